"""The admin console's billing pages: plans, each organization's subscription (its plan and
overrides; what Stripe's webhooks keep is read-only), month quotas (read-only: corrected by an
action with a reason, `billing.corrections`), the ledger, Stripe's events and meter reports.
What staff type is checked by the models (`billing.validation`)."""

from __future__ import annotations

import stripe
from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from accounts.admin import OrganizationAdmin, ReadOnlyAdmin
from accounts.models import Organization

from . import corrections, metering, reconcile, stripe_events
from .models import MeterReport, Plan, QuotaPeriod, StripeEvent, Subscription, UsageEvent
from .stripe_client import StripeClient, configured

STRIPE_DASHBOARD = "https://dashboard.stripe.com"
# Kept by Stripe's webhooks and the beat tasks (billing.stripe_events, metering, reconcile): typed
# by hand they would disagree with Stripe. "Re-sync from Stripe" fetches them again.
STRIPE_FIELDS = (
    "stripe_customer_id",
    "stripe_subscription_id",
    "billing_status",
    "past_due_since",
    "dunning_notified_at",
    "current_period_end",
    "metered_since",
    "billing_suspended_at",
    "lapsed_subscription_id",
    "reconciliation",
    "reconciled_at",
)


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "slug",
        "monthly_characters",
        "requests_per_minute",
        "concurrent_jobs",
        "max_input_chars",
        "queue_priority",
        "is_default",
        "monthly_price_cents",
        "overage_cents_per_1k",
    )


class SubscriptionInline(admin.StackedInline):
    model = Subscription
    can_delete = False
    extra = 0
    readonly_fields = STRIPE_FIELDS


class QuotaPeriodInline(admin.TabularInline):
    model = QuotaPeriod
    extra = 0
    fields = readonly_fields = ("period_start", "used", "reserved", "correct")
    can_delete = False
    ordering = ("-period_start",)

    def has_add_permission(self, request, obj=None) -> bool:
        return False  # a month's row is made by its first request (billing.quota)

    @admin.display(description="correction")
    def correct(self, period: QuotaPeriod):
        url = reverse("admin:billing_quotaperiod_changelist")
        return format_html('<a href="{}?organization__exact={}">correct…</a>', url, period.organization_id)


admin.site.unregister(Organization)


@admin.register(Organization)
class OrganizationBillingAdmin(OrganizationAdmin):
    inlines = [SubscriptionInline, QuotaPeriodInline]


def key_label(row) -> str:
    """A ledger row's or a job's key as staff read it (its name and prefix); the dashboard's own
    requests (playground, previews) have none."""
    return str(row.api_key) if row.api_key else "dashboard"


def seconds_label(row) -> str:
    """A row's audio length as "1.7 s" (shown as 1.6746666666666667 before)."""
    return f"{row.audio_seconds:.1f} s"


@admin.register(UsageEvent)
class UsageEventAdmin(ReadOnlyAdmin):
    """The ledger: one row a request, newest first; narrowed by organization, model, outcome and date."""

    list_display = ("created_at", "organization", "model", "key", "characters", "audio", "cached", "status", "latency")
    list_filter = ("status", "cached", "model", ("organization", admin.RelatedOnlyFieldListFilter), "created_at")
    date_hierarchy = "created_at"
    search_fields = ("organization__name", "request_id")
    list_select_related = ("organization", "api_key")

    key = admin.display(description="key", ordering="api_key__name")(lambda self, row: key_label(row))
    audio = admin.display(description="audio", ordering="audio_seconds")(lambda self, row: seconds_label(row))

    @admin.display(description="latency", ordering="latency_ms")
    def latency(self, event: UsageEvent) -> str:
        return f"{event.latency_ms:,} ms"


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    """Each organization's plan and its Stripe side: ids (linked to Stripe's dashboard), billing
    state, the last ledger row reported to the meter, the last reconciliation; and a re-sync."""

    list_display = (
        "organization",
        "plan",
        "billing_status",
        "customer",
        "stripe_subscription",
        "past_due_since",
        "last_reported",
        "reconciled",
    )
    list_filter = ("billing_status", "plan")
    search_fields = ("organization__name", "stripe_customer_id", "stripe_subscription_id")
    readonly_fields = STRIPE_FIELDS
    actions = ["resync"]

    @admin.display(description="Stripe customer")
    def customer(self, sub: Subscription):
        if not sub.stripe_customer_id:
            return "-"
        return format_html(
            '<a href="{}/customers/{}">{}</a>', STRIPE_DASHBOARD, sub.stripe_customer_id, sub.stripe_customer_id
        )

    @admin.display(description="Stripe subscription")
    def stripe_subscription(self, sub: Subscription):
        if not sub.stripe_subscription_id:
            return "-"
        return format_html(
            '<a href="{}/subscriptions/{}">{}</a>',
            STRIPE_DASHBOARD,
            sub.stripe_subscription_id,
            sub.stripe_subscription_id,
        )

    @admin.display(description="last ledger row reported")
    def last_reported(self, sub: Subscription):
        report = metering.last_reported(sub.organization_id)
        return f"#{report.usage_event_id} at {report.reported_at:%Y-%m-%d %H:%M}" if report else "-"

    @admin.display(description="reconciliation")
    def reconciled(self, sub: Subscription):
        r = sub.reconciliation or {}
        if not r:
            return "-"
        state = "ok" if not r.get("difference") else f"differs by {r['difference']:+,}"
        return f"{r.get('period')}: {state}"

    @admin.action(description="Re-sync from Stripe (subscription state, then this month's reconciliation)")
    def resync(self, request, queryset):
        if not configured():
            self.message_user(request, "Billing is not configured (STRIPE_SECRET_KEY).", messages.ERROR)
            return
        client = StripeClient()
        done = 0
        for sub in queryset:
            try:
                if sub.stripe_subscription_id:
                    stripe_events.apply_subscription(client.subscription(sub.stripe_subscription_id), client)
                if sub.stripe_customer_id:
                    reconcile.reconcile(client, timezone.now(), Subscription.objects.filter(pk=sub.pk))
                done += 1
            except stripe.StripeError as exc:
                self.message_user(request, f"{sub.organization}: Stripe answered {exc}", messages.ERROR)
        self.message_user(request, f"Re-synced {done} organization(s).")


class QuotaCorrectionForm(forms.Form):
    used = forms.IntegerField(required=False, min_value=0, label="Set the characters used to")
    adjustment = forms.IntegerField(
        required=False, label="or change them by", help_text="e.g. -5000 gives 5,000 characters back"
    )
    reason = forms.CharField(
        max_length=corrections.REASON_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="Recorded in the organization's audit log with the values before and after, and your name.",
    )

    def clean(self):
        data = super().clean() or {}
        if (data.get("used") is None) == (data.get("adjustment") is None):
            raise forms.ValidationError("Give either the new value or an adjustment.")
        return data


@admin.register(QuotaPeriod)
class QuotaPeriodAdmin(admin.ModelAdmin):
    """A month's characters per organization, as billing.quota counts them: read-only, corrected
    only by the action (a new value or an adjustment, with a reason, in the audit log)."""

    list_display = ("organization", "period_start", "used", "reserved")
    list_filter = ("period_start",)
    search_fields = ("organization__name", "organization__slug")
    actions = ["correct_used"]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False  # its page only shows the row: a save would change nothing and log a change

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def has_correct_permission(self, request) -> bool:
        """Who may correct a count: staff who may change quota rows."""
        return request.user.has_perm(f"{self.opts.app_label}.change_{self.opts.model_name}")

    @admin.action(description="Correct the characters used (with a reason)", permissions=["correct"])
    def correct_used(self, request, queryset):
        form = QuotaCorrectionForm(request.POST if "apply" in request.POST else None)
        periods = list(queryset.select_related("organization"))
        if form.is_valid():
            for period in periods:
                month = f"{period.organization} {period.period_start:%Y-%m}"
                try:
                    before, after = corrections.correct_used(period, by=request.user, **form.cleaned_data)
                except corrections.Refused as exc:
                    self.message_user(request, f"{month}: {exc}", messages.ERROR)
                else:
                    self.message_user(request, f"{month}: {before:,} characters used, now {after:,}.")
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Correct the characters used",
            "opts": self.opts,
            "form": form,
            "periods": periods,
            "checkbox": helpers.ACTION_CHECKBOX_NAME,
        }
        return TemplateResponse(request, "admin/billing/quotaperiod/correct_used.html", context)


@admin.register(StripeEvent)
class StripeEventAdmin(ReadOnlyAdmin):
    list_display = ("id", "type", "status", "attempts", "created", "received_at", "processed_at")
    list_filter = ("status", "type")
    search_fields = ("id", "error")


@admin.register(MeterReport)
class MeterReportAdmin(ReadOnlyAdmin):
    """Ledger rows and the meter: `too_old` and `rejected` rows are alerts to act on."""

    list_display = ("usage_event", "customer", "status", "error", "reported_at")
    list_filter = ("status",)
    search_fields = ("customer",)
