from __future__ import annotations

from django.contrib import admin

from synthesis.models import Job
from synthesis.webhook_models import WebhookDelivery, WebhookEndpoint


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("id", "organization", "status", "characters", "audio_seconds", "voice", "created_at")
    list_filter = ("status", "interactive", "voice")
    search_fields = ("id", "organization__name", "request_id")
    readonly_fields = [f.name for f in Job._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False


class ReadOnlyAdmin(admin.ModelAdmin):
    """Shown to operators, changed only by the tenant (the dashboard's Webhooks page, the API)."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(ReadOnlyAdmin):
    """An organization's event endpoints, for finding why its events do not arrive; the signing
    secrets never shown."""

    list_display = ("url", "organization", "events", "enabled", "created_at")
    list_filter = ("enabled",)
    search_fields = ("url", "organization__name", "organization__slug")
    exclude = ("secret", "previous_secret")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    """Every message sent to a receiver, with each attempt and the last answer (bounded, masked)."""

    list_display = ("event_type", "url", "organization", "status", "error", "tries", "next_attempt_at", "at")
    list_filter = ("event", "event_type", "status", "error")
    search_fields = ("organization__name", "organization__slug", "url", "message_id", "job__id")
    list_select_related = ("organization",)
    raw_id_fields = ("job", "endpoint")

    @admin.display(description="attempts")
    def tries(self, delivery: WebhookDelivery) -> int:
        return len(delivery.attempts)
