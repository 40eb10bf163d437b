from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import audit, mfa, sso  # noqa: F401, PLC0415  (connect the sign-in and second-factor signals)
