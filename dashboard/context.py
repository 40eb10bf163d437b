"""Template context every page gets: the operator's name for the service (TTS_PRODUCT_NAME)."""

from __future__ import annotations

from django.conf import settings


def branding(request) -> dict:
    return {"product_name": settings.TTS_PRODUCT_NAME}
