from __future__ import annotations

from django.apps import AppConfig


class DashboardConfig(AppConfig):
    name = "dashboard"

    def ready(self) -> None:
        # The admin console shows what the product uses. Not: Django's groups (roles are
        # memberships), the sites framework (one site, allauth's), allauth's stored social apps and
        # tokens (each organization's provider is built from its SSO connection, accounts.sso; no
        # token is stored). Its social accounts stay: they tie people to their provider identity.
        # Every admin module is imported by now (the admin app's ready runs first).
        from allauth.socialaccount.models import SocialApp, SocialToken  # noqa: PLC0415
        from django.contrib import admin  # noqa: PLC0415
        from django.contrib.auth.models import Group  # noqa: PLC0415
        from django.contrib.sites.models import Site  # noqa: PLC0415

        for model in (Group, Site, SocialApp, SocialToken):
            if admin.site.is_registered(model):
                admin.site.unregister(model)
