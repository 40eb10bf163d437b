"""What one action on an API key may give, checked in one place (`check`) for every action on a
key — create, change, rotate, revoke, hand over — by a key, a member or staff:

- a key gives no more than it has itself: what it makes or changes has at most its scopes, an
  allowlist inside its own and a life no longer than its own; a key with a monthly cap or a rate of
  its own makes no keys and changes no other key's limits (their use would not count against its
  own: it would multiply its cap). So a key cannot raise its own limits or widen its own allowlist;
- a member gives what their role allows (`accounts.scopes.ROLES`), with no limits of their own;
- an action on another key (rotating it hands over its secret; revoking it ends it) needs every
  right the key stores, whatever its owner's role lets it use now: a `keys:write` key cannot rotate
  an admin key and read the audit log with it, today or after its owner is promoted again. A key
  and its owner may always rotate and revoke it.

A member's own key does at most what its owner's role allows, as the role is at each request
(`effective_scopes`): a demotion narrows the member's keys at once. A service key keeps what its
creator could give when it was made."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime

from django.db.models import OuterRef, QuerySet, Subquery

from tts_saas.errors import ApiError

from . import scopes as key_scopes
from .models import ApiKey, Membership, Organization

_UNREAD = object()


@dataclass(frozen=True)
class Terms:
    """What a key may do, where from and until when, or what an actor may give: None and () are
    unbounded."""

    scopes: frozenset[str]
    monthly_character_cap: int | None = None
    requests_per_minute: int | None = None
    allowed_ips: tuple[str, ...] = ()
    expires_at: datetime | None = None

    @classmethod
    def of_key(cls, key: ApiKey, scopes: frozenset[str] | None = None) -> Terms:
        """The key's terms; its scopes as stored unless `scopes` (what it may do now) is given."""
        return cls(
            scopes=stored_scopes(key) if scopes is None else scopes,
            monthly_character_cap=key.monthly_character_cap,
            requests_per_minute=key.requests_per_minute,
            allowed_ips=tuple(key.allowed_ips or ()),
            expires_at=key.expires_at,
        )

    def changed(self, changes: dict) -> Terms:
        """These terms with a PATCH's fields applied (the others kept)."""
        fields = {f: changes[f] for f in LIMITS if f in changes}
        if "scopes" in changes:
            fields["scopes"] = frozenset(changes["scopes"])
        if "allowed_ips" in changes:
            fields["allowed_ips"] = tuple(changes["allowed_ips"])
        return Terms(**{**self.__dict__, **fields})


LIMITS = {"monthly_character_cap": "characters a month", "requests_per_minute": "requests a minute"}
EVERYTHING = Terms(key_scopes.ALL)


def with_owner_roles(keys: QuerySet[ApiKey]) -> QuerySet[ApiKey]:
    """The keys, each with its owner's role now (`owner_role`), in the same query."""
    role = Membership.objects.filter(
        organization=OuterRef("organization"), user=OuterRef("owner"), user__is_active=True
    ).values("role")
    return keys.annotate(owner_role=Subquery(role[:1]))


def owner_role(key: ApiKey) -> str | None:
    """The role of the key's owner in its organization now; None for a service key or an owner who
    is no longer a member. Read from the `owner_role` annotation when the key was loaded with it."""
    role = getattr(key, "owner_role", _UNREAD)
    if role is _UNREAD:
        if key.owner_id is None:
            return None
        found = Membership.objects.filter(
            organization_id=key.organization_id, user_id=key.owner_id, user__is_active=True
        )
        role = found.values_list("role", flat=True).first()
    return role  # type: ignore[return-value]


def stored_scopes(key: ApiKey) -> frozenset[str]:
    """The key's scopes as stored; a value no API takes (a raw write) grants nothing."""
    if not isinstance(key.scopes, list):
        return frozenset()
    return frozenset(s for s in key.scopes if isinstance(s, str))


def effective_scopes(key: ApiKey) -> frozenset[str]:
    """What the key may do now: its scopes, bounded by its owner's role if it is a member's own."""
    granted = stored_scopes(key)
    if key.owner_id is None:
        return granted
    return key_scopes.bounded(granted, key_scopes.for_role(owner_role(key)))


def rights_of(by, org: Organization) -> Terms:
    """What `by` may give in `org`: an API key's principal (its scopes now and its own limits), a
    member's principal or membership (their role), a user (their role in `org`; staff outside it:
    everything), or the system (None, a name: everything)."""
    key = getattr(by, "api_key", None)
    if key is not None:
        return Terms.of_key(key, frozenset(by.scopes))
    if isinstance(by, Membership):
        return Terms(key_scopes.for_role(by.role))
    if hasattr(by, "scopes"):  # a member's principal: its scopes are the role's
        return Terms(frozenset(by.scopes))
    if hasattr(by, "is_staff"):  # a user
        role = Membership.objects.filter(organization=org, user=by).values_list("role", flat=True).first()
        return Terms(key_scopes.for_role(role)) if role or not by.is_staff else EVERYTHING
    return EVERYTHING


def _networks(values) -> list:
    """The networks of a stored allowlist; an entry that is not one (no API would have taken it)
    permits nothing, so it is left out."""
    found = []
    for value in values:
        try:
            found.append(ipaddress.ip_network(value))
        except (ValueError, TypeError):
            continue
    return found


def _inside(networks: tuple[str, ...], within: tuple[str, ...]) -> bool:
    outer, inner = _networks(within), _networks(networks)
    if networks and not inner:
        return True  # it permits no address at all
    return bool(inner) and all(any(n.version == o.version and n.subnet_of(o) for o in outer) for n in inner)


def beyond(rights: Terms, terms: Terms) -> list[tuple[str, str]]:
    """What of `terms` `rights` cannot give: (field, in words) for each."""
    found = []
    extra = sorted(s for s in terms.scopes if not key_scopes.allows(rights.scopes, s))
    if extra:
        found.append(("scopes", f"the scopes {', '.join(extra)}"))
    for field, unit in LIMITS.items():
        own, given = getattr(rights, field), getattr(terms, field)
        if own is not None and (given is None or given > own):
            found.append((field, f"more than {own} {unit} ({field}: {'none' if given is None else given})"))
    if rights.allowed_ips and not _inside(terms.allowed_ips, rights.allowed_ips):
        found.append(("allowed_ips", f"addresses outside {', '.join(rights.allowed_ips)} (allowed_ips)"))
    if rights.expires_at is not None and (terms.expires_at is None or terms.expires_at > rights.expires_at):
        found.append(("expires_at", f"a life beyond {rights.expires_at:%Y-%m-%d %H:%M} UTC (expires_at)"))
    return found


def _own(by, key: ApiKey) -> bool:
    """The key itself, or its owner (a member acting on their own key)."""
    acting = getattr(by, "api_key", None)
    if acting is not None:
        return acting.pk == key.pk
    user_id = by.user_id if isinstance(by, Membership) else getattr(by, "user_id", getattr(by, "pk", None))
    return key.owner_id is not None and user_id == key.owner_id


def check(by, org: Organization, *, key: ApiKey | None = None, giving: Terms | None = None) -> None:
    """Refuse the action unless `by` holds every right `key` stores (403; not needed on its own key:
    a key or its owner may rotate and revoke it) and may give `giving`, what the key will be (400
    naming the field). A key with a limit of its own makes no keys and changes no other key's
    limit: what they spent would not count against its own (it would multiply its cap)."""
    rights = rights_of(by, org)
    keyed = getattr(by, "api_key", None) is not None
    if key is not None and not _own(by, key) and (held := beyond(rights, Terms.of_key(key))):
        raise ApiError(
            403,
            f"{'This API key' if keyed else 'You'} cannot act on the key {key.prefix}: it has "
            f"{'; '.join(words for _, words in held)}, beyond what {'this key' if keyed else 'your role'} may "
            "give. A key or member with those rights can.",
            "insufficient_permissions",
        )
    if giving is None:
        return
    if key is None or not _own(by, key):
        for field in LIMITS:
            if getattr(rights, field) is not None and (key is None or getattr(giving, field) != getattr(key, field)):
                raise ApiError(
                    400,
                    f"This API key has a {field} of its own, so it cannot make keys or change another key's "
                    f"{field}: what they spend would not count against its own. A key or member without one can.",
                    "invalid_value",
                    field,
                )
    if given := beyond(rights, giving):
        raise ApiError(
            400,
            f"A key cannot be given more than {'the key giving it has' if keyed else 'your role gives'}: "
            f"{'; '.join(words for _, words in given)}.",
            "invalid_value",
            given[0][0],
        )
