from __future__ import annotations

from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The OpenAPI auth extension (once DRF is set up); plan and billing terms in the audit log.
        from . import schema, trail  # noqa: F401, PLC0415
