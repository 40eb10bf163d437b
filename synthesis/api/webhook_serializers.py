"""The shapes of /v1/webhooks/endpoints and /v1/webhooks/deliveries: an endpoint as written and as
read (its secret only where the caller asked for it: made, read alone, rotated), a delivery with
its bodies (bounded, secrets masked) and attempts."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from synthesis.models import WebhookDelivery, WebhookEndpoint
from synthesis.service.callbacks import url_problem
from synthesis.webhook_models import EVENT_TYPES
from tts_saas.serializers import StrictSerializer

EVENTS_HELP = "Event types it receives: " + "; ".join(f"{name} ({meaning})" for name, meaning in EVENT_TYPES.items())


def checked_url(value: str, field: str = "url") -> str:
    if problem := url_problem(value, field=field):  # the field as the caller sent it
        raise serializers.ValidationError(problem)
    return value


class WebhookEndpointWriteSerializer(StrictSerializer):
    url = serializers.CharField(max_length=2000, help_text="An https or http URL on a public address.")
    events = serializers.ListField(
        child=serializers.ChoiceField(choices=list(EVENT_TYPES)), min_length=1, max_length=20, help_text=EVENTS_HELP
    )
    description = serializers.CharField(max_length=200, allow_blank=True, required=False, default="")
    enabled = serializers.BooleanField(required=False, default=True, help_text="A disabled endpoint gets nothing.")

    def validate_url(self, value: str) -> str:
        return checked_url(value.strip())

    def validate_events(self, value: list[str]) -> list[str]:
        return sorted(set(value))


class WebhookEndpointSerializer(serializers.ModelSerializer):
    object = serializers.SerializerMethodField()
    previous_secret_valid_until = serializers.DateTimeField(
        read_only=True,
        allow_null=True,
        help_text="Until then deliveries also carry a signature with the previous secret; null when not.",
    )

    class Meta:
        model = WebhookEndpoint
        fields = [
            "id",
            "object",
            "url",
            "description",
            "events",
            "enabled",
            "created_at",
            "secret_rotated_at",
            "previous_secret_valid_until",
        ]

    def get_object(self, endpoint) -> str:
        return "webhook_endpoint"


class WebhookEndpointWithSecretSerializer(WebhookEndpointSerializer):
    secret = serializers.CharField(read_only=True, help_text="whsec_ and the base64 of the HMAC key: verify with it.")

    class Meta(WebhookEndpointSerializer.Meta):
        fields = [*WebhookEndpointSerializer.Meta.fields, "secret"]


class AttemptSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    status = serializers.IntegerField(allow_null=True, help_text="The receiver's HTTP status; null: no answer.")
    error = serializers.CharField(help_text="Why there is no status: timeout, connection failed, …")
    duration_ms = serializers.IntegerField()


class WebhookDeliverySerializer(serializers.ModelSerializer):
    object = serializers.SerializerMethodField()
    endpoint = serializers.UUIDField(source="endpoint_id", allow_null=True, read_only=True)
    job = serializers.UUIDField(source="job_id", allow_null=True, read_only=True)
    delivered = serializers.BooleanField(read_only=True)
    last_attempt_at = serializers.DateTimeField(source="at", read_only=True)
    attempts = AttemptSerializer(many=True, read_only=True)
    request_body = serializers.CharField(read_only=True, help_text="As sent (at most 4,096 characters).")
    response_body = serializers.CharField(
        read_only=True, help_text="The last answer's (at most 4,096 characters, secrets masked)."
    )
    next_attempt_at = serializers.DateTimeField(
        read_only=True, allow_null=True, help_text="When the next retry is due; null: none is."
    )

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "object",
            "endpoint",
            "job",
            "event_type",
            "message_id",
            "url",
            "created_at",
            "delivered",
            "status",
            "error",
            "last_attempt_at",
            "attempts",
            "next_attempt_at",
            "request_body",
            "response_body",
        ]

    def get_object(self, delivery) -> str:
        return "webhook_delivery"


@extend_schema_serializer(many=False)  # the whole body, though the action is a list
class WebhookEndpointListSerializer(serializers.Serializer):
    object = serializers.ChoiceField(choices=["list"])
    data = WebhookEndpointSerializer(many=True)  # type: ignore[assignment]  # the response field, not Serializer.data


@extend_schema_serializer(many=False)
class WebhookDeliveryListSerializer(serializers.Serializer):
    object = serializers.ChoiceField(choices=["list"])
    data = WebhookDeliverySerializer(many=True)  # type: ignore[assignment]  # the response field, not Serializer.data
