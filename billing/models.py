"""Plans, each organization's subscription (plan + per-org overrides), monthly quota counters and
the usage ledger.

Quotas are money. `QuotaPeriod` holds, per organization and calendar month (UTC), the characters
committed (`used`) and reserved by requests in flight (`reserved`); reservations are taken with one
conditional UPDATE (see billing.quota). `UsageEvent` is the append-only ledger: one row per
finished request, written in the transaction that finishes it.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.db import models
from django.utils import timezone

from accounts.models import ApiKey, Organization


class Plan(models.Model):
    slug = models.SlugField(max_length=50, unique=True)
    name = models.CharField(max_length=100)
    monthly_characters = models.BigIntegerField()
    requests_per_minute = models.PositiveIntegerField()
    concurrent_jobs = models.PositiveIntegerField()
    max_input_chars = models.PositiveIntegerField()
    allowed_formats = models.JSONField(default=list, blank=True, help_text="empty: every format")
    allowed_voices = models.JSONField(default=list, blank=True, help_text="empty: every voice")
    # Celery priority on the tts queue: 0 is served first (paid plans), 9 last.
    queue_priority = models.PositiveSmallIntegerField(default=6)
    is_default = models.BooleanField(default=False, help_text="the plan of new organizations")
    monthly_price_cents = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["monthly_price_cents", "slug"]

    def __str__(self) -> str:
        return self.name


def default_plan() -> Plan:
    """The plan new organizations start on (the migrations seed one)."""
    plan = Plan.objects.filter(is_default=True).first() or Plan.objects.order_by("monthly_price_cents").first()
    if plan is None:
        raise ImproperlyConfigured("No plans exist: run `manage.py migrate`, which seeds the default plans.")
    return plan


class Subscription(models.Model):
    """An organization's plan, and operator overrides of each limit (empty: the plan's)."""

    organization = models.OneToOneField(Organization, on_delete=models.CASCADE, related_name="subscription")
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="subscriptions")
    monthly_characters = models.BigIntegerField(null=True, blank=True)
    requests_per_minute = models.PositiveIntegerField(null=True, blank=True)
    concurrent_jobs = models.PositiveIntegerField(null=True, blank=True)
    max_input_chars = models.PositiveIntegerField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.organization} on {self.plan}"


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


class UsageEvent(models.Model):
    class Status(models.TextChoices):
        SUCCEEDED = "succeeded"
        FAILED = "failed"  # failed, expired or lost: nothing billed
        CANCELLED = "cancelled"  # billed for the segments done before the cancel

    organization = models.ForeignKey(Organization, on_delete=models.PROTECT, related_name="usage_events")
    api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    job_id = models.UUIDField(null=True, blank=True, unique=True)  # one ledger row per job, ever
    request_id = models.CharField(max_length=128, blank=True)
    characters = models.PositiveIntegerField()  # billed: 0 when the request failed
    audio_seconds = models.FloatField(default=0.0)
    model = models.CharField(max_length=64)
    voice = models.CharField(max_length=64)
    cached = models.BooleanField(default=False)
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
