"""What one action on an API key may give, checked in one place (`check`) for every action on a
key — create, change, rotate, revoke, hand over — by a key, a member or staff:

- a key gives no scope it lacks itself, and no limit or allowlist looser than its own: what it
  makes or changes has at most its scopes, a monthly cap and a rate at most its own, an allowlist
  inside its own. So a key cannot raise its own limits or widen its own allowlist either;
- a member gives what their role allows (`accounts.scopes.ROLES`), with no limits of their own;
- an action on an existing key (rotating it hands over its secret; revoking it ends it) needs the
  rights the key has: a `keys:write` key cannot rotate an admin key and read the audit log with it.

A member's own key is worth at most its owner's role, as the role is at each request
(`effective_scopes`): a demotion narrows the member's keys at once. A service key keeps what its
creator could give when it was made."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from tts_saas.errors import ApiError

from . import scopes as key_scopes
from .models import ApiKey, Membership, Organization

_UNREAD = object()


@dataclass(frozen=True)
class Terms:
    """What a key may do and where from, or what an actor may give: None and () are unbounded."""

    scopes: frozenset[str]
    monthly_character_cap: int | None = None
    requests_per_minute: int | None = None
    allowed_ips: tuple[str, ...] = ()

    @classmethod
    def of_key(cls, key: ApiKey, scopes: frozenset[str] | None = None) -> Terms:
        return cls(
            scopes=effective_scopes(key) if scopes is None else scopes,
            monthly_character_cap=key.monthly_character_cap,
            requests_per_minute=key.requests_per_minute,
            allowed_ips=tuple(key.allowed_ips or ()),
        )

    def changed(self, changes: dict) -> Terms:
        """These terms with a PATCH's fields applied (the others kept)."""
        fields = {f: changes[f] for f in ("monthly_character_cap", "requests_per_minute") if f in changes}
        if "scopes" in changes:
            fields["scopes"] = frozenset(changes["scopes"])
        if "allowed_ips" in changes:
            fields["allowed_ips"] = tuple(changes["allowed_ips"])
        return Terms(**{**self.__dict__, **fields})


EVERYTHING = Terms(key_scopes.ALL)


def owner_role(key: ApiKey) -> str | None:
    """The role of the key's owner in its organization now; None for a service key or an owner who
    is no longer a member. Read from the `owner_role` annotation when the key was loaded with it."""
    role = getattr(key, "owner_role", _UNREAD)
    if role is _UNREAD:
        if key.owner_id is None:
            return None
        found = Membership.objects.filter(organization_id=key.organization_id, user_id=key.owner_id)
        role = found.values_list("role", flat=True).first()
    return role  # type: ignore[return-value]


def effective_scopes(key: ApiKey) -> frozenset[str]:
    """What the key may do now: its scopes, bounded by its owner's role if it is a member's own."""
    granted = frozenset(key.scopes)
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


def _inside(networks: tuple[str, ...], within: tuple[str, ...]) -> bool:
    outer = [ipaddress.ip_network(n) for n in within]
    return bool(networks) and all(
        any(inner.version == o.version and inner.subnet_of(o) for o in outer)  # type: ignore[arg-type]
        for inner in map(ipaddress.ip_network, networks)
    )


def beyond(rights: Terms, terms: Terms) -> list[tuple[str, str]]:
    """What of `terms` `rights` cannot give: (field, in words) for each."""
    found = []
    extra = sorted(s for s in terms.scopes if not key_scopes.allows(rights.scopes, s))
    if extra:
        found.append(("scopes", f"the scopes {', '.join(extra)}"))
    for field, unit in (("monthly_character_cap", "characters a month"), ("requests_per_minute", "requests a minute")):
        own, given = getattr(rights, field), getattr(terms, field)
        if own is not None and (given is None or given > own):
            found.append((field, f"more than {own} {unit} ({field}: {'none' if given is None else given})"))
    if rights.allowed_ips and not _inside(terms.allowed_ips, rights.allowed_ips):
        found.append(("allowed_ips", f"addresses outside {', '.join(rights.allowed_ips)} (allowed_ips)"))
    return found


def check(by, org: Organization, *, key: ApiKey | None = None, giving: Terms | None = None) -> None:
    """Refuse the action unless `by` holds every right of `key` as it is (403) and may give
    `giving`, what the key will be (400 naming the field)."""
    rights = rights_of(by, org)
    keyed = getattr(by, "api_key", None) is not None
    if key is not None and (held := beyond(rights, Terms.of_key(key))):
        raise ApiError(
            403,
            f"{'This API key' if keyed else 'You'} cannot act on the key {key.prefix}: it has "
            f"{'; '.join(words for _, words in held)}, beyond what {'this key' if keyed else 'your role'} may "
            "give. A key or member with those rights can.",
            "insufficient_permissions",
        )
    if giving is not None and (given := beyond(rights, giving)):
        raise ApiError(
            400,
            f"A key cannot be given more than {'the key giving it has' if keyed else 'your role gives'}: "
            f"{'; '.join(words for _, words in given)}.",
            "invalid_value",
            given[0][0],
        )
