"""Writing the usage ledger: one UsageEvent per finished request, and the quota settlement that
goes with it, in one transaction."""

from __future__ import annotations

from datetime import date

from django.db import transaction

from . import quota
from .models import UsageEvent


def settle(
    *,
    org_id: int,
    period: date,
    reserved: int,
    succeeded: bool,
    api_key_id: int | None,
    job_id=None,
    request_id: str = "",
    audio_seconds: float = 0.0,
    model: str,
    voice: str,
    cached: bool = False,
    latency_ms: int = 0,
) -> UsageEvent:
    """Commit the reservation (success) or refund it (failure) and append the ledger row.
    Call inside the transaction that moves the request to its final state."""
    with transaction.atomic():
        if succeeded:
            quota.commit(org_id, period, reserved)
        else:
            quota.refund(org_id, period, reserved)
        return append(
            organization_id=org_id,
            api_key_id=api_key_id,
            job_id=job_id,
            request_id=request_id,
            characters=reserved if succeeded else 0,
            audio_seconds=audio_seconds,
            model=model,
            voice=voice,
            cached=cached,
            latency_ms=latency_ms,
            status=UsageEvent.Status.SUCCEEDED if succeeded else UsageEvent.Status.FAILED,
        )


def append(**fields) -> UsageEvent:
    return UsageEvent.objects.create(**fields)


def charge_cached(*, org, limit: int, characters: int, **fields) -> UsageEvent:
    """A request served from the cache: charge the quota (refusing if it does not fit) and append
    its ledger row, in one transaction."""
    with transaction.atomic():
        quota.charge(org, characters, limit)
        return append(organization_id=org.pk, characters=characters, cached=True, **fields)
