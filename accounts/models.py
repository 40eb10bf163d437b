"""Organization (the tenant) and ApiKey.

A key is `tts_<prefix>_<secret>`: the prefix is stored in clear to find the row and to show in
lists; only a SHA-256 of the whole key is stored. SHA-256, not PBKDF2: the secret has ~190 bits of
entropy, so a slow hash buys nothing, and it runs on every request.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
import string
from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from django.utils import timezone

from . import scopes as key_scopes
from . import validation

KEY_SCHEME = "tts"
PREFIX_LENGTH = 12
SECRET_LENGTH = 32
LAST_USED_RESOLUTION = timedelta(minutes=1)
# After a rotation callbacks carry a signature with the previous webhook secret too, this long:
# receivers switch to the new secret without losing a delivery.
WEBHOOK_SECRET_GRACE = timedelta(hours=24)


ALPHABET = string.ascii_letters + string.digits


def random_token(length: int) -> str:
    return "".join(secrets.choice(ALPHABET) for _ in range(length))


def _new_webhook_secret() -> str:
    """Standard Webhooks' format: "whsec_" and the base64 of random bytes (the HMAC key). Older
    secrets, "whsec_" and 32 letters or digits, read as valid base64 too and keep working."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def hash_key(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


class Organization(models.Model):
    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=100, unique=True)
    suspended_at = models.DateTimeField(null=True, blank=True)
    suspension_reason = models.CharField(max_length=500, blank=True)
    # Signs job callbacks (Standard Webhooks); shown to the organization's admins, rotatable.
    webhook_secret = models.CharField(max_length=64, default=_new_webhook_secret)
    previous_webhook_secret = models.CharField(max_length=64, blank=True)  # signs too, for the grace
    webhook_secret_rotated_at = models.DateTimeField(null=True, blank=True)
    # Unused: the event endpoint of old, moved to synthesis.WebhookEndpoint (its migration 0014) and
    # signed there with a copy of this secret. Kept for that migration; not read anywhere.
    webhook_url = models.URLField(max_length=2000, blank=True)

    class Retention(models.TextChoices):
        STANDARD = "standard"  # texts kept with jobs and history, audio cached and stored as usual
        OPTIONAL = "optional"  # a request may ask for zero retention (`"zero_retention": true`)
        ZERO = "zero"  # every request: no input text and no audio kept anywhere once it is answered

    data_retention = models.CharField(max_length=16, choices=Retention.choices, default=Retention.STANDARD)
    # API calls (REST and WebSocket) are refused from other addresses; empty: any address.
    allowed_ips = models.JSONField(default=list, blank=True, help_text="CIDR networks; empty: any address")
    # Sites whose pages may call the speech API with this organization's client tokens (CORS).
    browser_origins = models.JSONField(default=list, blank=True, help_text="https://host[:port] each; empty: none")
    require_mfa = models.BooleanField(default=False)  # members add a second factor before using the dashboard
    # What a request that names no model (or OpenAI's names) speaks with, and its voice when it names
    # none; empty: the deployment's (TTS_DEFAULT_MODEL, "alloy"). Checked when set (synthesis.api.defaults).
    default_model = models.CharField(max_length=64, blank=True)
    default_voice = models.CharField(max_length=64, blank=True)
    # OpenAI's voice names mapped to voices of the organization's choosing, {"alloy": {"model": "voxcpm",
    # "voice": "voice_…"}}, for clients that send only those names. Checked when set (synthesis.api.aliases).
    voice_aliases = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def clean_fields(self, exclude=None) -> None:
        """Django's checks, then the API's (accounts.validation): the console saves no allowlist the API refuses."""
        validation.clean_fields(self, exclude, super().clean_fields, validation.ORGANIZATION)

    @property
    def is_suspended(self) -> bool:
        return self.suspended_at is not None

    def previous_webhook_secret_valid_until(self, now: datetime | None = None) -> datetime | None:
        """Until when callbacks also carry a signature with the previous secret; None when they
        do not (no rotation yet, or its grace period is over)."""
        if not self.previous_webhook_secret or self.webhook_secret_rotated_at is None:
            return None
        until = self.webhook_secret_rotated_at + WEBHOOK_SECRET_GRACE
        return until if (now or timezone.now()) < until else None

    def webhook_signing_secrets(self, now: datetime | None = None) -> list[str]:
        """The secrets a callback is signed with now: the current one, and the previous one
        during the grace period after a rotation."""
        if self.previous_webhook_secret_valid_until(now) is not None:
            return [self.webhook_secret, self.previous_webhook_secret]
        return [self.webhook_secret]

    def create_api_key(
        self,
        name: str,
        expires_at=None,
        created_by=None,
        kind: str = "standard",
        scopes: frozenset[str] | None = None,
        allowed_ips: list[str] | None = None,
        owner=None,
        monthly_character_cap: int | None = None,
        requests_per_minute: int | None = None,
    ) -> tuple[ApiKey, str]:
        """Make a key with a preset's scopes (`kind`) or scopes of its own; the raw key is returned
        once and never stored."""
        if scopes is None:
            scopes = key_scopes.PRESETS[kind]
        prefix, secret = random_token(PREFIX_LENGTH), random_token(SECRET_LENGTH)
        raw = f"{KEY_SCHEME}_{prefix}_{secret}"
        key = ApiKey.objects.create(
            organization=self,
            name=name,
            prefix=prefix,
            hashed_key=hash_key(raw),
            expires_at=expires_at,
            created_by=created_by,
            kind=ApiKey.kind_of(scopes),
            scopes=sorted(scopes),
            allowed_ips=allowed_ips or [],
            owner=owner,
            monthly_character_cap=monthly_character_cap,
            requests_per_minute=requests_per_minute,
        )
        return key, raw


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner"
        ADMIN = "admin"
        MEMBER = "member"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "organization"], name="one_membership_per_org")]

    def __str__(self) -> str:
        return f"{self.user} in {self.organization} ({self.role})"

    @property
    def is_admin(self) -> bool:
        """Owners and admins manage the organization's keys and invite people."""
        return self.role in (self.Role.OWNER, self.Role.ADMIN)


def valid_address(address: str | None) -> str | None:
    """An address the database's inet column takes (a proxy may pass anything, an IPv6 zone id), else None."""
    try:
        return str(ipaddress.ip_address(address.partition("%")[0])) if address else None  # no zone id
    except ValueError:
        return None


class ApiKey(models.Model):
    class Kind(models.TextChoices):
        STANDARD = "standard"  # the scopes of an application: speech, jobs, voices, lexicons, usage
        ADMIN = "admin"  # every scope, management too
        RESTRICTED = "restricted"  # scopes of its own

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200)
    prefix = models.CharField(max_length=PREFIX_LENGTH, unique=True)
    hashed_key = models.CharField(max_length=64)
    # After a rotation with a grace period, the previous secret works too until then.
    previous_hashed_key = models.CharField(max_length=64, blank=True)
    previous_valid_until = models.DateTimeField(null=True, blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.STANDARD)
    scopes = models.JSONField(default=list, help_text="area:level strings (accounts.scopes)")
    allowed_ips = models.JSONField(default=list, blank=True, help_text="CIDR networks; empty: any address")
    created_at = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # A member's own key is revoked when they leave the organization (unless transferred first); a
    # service key (no owner) is the organization's and outlives whoever made it.
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="owned_api_keys"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Limits of the key's own, within the organization's: characters a calendar month (UTC), and
    # requests a minute. Empty: only the organization's.
    monthly_character_cap = models.PositiveBigIntegerField(null=True, blank=True)
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    last_used_ip = models.GenericIPAddressField(null=True, blank=True)  # the address of that use

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"  # (Django's default: "api key", shown as "Api keys")

    def __str__(self) -> str:
        return f"{self.name} ({KEY_SCHEME}_{self.prefix}_…)"

    def clean_fields(self, exclude=None) -> None:
        """Django's checks, then the API's (accounts.validation): scopes, allowlist and limits as the API takes them."""
        validation.clean_fields(self, exclude, super().clean_fields, validation.API_KEY)

    @staticmethod
    def kind_of(scopes) -> str:
        """standard or admin when the scopes are that preset's, else restricted."""
        preset = key_scopes.preset_of(scopes)
        return preset if preset in ApiKey.Kind.values else ApiKey.Kind.RESTRICTED

    def new_secret(self, grace: timedelta = timedelta(0)) -> str:
        """A new secret for the same key (its id, scopes, limits and counters stay); the old one is
        refused from now on, or after `grace` (clients switch over without an outage). The raw key
        is returned once."""
        raw = f"{KEY_SCHEME}_{self.prefix}_{random_token(SECRET_LENGTH)}"
        keep = grace > timedelta(0)
        self.previous_hashed_key = self.hashed_key if keep else ""
        self.previous_valid_until = timezone.now() + grace if keep else None
        self.hashed_key = hash_key(raw)
        fields = ("hashed_key", "previous_hashed_key", "previous_valid_until")
        ApiKey.objects.filter(pk=self.pk).update(**{f: getattr(self, f) for f in fields})
        return raw

    def matches(self, raw_key: str) -> bool:
        hashed = hash_key(raw_key)
        if hmac.compare_digest(self.hashed_key, hashed):
            return True
        in_grace = self.previous_valid_until is not None and timezone.now() < self.previous_valid_until
        return in_grace and hmac.compare_digest(self.previous_hashed_key, hashed)

    def is_usable(self, now=None) -> bool:
        now = now or timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)

    def touch(self, now=None, address: str | None = None) -> None:
        """Record use coarsely, with the caller's address: at most one write a minute per key."""
        now = now or timezone.now()
        if self.last_used_at is None or now - self.last_used_at >= LAST_USED_RESOLUTION:
            address = valid_address(address)
            ApiKey.objects.filter(pk=self.pk).update(last_used_at=now, last_used_ip=address)
            self.last_used_at, self.last_used_ip = now, address

    def revoke(self) -> None:
        if self.revoked_at is None:
            self.revoked_at = timezone.now()
            ApiKey.objects.filter(pk=self.pk, revoked_at__isnull=True).update(revoked_at=self.revoked_at)


def _invitation_token() -> str:
    return random_token(40)


class Invitation(models.Model):
    """An e-mailed invitation to join an organization with a role; the link works once, for a week."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=16, choices=Membership.Role.choices, default=Membership.Role.MEMBER)
    token = models.CharField(max_length=64, unique=True, default=_invitation_token)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    accepted_at = models.DateTimeField(null=True, blank=True)

    VALID_FOR = timedelta(days=7)

    def __str__(self) -> str:
        return f"{self.email} to {self.organization} ({self.role})"

    @property
    def is_open(self) -> bool:
        return self.accepted_at is None and timezone.now() < self.expires_at

    @property
    def expires_at(self):
        """When its link stops working (created_at is reset when it is resent)."""
        return self.created_at + self.VALID_FOR

    def accept(self, user) -> Membership:
        membership, _ = Membership.objects.get_or_create(
            user=user, organization=self.organization, defaults={"role": self.role}
        )
        Invitation.objects.filter(pk=self.pk).update(accepted_at=timezone.now())
        return membership


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise TypeError("Audit events are append-only.")


class AuditEvent(models.Model):
    """One thing done to or in an organization, by whom, from where: append-only (no update; rows
    leave only by age, `TTS_AUDIT_RETENTION_DAYS`). `before`/`after` hold what changed."""

    class Actor(models.TextChoices):
        MEMBER = "member"
        KEY = "key"
        STAFF = "staff"
        ANONYMOUS = "anonymous"  # a failed sign-in, a call refused before a key was known
        SYSTEM = "system"  # e.g. Stripe's webhooks, a beat task

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="audit_events")
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    action = models.CharField(max_length=64, db_index=True)
    actor_type = models.CharField(max_length=16, choices=Actor.choices)
    actor_id = models.CharField(max_length=64, blank=True)  # a user's id, a key's prefix
    actor_label = models.CharField(max_length=254, blank=True)  # an e-mail, a key's name
    ip = models.GenericIPAddressField(null=True, blank=True)
    target = models.CharField(max_length=200, blank=True)  # e.g. "key:AbC123", "member:ann@example.com"
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["organization", "-created_at", "-id"])]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.action} by {self.actor_label or self.actor_type}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise TypeError("Audit events are append-only.")
        super().save(*args, **kwargs)


from .sso_models import SsoConnection  # noqa: E402, F401 (a model of this app)
