"""The policy every API call passes: a valid key of an active organization, then the
organization's rate limit. REST views get it through DRF's authentication class, async views and
WebSocket consumers by calling `aauthenticate_request`."""

from __future__ import annotations

from asgiref.sync import sync_to_async

from accounts.auth import ApiKeyAuthentication, Principal, authenticate_key

from . import ratelimit
from .limits import limits_for


def authenticate_request(request) -> Principal:
    principal = authenticate_key(request.headers.get("Authorization"))
    ratelimit.enforce(request, principal.organization.pk, limits_for(principal.organization).requests_per_minute)
    return principal


async def aauthenticate_request(request) -> Principal:
    return await sync_to_async(authenticate_request, thread_sensitive=False)(request)


class MeteredApiKeyAuthentication(ApiKeyAuthentication):
    """API key authentication that also counts the request against the rate limit."""

    def authenticate(self, request):
        principal = authenticate_request(request._request)
        return principal, principal.api_key
