"""Usage reporting to Stripe: the ledger is the outbox.

Every ledger row that bills characters to an organization with a Stripe subscription, written
since that subscription began, is sent as one meter event (`stripe_client.send_meter_event`), in
id order, in batches. A row gets its `MeterReport` only after Stripe accepted the event, so a row
is never lost: a crash or a timeout after Stripe recorded the event means the row is sent again,
and Stripe keeps one event per identifier (and answers a retried request with its first answer),
so it is never counted twice either. On a transient error (network, timeout, Stripe 5xx or 429)
the run stops and the task retries with backoff; the next beat run starts again anyway.

A row Stripe can no longer take is not dropped silently: older than Stripe's back-dating window
(35 days) it is marked `too_old`, and a row Stripe refuses (say, a deleted customer) `rejected`;
both are logged as errors for the operator and listed in the admin, where the organization's
billing can be corrected and the difference invoiced by hand.
"""

from __future__ import annotations

import logging
import time
from datetime import timedelta

import stripe
from django.conf import settings
from django.db.models import F, QuerySet
from django.utils import timezone

from tts_saas.redis import get_redis

from .models import MeterReport, Subscription, UsageEvent
from .stripe_client import BACKDATE_LIMIT_DAYS, TRANSIENT_ERRORS, StripeClient

logger = logging.getLogger(__name__)

LOCK = "tts:billing:report-usage"
RUN_SECONDS = 40  # one run's sending time (beat starts one a minute): ~100 events/s keep up with busy ledgers


class TransientStripeError(Exception):
    """Stripe could not be reached or failed; the report task retries with backoff."""


class StripeRefused(Exception):
    """Stripe refused an event for a reason that is not the row's (a revoked key, no meter): the
    run stops and every row waits for the operator to fix it."""


# Refusals that belong to one row (its customer, its time); any other refusal stops the run.
ROW_PARAMS = ("payload[stripe_customer_id]", "payload[value]", "timestamp")


def pending() -> QuerySet[UsageEvent]:
    """Ledger rows still to be sent, oldest first: only billed organizations' rows are looked at
    (the ledger's (organization, created_at) index), each since its metered subscription began."""
    billed = Subscription.objects.exclude(stripe_customer_id="").filter(metered_since__isnull=False)
    return (
        UsageEvent.objects.filter(
            organization_id__in=billed.values("organization_id"),
            characters__gt=0,
            meter_report__isnull=True,
            created_at__gte=F("organization__subscription__metered_since"),
        )
        .select_related("organization__subscription")
        .order_by("id")
    )


def report_usage(client: StripeClient | None = None, batch: int | None = None) -> dict[str, int]:
    """Send up to `batch` pending rows; one run at a time (a Redis lock)."""
    batch = batch or settings.STRIPE_METER_BATCH
    redis = get_redis()
    if not redis.set(LOCK, "1", nx=True, ex=300):
        return {"skipped": 1}
    client = client or StripeClient()
    totals = {"reported": 0, "too_old": 0, "rejected": 0}
    deadline = time.monotonic() + RUN_SECONDS
    try:
        while True:  # batch after batch while there are rows, for at most RUN_SECONDS
            counts = _report(client, batch)
            totals = {k: totals[k] + counts[k] for k in totals}
            if sum(counts.values()) < batch or time.monotonic() > deadline:
                return totals
    finally:
        redis.delete(LOCK)


def _report(client: StripeClient, batch: int) -> dict[str, int]:
    counts = {"reported": 0, "too_old": 0, "rejected": 0}
    oldest = timezone.now() - timedelta(days=BACKDATE_LIMIT_DAYS) + timedelta(hours=1)  # a margin for the send
    for row in pending()[:batch]:
        customer = row.organization.subscription.stripe_customer_id
        if row.created_at < oldest:
            _mark(row, MeterReport.Status.TOO_OLD, "older than Stripe's back-dating window")
            logger.error(
                "ALERT: a ledger row is too old for Stripe's meter and was not billed through it",
                extra={"usage_event": row.pk, "org_id": row.organization_id, "characters": row.characters},
            )
            counts["too_old"] += 1
            continue
        try:
            client.send_meter_event(
                usage_event_id=row.pk, customer=customer, characters=row.characters, at=row.created_at, model=row.model
            )
        except TRANSIENT_ERRORS as exc:
            logger.warning("Stripe did not take a meter event; retrying later", extra={"usage_event": row.pk})
            raise TransientStripeError(str(exc)) from exc
        except stripe.StripeError as exc:
            if not (isinstance(exc, stripe.InvalidRequestError) and exc.param in ROW_PARAMS):
                # authentication, permission, idempotency, no meter: not the row's fault
                logger.error("ALERT: Stripe refuses meter events: %s", exc, extra={"usage_event": row.pk})
                raise StripeRefused(str(exc)) from exc
            _mark(row, MeterReport.Status.REJECTED, str(exc.user_message or exc)[:500])
            logger.error(
                "ALERT: Stripe refused a meter event; the row was not billed through it",
                extra={"usage_event": row.pk, "org_id": row.organization_id, "error": str(exc)[:200]},
            )
            counts["rejected"] += 1
            continue
        _mark(row, MeterReport.Status.REPORTED)
        counts["reported"] += 1
    return counts


def _mark(row: UsageEvent, status: str, error: str = "") -> None:
    MeterReport.objects.get_or_create(
        usage_event=row,
        defaults={"status": status, "error": error, "customer": row.organization.subscription.stripe_customer_id},
    )


def last_reported(org_id: int) -> MeterReport | None:
    return (
        MeterReport.objects.filter(usage_event__organization_id=org_id, status=MeterReport.Status.REPORTED)
        .select_related("usage_event")
        .order_by("-usage_event_id")
        .first()
    )
