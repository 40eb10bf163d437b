"""Plans, each organization's subscription (plan + per-org overrides), monthly quota counters and
the usage ledger.

Quotas are money. `QuotaPeriod` holds, per organization and calendar month (UTC), the characters
committed (`used`) and reserved by requests in flight (`reserved`); reservations are taken with one
conditional UPDATE (see billing.quota). `UsageEvent` is the append-only ledger: one row per
finished request, written in the transaction that finishes it.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.utils import timezone

from accounts.models import ApiKey, Organization
from accounts.validation import clean_fields as validate_fields

from . import validation


class Plan(models.Model):
    slug = models.SlugField(max_length=50, unique=True)
    name = models.CharField(max_length=100)
    monthly_characters = models.BigIntegerField()
    requests_per_minute = models.PositiveIntegerField()
    concurrent_jobs = models.PositiveIntegerField()
    max_input_chars = models.PositiveIntegerField()
    max_job_chars = models.PositiveIntegerField(default=20_000, help_text="input of one asynchronous job")
    max_custom_voices = models.PositiveIntegerField(default=3, help_text="the organization's own voices")
    max_cloned_voices = models.PositiveIntegerField(
        default=3, help_text="of those, voices made from a person's recording (0: no voice cloning)"
    )
    max_lexicon_entries = models.PositiveIntegerField(
        default=100, help_text="pronunciation lexicon entries, all lexicons together"
    )
    max_webhook_endpoints = models.PositiveIntegerField(
        default=10, help_text="webhook endpoints an organization keeps (at most TTS_MAX_WEBHOOK_ENDPOINTS)"
    )
    allowed_formats = models.JSONField(
        default=list, blank=True, help_text="codecs (mp3, opus, aac, flac, wav, pcm, ulaw, alaw); empty: every format"
    )
    allowed_voices = models.JSONField(default=list, blank=True, help_text="empty: every voice")
    allowed_models = models.JSONField(
        default=list, blank=True, help_text="model ids (chattts, kokoro); empty: every model the deployment serves"
    )
    model_weights = models.JSONField(
        default=dict,
        blank=True,
        help_text='characters billed per character of input, by model, e.g. {"kokoro": 0.5}; a model not named: 1',
    )
    # Celery priority on the tts queue: 0 is served first (paid plans), 9 last.
    queue_priority = models.PositiveSmallIntegerField(default=6)
    is_default = models.BooleanField(default=False, help_text="the plan of new organizations")
    monthly_price_cents = models.PositiveIntegerField(default=0)
    # Billing terms: `monthly_characters` are included; beyond them either a hard cap (429), or, for
    # organizations Stripe bills, overage at this price up to the spending limit they set.
    overage_cents_per_1k = models.PositiveIntegerField(
        null=True, blank=True, help_text="price per 1,000 characters beyond the included ones; empty: a hard cap"
    )

    class Meta:
        ordering = ["monthly_price_cents", "slug"]

    def __str__(self) -> str:
        return self.name

    def clean_fields(self, exclude=None) -> None:
        """Django's checks, then numbers and lists the limits can use (billing.validation)."""
        validate_fields(self, exclude, super().clean_fields, validation.PLAN)


def default_plan() -> Plan:
    """The plan new organizations start on (the migrations seed one)."""
    plan = Plan.objects.filter(is_default=True).first() or Plan.objects.order_by("monthly_price_cents").first()
    if plan is None:
        raise ImproperlyConfigured("No plans exist: run `manage.py migrate`, which seeds the default plans.")
    return plan


class BillingStatus(models.TextChoices):
    NONE = "none", "not billed through Stripe"
    ACTIVE = "active", "active"
    PAST_DUE = "past_due", "payment failed (grace period)"
    SUSPENDED = "suspended", "suspended for non-payment"
    CANCELED = "canceled", "subscription cancelled"


class Subscription(models.Model):
    """An organization's plan, and operator overrides of each limit (empty: the plan's)."""

    organization = models.OneToOneField(Organization, on_delete=models.CASCADE, related_name="subscription")
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="subscriptions")
    monthly_characters = models.BigIntegerField(null=True, blank=True)
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    concurrent_jobs = models.PositiveIntegerField(null=True, blank=True)
    max_input_chars = models.PositiveIntegerField(null=True, blank=True)
    # Stripe (billing.stripe_events keeps these in step with Stripe's webhooks).
    stripe_customer_id = models.CharField(max_length=255, blank=True, db_index=True)
    stripe_subscription_id = models.CharField(max_length=255, blank=True)
    billing_status = models.CharField(max_length=16, choices=BillingStatus.choices, default=BillingStatus.NONE)
    past_due_since = models.DateTimeField(null=True, blank=True)
    dunning_notified_at = models.DateTimeField(null=True, blank=True)
    current_period_end = models.DateTimeField(null=True, blank=True)
    metered_since = models.DateTimeField(null=True, blank=True, help_text="ledger rows from here on go to Stripe")
    billing_suspended_at = models.DateTimeField(
        null=True, blank=True, help_text="when billing suspended the organization (only that suspension is lifted)"
    )
    lapsed_subscription_id = models.CharField(max_length=255, blank=True, help_text="the subscription that owes")
    spending_limit_cents = models.PositiveIntegerField(
        null=True, blank=True, help_text="most overage a month, set by the organization; empty: no limit"
    )
    reconciliation = models.JSONField(default=dict, blank=True)
    reconciled_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.organization} on {self.plan}"

    def clean_fields(self, exclude=None) -> None:
        """Django's checks, then overrides the limits can use (billing.validation)."""
        validate_fields(self, exclude, super().clean_fields, validation.OVERRIDES)


class QuotaPeriod(models.Model):
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="quota_periods")
    period_start = models.DateField()
    used = models.BigIntegerField(default=0)
    reserved = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["organization", "period_start"], name="one_quota_row_per_month"),
            models.CheckConstraint(condition=models.Q(used__gte=0, reserved__gte=0), name="quota_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.organization} {self.period_start:%Y-%m}: {self.used} used, {self.reserved} reserved"


class KeyQuotaPeriod(models.Model):
    """One key's characters this month, kept like its organization's (`QuotaPeriod`): every request
    with the key counts here too, so a cap set later starts from what the key already used."""

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="quota_periods")
    period_start = models.DateField()
    used = models.BigIntegerField(default=0)
    reserved = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["api_key", "period_start"], name="one_key_quota_row_per_month"),
            models.CheckConstraint(condition=models.Q(used__gte=0, reserved__gte=0), name="key_quota_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.api_key} {self.period_start:%Y-%m}: {self.used} used, {self.reserved} reserved"


class UsageAlert(models.Model):
    """A threshold of a month's quota (the organization's, or a key's cap) crossed and told: one row
    per threshold per period, so each is told once."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="usage_alerts")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    subject = models.CharField(max_length=32)  # "organization", or "key:<id>"
    period_start = models.DateField()
    threshold = models.PositiveSmallIntegerField()  # percent: 50, 80, 100
    used = models.BigIntegerField()
    limit = models.BigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "subject", "period_start", "threshold"], name="one_alert_per_threshold"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.organization} {self.period_start:%Y-%m} {self.threshold}%"


class UsageEvent(models.Model):
    class Status(models.TextChoices):
        SUCCEEDED = "succeeded"
        FAILED = "failed"  # failed, expired or lost: nothing billed
        CANCELLED = "cancelled"  # billed for the segments done before the cancel

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="usage_events")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    # Without a key: the dashboard member who played or previewed (null once their account is gone).
    member = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    job_id = models.UUIDField(null=True, blank=True, unique=True)  # one ledger row per job, ever
    request_id = models.CharField(max_length=128, blank=True)
    characters = models.PositiveIntegerField()  # billed: 0 when the request failed
    audio_seconds = models.FloatField(default=0.0)
    model = models.CharField(max_length=64)
    voice = models.CharField(max_length=64)
    cached = models.BooleanField(default=False)
    cache_key = models.CharField(max_length=200, blank=True)  # a cache hit: the entry it replayed
    latency_ms = models.PositiveIntegerField(default=0)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.SUCCEEDED)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["organization", "created_at"])]

    def __str__(self) -> str:
        return f"{self.organization}: {self.characters} chars ({self.status})"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("UsageEvent rows are append-only")
        super().save(*args, **kwargs)


class StripeEvent(models.Model):
    """A webhook event from Stripe, stored by its id: a delivery of an event already handled
    changes nothing (Stripe delivers at least once)."""

    class Status(models.TextChoices):
        RECEIVED = "received"
        PROCESSED = "processed"
        IGNORED = "ignored"  # a type this product does not act on
        FAILED = "failed"  # handling raised: Stripe delivers it again

    id = models.CharField(max_length=255, primary_key=True)
    type = models.CharField(max_length=100, db_index=True)
    created = models.DateTimeField(help_text="when Stripe created the event")
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RECEIVED)
    error = models.TextField(blank=True)
    attempts = models.PositiveIntegerField(default=0)
    received_at = models.DateTimeField(default=timezone.now)
    processed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-received_at"]

    def __str__(self) -> str:
        return f"{self.id} {self.type} ({self.status})"


class MeterReport(models.Model):
    """A ledger row's fate at Stripe's meter (billing.metering): reported, or why not."""

    class Status(models.TextChoices):
        REPORTED = "reported"
        TOO_OLD = "too_old"  # older than Stripe's back-dating window: an alert
        REJECTED = "rejected"  # Stripe refused it for good: an alert

    usage_event = models.OneToOneField(
        UsageEvent, on_delete=models.PROTECT, primary_key=True, related_name="meter_report"
    )
    customer = models.CharField(max_length=255)
    status = models.CharField(max_length=16, choices=Status.choices)
    error = models.CharField(max_length=500, blank=True)
    reported_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"ledger row {self.usage_event_id}: {self.status}"
