"""Telling usage alerts (billing.alerts finds them): a Standard Webhooks event to each of the
organization's endpoints that receive `usage.threshold_reached` (synthesis.service.events: signed
with the endpoint's secret, sent through the guarded delivery, retried by its task); and an e-mail
to the organization's owners and admins, once."""

from __future__ import annotations

from django.conf import settings
from django.core.mail import send_mail

from accounts.models import Membership
from billing.alerts import payload
from billing.models import UsageAlert


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
