from __future__ import annotations

from django.contrib import admin

from .models import ApiKey, Membership, Organization


@admin.register(Organization)
class OrganizationAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "suspended_at", "created_at")
    search_fields = ("name", "slug")


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("user", "organization", "role", "created_at")
    list_filter = ("role",)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ("name", "prefix", "kind", "organization", "created_at", "last_used_at", "revoked_at")
    readonly_fields = ("prefix", "hashed_key", "last_used_at")
    search_fields = ("prefix", "name", "organization__name")
