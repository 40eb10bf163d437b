from __future__ import annotations

from django.contrib import admin
from django.utils import timezone

from . import audit
from .models import ApiKey, AuditEvent, Invitation, Membership, Organization


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "suspended_at", "created_at")
    list_filter = ("suspended_at",)
    search_fields = ("name", "slug")
    readonly_fields = ("webhook_secret", "previous_webhook_secret", "webhook_secret_rotated_at")
    actions = ["suspend", "unsuspend"]

    @admin.action(description="Suspend (every API call answers 403)")
    def suspend(self, request, queryset):
        orgs = list(queryset.filter(suspended_at__isnull=True))
        for org in orgs:
            Organization.objects.filter(pk=org.pk).update(
                suspended_at=timezone.now(), suspension_reason="suspended by an operator"
            )
            audit.record(org, "staff.suspended", request.user, staff=True, target=f"organization:{org.slug}")
        self.message_user(request, f"{len(orgs)} organization(s) suspended.")

    @admin.action(description="Unsuspend")
    def unsuspend(self, request, queryset):
        orgs = list(queryset.filter(suspended_at__isnull=False))
        for org in orgs:
            Organization.objects.filter(pk=org.pk).update(suspended_at=None, suspension_reason="")
            audit.record(org, "staff.unsuspended", request.user, staff=True, target=f"organization:{org.slug}")
        self.message_user(request, f"{len(orgs)} organization(s) unsuspended.")


@admin.register(Invitation)
class InvitationAdmin(admin.ModelAdmin):
    list_display = ("email", "organization", "role", "created_at", "accepted_at")
    readonly_fields = ("token",)


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "organization", "role", "created_at")
    list_filter = ("role",)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "prefix", "kind", "organization", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "hashed_key", "last_used_at")
    search_fields = ("prefix", "name", "organization__name")
    list_filter = ("kind",)
    actions = ["revoke"]

    @admin.action(description="Revoke (refused at once)")
    def revoke(self, request, queryset):
        keys = list(queryset.filter(revoked_at__isnull=True).select_related("organization"))
        for key in keys:
            key.revoke()
            audit.record(key.organization, "key.revoked", request.user, staff=True, target=f"key:{key.prefix}")
        self.message_user(request, f"{len(keys)} key(s) revoked.")


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records nobody edits here: the audit log, the ledger, Stripe's events, meter reports."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ("created_at", "organization", "action", "actor_type", "actor_label", "ip", "target")
    list_filter = ("action", "actor_type")
    search_fields = ("organization__name", "actor_label", "target")
