"""Webhooks: an organization's event endpoints (`WebhookEndpoint`: a URL, the event types it
receives, its own signing secret, enabled or not) and the delivery log (`WebhookDelivery`: one
message to one receiver, with the request and the last response body, bounded and masked, every
attempt and when the next one is due). A job's callback to its `callback_url` is a delivery without
an endpoint, signed with the organization's secret."""

from __future__ import annotations

import uuid
from datetime import datetime

from django.db import models
from django.utils import timezone

from accounts.models import WEBHOOK_SECRET_GRACE, Organization, _new_webhook_secret
from tts_saas.outbound import without_credentials

# The event types an endpoint may receive (Standard Webhooks' `type`), with what they mean.
EVENT_TYPES = {
    "job.succeeded": "an asynchronous job finished: its audio is ready",
    "job.failed": "an asynchronous job failed",
    "job.cancelled": "an asynchronous job was cancelled",
    "job.expired": "an asynchronous job waited too long for a worker and never ran",
    "usage.threshold_reached": "50, 80 or 100 % of the monthly quota or of a key's cap used",
}
BODY_CHARS = 4096  # of a request or response body the log keeps


class WebhookEndpoint(models.Model):
    """Where an organization's events go, signed with the endpoint's own secret (rotatable: the
    previous one signs too for WEBHOOK_SECRET_GRACE)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="webhook_endpoints")
    url = models.URLField(max_length=2000)
    description = models.CharField(max_length=200, blank=True)
    events = models.JSONField(default=list, help_text="event types (synthesis.webhook_models.EVENT_TYPES)")
    enabled = models.BooleanField(default=True)
    secret = models.CharField(max_length=64, default=_new_webhook_secret)
    previous_secret = models.CharField(max_length=64, blank=True)
    secret_rotated_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:  # shown in the console: never the credentials a URL may carry
        return f"{without_credentials(self.url)} ({', '.join(self.events)})"

    def previous_secret_valid_until(self, now: datetime | None = None) -> datetime | None:
        """Until when deliveries also carry a signature with the previous secret; None when not."""
        if not self.previous_secret or self.secret_rotated_at is None:
            return None
        until = self.secret_rotated_at + WEBHOOK_SECRET_GRACE
        return until if (now or timezone.now()) < until else None

    def signing_secrets(self, now: datetime | None = None) -> list[str]:
        if self.previous_secret_valid_until(now) is not None:
            return [self.secret, self.previous_secret]
        return [self.secret]


class WebhookDelivery(models.Model):
    """One message to one receiver: a job's callback, an event to an endpoint, or a test event.
    `attempts` lists every try ({at, status, error, duration_ms}); `at`, `status`, `error` and
    `duration_ms` are the last one's. Kept as long as its job (callbacks) or TTS_WEBHOOK_LOG_DAYS."""

    class Event(models.TextChoices):
        JOB = "job", "Job callback"
        USAGE_ALERT = "usage_alert", "Usage alert"
        TEST = "test", "Test event"
        JOB_EVENT = "job_event", "Job event"

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="webhook_deliveries")
    job = models.ForeignKey("synthesis.Job", null=True, blank=True, on_delete=models.CASCADE, related_name="deliveries")
    endpoint = models.ForeignKey(
        WebhookEndpoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    # Sent to one of the organization's endpoints (kept once the endpoint is deleted: its deliveries
    # stay in the log without it, and say why they are not sent again).
    to_endpoint = models.BooleanField(default=False)
    event = models.CharField(max_length=16, choices=Event.choices)
    event_type = models.CharField(max_length=64)  # the payload's "type": job.succeeded, usage.threshold_reached, test
    message_id = models.CharField(max_length=80)  # webhook-id: the same on every attempt of one message
    url = models.CharField(max_length=2000)  # as delivered to, without credentials
    request_body = models.TextField(blank=True)  # as sent, at most BODY_CHARS
    response_body = models.TextField(blank=True)  # the last answer's, at most BODY_CHARS, secrets masked
    attempts = models.JSONField(default=list, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)  # when the next retry is due; None: none
    created_at = models.DateTimeField(default=timezone.now)
    at = models.DateTimeField(default=timezone.now)
    status = models.PositiveSmallIntegerField(null=True, blank=True)  # the receiver's HTTP status
    error = models.CharField(max_length=64, blank=True)  # a generic reason when there is no status
    duration_ms = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["organization", "-at"])]
        verbose_name_plural = "webhook deliveries"  # (Django's default: "webhook deliverys")

    def __str__(self) -> str:
        return f"{self.event_type} to {self.url} ({self.status or self.error})"

    @property
    def delivered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300
