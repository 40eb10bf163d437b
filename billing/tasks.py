"""Billing's periodic work (beat): usage to Stripe's meter, and dunning. Both do nothing unless
Stripe is configured."""

from __future__ import annotations

from celery import shared_task

from . import metering, stripe_events
from .stripe_client import configured


@shared_task(
    name="billing.tasks.report_usage",
    autoretry_for=(metering.TransientStripeError,),
    retry_backoff=5,
    retry_backoff_max=300,
    retry_jitter=True,
    max_retries=6,
)
def report_usage() -> dict[str, int]:
    if not configured():
        return {}
    return metering.report_usage()


@shared_task(name="billing.tasks.enforce_dunning")
def enforce_dunning() -> dict[str, int]:
    if not configured():
        return {}
    return {"suspended": stripe_events.enforce_dunning()}
