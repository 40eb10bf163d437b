"""Whether this server delivers e-mail: invitations and password resets say so where it does not
(Django's console, file, memory and dummy back ends keep the message on the server)."""

from __future__ import annotations

from django.conf import settings

UNDELIVERED = (
    "django.core.mail.backends.console.EmailBackend",
    "django.core.mail.backends.filebased.EmailBackend",
    "django.core.mail.backends.locmem.EmailBackend",
    "django.core.mail.backends.dummy.EmailBackend",
)


def delivers_nothing() -> bool:
    return settings.EMAIL_BACKEND in UNDELIVERED
