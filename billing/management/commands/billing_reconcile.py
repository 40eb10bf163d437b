"""`manage.py billing_reconcile --period YYYY-MM`: the ledger against Stripe's meter, per customer."""

from __future__ import annotations

from datetime import UTC, datetime

from django.core.management.base import BaseCommand, CommandError

from billing import reconcile
from billing.stripe_client import StripeClient, configured


def month(value: str) -> datetime:
    try:
        return datetime.strptime(value, "%Y-%m").replace(tzinfo=UTC)
    except ValueError as exc:
        raise CommandError(f"--period must look like 2026-11, not {value!r}") from exc


class Command(BaseCommand):
    help = (
        "Compare, for each organization with a Stripe customer, the characters its ledger bills in the month with "
        "what Stripe's meter summed for it; print the differences (exit status 1 if there are any)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--period", required=True, type=month, help="the month, YYYY-MM (UTC)")

    def handle(self, *args, period: datetime, **options):
        if not configured():
            raise CommandError("Billing is not configured: set STRIPE_SECRET_KEY.")
        results = reconcile.reconcile(StripeClient(), period)
        differences = [r for r in results if r.difference]
        for r in results:
            mark = "DIFFERS" if r.difference else "ok"
            self.stdout.write(
                f"{mark:7} org {r.org_id} ({r.org_name}) customer {r.customer}: ledger {r.ledger:,} characters, "
                f"Stripe {r.stripe:,}, difference {r.difference:+,}"
            )
        self.stdout.write(f"{len(results)} customers, {len(differences)} with differences")
        if differences:
            raise SystemExit(1)
