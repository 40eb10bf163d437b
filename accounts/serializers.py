from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema_serializer
from rest_framework import serializers

from .models import KEY_SCHEME, ApiKey


class ApiKeySerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="prefix", read_only=True)
    redacted = serializers.SerializerMethodField()

    class Meta:
        model = ApiKey
        fields = ["id", "name", "kind", "redacted", "created_at", "last_used_at", "expires_at", "revoked_at"]
        read_only_fields = ["created_at", "last_used_at", "revoked_at"]

    def get_redacted(self, key: ApiKey) -> str:
        return f"{KEY_SCHEME}_{key.prefix}_…"


class ApiKeyCreatedSerializer(ApiKeySerializer):
    """A new key as created: the only response that carries the secret."""

    key = serializers.CharField(read_only=True, help_text="The key itself (tts_<id>_<secret>); shown this once.")

    class Meta(ApiKeySerializer.Meta):
        fields = [*ApiKeySerializer.Meta.fields, "key"]


@extend_schema_serializer(many=False)  # the whole body, though the action is a list
class ApiKeyListSerializer(serializers.Serializer):
    object = serializers.ChoiceField(choices=["list"])
    # DRF takes declared fields off the class, so `data` the property stays; the stubs don't know.
    data = ApiKeySerializer(many=True)  # type: ignore[assignment]


class ApiKeyCreateSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(choices=ApiKey.Kind.choices, default=ApiKey.Kind.STANDARD)
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)

    def validate_expires_at(self, value):
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("expires_at must be in the future.")
        return value


class WebhookSecretSerializer(serializers.Serializer):
    """The secret that signs the organization's job callbacks (Standard Webhooks)."""

    secret = serializers.CharField(
        source="webhook_secret", read_only=True, help_text="whsec_ and the base64 of the HMAC key."
    )
    rotated_at = serializers.DateTimeField(source="webhook_secret_rotated_at", read_only=True, allow_null=True)
    previous_valid_until = serializers.DateTimeField(
        source="previous_webhook_secret_valid_until",
        read_only=True,
        allow_null=True,
        help_text="Until then callbacks are also signed with the previous secret; null when they are not.",
    )
