from __future__ import annotations

from django.contrib import admin

from synthesis.models import Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("id", "organization", "status", "characters", "audio_seconds", "voice", "created_at")
    list_filter = ("status", "interactive", "voice")
    search_fields = ("id", "organization__name", "request_id")
    readonly_fields = [f.name for f in Job._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
