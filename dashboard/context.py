"""Template context every page gets: the operator's name and logo for the service (TTS_PRODUCT_NAME,
TTS_PRODUCT_LOGO)."""

from __future__ import annotations

from django.conf import settings


def branding(request) -> dict:
    return {"product_name": settings.TTS_PRODUCT_NAME, "product_logo": settings.TTS_PRODUCT_LOGO}
