from __future__ import annotations

from django.contrib import admin

from accounts.admin import OrganizationAdmin
from accounts.models import Organization

from .models import Plan, QuotaPeriod, Subscription, UsageEvent


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
class UsageEventAdmin(admin.ModelAdmin):
    list_display = ("created_at", "organization", "characters", "audio_seconds", "cached", "status", "latency_ms")
    list_filter = ("status", "cached")
    search_fields = ("organization__name", "request_id")

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False
