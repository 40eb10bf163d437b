"""Stripe's webhooks and what they change here: an organization's plan, its billing state and,
through dunning, its suspension.

Deliveries are at least once and in no particular order, so every event is stored by its id
(`StripeEvent`: a replay of a handled event changes nothing), and handlers re-fetch the object the
event names and apply its state now, rather than trusting the event's copy: an old
`customer.subscription.created` handled after an `updated` still applies the subscription as it is.

Dunning: a failed payment leaves the organization working for `STRIPE_PAYMENT_GRACE_DAYS`, with a
banner in the dashboard and one notice e-mail to its owners; still unpaid after that,
`enforce_dunning` (beat) suspends it (the API answers 403 saying why and where to pay); a paid
invoice reinstates it at once. Only a suspension billing made is lifted by billing.
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
from .stripe_client import StripeClient, plan_slug_of_price

logger = logging.getLogger(__name__)

ACTIVE = {"active", "trialing"}
OVERDUE = {"past_due", "unpaid"}
ENDED = {"canceled", "incomplete_expired"}

HANDLED = {
    "checkout.session.completed",
    "customer.subscription.created",
    "customer.subscription.updated",
    "customer.subscription.deleted",
    "invoice.paid",
    "invoice.payment_failed",
    "billing.meter.error_report_triggered",
}


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
        row.attempts += 1
        try:
            with transaction.atomic():  # a savepoint: a handler that fails changes nothing
                handled = handle(event, client or StripeClient())
        except Exception as exc:
            row.status = StripeEvent.Status.FAILED
            row.error = f"{type(exc).__name__}: {exc}"[:2000]
            row.save(update_fields=["status", "error", "attempts"])
            logger.exception("a Stripe event could not be handled", extra={"event": row.pk, "type": row.type})
            raise
        row.status = StripeEvent.Status.PROCESSED if handled else StripeEvent.Status.IGNORED
        row.error = ""
        row.processed_at = timezone.now()
        row.save(update_fields=["status", "error", "attempts", "processed_at"])
    return row


def handle(event: dict, client: StripeClient) -> bool:
    """Apply one event; False for types this product does not act on."""
    kind = event.get("type", "")
    obj = event.get("data", {}).get("object", {})
    if kind == "checkout.session.completed":
        session = client.checkout_session_object(obj["id"])
        if session.get("subscription"):
            apply_subscription(
                client.subscription(session["subscription"]), org_hint=session.get("client_reference_id")
            )
        return True
    if kind.startswith("customer.subscription."):
        apply_subscription(client.subscription(obj["id"]))
        return True
    if kind == "invoice.paid":
        invoice = client.invoice(obj["id"])
        if invoice.get("status") == "paid":
            payment_succeeded(invoice["customer"])
        return True
    if kind == "invoice.payment_failed":
        invoice = client.invoice(obj["id"])
        if invoice.get("status") not in ("paid", "void"):
            payment_failed(invoice["customer"], invoice.get("hosted_invoice_url") or "")
        return True
    if kind == "billing.meter.error_report_triggered":
        logger.error(
            "ALERT: Stripe reports meter events it could not use",
            extra={"event": event.get("id"), "summary": str(obj.get("reason") or obj)[:500]},
        )
        return True
    return False


def _billing_for(customer: str, org_hint: str | None = None) -> Subscription | None:
    sub = Subscription.objects.select_related("organization", "plan").filter(stripe_customer_id=customer).first()
    if sub is None and org_hint and org_hint.isdigit():
        # Checkout for an organization whose customer id was stored: the same customer or none.
        sub = Subscription.objects.select_related("organization", "plan").filter(organization_id=int(org_hint)).first()
        if sub is not None and sub.stripe_customer_id not in ("", customer):
            return None
    return sub


def apply_subscription(stripe_sub: dict, org_hint: str | None = None) -> None:
    hint = org_hint or (stripe_sub.get("metadata") or {}).get("org_id")
    sub = _billing_for(stripe_sub["customer"], hint)
    if sub is None:
        logger.warning("a Stripe subscription matches no organization", extra={"subscription": stripe_sub["id"]})
        return
    status = stripe_sub.get("status", "")
    now = timezone.now()
    if status in ENDED:
        if sub.stripe_subscription_id not in ("", stripe_sub["id"]):
            return  # an older subscription ending: the current one stays
        sub.plan = default_plan()
        sub.stripe_subscription_id = ""
        sub.metered_since = None
        sub.current_period_end = None
        _lift_billing_suspension(sub)
        sub.billing_status = BillingStatus.CANCELED
        sub.past_due_since = None
        sub.save()
        return
    if status not in ACTIVE | OVERDUE:
        return  # incomplete or paused: nothing paid yet, nothing changes
    plan = _plan_of(stripe_sub)
    if plan is not None:
        sub.plan = plan
    sub.stripe_customer_id = stripe_sub["customer"]
    sub.stripe_subscription_id = stripe_sub["id"]
    sub.metered_since = sub.metered_since or datetime.fromtimestamp(
        int(stripe_sub.get("start_date") or stripe_sub.get("created") or now.timestamp()), UTC
    )
    period_end = stripe_sub.get("current_period_end") or _item_period_end(stripe_sub)
    sub.current_period_end = datetime.fromtimestamp(int(period_end), UTC) if period_end else None
    if status in ACTIVE:
        if sub.billing_status != BillingStatus.SUSPENDED or sub.past_due_since is None:
            sub.billing_status = BillingStatus.ACTIVE
    elif sub.billing_status != BillingStatus.SUSPENDED:
        sub.billing_status = BillingStatus.PAST_DUE
        sub.past_due_since = sub.past_due_since or now
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


def payment_failed(customer: str, invoice_url: str = "") -> None:
    sub = _billing_for(customer)
    if sub is None:
        return
    if sub.billing_status != BillingStatus.SUSPENDED:
        sub.billing_status = BillingStatus.PAST_DUE
    sub.past_due_since = sub.past_due_since or timezone.now()
    notify = sub.dunning_notified_at is None
    sub.dunning_notified_at = sub.dunning_notified_at or timezone.now()
    sub.save()
    if notify:
        _email_owners(sub, invoice_url)


def payment_succeeded(customer: str) -> None:
    sub = _billing_for(customer)
    if sub is None:
        return
    _lift_billing_suspension(sub)
    if sub.stripe_subscription_id:
        sub.billing_status = BillingStatus.ACTIVE
    sub.past_due_since = None
    sub.dunning_notified_at = None
    sub.save()


def grace_ends(sub: Subscription) -> datetime | None:
    if sub.past_due_since is None:
        return None
    return sub.past_due_since + timedelta(days=settings.STRIPE_PAYMENT_GRACE_DAYS)


def enforce_dunning(now: datetime | None = None) -> int:
    """Suspend organizations whose payment is still due after the grace period; how many."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.STRIPE_PAYMENT_GRACE_DAYS)
    suspended = 0
    for sub in Subscription.objects.select_related("organization").filter(
        billing_status=BillingStatus.PAST_DUE, past_due_since__lte=cutoff
    ):
        org: Organization = sub.organization
        if org.suspended_at is not None:
            continue  # an operator's suspension: billing leaves it alone
        org.suspended_at = now
        org.suspension_reason = (
            f"payment for its subscription has been due since {sub.past_due_since:%Y-%m-%d}. An owner can pay the "
            "open invoice on the dashboard's billing page (/dashboard/billing/); service resumes as soon as it is paid"
        )
        org.save(update_fields=["suspended_at", "suspension_reason"])
        sub.billing_status = BillingStatus.SUSPENDED
        sub.save(update_fields=["billing_status", "updated_at"])
        logger.warning("organization suspended for non-payment", extra={"org_id": org.pk})
        suspended += 1
    return suspended


def _lift_billing_suspension(sub: Subscription) -> None:
    if sub.billing_status == BillingStatus.SUSPENDED and sub.organization.suspended_at is not None:
        org = sub.organization
        org.suspended_at = None
        org.suspension_reason = ""
        org.save(update_fields=["suspended_at", "suspension_reason"])
        logger.info("organization reinstated: paid", extra={"org_id": org.pk})


def _email_owners(sub: Subscription, invoice_url: str) -> None:
    owners = Membership.objects.filter(organization=sub.organization, role=Membership.Role.OWNER).select_related("user")
    recipients = [m.user.email for m in owners if m.user.email]
    if not recipients:
        return
    deadline = grace_ends(sub)
    try:
        _send_notice(sub, recipients, deadline, invoice_url)
    except Exception:  # the notice is a courtesy: the banner and the state do not depend on it
        logger.exception("the payment-failed notice could not be sent", extra={"org_id": sub.organization_id})


def _send_notice(sub: Subscription, recipients: list[str], deadline, invoice_url: str) -> None:
    send_mail(
        f"Payment failed for {sub.organization.name}",
        (
            f"The payment for {sub.organization.name}'s {sub.plan.name} subscription failed.\n\n"
            f"The service keeps working until {deadline:%Y-%m-%d %H:%M} UTC; if the invoice is still unpaid then, "
            "API keys stop working until it is paid.\n\n"
            + (f"Pay the invoice: {invoice_url}\n" if invoice_url else "")
            + "Update the payment method on the dashboard's billing page: /dashboard/billing/\n"
        ),
        None,
        recipients,
        fail_silently=True,
    )
