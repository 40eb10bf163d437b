"""Every way in, in one module, each ending in the same `Principal`: an API key
(`Authorization: Bearer tts_<prefix>_<secret>`), a single-use WebSocket ticket, a signed-in
dashboard member, or a client token acting for its key (`tts_tok_…`, speech only). A key must be
unrevoked and unexpired, called from an address its allowlist and its organization's permit, a
member still a member, and the organization not suspended: those checks are written once, here;
so is the scope check (`require`)."""

from __future__ import annotations

import hmac
import logging
from dataclasses import dataclass, replace

from django.db.models import QuerySet
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication

from tts_saas.errors import ApiError

from . import audit, client_tokens, tickets
from . import scopes as key_scopes
from .grants import effective_scopes, owner_role, with_owner_roles
from .models import KEY_SCHEME, ApiKey, Membership, Organization, hash_key
from .network import permits

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Principal:
    """Who is calling: the organization, and the key or member acting for it."""

    organization: Organization
    api_key: ApiKey | None  # None for a dashboard member
    user_id: int | None = None  # the member, for a dashboard session or a member's ticket
    is_admin: bool = False  # an admin key, or an owner/admin member: may manage keys and the team
    scopes: frozenset[str] = key_scopes.STANDARD  # what it may do (accounts.scopes)
    token: client_tokens.ClientToken | None = None  # a client token acting for `api_key` (speech only)
    secret: str = ""  # the SHA-256 of the key's secret it came in with: it ends when that secret ends

    is_authenticated = True  # lets DRF's IsAuthenticated accept it as request.user

    @property
    def key_id(self) -> int | None:
        """The key the request is billed to (a client token's: the key that minted it)."""
        return self.api_key.pk if self.api_key is not None else None

    @property
    def member_id(self) -> int | None:
        """The dashboard member making a request without a key (the playground, a preview)."""
        return self.user_id if self.api_key is None else None


def check_active(org: Organization) -> None:
    if org.is_suspended:
        reason = f": {org.suspension_reason}" if org.suspension_reason else "."
        raise ApiError(403, f"Your organization has been suspended{reason}", "organization_suspended")


def check_address(org: Organization, key: ApiKey | None, address: str | None) -> None:
    """The organization's allowlist, then the key's: 403 `ip_not_allowed` naming the address (and
    recorded in the audit log)."""
    for whose, networks in (("your organization's", org.allowed_ips), ("this API key's", key and key.allowed_ips)):
        try:
            permitted = not networks or permits(networks, address)
        except (ValueError, TypeError):  # a stored entry no API would have taken: refused, never a 500
            logger.error("invalid IP allowlist entry", extra={"org_id": org.pk, "key": key and key.prefix})
            raise ApiError(
                403,
                f"{whose.capitalize()} IP allowlist holds an entry that is not a network, so calls are refused: an "
                "owner or admin must correct it ("
                + (
                    f"PATCH /v1/keys/{key.prefix} with allowed_ips"
                    if key and whose.startswith("this")
                    else "dashboard: Settings"
                )
                + ").",
                "invalid_ip_allowlist",
            ) from None
        if not permitted:
            audit.record(org, "access.ip_refused", key, target=f"key:{key.prefix}" if key else "", ip=address)
            raise ApiError(403, f"Calls from {address} are not allowed by {whose} IP allowlist.", "ip_not_allowed")


def keys() -> QuerySet[ApiKey]:
    """Keys as authentication reads them: with their organization and their owner's role now."""
    return with_owner_roles(ApiKey.objects.select_related("organization"))


def secret_valid(key: ApiKey, secret: str) -> bool:
    """Whether the secret with this hash still opens the key: its current one, or the previous
    one during a rotation's grace."""
    if hmac.compare_digest(key.hashed_key, secret):
        return True
    in_grace = key.previous_valid_until is not None and timezone.now() < key.previous_valid_until
    return in_grace and bool(key.previous_hashed_key) and hmac.compare_digest(key.previous_hashed_key, secret)


def principal_for_key(key: ApiKey, address: str | None = None, secret: str = "") -> Principal:
    """The caller behind a key already identified (by its secret, by a WebSocket ticket or a
    client token bought with it: `secret`, its hash), calling from `address`. A member's own key
    does at most what its owner's role allows now."""
    if not key.is_usable():
        raise ApiError(401, "This API key has been revoked or has expired.", "invalid_api_key")
    if secret and not secret_valid(key, secret):
        raise ApiError(401, "This API key's secret was rotated: use its new secret.", "invalid_api_key")
    if key.owner_id is not None and owner_role(key) is None:
        raise ApiError(401, "This API key's owner is no longer a member of the organization.", "invalid_api_key")
    check_active(key.organization)
    check_address(key.organization, key, address)
    if not isinstance(key.scopes, list) or not all(isinstance(s, str) for s in key.scopes):
        logger.error(
            "API key's stored scopes are not a list of scopes", extra={"org_id": key.organization_id, "key": key.prefix}
        )
        raise ApiError(
            403,
            f"This API key's stored scopes are not valid, so its calls are refused: an owner or admin must set them "
            f"again (PATCH /v1/keys/{key.prefix} with scopes).",
            "invalid_key_scopes",
        )
    key.touch(address=address)
    granted = effective_scopes(key)
    return Principal(
        organization=key.organization,
        api_key=key,
        is_admin=granted == key_scopes.ALL,
        scopes=granted,
        secret=secret,
    )


def require(principal: Principal, scope: str | None, what: str) -> None:
    """403 `insufficient_permissions` naming the missing scope, unless the caller has it."""
    if scope is not None and not key_scopes.allows(principal.scopes, scope):
        who, hint = "This API key", "An admin key has every scope."
        if principal.token is not None:
            raise ApiError(
                403,
                f"This client token may only speak (POST /v1/audio/speech, the WebSocket with ?token=): "
                f"{what} needs an API key with the scope '{scope}'.",
                "insufficient_permissions",
            )
        if principal.api_key is None:
            who, hint = "Your role", "Owners and admins have every scope."
        raise ApiError(403, f"{who} lacks the scope '{scope}', needed for {what}. {hint}", "insufficient_permissions")


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
        scopes=key_scopes.for_role(membership.role),
    )


def _raw_key_from_header(header: str | None) -> str:
    if not header:
        raise ApiError(401, "Missing API key. Send it as 'Authorization: Bearer <key>'.", "missing_api_key")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() != "bearer" or not raw.strip():
        raise ApiError(401, "Malformed Authorization header. Use 'Authorization: Bearer <key>'.", "invalid_api_key")
    return raw.strip()


def authenticate_key(header: str | None, address: str | None = None) -> Principal:
    raw = _raw_key_from_header(header)
    if raw.startswith(client_tokens.PREFIX):
        return authenticate_token(raw, address)
    scheme, _, rest = raw.partition("_")
    prefix, _, secret = rest.partition("_")
    invalid = ApiError(401, "Incorrect API key provided.", "invalid_api_key")
    if scheme != KEY_SCHEME or not prefix or not secret:
        raise invalid
    key = keys().filter(prefix=prefix).first()
    if key is None or not secret_valid(key, hash_key(raw)):
        raise invalid
    return principal_for_key(key, address, hash_key(raw))


def authenticate_token(raw: str, address: str | None = None) -> Principal:
    """A client token (accounts.client_tokens), spent if single-use: the key that minted it, as it
    is now, with speech as its only scope and the token's terms."""
    token = client_tokens.redeem(raw)
    if token is None:
        raise ApiError(401, "This client token is unknown, used up or expired.", "invalid_token")
    return _token_principal(token, address)


def _token_principal(token: client_tokens.ClientToken, address: str | None) -> Principal:
    if token.expired:
        raise ApiError(401, "This client token has expired.", "invalid_token")
    key = keys().filter(pk=token.api_key_id).first()
    if key is None:
        raise ApiError(401, "This client token's API key has been deleted.", "invalid_token")
    if token.secret and not secret_valid(key, token.secret):
        raise ApiError(401, "The API key that minted this client token has a new secret.", "invalid_token")
    principal = principal_for_key(key, address)
    speech = frozenset({key_scopes.WEBSOCKET}) & principal.scopes
    return replace(principal, scopes=speech, is_admin=False, token=token)


def authenticate_ticket(ticket: str, address: str | None = None) -> Principal:
    """Spend a WebSocket ticket (once) and check its holder as it is now, from `address`."""
    holder = tickets.redeem(ticket)
    if holder is None:
        raise ApiError(401, "Authenticate with an Authorization header or a fresh ticket.", "invalid_ticket")
    if holder.get("api_key"):
        key = keys().filter(pk=holder["api_key"]).first()
        if key is None:
            raise ApiError(401, "Unknown ticket.", "invalid_ticket")
        return principal_for_key(key, address, holder.get("secret", ""))
    membership = (
        Membership.objects.select_related("organization")
        .filter(organization_id=int(holder["organization"]), user_id=int(holder["user"]), user__is_active=True)
        .first()
    )
    if membership is None:
        raise ApiError(401, "This ticket's member has left the organization.", "invalid_ticket")
    return _member_calling(membership, address)


def _member_calling(membership: Membership, address: str | None) -> Principal:
    """A member on the API (a ticket's WebSocket): their organization's allowlist applies."""
    check_address(membership.organization, None, address)
    return principal_for_member(membership)


def refresh(principal: Principal, address: str | None = None) -> Principal:
    """The same caller as it stands now: a long-lived connection re-checks, per request, that its
    key is still valid (its scopes and allowlists as they are now, the secret it came in with not
    ended by a rotation), its member still a member and its organization not suspended."""
    if principal.token is not None:
        return _token_principal(principal.token, address)
    if principal.api_key is not None:
        key = keys().filter(pk=principal.api_key.pk).first()
        if key is None:
            raise ApiError(401, "This API key has been deleted.", "invalid_api_key")
        return principal_for_key(key, address, principal.secret)
    membership = (
        Membership.objects.select_related("organization")
        .filter(organization_id=principal.organization.pk, user_id=principal.user_id or 0, user__is_active=True)
        .first()
    )
    if membership is None:
        raise ApiError(401, "You are no longer a member of this organization.", "invalid_ticket")
    return _member_calling(membership, address)


def issue_ticket(principal: Principal) -> str:
    """A WebSocket ticket for this caller: its key, or the member in their organization (a client
    token connects with itself: a ticket would act as its whole key)."""
    if principal.token is not None:
        raise ApiError(
            403, "A client token connects to the WebSocket itself (?token=…): it cannot buy tickets.", "invalid_token"
        )
    if principal.api_key is not None:
        return tickets.issue(api_key_id=principal.api_key.pk, secret=principal.secret)
    return tickets.issue(organization_id=principal.organization.pk, user_id=principal.user_id)


class ApiKeyAuthentication(BaseAuthentication):
    def authenticate(self, request):
        principal = authenticate_key(request.headers.get("Authorization"), request.META.get("REMOTE_ADDR"))
        return principal, principal.api_key

    def authenticate_header(self, request) -> str:
        return 'Bearer realm="api"'  # makes DRF answer 401, not 403
