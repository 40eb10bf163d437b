"""Stripe's webhooks and what they change here: an organization's plan, its billing state and,
through dunning, its suspension.

Deliveries are at least once and in no particular order, so every event is stored by its id
(`StripeEvent`: a replay of a handled event changes nothing), and handlers re-fetch the object the
event names and apply its state now, rather than trusting the event's copy: an old
`customer.subscription.created` handled after an `updated` still applies the subscription as it is.
A handler runs in the event row's transaction with the organization's billing row locked, so
webhooks, the dunning task and the dashboard never overwrite each other's changes; a handler that
fails changes nothing and the event is handled when Stripe delivers it again.

Dunning: a failed payment of the organization's subscription leaves it working for
`STRIPE_PAYMENT_GRACE_DAYS` (no overage meanwhile), with a banner in the dashboard and one notice
e-mail to its owners; still unpaid after that, `enforce_dunning` (beat) suspends it (the API answers
403 saying why and where to pay); once its subscription's invoices are paid it is reinstated at
once. Billing lifts only the suspension it made (`billing_suspended_at`), never an operator's; a
subscription that ends while money is still due stays in dunning on the free plan.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.models import Membership, Organization

from .models import BillingStatus, Plan, StripeEvent, Subscription, default_plan
from .stripe_client import StripeClient, invoice_subscription, plan_slug_of_price

logger = logging.getLogger(__name__)

ACTIVE = {"active", "trialing"}
OVERDUE = {"past_due", "unpaid"}
ENDED = {"canceled", "incomplete_expired"}
PAUSED = {"paused"}  # no invoices while paused: the paid plan stops, dunning does not start
OWING = (BillingStatus.PAST_DUE, BillingStatus.SUSPENDED)


def receive(event: dict, client: StripeClient | None = None) -> StripeEvent:
    """Store the (verified) event and handle it once. Raises if handling failed (the row keeps
    the error; Stripe delivers the event again and it is handled then)."""
    row, _ = StripeEvent.objects.get_or_create(
        id=event["id"],
        defaults={
            "type": event.get("type", ""),
            "payload": event,
            "created": datetime.fromtimestamp(int(event.get("created") or 0), UTC),
        },
    )
    try:
        with transaction.atomic():  # the event's row locked: one delivery handles it at a time
            row = StripeEvent.objects.select_for_update().get(pk=row.pk)
            if row.status in (StripeEvent.Status.PROCESSED, StripeEvent.Status.IGNORED):
                return row
            handled = handle(event, client or StripeClient())  # rolled back with the block if it raises
            row.attempts += 1
            row.status = StripeEvent.Status.PROCESSED if handled else StripeEvent.Status.IGNORED
            row.error = ""
            row.processed_at = timezone.now()
            row.save(update_fields=["status", "error", "attempts", "processed_at"])
            return row
    except Exception as exc:
        StripeEvent.objects.filter(pk=row.pk).exclude(status=StripeEvent.Status.PROCESSED).update(
            status=StripeEvent.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:2000], attempts=F("attempts") + 1
        )
        logger.exception("a Stripe event could not be handled", extra={"event": row.pk, "type": row.type})
        raise


def handle(event: dict, client: StripeClient) -> bool:
    """Apply one event; False for types this product does not act on."""
    kind = event.get("type", "")
    obj = event.get("data", {}).get("object", {})
    if kind == "checkout.session.completed":
        session = client.checkout_session_object(obj["id"])
        if session.get("subscription"):
            apply_subscription(client.subscription(session["subscription"]), client)
        return True
    if kind.startswith("customer.subscription."):
        apply_subscription(client.subscription(obj["id"]), client)
        return True
    if kind in ("invoice.paid", "invoice.payment_failed"):
        invoice = client.invoice(obj["id"])
        if kind == "invoice.paid" and invoice.get("status") == "paid":
            payment_succeeded(invoice, client)
        elif kind == "invoice.payment_failed" and invoice.get("status") not in ("paid", "void"):
            payment_failed(invoice)
        return True
    if kind == "billing.meter.error_report_triggered":
        logger.error(
            "ALERT: Stripe reports meter events it could not use",
            extra={"event": event.get("id"), "summary": str(obj.get("reason") or obj)[:500]},
        )
        return True
    return False


def _locked(**lookup) -> Subscription | None:
    return Subscription.objects.select_for_update().select_related("organization", "plan").filter(**lookup).first()


def _billing_for_subscription(stripe_sub: dict, client: StripeClient) -> Subscription | None:
    """The organization a Stripe subscription bills: the one its customer belongs to. A customer
    not yet stored is accepted only if Stripe's copy of it names the organization (this product
    creates every customer with `metadata.org_id`), so a subscription made elsewhere, with any
    `client_reference_id` or metadata, can never attach itself to an organization."""
    customer = stripe_sub["customer"]
    sub = _locked(stripe_customer_id=customer)
    if sub is not None:
        return sub
    org_id = (client.customer(customer).get("metadata") or {}).get("org_id", "")
    if not org_id.isdigit():
        return None
    sub = _locked(organization_id=int(org_id))
    if sub is None or sub.stripe_customer_id not in ("", customer):
        return None
    return sub


def apply_subscription(stripe_sub: dict, client: StripeClient) -> None:
    with transaction.atomic():
        sub = _billing_for_subscription(stripe_sub, client)
        if sub is None:
            logger.warning("a Stripe subscription matches no organization", extra={"subscription": stripe_sub["id"]})
            return
        _apply(sub, stripe_sub)


def _apply(sub: Subscription, stripe_sub: dict) -> None:
    status = stripe_sub.get("status", "")
    current = sub.stripe_subscription_id
    if status in ENDED | PAUSED:
        if current not in ("", stripe_sub["id"]):
            return  # an older subscription ending: the current one stays
        sub.plan = default_plan()
        sub.current_period_end = None
        if status in ENDED:
            sub.stripe_subscription_id = ""
        if sub.billing_status not in OWING:  # still owing: dunning goes on, on the free plan
            sub.billing_status = BillingStatus.CANCELED
        # metered_since stays: rows not yet sent still go to the meter (nothing is lost).
        sub.save()
        return
    if status not in ACTIVE | OVERDUE:
        return  # incomplete: nothing paid yet, nothing changes
    if current and current != stripe_sub["id"] and status in ACTIVE:
        logger.error(
            "ALERT: a second active Stripe subscription for one organization; cancel one in Stripe",
            extra={"org_id": sub.organization_id, "current": current, "other": stripe_sub["id"]},
        )
    plan = _plan_of(stripe_sub)
    if plan is not None:
        sub.plan = plan
    sub.stripe_customer_id = stripe_sub["customer"]
    sub.stripe_subscription_id = stripe_sub["id"]
    start = int(stripe_sub.get("start_date") or stripe_sub.get("created") or timezone.now().timestamp())
    sub.metered_since = sub.metered_since or datetime.fromtimestamp(start, UTC)
    period_end = _item_period_end(stripe_sub) or stripe_sub.get("current_period_end")
    sub.current_period_end = datetime.fromtimestamp(int(period_end), UTC) if period_end else None
    if status in ACTIVE:
        if sub.billing_status not in OWING:
            sub.billing_status = BillingStatus.ACTIVE
    elif sub.billing_status != BillingStatus.SUSPENDED:
        sub.billing_status = BillingStatus.PAST_DUE
        sub.past_due_since = sub.past_due_since or timezone.now()
    sub.save()


def _plan_of(stripe_sub: dict) -> Plan | None:
    for item in (stripe_sub.get("items") or {}).get("data", []):
        slug = plan_slug_of_price(item.get("price") or {})
        if slug:
            return Plan.objects.filter(slug=slug).first()
    return None


def _item_period_end(stripe_sub: dict) -> int | None:
    ends = [i.get("current_period_end") for i in (stripe_sub.get("items") or {}).get("data", [])]
    return max((e for e in ends if e), default=None)


def _ours(sub: Subscription, invoice: dict) -> bool:
    """The invoice belongs to the organization's subscription (one-off invoices do not count)."""
    billed = invoice_subscription(invoice)
    return bool(billed) and billed in (sub.stripe_subscription_id, sub.lapsed_subscription_id)


def payment_failed(invoice: dict) -> None:
    with transaction.atomic():
        sub = _locked(stripe_customer_id=invoice.get("customer") or "-")
        if sub is None or not _ours(sub, invoice):
            return
        if sub.billing_status != BillingStatus.SUSPENDED:
            sub.billing_status = BillingStatus.PAST_DUE
        sub.past_due_since = sub.past_due_since or timezone.now()
        notify = sub.dunning_notified_at is None
        sub.dunning_notified_at = sub.dunning_notified_at or timezone.now()
        if sub.stripe_subscription_id:
            sub.lapsed_subscription_id = sub.stripe_subscription_id
        sub.save()
        if notify:
            url = invoice.get("hosted_invoice_url") or ""
            transaction.on_commit(lambda: _email_owners(sub, url))


def payment_succeeded(invoice: dict, client: StripeClient) -> None:
    """The subscription's invoice is paid: out of dunning once none of its invoices is still open."""
    with transaction.atomic():
        sub = _locked(stripe_customer_id=invoice.get("customer") or "-")
        if sub is None or not _ours(sub, invoice) or sub.billing_status not in OWING:
            return
        if any(_ours(sub, i) for i in client.open_invoices(sub.stripe_customer_id)):
            return  # another invoice of the subscription is still due
        _lift_billing_suspension(sub)
        sub.billing_status = BillingStatus.ACTIVE if sub.stripe_subscription_id else BillingStatus.CANCELED
        sub.past_due_since = None
        sub.dunning_notified_at = None
        sub.lapsed_subscription_id = ""
        sub.save()


def grace_ends(sub: Subscription) -> datetime | None:
    if sub.past_due_since is None:
        return None
    return sub.past_due_since + timedelta(days=settings.STRIPE_PAYMENT_GRACE_DAYS)


def enforce_dunning(now: datetime | None = None) -> int:
    """Suspend organizations whose payment is still due after the grace period; how many."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.STRIPE_PAYMENT_GRACE_DAYS)
    due = Subscription.objects.filter(billing_status=BillingStatus.PAST_DUE, past_due_since__lte=cutoff)
    suspended = 0
    for pk in due.values_list("pk", flat=True):
        with transaction.atomic():
            sub = _locked(pk=pk, billing_status=BillingStatus.PAST_DUE, past_due_since__lte=cutoff)  # paid meanwhile?
            if sub is None:
                continue
            org = Organization.objects.select_for_update().get(pk=sub.organization_id)
            if org.suspended_at is not None:
                continue  # an operator's suspension: billing leaves it alone
            org.suspended_at = now
            org.suspension_reason = (
                f"payment for its subscription has been due since {sub.past_due_since:%Y-%m-%d}. An owner can pay the "
                "open invoice on the dashboard's billing page (/dashboard/billing/); service resumes as soon as it is "
                "paid"
            )
            org.save(update_fields=["suspended_at", "suspension_reason"])
            sub.billing_status = BillingStatus.SUSPENDED
            sub.billing_suspended_at = now
            sub.save(update_fields=["billing_status", "billing_suspended_at", "updated_at"])
        logger.warning("organization suspended for non-payment", extra={"org_id": sub.organization_id})
        suspended += 1
    return suspended


def _lift_billing_suspension(sub: Subscription) -> None:
    """Lift the suspension billing made, if it is still the organization's suspension."""
    org = Organization.objects.select_for_update().get(pk=sub.organization_id)
    if sub.billing_suspended_at is not None and org.suspended_at == sub.billing_suspended_at:
        org.suspended_at = None
        org.suspension_reason = ""
        org.save(update_fields=["suspended_at", "suspension_reason"])
        logger.info("organization reinstated: paid", extra={"org_id": org.pk})
    sub.billing_suspended_at = None


def _email_owners(sub: Subscription, invoice_url: str) -> None:
    owners = Membership.objects.filter(organization=sub.organization, role=Membership.Role.OWNER).select_related("user")
    recipients = [m.user.email for m in owners if m.user.email]
    if not recipients:
        return
    deadline = grace_ends(sub)
    try:
        send_mail(
            f"Payment failed for {sub.organization.name}",
            (
                f"The payment for {sub.organization.name}'s {sub.plan.name} subscription failed.\n\n"
                f"The service keeps working until {deadline:%Y-%m-%d %H:%M} UTC; if the invoice is still unpaid "
                "then, API keys stop working until it is paid.\n\n"
                + (f"Pay the invoice: {invoice_url}\n" if invoice_url else "")
                + "Update the payment method on the dashboard's billing page: /dashboard/billing/\n"
            ),
            None,
            recipients,
        )
    except Exception:  # the notice is a courtesy: the banner and the state do not depend on it
        logger.exception("the payment-failed notice could not be sent", extra={"org_id": sub.organization_id})
