"""Stripe's side of the plans (`manage.py stripe_sync`): the meter, one product per paid plan, its
base price and, where the plan allows overage, its metered price. Idempotent: what exists and
matches is left alone, so an operator can run it on a fresh account and again after every plan
change. Prices cannot change their amounts in Stripe: a changed plan gets a new price that takes
over the lookup key (`transfer_lookup_key`), and the old one is deactivated (existing subscriptions
keep it until they change plan)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import stripe

from .models import Plan
from .stripe_client import (
    METER_EVENT_NAME,
    StripeClient,
    base_lookup_key,
    overage_lookup_key,
    product_id,
)


def sync(client: StripeClient, report: Callable[[str], None]) -> None:
    meter = client.meter()
    if meter is None:
        meter = client.v1.billing.meters.create(
            params={
                "display_name": "Speech characters",
                "event_name": METER_EVENT_NAME,
                "default_aggregation": {"formula": "sum"},
                "customer_mapping": {"event_payload_key": "stripe_customer_id", "type": "by_id"},
                "value_settings": {"event_payload_key": "value"},
            }
        ).to_dict()
        report(f"meter {METER_EVENT_NAME}: created ({meter['id']})")
    else:
        report(f"meter {METER_EVENT_NAME}: unchanged ({meter['id']})")
    for plan in Plan.objects.filter(monthly_price_cents__gt=0).order_by("monthly_price_cents"):
        _sync_plan(client, plan, meter["id"], report)


def _sync_plan(client: StripeClient, plan: Plan, meter_id: str, report: Callable[[str], None]) -> None:
    pid = product_id(plan.slug)
    name = f"Speech API: {plan.name}"
    try:
        product = client.v1.products.retrieve(pid).to_dict()
    except stripe.InvalidRequestError:
        client.v1.products.create(params={"id": pid, "name": name, "metadata": {"plan": plan.slug}})
        report(f"product {pid}: created")
    else:
        if product.get("name") != name or not product.get("active", True):
            client.v1.products.update(pid, params={"name": name, "active": True})
            report(f"product {pid}: updated")
        else:
            report(f"product {pid}: unchanged")

    existing = client.prices_by_lookup_key([base_lookup_key(plan.slug), overage_lookup_key(plan.slug)])
    base = {
        "product": pid,
        "currency": "usd",
        "unit_amount": plan.monthly_price_cents,
        "recurring": {"interval": "month", "usage_type": "licensed"},
        "nickname": f"{plan.name} monthly",
        "metadata": {"plan": plan.slug, "terms": f"base:{plan.monthly_price_cents}"},
    }
    _ensure_price(client, base_lookup_key(plan.slug), base, existing, report)
    if plan.overage_cents_per_1k is None:
        old = existing.get(overage_lookup_key(plan.slug))
        if old is not None:
            client.v1.prices.update(old["id"], params={"active": False})
            report(f"price {overage_lookup_key(plan.slug)}: deactivated (the plan has a hard cap now)")
        return
    per_character = Decimal(plan.overage_cents_per_1k) / 1000
    overage = {
        "product": pid,
        "currency": "usd",
        "billing_scheme": "tiered",
        "tiers_mode": "graduated",
        "tiers": [
            {"up_to": plan.monthly_characters, "unit_amount_decimal": "0"},
            {"up_to": "inf", "unit_amount_decimal": format(per_character.normalize(), "f")},
        ],
        "recurring": {"interval": "month", "usage_type": "metered", "meter": meter_id},
        "nickname": f"{plan.name} characters beyond {plan.monthly_characters:,}",
        "metadata": {
            "plan": plan.slug,
            "terms": f"overage:{plan.monthly_characters}:{plan.overage_cents_per_1k}:{meter_id}",
        },
    }
    _ensure_price(client, overage_lookup_key(plan.slug), overage, existing, report)


def _ensure_price(
    client: StripeClient, lookup_key: str, wanted: dict, existing: dict[str, dict], report: Callable[[str], None]
) -> None:
    """The price under `lookup_key` has the wanted terms (compared by the `terms` metadata the sync
    writes, since Stripe returns amounts in its own shapes)."""
    current = existing.get(lookup_key)
    if current is not None and (current.get("metadata") or {}).get("terms") == wanted["metadata"]["terms"]:
        report(f"price {lookup_key}: unchanged ({current['id']})")
        return
    params: Any = {**wanted, "lookup_key": lookup_key, "transfer_lookup_key": True}
    # No idempotency key of ours: terms that come back (a price changed and changed back) must make
    # a new price, not replay the old one (the library adds a key per request for its own retries).
    created = client.v1.prices.create(params=params).to_dict()
    if current is not None:
        client.v1.prices.update(current["id"], params={"active": False})
        report(f"price {lookup_key}: replaced ({current['id']} -> {created['id']}; the old one deactivated)")
    else:
        report(f"price {lookup_key}: created ({created['id']})")
