"""Every way in, in one module, each ending in the same `Principal`: an API key
(`Authorization: Bearer tts_<prefix>_<secret>`), a single-use WebSocket ticket, or a signed-in
dashboard member. A key must be unrevoked and unexpired, a member still a member, and the
organization not suspended: those checks are written once, here."""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework.authentication import BaseAuthentication

from tts_saas.errors import ApiError

from . import tickets
from .models import KEY_SCHEME, ApiKey, Membership, Organization


@dataclass(frozen=True)
class Principal:
    """Who is calling: the organization, and the key or member acting for it."""

    organization: Organization
    api_key: ApiKey | None  # None for a dashboard member
    user_id: int | None = None  # the member, for a dashboard session or a member's ticket
    is_admin: bool = False  # an admin key, or an owner/admin member: may manage keys and the team

    is_authenticated = True  # lets DRF's IsAuthenticated accept it as request.user


def check_active(org: Organization) -> None:
    if org.is_suspended:
        reason = f": {org.suspension_reason}" if org.suspension_reason else "."
        raise ApiError(403, f"Your organization has been suspended{reason}", "organization_suspended")


def principal_for_key(key: ApiKey) -> Principal:
    """The caller behind a key already identified (by its secret, or by a WebSocket ticket)."""
    if not key.is_usable():
        raise ApiError(401, "This API key has been revoked or has expired.", "invalid_api_key")
    check_active(key.organization)
    key.touch()
    return Principal(organization=key.organization, api_key=key, is_admin=key.kind == ApiKey.Kind.ADMIN)


def principal_for_member(membership: Membership, *, active: bool = True) -> Principal:
    """A dashboard member acting in one of their organizations; `active=False` lets the pages of a
    suspended organization still be read."""
    if active:
        check_active(membership.organization)
    return Principal(
        organization=membership.organization,
        api_key=None,
        user_id=membership.user_id,
        is_admin=membership.is_admin,
    )


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
    return principal_for_key(key)


def authenticate_ticket(ticket: str) -> Principal:
    """Spend a WebSocket ticket (once) and check its holder as it is now."""
    holder = tickets.redeem(ticket)
    if holder is None:
        raise ApiError(401, "Authenticate with an Authorization header or a fresh ticket.", "invalid_ticket")
    if holder.get("api_key"):
        key = ApiKey.objects.select_related("organization").filter(pk=holder["api_key"]).first()
        if key is None:
            raise ApiError(401, "Unknown ticket.", "invalid_ticket")
        return principal_for_key(key)
    membership = (
        Membership.objects.select_related("organization")
        .filter(organization_id=int(holder["organization"]), user_id=int(holder["user"]), user__is_active=True)
        .first()
    )
    if membership is None:
        raise ApiError(401, "This ticket's member has left the organization.", "invalid_ticket")
    return principal_for_member(membership)


def refresh(principal: Principal) -> Principal:
    """The same caller as it stands now: a long-lived connection re-checks, per request, that its
    key is still valid, its member still a member and its organization not suspended."""
    if principal.api_key is not None:
        key = ApiKey.objects.select_related("organization").filter(pk=principal.api_key.pk).first()
        if key is None:
            raise ApiError(401, "This API key has been deleted.", "invalid_api_key")
        return principal_for_key(key)
    membership = (
        Membership.objects.select_related("organization")
        .filter(organization_id=principal.organization.pk, user_id=principal.user_id or 0, user__is_active=True)
        .first()
    )
    if membership is None:
        raise ApiError(401, "You are no longer a member of this organization.", "invalid_ticket")
    return principal_for_member(membership)


def issue_ticket(principal: Principal) -> str:
    """A WebSocket ticket for this caller: its key, or the member in their organization."""
    if principal.api_key is not None:
        return tickets.issue(api_key_id=principal.api_key.pk)
    return tickets.issue(organization_id=principal.organization.pk, user_id=principal.user_id)


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request):
        principal = authenticate_key(request.headers.get("Authorization"))
        return principal, principal.api_key

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'  # makes DRF answer 401, not 403
