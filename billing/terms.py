"""A plan's billing terms applied to one organization: how many characters it may use this month
(its included characters, plus overage up to its spending limit where its plan allows overage and
it pays through Stripe) and what the month costs so far."""

from __future__ import annotations

from dataclasses import dataclass

from .models import BillingStatus, Plan, Subscription

UNLIMITED = 10**15  # characters: overage without a spending limit


def overage_allowed(plan: Plan, sub: Subscription) -> bool:
    """Overage is sold only to organizations Stripe bills (a live subscription on such a plan),
    and not while a payment is overdue."""
    return (
        plan.overage_cents_per_1k is not None
        and bool(sub.stripe_subscription_id)
        and sub.billing_status == BillingStatus.ACTIVE
    )


def stripe_billed(sub: Subscription) -> bool:
    return bool(sub.stripe_subscription_id) and sub.billing_status in (BillingStatus.ACTIVE, BillingStatus.PAST_DUE)


def ceiling(plan: Plan, sub: Subscription, included: int) -> int:
    """The characters the organization may use this month: reservations stop there (429)."""
    if not overage_allowed(plan, sub):
        return included
    if sub.spending_limit_cents is None:
        return UNLIMITED
    assert plan.overage_cents_per_1k is not None
    if plan.overage_cents_per_1k == 0:
        return UNLIMITED
    return included + sub.spending_limit_cents * 1000 // plan.overage_cents_per_1k


@dataclass(frozen=True)
class Estimate:
    base_cents: int
    overage_characters: int
    overage_cents: int

    @property
    def total_cents(self) -> int:
        return self.base_cents + self.overage_cents


def estimate(plan: Plan, used: int, included: int) -> Estimate:
    """This month's bill so far: the plan's price and the characters beyond the included ones
    (rounded as Stripe rounds the invoice line: to the cent)."""
    over = max(0, used - included)
    cents = round(over * (plan.overage_cents_per_1k or 0) / 1000) if plan.overage_cents_per_1k is not None else 0
    return Estimate(plan.monthly_price_cents, over, cents)
