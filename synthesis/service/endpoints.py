"""An organization's webhook endpoints: made, changed, their secret rotated, deleted; each audited
(never with the secret). URLs are checked by the caller as callback URLs are (callbacks.url_problem)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from accounts import audit
from accounts.models import Organization, _new_webhook_secret
from billing.limits import limits_for
from synthesis.models import WebhookEndpoint
from tts_saas.errors import ApiError

CHANGEABLE = ("url", "description", "events", "enabled")


def described(endpoint: WebhookEndpoint) -> dict:
    return {field: getattr(endpoint, field) for field in CHANGEABLE}


def target(endpoint: WebhookEndpoint) -> str:
    return f"webhook_endpoint:{endpoint.pk}"


def create(org: Organization, by, **fields) -> WebhookEndpoint:
    """A new endpoint; 400 when the organization keeps its limit already (its plan's
    `max_webhook_endpoints`, within the deployment's TTS_MAX_WEBHOOK_ENDPOINTS)."""
    most = limits_for(org).max_webhook_endpoints
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=org.pk).first()  # one creation at a time
        if WebhookEndpoint.objects.filter(organization=org).count() >= most:
            raise ApiError(
                400,
                f"This organization may keep {most} webhook endpoints (its plan's limit): delete one first.",
                "webhook_endpoint_limit",
            )
        endpoint = WebhookEndpoint.objects.create(organization=org, **fields)
        audit.record(org, "webhook_endpoint.created", by, target=target(endpoint), after=described(endpoint))
    return endpoint


def update(endpoint: WebhookEndpoint, by, **fields) -> WebhookEndpoint:
    before = described(endpoint)
    for name, value in fields.items():
        setattr(endpoint, name, value)
    endpoint.save(update_fields=list(fields))
    org, after = endpoint.organization, described(endpoint)
    audit.record_changes(org, "webhook_endpoint.updated", before, after, by, target=target(endpoint))
    return endpoint


def rotate_secret(endpoint: WebhookEndpoint, by) -> WebhookEndpoint:
    """A new secret; the one it replaces keeps signing for the grace period (WEBHOOK_SECRET_GRACE)."""
    with transaction.atomic():
        locked = WebhookEndpoint.objects.select_for_update().get(pk=endpoint.pk)
        locked.previous_secret, locked.secret = locked.secret, _new_webhook_secret()
        locked.secret_rotated_at = timezone.now()
        locked.save(update_fields=["secret", "previous_secret", "secret_rotated_at"])
        audit.record(locked.organization, "webhook_endpoint.secret_rotated", by, target=target(locked))
    return locked


def delete(endpoint: WebhookEndpoint, by) -> None:
    """Its deliveries stay in the log (without their endpoint): they were sent."""
    org, before = endpoint.organization, described(endpoint)
    audit.record(org, "webhook_endpoint.deleted", by, target=target(endpoint), before=before)
    endpoint.delete()
