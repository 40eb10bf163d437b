"""The organization's single sign-on connection and its second-factor requirement, as the API
reads and writes them (accounts/sso.py, accounts/mfa.py)."""

from __future__ import annotations

import re

from rest_framework import serializers

from tts_saas.serializers import StrictSerializer

from .sso import JOINABLE_ROLES

DOMAIN = re.compile(r"^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))+$")
NOT_A_DOMAIN = "Not a domain name, e.g. example.com."
MAX_GROUPS = 100  # group_roles' entries
MAX_GROUP_CHARS = 200


def checked_domain(value: str) -> str:
    """An e-mail domain as stored (lower case); ValueError when it is not one."""
    value = value.strip().lower()
    if not DOMAIN.match(value):
        raise ValueError(NOT_A_DOMAIN)
    return value


ROLES = [(role.value, role.value) for role in reversed(JOINABLE_ROLES)]  # member first: the default


class SsoConnectionSerializer(StrictSerializer):
    issuer = serializers.URLField(
        max_length=500,
        help_text="The provider's issuer; its discovery document is at /.well-known/openid-configuration.",
    )
    client_id = serializers.CharField(max_length=255)
    client_secret = serializers.CharField(
        max_length=500, write_only=True, required=False, help_text="Needed to connect; kept when not sent again."
    )
    domain = serializers.CharField(
        max_length=253, help_text="The e-mail domain the provider signs in, e.g. example.com."
    )
    enforced = serializers.BooleanField(
        default=False, help_text="Members must sign in through the provider (owners keep a password sign-in)."
    )
    default_role = serializers.ChoiceField(choices=ROLES, default="member", help_text="A new member's role.")
    group_claim = serializers.CharField(max_length=100, default="groups", help_text="The claim listing groups.")
    group_roles = serializers.DictField(
        child=serializers.ChoiceField(choices=ROLES),
        default=dict,
        help_text=f'{{"group": "admin" | "member"}}, at most {MAX_GROUPS} groups, names of up to '
        f"{MAX_GROUP_CHARS} characters.",
    )
    provider_id = serializers.CharField(read_only=True)
    redirect_uri = serializers.CharField(read_only=True, help_text="Register this at the provider.")
    domain_record_name = serializers.CharField(read_only=True, help_text="Publish a DNS TXT record here...")
    domain_record_value = serializers.CharField(read_only=True, help_text="...holding this value.")
    domain_verified_at = serializers.DateTimeField(read_only=True, allow_null=True)

    def to_internal_value(self, data):
        # Bounded before the dict's entries are read one by one.
        groups = data.get("group_roles") if isinstance(data, dict) else None
        if isinstance(groups, dict) and len(groups) > MAX_GROUPS:
            raise serializers.ValidationError({"group_roles": [f"group_roles holds at most {MAX_GROUPS} groups."]})
        return super().to_internal_value(data)

    def validate_group_roles(self, value: dict) -> dict:
        long = next((group for group in value if len(group) > MAX_GROUP_CHARS), None)
        if long is not None:
            message = f"A group's name is at most {MAX_GROUP_CHARS} characters: '{long[:40]}…'."
            raise serializers.ValidationError(message)
        return value

    def validate_domain(self, value: str) -> str:
        try:
            return checked_domain(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None


class RequireMfaSerializer(StrictSerializer):
    require_mfa = serializers.BooleanField(
        help_text="Members add a second factor (an authenticator app or a passkey) before using the dashboard."
    )
