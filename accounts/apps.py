from __future__ import annotations

from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Organizations, members and keys"  # allauth's own app is "Accounts" in the console
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Connect the sign-in, second-factor and deleted-user signals.
        from . import audit, keys, mfa, sso  # noqa: F401, PLC0415
