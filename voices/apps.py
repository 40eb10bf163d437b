from __future__ import annotations

from django.apps import AppConfig


class VoicesConfig(AppConfig):
    name = "voices"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import cleanup, trail  # noqa: F401, PLC0415  (what goes with a deleted voice; the audit log)
