"""Telling usage alerts (billing.alerts finds them): a Standard Webhooks event to the
organization's endpoint (`webhook_url`), signed like job callbacks and sent through the same
guarded delivery (public addresses only, the checked address pinned), retried by its task; and an
e-mail to the organization's owners and admins, once."""

from __future__ import annotations

from django.conf import settings
from django.core.mail import send_mail

from accounts.models import Membership
from billing.alerts import payload
from billing.models import UsageAlert
from synthesis.models import WebhookDelivery

from .callbacks import send


def message_id(alert: UsageAlert) -> str:
    return f"msg_usage_{alert.pk}"  # the same on every retry: receivers de-duplicate by it


def deliver(alert_id: int) -> bool:
    """One attempt at the webhook; True when delivered or when there is no endpoint to tell."""
    alert = UsageAlert.objects.select_related("organization").get(pk=alert_id)
    url = alert.organization.webhook_url
    if not url:
        return True
    sent = send(alert.organization, url, payload(alert), message_id(alert), WebhookDelivery.Event.USAGE_ALERT)
    return sent.delivered


def describe(alert: UsageAlert) -> str:
    whose = f"API key {alert.subject.removeprefix('key:')}'s monthly cap" if alert.api_key_id else "monthly quota"
    return (
        f"{alert.threshold}% of {alert.organization.name}'s {whose} used ({alert.used:,} of {alert.limit:,} characters)"
    )


def email(alert_id: int) -> int:
    """E-mail the owners and admins; the number of addresses written to."""
    alert = UsageAlert.objects.select_related("organization").get(pk=alert_id)
    admins = Membership.objects.filter(
        organization=alert.organization, role__in=[Membership.Role.OWNER, Membership.Role.ADMIN], user__is_active=True
    ).select_related("user")
    addresses = sorted({m.user.email for m in admins if m.user.email})
    if not addresses:
        return 0
    data = payload(alert)["data"]
    send_mail(
        f"{settings.TTS_PRODUCT_NAME}: {describe(alert)}",
        f"{describe(alert)} this month (since {data['period_start']}).\n\n"
        + (
            "Requests beyond the limit are refused until it resets"
            if alert.threshold >= 100
            else "At 100% requests beyond the limit are refused"
        )
        + f" at {data['resets_at']}. Owners and admins can see usage on the dashboard's Usage page.\n",
        None,
        addresses,
    )
    return len(addresses)
