"""Throttles on the ways into the dashboard, with django-ratelimit (counted in Redis, shared by
every web process): sign-in per client address and per account name, sign-up per address,
password reset per address and per e-mail, invitations per inviting user, accepting an invitation
per address. Only POSTs count. Over a limit: 429 with Retry-After, on a page that says so.

The rates are settings (TTS_*_RATE, django-ratelimit's "10/m" form). The client address is
REMOTE_ADDR: behind a proxy, run uvicorn with --proxy-headers and --forwarded-allow-ips set to the
proxy, so that it is the client's and not the proxy's.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.shortcuts import render
from django_ratelimit.decorators import ratelimit

RETRY_AFTER_SECONDS = 60


def _rate(setting: str) -> Callable:
    return lambda group, request: getattr(settings, setting)


def posted(field: str) -> Callable:
    """A key: a posted form field, compared case-insensitively (e-mail addresses)."""
    return lambda group, request: request.POST.get(field, "").strip().lower() or "-"


def by_user(group, request) -> str:
    return str(request.user.pk)


def throttled(name: str, *limits: tuple[str | Callable, str]) -> Callable:
    """Decorate a view with one limit per (key, rate setting) pair, each its own counter."""

    def decorator(view: Callable) -> Callable:
        @wraps(view)
        def checked(request, *args, **kwargs):
            if getattr(request, "limited", False):  # set by the counters below
                return too_many_attempts(request)
            return view(request, *args, **kwargs)

        counted = checked
        for key, setting in reversed(limits):
            counted = ratelimit(
                group=f"auth:{name}:{setting}", key=key, rate=_rate(setting), method="POST", block=False
            )(counted)
        return counted

    return decorator


def too_many_attempts(request):
    """What a throttled request gets."""
    response = render(request, "dashboard/throttled.html", {"retry_after": RETRY_AFTER_SECONDS}, status=429)
    response["Retry-After"] = str(RETRY_AFTER_SECONDS)
    return response
