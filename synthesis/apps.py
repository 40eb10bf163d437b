from __future__ import annotations

from django.apps import AppConfig
from prometheus_client import REGISTRY


class SynthesisConfig(AppConfig):
    name = "synthesis"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from synthesis.service.metrics import SynthesisCollector  # noqa: PLC0415  (it reads models: import once apps are loaded)

        REGISTRY.register(SynthesisCollector())
