"""Whom tenants ask: the operator's published contact (TTS_OPERATOR_CONTACT), else the first
superuser's address."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model


def contact_link(contact: str) -> str:
    """The operator's contact as a link: a URL as is, an e-mail address as mailto:; none: empty."""
    if not contact:
        return ""
    return contact if contact.startswith(("https://", "http://")) else f"mailto:{contact}"


def operator_contact() -> str:
    """Whom tenants ask about plans, a suspension or a lost password: TTS_OPERATOR_CONTACT, else the
    address of the service's first superuser (who runs it); empty when neither exists."""
    if settings.TTS_OPERATOR_CONTACT:
        return settings.TTS_OPERATOR_CONTACT
    found = get_user_model().objects.filter(is_superuser=True, is_active=True).exclude(email="").order_by("pk").first()
    return found.email if found else ""
