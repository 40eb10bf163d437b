from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Connect the sign-in, second-factor and deleted-user signals.
        from . import audit, keys, mfa, sso  # noqa: F401, PLC0415
