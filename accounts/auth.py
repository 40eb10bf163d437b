"""API key authentication: `Authorization: Bearer tts_<prefix>_<secret>`.

`authenticate_key` is the one implementation; the DRF class, async views and (later) WebSocket
consumers all call it.
"""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework.authentication import BaseAuthentication

from tts_saas.errors import ApiError

from .models import KEY_SCHEME, ApiKey, Organization


@dataclass(frozen=True)
class Principal:
    """Who is calling: the organization and the key it used."""

    organization: Organization
    api_key: ApiKey | None  # None for a dashboard session
    can_manage_keys: bool = False

    is_authenticated = True  # lets DRF's IsAuthenticated accept it as request.user


def _raw_key_from_header(header: str | None) -> str:
    if not header:
        raise ApiError(401, "Missing API key. Send it as 'Authorization: Bearer <key>'.", "missing_api_key")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise ApiError(401, "Malformed Authorization header. Use 'Authorization: Bearer <key>'.", "invalid_api_key")
    return raw.strip()


def authenticate_key(header: str | None) -> Principal:
    raw = _raw_key_from_header(header)
    scheme, _, rest = raw.partition("_")
    prefix, _, secret = rest.partition("_")
    invalid = ApiError(401, "Incorrect API key provided.", "invalid_api_key")
    if scheme != KEY_SCHEME or not prefix or not secret:
        raise invalid
    key = ApiKey.objects.select_related("organization").filter(prefix=prefix).first()
    if key is None or not key.matches(raw):
        raise invalid
    return principal_for(key)


def principal_for(key: ApiKey) -> Principal:
    """The caller behind a key already identified (by its secret, or by a WebSocket ticket)."""
    if not key.is_usable():
        raise ApiError(401, "This API key has been revoked or has expired.", "invalid_api_key")
    org = key.organization
    if org.is_suspended:
        reason = f": {org.suspension_reason}" if org.suspension_reason else "."
        raise ApiError(403, f"Your organization has been suspended{reason}", "organization_suspended")
    key.touch()
    return Principal(organization=org, api_key=key, can_manage_keys=key.kind == ApiKey.Kind.ADMIN)


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request):
        principal = authenticate_key(request.headers.get("Authorization"))
        return principal, principal.api_key

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'  # makes DRF answer 401, not 403
