"""Billing: the plan, this month's usage and estimated bill, plan changes through Stripe Checkout,
the Stripe Customer Portal (payment methods, invoices, cancellation), invoices and the spending
limit. Owners and admins act; members see the plan. Without Stripe configured the page says so."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

import stripe
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from billing import offer, quota, terms
from billing.limits import limits_for, subscription_for
from billing.models import Plan
from billing.stripe_client import CatalogueMissing, StripeClient, configured
from billing.stripe_events import grace_ends

from ..access import member_required, page, require_admin
from ..operator import contact_link, operator_contact

STRIPE_DOWN = "Stripe could not be reached just now; try again in a minute."


@dataclass(frozen=True)
class PlanRow:
    """A plan as the comparison table shows it: the models it allows with their price weights."""

    plan: Plan
    models: list[tuple[str, float]]


def plan_rows(plans) -> list[PlanRow]:
    served = offer.served()
    rows = []
    for plan in plans:
        allowed = [s for s in served if not plan.allowed_models or s.name in plan.allowed_models]
        weights = plan.model_weights if isinstance(plan.model_weights, dict) else {}
        rows.append(PlanRow(plan, [(s.title, float(weights.get(s.name, 1))) for s in allowed]))
    return rows


@member_required
def billing(request):
    org = request.principal.organization
    sub = subscription_for(org)
    limits = limits_for(org)
    used, reserved, resets_at = quota.usage(org)
    invoices, invoices_error = [], ""
    if configured() and sub.stripe_customer_id and request.principal.is_admin:
        try:
            invoices = StripeClient().invoices(sub.stripe_customer_id)
        except stripe.StripeError:
            invoices_error = "Stripe could not be reached, so invoices are not shown just now."
    return page(
        request,
        "billing.html",
        "billing",
        configured=configured(),
        contact=contact_link(operator_contact()),
        contact_text=operator_contact().removeprefix("mailto:"),
        sub=sub,
        plan=sub.plan,
        limits=limits,
        used=used,
        reserved=reserved,
        resets_at=resets_at,
        estimate=terms.estimate(sub.plan, used, limits.monthly_characters),
        overage=terms.overage_allowed(sub.plan, sub),
        plans=Plan.objects.order_by("monthly_price_cents", "slug"),
        plan_rows=plan_rows(Plan.objects.order_by("monthly_price_cents", "slug")),
        invoices=invoices,
        invoices_error=invoices_error,
        can_manage=request.principal.is_admin,
        grace_ends=grace_ends(sub),
        spending_limit=None if sub.spending_limit_cents is None else Decimal(sub.spending_limit_cents) / 100,
    )


def _back(request, message: str):
    """To the billing page, with a message."""
    messages.info(request, message)
    return redirect("dashboard:billing")


def _require_billing_admin(request) -> None:
    """Owners and admins, even of a suspended organization: paying is how it comes back."""
    if not request.principal.is_admin:
        raise PermissionDenied("Only owners and admins manage billing.")


@require_POST
@member_required
def checkout(request):
    """Subscribe to a paid plan through Stripe Checkout; an organization that already pays
    through Stripe changes plans in the Customer Portal (Stripe prorates)."""
    require_admin(request, "change the plan")
    if not configured():
        return _back(request, "Billing is not configured on this installation: ask the operator to change plans.")
    plan = Plan.objects.filter(slug=request.POST.get("plan", ""), monthly_price_cents__gt=0).first()
    if plan is None:
        return _back(request, "Choose one of the paid plans.")
    org = request.principal.organization
    sub = subscription_for(org)
    back = request.build_absolute_uri(reverse("dashboard:billing"))
    client = StripeClient()
    try:
        # A subscription not ended (also one whose webhook has not arrived yet: a second tab, a
        # second click) changes plans in the portal; a second Checkout would bill twice.
        if sub.stripe_customer_id and client.live_subscriptions(sub.stripe_customer_id):
            return redirect(client.portal_session(customer=sub.stripe_customer_id, return_url=back))
        if not sub.stripe_customer_id:
            sub.stripe_customer_id = client.create_customer(org_id=org.pk, name=org.name, email=request.user.email)
            sub.save(update_fields=["stripe_customer_id", "updated_at"])
        url = client.checkout_session(
            customer=sub.stripe_customer_id,
            org_id=org.pk,
            plan_slug=plan.slug,
            success_url=f"{back}?checkout=done",
            cancel_url=f"{back}?checkout=cancelled",
        )
    except CatalogueMissing:
        return _back(request, "This plan is not set up in Stripe yet: ask the operator to run `manage.py stripe_sync`.")
    except stripe.StripeError:
        return _back(request, STRIPE_DOWN)
    return redirect(url)


@require_POST
@member_required
def portal(request):
    """The Stripe Customer Portal: payment methods, invoices, plan changes, cancellation."""
    _require_billing_admin(request)
    sub = subscription_for(request.principal.organization)
    if not configured() or not sub.stripe_customer_id:
        return _back(request, "There is no Stripe billing account for this organization yet: choose a plan first.")
    try:
        url = StripeClient().portal_session(
            customer=sub.stripe_customer_id, return_url=request.build_absolute_uri(reverse("dashboard:billing"))
        )
    except stripe.StripeError:
        return _back(request, STRIPE_DOWN)
    return redirect(url)


@require_POST
@member_required
def spending_limit(request):
    """The most overage the organization will pay for in a month, in dollars (empty: no limit)."""
    require_admin(request, "set the spending limit")
    sub = subscription_for(request.principal.organization)
    raw = request.POST.get("spending_limit", "").strip().lstrip("$")
    if not raw:
        sub.spending_limit_cents = None
        messages.info(request, "Spending limit removed: overage is billed without a limit.")
    else:
        try:
            dollars = Decimal(raw)
        except InvalidOperation:
            dollars = Decimal(-1)
        if not dollars.is_finite() or dollars < 0 or dollars > 1_000_000:
            return _back(request, "Enter the limit in dollars, between 0 and 1,000,000 (or leave it empty).")
        sub.spending_limit_cents = int(dollars * 100)
        messages.info(request, f"Spending limit set to ${dollars:,.2f} of overage a month.")
    sub.save(update_fields=["spending_limit_cents", "updated_at"])
    return redirect("dashboard:billing")
