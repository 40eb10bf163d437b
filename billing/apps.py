from __future__ import annotations

from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import schema  # noqa: F401, PLC0415  (registers the OpenAPI auth extension once DRF is set up)
