"""The one place that talks to Stripe.

`StripeClient` wraps the official `stripe` library's client with the API version this code was
written against, keys and addresses from settings, a timeout, and the few calls the product makes.
Without `STRIPE_SECRET_KEY` billing is not configured: `configured()` is False, the product runs on
plans assigned by operators, and nothing here is called.

What this module knows about Stripe's model (https://docs.stripe.com/billing/subscriptions/usage-based):
- each paid plan is a Product (`tts_plan_<slug>`) with a recurring base Price (lookup key
  `tts_<slug>_base`) and, when the plan allows overage, a metered Price (`tts_<slug>_overage`) on
  the Billing Meter `tts_characters` (sum of meter events' values), graduated: the plan's included
  characters cost nothing, each further character its plan's price per 1,000 / 1,000;
- usage goes in as meter events, one per ledger row (`identifier` = `ledger-<row id>`, which
  Stripe de-duplicates; an idempotency key makes a retried request return the first answer).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import stripe
from django.conf import settings

API_VERSION = "2026-10-28.endive"  # what stripe 16.x pins; the shapes below were written for it
METER_EVENT_NAME = "tts_characters"
BACKDATE_LIMIT_DAYS = 35  # Stripe refuses meter events older than this
# Errors worth retrying later: the request may not have reached Stripe, or Stripe failed.
TRANSIENT_ERRORS = (stripe.APIConnectionError, stripe.RateLimitError, stripe.APIError)


def configured() -> bool:
    return bool(settings.STRIPE_SECRET_KEY)


def product_id(plan_slug: str) -> str:
    return f"tts_plan_{plan_slug}"


def base_lookup_key(plan_slug: str) -> str:
    return f"tts_{plan_slug}_base"


def overage_lookup_key(plan_slug: str) -> str:
    return f"tts_{plan_slug}_overage"


def plan_slug_of_price(price: dict) -> str | None:
    """The plan a subscription item's price belongs to (its base price's lookup key)."""
    key = price.get("lookup_key") or ""
    if key.startswith("tts_") and key.endswith("_base"):
        return key[len("tts_") : -len("_base")]
    return None


def invoice_subscription(invoice: dict) -> str:
    """The subscription an invoice bills ('' for one-off invoices): since API version 2025-03-31 it
    is under `parent.subscription_details`."""
    details = (invoice.get("parent") or {}).get("subscription_details") or {}
    return details.get("subscription") or invoice.get("subscription") or ""


def first_of_next_month(now: datetime) -> datetime:
    year, month = (now.year + 1, 1) if now.month == 12 else (now.year, now.month + 1)
    return datetime(year, month, 1, tzinfo=UTC)


def meter_identifier(usage_event_id: int) -> str:
    return f"ledger-{usage_event_id}"


class CatalogueMissing(Exception):
    """Stripe lacks a product, price or the meter this product expects (`manage.py stripe_sync`)."""


@dataclass(frozen=True)
class Invoice:
    id: str
    number: str
    status: str
    amount_due_cents: int
    amount_paid_cents: int
    currency: str
    created: datetime
    url: str
    pdf: str


class StripeClient:
    def __init__(self) -> None:
        base = settings.STRIPE_API_BASE
        self._client = stripe.StripeClient(
            settings.STRIPE_SECRET_KEY,
            stripe_version=API_VERSION,
            base_addresses={"api": base} if base else None,
            max_network_retries=settings.STRIPE_MAX_NETWORK_RETRIES,
            http_client=stripe.HTTPXClient(timeout=settings.STRIPE_TIMEOUT, allow_sync_methods=True),
        )
        self.v1 = self._client.v1

    # Customers, checkout and the portal.

    def create_customer(self, *, org_id: int, name: str, email: str) -> str:
        customer = self.v1.customers.create(
            params={"name": name, "email": email, "metadata": {"org_id": str(org_id)}},
            options={"idempotency_key": f"customer-org-{org_id}"},
        )
        return customer.id

    def checkout_session(self, *, customer: str, org_id: int, plan_slug: str, success_url: str, cancel_url: str) -> str:
        """A Checkout Session subscribing `customer` to the plan's prices; returns its URL."""
        prices = self.prices_by_lookup_key([base_lookup_key(plan_slug), overage_lookup_key(plan_slug)])
        base = prices.get(base_lookup_key(plan_slug))
        if base is None:
            raise CatalogueMissing(f"Stripe has no price {base_lookup_key(plan_slug)}: run `manage.py stripe_sync`.")
        items: list[dict[str, Any]] = [{"price": base["id"], "quantity": 1}]
        overage = prices.get(overage_lookup_key(plan_slug))
        if overage is not None:
            items.append({"price": overage["id"]})  # metered: no quantity
        metadata = {"org_id": str(org_id), "plan": plan_slug}
        params: Any = {
            "mode": "subscription",
            "customer": customer,
            "client_reference_id": str(org_id),
            "line_items": items,
            "success_url": success_url,
            "cancel_url": cancel_url,
            "metadata": metadata,
            # Periods on calendar months (UTC), as quotas, the spending limit and the estimate
            # count them; the first, partial month is prorated.
            "subscription_data": {
                "metadata": metadata,
                "billing_cycle_anchor": int(first_of_next_month(datetime.now(UTC)).timestamp()),
            },
        }
        session = self.v1.checkout.sessions.create(params=params)
        if not session.url:
            raise stripe.APIError("Stripe returned a Checkout Session without a URL.")
        return session.url

    def portal_session(self, *, customer: str, return_url: str) -> str:
        session = self.v1.billing_portal.sessions.create(params={"customer": customer, "return_url": return_url})
        return session.url

    # Objects re-fetched when a webhook names them (events can arrive late and out of order).

    def subscription(self, subscription_id: str) -> dict:
        return self.v1.subscriptions.retrieve(subscription_id).to_dict()

    def checkout_session_object(self, session_id: str) -> dict:
        return self.v1.checkout.sessions.retrieve(session_id).to_dict()

    def customer(self, customer_id: str) -> dict:
        return self.v1.customers.retrieve(customer_id).to_dict()

    def live_subscriptions(self, customer: str) -> list[dict]:
        """The customer's subscriptions that have not ended."""
        found = self.v1.subscriptions.list(params={"customer": customer, "status": "all", "limit": 100})
        subs = [s.to_dict() for s in found.data]
        return [s for s in subs if s.get("status") not in ("canceled", "incomplete_expired")]

    def open_invoices(self, customer: str) -> list[dict]:
        found = self.v1.invoices.list(params={"customer": customer, "status": "open", "limit": 100})
        return [i.to_dict() for i in found.data]

    def invoice(self, invoice_id: str) -> dict:
        return self.v1.invoices.retrieve(invoice_id).to_dict()

    def invoices(self, customer: str, limit: int = 12) -> list[Invoice]:
        found = [i.to_dict() for i in self.v1.invoices.list(params={"customer": customer, "limit": limit}).data]
        return [
            Invoice(
                id=i["id"],
                number=i.get("number") or i["id"],
                status=i.get("status") or "",
                amount_due_cents=int(i.get("amount_due") or 0),
                amount_paid_cents=int(i.get("amount_paid") or 0),
                currency=(i.get("currency") or "usd").upper(),
                created=datetime.fromtimestamp(int(i.get("created") or 0), UTC),
                url=i.get("hosted_invoice_url") or "",
                pdf=i.get("invoice_pdf") or "",
            )
            for i in found
        ]

    # The catalogue (manage.py stripe_sync).

    def prices_by_lookup_key(self, keys: list[str]) -> dict[str, dict]:
        found = self.v1.prices.list(params={"lookup_keys": keys, "active": True, "limit": 100})
        prices = [p.to_dict() for p in found.data]
        return {p["lookup_key"]: p for p in prices if p.get("lookup_key")}

    def meter(self) -> dict | None:
        for meter in self.v1.billing.meters.list(params={"limit": 100}).data:
            found = meter.to_dict()
            if found.get("event_name") == METER_EVENT_NAME and found.get("status", "active") == "active":
                return found
        return None

    # Usage.

    def send_meter_event(
        self, *, usage_event_id: int, customer: str, characters: int, at: datetime, model: str = ""
    ) -> None:
        """One ledger row as a meter event (with the model that spoke it, for reports by model). Safe
        to repeat: Stripe keeps one event per identifier, and the idempotency key returns the first
        answer to a retried request."""
        identifier = meter_identifier(usage_event_id)
        payload = {"stripe_customer_id": customer, "value": str(characters)}
        if model:
            payload["model"] = model
        self.v1.billing.meter_events.create(
            params={
                "event_name": METER_EVENT_NAME,
                "payload": payload,
                "identifier": identifier,
                "timestamp": int(at.timestamp()),
            },
            options={"idempotency_key": f"meter-event-{identifier}"},
        )

    def metered_characters(self, *, meter_id: str, customer: str, start: datetime, end: datetime) -> int:
        """What Stripe's meter summed for `customer` in [start, end)."""
        summaries = self.v1.billing.meters.event_summaries.list(
            meter_id,
            params={"customer": customer, "start_time": int(start.timestamp()), "end_time": int(end.timestamp())},
        )
        return int(sum(float(s.to_dict().get("aggregated_value") or 0) for s in summaries.data))
