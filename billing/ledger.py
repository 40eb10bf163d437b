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
    status: str,
    billed: int,
    api_key_id: int | None,
    member_id: int | None = None,
    job_id=None,
    request_id: str = "",
    audio_seconds: float = 0.0,
    model: str,
    voice: str,
    cached: bool = False,
    latency_ms: int = 0,
) -> UsageEvent:
    """Commit what is billed of the reservation, refund the rest, and append the ledger row.
    Call inside the transaction that moves the request to its final state."""
    with transaction.atomic():
        if billed:
            quota.commit(org_id, period, billed, api_key_id)
        if reserved - billed:
            quota.refund(org_id, period, reserved - billed, api_key_id)
        return append(
            organization_id=org_id,
            api_key_id=api_key_id,
            member_id=member_id,
            job_id=job_id,
            request_id=request_id,
            characters=billed,
            audio_seconds=audio_seconds,
            model=model,
            voice=voice,
            cached=cached,
            latency_ms=latency_ms,
            status=status,
        )


def append(**fields) -> UsageEvent:
    return UsageEvent.objects.create(**fields)


def charge_cached(*, org, limit: int, characters: int, key=None, **fields) -> UsageEvent:
    """A request served from the cache: charge the quota (refusing if it does not fit) and append
    its ledger row, in one transaction."""
    with transaction.atomic():
        quota.charge(org, characters, limit, key=key)
        return append(
            organization_id=org.pk, api_key_id=key.pk if key else None, characters=characters, cached=True, **fields
        )
