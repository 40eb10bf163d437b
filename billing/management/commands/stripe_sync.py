"""`manage.py stripe_sync`: create or update the Stripe meter, products and prices of the paid plans."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from billing import catalogue
from billing.stripe_client import StripeClient, configured


class Command(BaseCommand):
    help = (
        "Create or update, in the Stripe account of STRIPE_SECRET_KEY, the meter `tts_characters`, one product per "
        "paid plan, its monthly base price and (for plans with overage) its metered price. Safe to run again."
    )

    def handle(self, *args, **options):
        if not configured():
            raise CommandError("Billing is not configured: set STRIPE_SECRET_KEY (and STRIPE_WEBHOOK_SECRET).")
        catalogue.sync(StripeClient(), lambda line: self.stdout.write(line))
