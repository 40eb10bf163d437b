"""Template context every page gets: the operator's name and logo for the service (TTS_PRODUCT_NAME,
TTS_PRODUCT_LOGO) and where it publishes the service's source code (TTS_SOURCE_URL: the footer's link,
which the AGPL-3.0 asks a network service to offer its users)."""

from __future__ import annotations

from django.conf import settings


def branding(request) -> dict:
    return {
        "product_name": settings.TTS_PRODUCT_NAME,
        "product_logo": settings.TTS_PRODUCT_LOGO,
        "source_url": settings.TTS_SOURCE_URL,
    }
