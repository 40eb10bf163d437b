"""How the dashboard presents the service: its name, logo, where its source is published, and whom
tenants ask about plans when billing is not self-service."""

from __future__ import annotations

from .env import envstr

TTS_PRODUCT_NAME = envstr("TTS_PRODUCT_NAME", "tts_saas")  # the dashboard's name for the service
TTS_PRODUCT_LOGO = envstr("TTS_PRODUCT_LOGO", "")  # URL of the logo shown before it (served by the operator), or none
TTS_SOURCE_URL = envstr("TTS_SOURCE_URL", "")  # where the operator publishes this service's source (AGPL-3.0 §13)
# Whom tenants ask for another plan when Stripe is not configured: an e-mail address or a URL.
TTS_OPERATOR_CONTACT = envstr("TTS_OPERATOR_CONTACT", "")
