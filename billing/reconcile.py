"""The ledger against Stripe's meter (`manage.py billing_reconcile`, the admin's re-sync): for one
month, per organization with a Stripe customer, the characters its ledger bills (rows since its
metered subscription began) and what the meter summed for it. The result is kept on the
organization's subscription for the admin."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

from django.db.models import Sum
from django.utils import timezone

from .models import Subscription, UsageEvent
from .quota import next_reset
from .stripe_client import CatalogueMissing, StripeClient


@dataclass(frozen=True)
class Reconciliation:
    org_id: int
    org_name: str
    customer: str
    period: str
    ledger: int
    stripe: int

    @property
    def difference(self) -> int:
        return self.stripe - self.ledger


def reconcile(client: StripeClient, month: datetime, subs=None) -> list[Reconciliation]:
    meter = client.meter()
    if meter is None:
        raise CatalogueMissing("Stripe has no meter tts_characters: run `manage.py stripe_sync`.")
    start = month.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    end = next_reset(start.date())
    subs = subs if subs is not None else Subscription.objects.exclude(stripe_customer_id="")
    results = []
    for sub in subs.select_related("organization"):
        rows = UsageEvent.objects.filter(organization_id=sub.organization_id, created_at__gte=start, created_at__lt=end)
        rows = rows.filter(created_at__gte=sub.metered_since) if sub.metered_since else rows.none()
        ledger = rows.aggregate(total=Sum("characters"))["total"] or 0
        stripe_total = client.metered_characters(
            meter_id=meter["id"], customer=sub.stripe_customer_id, start=start, end=end
        )
        result = Reconciliation(
            sub.organization_id, sub.organization.name, sub.stripe_customer_id, f"{start:%Y-%m}", ledger, stripe_total
        )
        sub.reconciliation = {**asdict(result), "difference": result.difference}
        sub.reconciled_at = timezone.now()
        sub.save(update_fields=["reconciliation", "reconciled_at", "updated_at"])
        results.append(result)
    return results
