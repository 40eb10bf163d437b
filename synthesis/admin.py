from __future__ import annotations

from django.contrib import admin

from accounts.admin import ReadOnlyAdmin
from billing.admin import key_label, seconds_label
from synthesis.models import Job
from synthesis.webhook_models import WebhookDelivery, WebhookEndpoint
from tts_saas.outbound import without_credentials


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("created_at", "organization", "model", "key", "voice", "status", "characters", "audio", "id")
    list_filter = (
        "status",
        "interactive",
        "model",
        ("organization", admin.RelatedOnlyFieldListFilter),
        "created_at",
    )
    date_hierarchy = "created_at"
    search_fields = ("id", "organization__name", "request_id")
    readonly_fields = [f.name for f in Job._meta.fields]
    list_select_related = ("organization", "api_key")

    key = admin.display(description="key", ordering="api_key__name")(lambda self, row: key_label(row))
    audio = admin.display(description="audio", ordering="audio_seconds")(lambda self, row: seconds_label(row))

    def has_add_permission(self, request) -> bool:
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnlyAdmin):
    """An organization's event endpoints, for finding why its events do not arrive: changed and
    deleted only by the tenant (the dashboard's Webhooks page, the API); no secret shown (the
    signing secrets, a URL's user and password)."""

    list_display = ("target", "organization", "events", "enabled", "created_at")
    list_filter = ("enabled",)
    search_fields = ("organization__name", "organization__slug")
    exclude = ("url", "secret", "previous_secret")  # the URL's credentials are secrets too
    readonly_fields = ("target",)

    @admin.display(description="URL")
    def target(self, endpoint: WebhookEndpoint) -> str:
        return without_credentials(endpoint.url)


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    """Every message sent to a receiver (its URL stored without credentials), with each attempt and
    the last answer (bounded, masked): the tenant's record, kept as long as its job or
    TTS_WEBHOOK_LOG_DAYS."""

    list_display = ("event_type", "url", "organization", "status", "error", "tries", "next_attempt_at", "at")
    list_filter = ("event", "event_type", "status", "error")
    search_fields = ("organization__name", "organization__slug", "url", "message_id", "job__id")
    list_select_related = ("organization",)
    raw_id_fields = ("job", "endpoint")

    @admin.display(description="attempts")
    def tries(self, delivery: WebhookDelivery) -> int:
        return len(delivery.attempts)
