from __future__ import annotations

import stripe
from django.contrib import admin, messages
from django.utils import timezone
from django.utils.html import format_html

from accounts.admin import OrganizationAdmin, ReadOnlyAdmin
from accounts.models import Organization

from . import metering, reconcile, stripe_events
from .models import MeterReport, Plan, QuotaPeriod, StripeEvent, Subscription, UsageEvent
from .stripe_client import StripeClient, configured

STRIPE_DASHBOARD = "https://dashboard.stripe.com"


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


class QuotaPeriodInline(admin.TabularInline):
    model = QuotaPeriod
    extra = 0
    readonly_fields = ("period_start", "used", "reserved")
    can_delete = False
    ordering = ("-period_start",)


admin.site.unregister(Organization)


@admin.register(Organization)
class OrganizationBillingAdmin(OrganizationAdmin):
    inlines = [SubscriptionInline, QuotaPeriodInline]


@admin.register(UsageEvent)
class UsageEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "organization", "characters", "audio_seconds", "cached", "status", "latency_ms")
    list_filter = ("status", "cached")
    search_fields = ("organization__name", "request_id")


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
    readonly_fields = ("reconciliation", "reconciled_at", "metered_since", "current_period_end", "dunning_notified_at")
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
