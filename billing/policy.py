"""The policy every API call passes: a valid key of an active organization, called from an
address its allowlists permit, holding the scope its route needs (accounts.auth, accounts.scopes),
then the organization's rate limit. REST views get it through DRF's authentication class, async views
by calling `aauthorize`, WebSocket utterances by calling `meter` with the connection's principal."""

from __future__ import annotations

from dataclasses import replace

from django.http import HttpRequest
from django.utils import timezone

from accounts import scopes
from accounts.auth import ApiKeyAuthentication, Principal, authenticate_key, require
from tts_saas.request_id import actor_var
from tts_saas.threads import in_thread

from . import quota
from .limits import Limits, limits_for
from .ratelimit import CharacterUsage, RateUsage, count_request
from .terms import UNLIMITED


def meter(principal: Principal) -> tuple[Limits, RateUsage]:
    """The organization's limits, with this request counted against its rate limit (429 when over)."""
    limits = limits_for(principal.organization)
    return limits, count_request(principal.organization, limits.requests_per_minute, principal.api_key)


def authorize(request: HttpRequest) -> tuple[Principal, Limits]:
    principal = authenticate_key(request.headers.get("Authorization"), request.META.get("REMOTE_ADDR"))
    route = request.resolver_match.url_name if request.resolver_match else None
    require(principal, scopes.needed(route, request.method or "GET"), f"{request.method} {request.path}")
    actor_var.set(principal)  # for the audit log (in this thread: the view's, for DRF views)
    limits, rate = meter(principal)
    characters = None
    if limits.quota_characters < UNLIMITED:  # overage without a spending limit: no ceiling to state
        used, reserved, resets_at = quota.usage(principal.organization)
        characters = CharacterUsage(
            limit=limits.quota_characters,
            remaining=limits.quota_characters - used - reserved,
            reset_seconds=max(0, int((resets_at - timezone.now()).total_seconds())),
        )
    request.rate_usage = replace(rate, characters=characters)  # type: ignore[attr-defined]  # for the headers
    return principal, limits


async def aauthorize(request: HttpRequest) -> tuple[Principal, Limits]:
    return await in_thread(authorize)(request)


class MeteredApiKeyAuthentication(ApiKeyAuthentication):
    """API key authentication that also counts the request against the rate limit."""

    def authenticate(self, request):
        principal, _ = authorize(request._request)
        return principal, principal.api_key


class OptionalApiKeyAuthentication(MeteredApiKeyAuthentication):
    """For public lists (built-in voices and models, which clients such as Open WebUI fetch
    without a key): no Authorization header is anonymous; a header must hold a valid key."""

    def authenticate(self, request):
        if not request.headers.get("Authorization"):
            return None
        return super().authenticate(request)
