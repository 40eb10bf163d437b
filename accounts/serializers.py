from __future__ import annotations

from django.utils import timezone
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from tts_saas.serializers import StrictSerializer

from . import client_tokens
from . import scopes as key_scopes
from .grants import effective_scopes
from .keys import MAX_ROTATION_GRACE
from .models import KEY_SCHEME, ApiKey, Organization
from .network import parse_networks
from .validation import KEY_CAP, KEY_RATE


class KeyRotationSerializer(StrictSerializer):
    grace_seconds = serializers.IntegerField(
        min_value=0,
        max_value=int(MAX_ROTATION_GRACE.total_seconds()),
        default=0,
        help_text="How long the old secret keeps working (at most 7 days); 0: refused at once.",
    )


class ApiKeySerializer(serializers.ModelSerializer):
    id = serializers.CharField(source="prefix", read_only=True)
    redacted = serializers.SerializerMethodField()
    owner = serializers.SerializerMethodField(
        help_text="The member whose own key it is (revoked when they leave); null: a service key of the organization."
    )
    effective_scopes = serializers.SerializerMethodField(
        help_text="What the key may do now: its scopes, narrowed to its owner's role for a member's own key."
    )

    class Meta:
        model = ApiKey
        fields = [
            "id",
            "name",
            "kind",
            "scopes",
            "effective_scopes",
            "allowed_ips",
            "monthly_character_cap",
            "requests_per_minute",
            "owner",
            "redacted",
            "created_at",
            "last_used_at",
            "expires_at",
            "revoked_at",
            "previous_valid_until",
        ]
        read_only_fields = ["created_at", "last_used_at", "revoked_at", "previous_valid_until"]

    def get_effective_scopes(self, key: ApiKey) -> list[str]:
        return sorted(effective_scopes(key))

    def get_owner(self, key: ApiKey) -> str | None:
        return key.owner.email if key.owner_id and key.owner else None

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


class ParsedListField(serializers.ListField):
    """A list of strings read by `parse` (its ValueError is the field's error)."""

    child = serializers.CharField()
    parse = staticmethod(lambda values: values)

    def to_internal_value(self, data):
        try:
            return self.parse(data)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class ScopesField(ParsedListField):
    parse = staticmethod(key_scopes.parse)


class NetworksField(ParsedListField):
    parse = staticmethod(parse_networks)


def cap_field():
    return serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=KEY_CAP[0],
        max_value=KEY_CAP[1],
        help_text="Characters this key may use a calendar month (UTC), within the organization's quota; null: no cap. "
        "At most the calling key's own cap: a key cannot raise its own.",
    )


def rate_field():
    return serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=KEY_RATE[0],
        max_value=KEY_RATE[1],
        help_text="Requests a minute for this key, within the organization's limit; null: only the organization's. "
        "At most the calling key's own.",
    )


class ApiKeyUpdateSerializer(StrictSerializer):
    """Only the fields sent change."""

    name = serializers.CharField(max_length=200, required=False)
    scopes = ScopesField(required=False)
    allowed_ips = NetworksField(required=False)
    monthly_character_cap = cap_field()
    requests_per_minute = rate_field()

    def validate(self, attrs):
        if not attrs:
            raise serializers.ValidationError({"name": ["Send at least one field to change."]})
        return attrs


class ApiKeyCreateSerializer(StrictSerializer):
    name = serializers.CharField(max_length=200)
    kind = serializers.ChoiceField(
        choices=[ApiKey.Kind.STANDARD, ApiKey.Kind.ADMIN],
        required=False,
        help_text="A preset: standard (speech, jobs, voices, lexicons, usage, billing) or admin (every scope). "
        "Give `scopes` instead for a key of its own.",
    )
    scopes = ScopesField(
        required=False,
        help_text="`area:read` or `area:write` (write includes read), or presets (admin, standard, speech, "
        f"read_only). Areas: {', '.join(key_scopes.AREAS)}. At most the scopes of the caller.",
    )
    allowed_ips = NetworksField(
        required=False,
        help_text="Addresses or CIDR networks (IPv4, IPv6) this key may call from; empty: any. Inside the calling "
        "key's own allowlist when it has one: a key cannot widen its own.",
    )
    monthly_character_cap = cap_field()
    requests_per_minute = rate_field()
    expires_at = serializers.DateTimeField(required=False, allow_null=True, default=None)

    def validate_expires_at(self, value):
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("expires_at must be in the future.")
        return value

    def validate(self, attrs):
        if "kind" in attrs and "scopes" in attrs:
            raise serializers.ValidationError({"scopes": ["Give `kind` (a preset) or `scopes`, not both."]})
        if "scopes" not in attrs:
            attrs["scopes"] = key_scopes.PRESETS[attrs.pop("kind", ApiKey.Kind.STANDARD)]
        return attrs


class IpAllowlistSerializer(StrictSerializer):
    """The organization's IP allowlist: API calls (REST and WebSocket) from other addresses are
    refused with 403 `ip_not_allowed`; each key may narrow it further."""

    allowed_ips = NetworksField(help_text="Addresses or CIDR networks (IPv4, IPv6); empty: any address.")


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


@extend_schema_field({"type": ["object", "null"], "additionalProperties": True})
class ChangeField(serializers.JSONField):
    """What changed, before or after: an object, or null where the action has no such side."""


class AuditEventSerializer(serializers.Serializer):
    id = serializers.SerializerMethodField()
    object = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()
    action = serializers.CharField(help_text="e.g. key.created, key.revoked, signin.failed, access.ip_refused")
    actor = serializers.SerializerMethodField()
    ip = serializers.IPAddressField(allow_null=True)
    target = serializers.CharField(help_text='what it was done to, e.g. "key:AbC123…", "member:ann@example.com"')
    before = ChangeField(allow_null=True)
    after = ChangeField(allow_null=True)

    def get_id(self, event) -> str:
        return f"{AUDIT_ID_PREFIX}{event.pk}"

    def get_object(self, event) -> str:
        return "audit_log"

    def get_actor(self, event) -> dict:
        return {"type": event.actor_type, "id": event.actor_id, "label": event.actor_label}


AUDIT_ID_PREFIX = "audit_"


class AuditQuerySerializer(StrictSerializer):
    action = serializers.CharField(required=False, help_text='one action, or a group ending in "." (e.g. "key.")')
    actor_id = serializers.CharField(required=False, help_text="a member's id or a key's id")
    since = serializers.DateTimeField(required=False)
    until = serializers.DateTimeField(required=False)
    after = serializers.RegexField(
        rf"^{AUDIT_ID_PREFIX}\d{{1,18}}$", required=False, help_text="a cursor: the last id of the previous page"
    )
    limit = serializers.IntegerField(required=False, min_value=1, max_value=100, default=20)


@extend_schema_serializer(many=False)
class AuditEventListSerializer(serializers.Serializer):
    object = serializers.ChoiceField(choices=["list"])
    data = AuditEventSerializer(many=True)  # type: ignore[assignment]
    first_id = serializers.CharField(allow_null=True)
    last_id = serializers.CharField(allow_null=True)
    has_more = serializers.BooleanField()


class ClientTokenCreateSerializer(StrictSerializer):
    expires_in = serializers.IntegerField(
        min_value=10,
        max_value=client_tokens.MAX_SECONDS,
        default=client_tokens.DEFAULT_SECONDS,
        help_text="Seconds the token lives (10 to 3600; 300 when not given).",
    )
    single_use = serializers.BooleanField(
        default=False,
        help_text="Spent by its first request (or WebSocket connection); its budget still counts every utterance.",
    )
    voice = serializers.CharField(
        required=False, max_length=64, help_text="The one voice it may speak with (a built-in name or voice_…)."
    )
    max_characters = serializers.IntegerField(
        required=False, min_value=1, max_value=10_000_000, help_text="Characters of input it may speak in all."
    )


class ClientTokenSerializer(serializers.Serializer):
    object = serializers.ChoiceField(choices=["client_token"])
    token = serializers.CharField(
        help_text="tts_tok_…: send it as `Authorization: Bearer`, or `?token=` on the WebSocket."
    )
    expires_at = serializers.DateTimeField()
    single_use = serializers.BooleanField()
    voice = serializers.CharField(allow_null=True)
    max_characters = serializers.IntegerField(allow_null=True)


class DataRetentionSerializer(StrictSerializer):
    data_retention = serializers.ChoiceField(
        choices=Organization.Retention.choices,
        help_text="standard: texts kept with jobs and history, audio cached; optional: a request may send "
        '`"zero_retention": true`; zero: every request keeps no input text and no audio once answered.',
    )
