from __future__ import annotations

from django.apps import AppConfig


class VoicesConfig(AppConfig):
    name = "voices"
    default_auto_field = "django.db.models.BigAutoField"
