"""An organization's single sign-on: its OpenID Connect provider, the e-mail domain it proved, and
how people arriving through it become members (accounts/sso.py does the rest)."""

from __future__ import annotations

import secrets

from django.db import models
from django.utils import timezone


def _provider_id() -> str:
    """The connection's name in its sign-in and callback URLs (the redirect URI the provider is told)."""
    return "org-" + secrets.token_hex(6)


def _domain_token() -> str:
    return "tts-verify=" + secrets.token_urlsafe(24)


class SsoConnection(models.Model):
    organization = models.OneToOneField("accounts.Organization", on_delete=models.CASCADE, related_name="sso")
    provider_id = models.CharField(max_length=40, unique=True, default=_provider_id)
    issuer = models.URLField(max_length=500)  # its discovery document: <issuer>/.well-known/openid-configuration
    client_id = models.CharField(max_length=255)
    client_secret = models.CharField(max_length=500)  # never shown again once set
    # The e-mail domain whose addresses the provider vouches for, proven by a DNS TXT record
    # `_tts-saas.<domain>` holding `domain_token`; no one signs in through it until it is proven.
    domain = models.CharField(max_length=253)
    domain_token = models.CharField(max_length=64, default=_domain_token)
    domain_verified_at = models.DateTimeField(null=True, blank=True)
    # Members must sign in through the provider (owners keep a password sign-in: the break-glass).
    enforced = models.BooleanField(default=False)
    # People new to the organization join just in time with the role their groups map to, else this.
    default_role = models.CharField(max_length=16, default="member")
    group_claim = models.CharField(max_length=100, default="groups")
    group_roles = models.JSONField(default=dict, blank=True)  # {"group name": "admin" | "member"}
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["domain"], condition=models.Q(domain_verified_at__isnull=False), name="one_owner_per_domain"
            )
        ]

    def __str__(self) -> str:
        return f"SSO for {self.organization} ({self.domain})"

    @property
    def verified(self) -> bool:
        return self.domain_verified_at is not None

    @property
    def txt_name(self) -> str:
        return f"_tts-saas.{self.domain}"
