"""Template context every page gets: the operator's name and logo for the service (TTS_PRODUCT_NAME,
TTS_PRODUCT_LOGO) and where it publishes the service's source code (TTS_SOURCE_URL: the footer's link,
which the AGPL-3.0 asks a network service to offer its users); on allauth's pages, the member's menu."""

from __future__ import annotations

from django.conf import settings

from accounts.mfa import second_factor_missing

from .access import current_membership


def branding(request) -> dict:
    return {
        "product_name": settings.TTS_PRODUCT_NAME,
        "product_logo": settings.TTS_PRODUCT_LOGO,
        "source_url": settings.TTS_SOURCE_URL,
        **identity_pages(request),
    }


def identity_pages(request) -> dict:
    """allauth's pages (second factors, sessions, re-authentication) in the dashboard's frame: the
    menu and organization switcher of the signed-in member, and the organization whose rule holds
    them on the second-factor page (`held_by`), if one does. Dashboard pages set their own."""
    match = getattr(request, "resolver_match", None)
    if match is None or not match.func.__module__.startswith("allauth.") or not request.user.is_authenticated:
        return {}
    membership, memberships = current_membership(request)
    if membership is None:
        return {}
    held = second_factor_missing(membership, request.session)
    return {
        "current_org": membership.organization,
        "membership": membership,
        "memberships": memberships,
        "nav": "security",
        "held_by": membership.organization if held else None,
    }
