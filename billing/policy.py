"""The policy every API call passes: a valid key of an active organization (accounts.auth), then
the organization's rate limit. REST views get it through DRF's authentication class, async views
by calling `aauthorize`, WebSocket utterances by calling `meter` with the connection's principal."""

from __future__ import annotations

from django.http import HttpRequest

from accounts.auth import ApiKeyAuthentication, Principal, authenticate_key
from tts_saas.threads import in_thread

from .limits import Limits, limits_for
from .ratelimit import RateUsage, count_request


def meter(principal: Principal) -> tuple[Limits, RateUsage]:
    """The organization's limits, with this request counted against its rate limit (429 when over)."""
    limits = limits_for(principal.organization)
    return limits, count_request(principal.organization, limits.requests_per_minute)


def authorize(request: HttpRequest) -> tuple[Principal, Limits]:
    principal = authenticate_key(request.headers.get("Authorization"))
    limits, rate = meter(principal)
    request.rate_usage = rate  # type: ignore[attr-defined]  # read by RateLimitHeadersMiddleware
    return principal, limits


async def aauthorize(request: HttpRequest) -> tuple[Principal, Limits]:
    return await in_thread(authorize)(request)


class MeteredApiKeyAuthentication(ApiKeyAuthentication):
    """API key authentication that also counts the request against the rate limit."""

    def authenticate(self, request):
        principal, _ = authorize(request._request)
        return principal, principal.api_key
