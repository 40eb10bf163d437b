from __future__ import annotations

from django.contrib import admin
from django.utils import timezone

from .models import ApiKey, Invitation, Membership, Organization


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "suspended_at", "created_at")
    list_filter = ("suspended_at",)
    search_fields = ("name", "slug")
    readonly_fields = ("webhook_secret", "previous_webhook_secret", "webhook_secret_rotated_at")
    actions = ["suspend", "unsuspend"]

    @admin.action(description="Suspend (every API call answers 403)")
    def suspend(self, request, queryset):
        changed = queryset.filter(suspended_at__isnull=True).update(
            suspended_at=timezone.now(), suspension_reason="suspended by an operator"
        )
        self.message_user(request, f"{changed} organization(s) suspended.")

    @admin.action(description="Unsuspend")
    def unsuspend(self, request, queryset):
        changed = queryset.filter(suspended_at__isnull=False).update(suspended_at=None, suspension_reason="")
        self.message_user(request, f"{changed} organization(s) unsuspended.")


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
        changed = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"{changed} key(s) revoked.")
