"""The policy every API call passes: a valid key of an active organization, then the
organization's rate limit. REST views get it through DRF's authentication class, async views and
WebSocket consumers by calling `aauthenticate_request`."""

from __future__ import annotations

from asgiref.sync import sync_to_async

from accounts.auth import ApiKeyAuthentication, Principal, authenticate_key

from . import ratelimit
from .limits import Limits, limits_for


def authenticate_request(request) -> tuple[Principal, Limits]:
    return admit_request(request, authenticate_key(request.headers.get("Authorization")))


def admit_request(request, principal: Principal) -> tuple[Principal, Limits]:
    """Count one request of an authenticated caller against its rate limit (429 when over)."""
    limits = limits_for(principal.organization)
    ratelimit.enforce(request, principal.organization.pk, limits.requests_per_minute)
    return principal, limits


async def aauthenticate_request(request) -> tuple[Principal, Limits]:
    return await sync_to_async(authenticate_request, thread_sensitive=False)(request)


class MeteredApiKeyAuthentication(ApiKeyAuthentication):
    """API key authentication that also counts the request against the rate limit."""

    def authenticate(self, request):
        principal, _ = authenticate_request(request._request)
        return principal, principal.api_key
