"""What is done to API keys and the organization's allowlist, each recorded in the audit log:
create, change, rotate, revoke, hand a leaving member's keys over, set the IP allowlist. Every key
action is first checked by `grants.check`: what the actor may give, against the key as it is and as
it will be."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models.signals import pre_delete
from django.dispatch import receiver

from tts_saas.errors import ApiError

from . import audit
from . import scopes as key_scopes
from .grants import Terms, check
from .models import ApiKey, Membership, Organization
from .network import permits


class NotAllowed(Exception):
    """The acting member's role does not allow the operation."""


def set_ip_allowlist(org: Organization, networks: list[str], caller: str | None, by=None) -> None:
    """Replace `org`'s IP allowlist. An API caller (`caller`: its address) is refused a list that
    would refuse its own address (400), so it cannot lock itself out by mistake; the dashboard,
    which the list does not restrict, passes None."""
    if networks and caller is not None and not permits(networks, caller):
        raise ApiError(
            400,
            f"This list would refuse your own address ({caller}): add it, or make the change from an allowed address.",
            "invalid_value",
            "allowed_ips",
        )
    before, org.allowed_ips = org.allowed_ips, networks
    org.save(update_fields=["allowed_ips"])
    audit.record_changes(org, "ip_allowlist.updated", {"allowed_ips": before}, {"allowed_ips": networks}, by)


EDITABLE = ("name", "scopes", "allowed_ips", "monthly_character_cap", "requests_per_minute")


def _terms(key: ApiKey) -> dict:
    return {field: getattr(key, field) for field in ("kind", *EDITABLE)}


def create_key(org: Organization, name: str, by, **options) -> tuple[ApiKey, str]:
    """A new key (see Organization.create_api_key) with at most what `by` may give, recorded in the
    audit log."""
    giving = Terms(
        frozenset(options.get("scopes") or key_scopes.PRESETS[options.get("kind", "standard")]),
        options.get("monthly_character_cap"),
        options.get("requests_per_minute"),
        tuple(options.get("allowed_ips") or ()),
        options.get("expires_at"),
    )
    check(by, org, giving=giving)
    key, raw = org.create_api_key(name, **options)
    after = {**_terms(key), "expires_at": key.expires_at.isoformat() if key.expires_at else None}
    audit.record(org, "key.created", by, target=f"key:{key.prefix}", after=after)
    return key, raw


def update_key(key: ApiKey, by, changes: dict) -> ApiKey:
    """Change a key's name, scopes, allowlist or limits; they apply from its next request (on an
    open WebSocket: its next utterance). Recorded with what changed, before and after."""
    check(by, key.organization, key=key, giving=Terms.of_key(key).changed(changes))
    before = _terms(key)
    for field, value in changes.items():
        setattr(key, field, sorted(value) if field == "scopes" else value)
    key.kind = ApiKey.kind_of(key.scopes)
    key.save(update_fields=["kind", *changes])
    audit.record_changes(key.organization, "key.updated", before, _terms(key), by, target=f"key:{key.prefix}")
    return key


MAX_ROTATION_GRACE = timedelta(days=7)


def rotate_key(key: ApiKey, by, grace: timedelta = timedelta(0)) -> str:
    """A new secret for `key`: the same id, scopes, limits and this month's counters; the old
    secret keeps working for `grace` (at most MAX_ROTATION_GRACE): on REST, on WebSockets (closed at
    their next utterance after it) and for client tokens minted with it (refused after it)."""
    check(by, key.organization, key=key)
    with transaction.atomic():  # two rotations at once: the second keeps the first's secret, not the one it ended
        locked = ApiKey.objects.select_for_update().get(pk=key.pk)
        raw = locked.new_secret(min(grace, MAX_ROTATION_GRACE))
    for field in ("hashed_key", "previous_hashed_key", "previous_valid_until"):
        setattr(key, field, getattr(locked, field))
    after = {"previous_valid_until": key.previous_valid_until.isoformat() if key.previous_valid_until else None}
    audit.record(key.organization, "key.rotated", by, target=f"key:{key.prefix}", after=after)
    return raw


def revoke_key(key: ApiKey, by) -> None:
    check(by, key.organization, key=key)
    if key.revoked_at is None:
        key.revoke()
        audit.record(key.organization, "key.revoked", by, target=f"key:{key.prefix}", before={"name": key.name})


def hand_over_keys(org: Organization, leaver, keys_to: str, acting: Membership) -> None:
    """A leaving member's own keys: revoked, made service keys, or given to another member."""
    keys = list(ApiKey.objects.filter(organization=org, owner=leaver, revoked_at__isnull=True))
    heir = None
    if keys_to.startswith("member:"):
        heir_id = keys_to.removeprefix("member:")
        heir = Membership.objects.filter(organization=org, pk=int(heir_id)).first() if heir_id.isdigit() else None
        if heir is None:
            raise NotAllowed("Keys can be handed only to a member of this organization.")
    elif keys_to not in ("revoke", "service"):
        raise NotAllowed("Choose what becomes of the member's keys: revoke, service, or member:<id>.")
    for key in keys:
        check(acting, org, key=key)
        if keys_to == "revoke":
            revoke_key(key, acting)
            continue
        owner = heir.user if heir is not None else None
        ApiKey.objects.filter(pk=key.pk).update(owner=owner)
        before, after = {"owner": leaver.email}, {"owner": owner.email if owner is not None else None}
        audit.record(org, "key.transferred", acting, target=f"key:{key.prefix}", before=before, after=after)


def set_data_retention(org: Organization, retention: str, by) -> None:
    before, org.data_retention = org.data_retention, retention
    org.save(update_fields=["data_retention"])
    audit.record_changes(org, "settings.data_retention", {"data_retention": before}, {"data_retention": retention}, by)


def set_speech_defaults(org: Organization, model: str, voice: str, by) -> None:
    """The organization's default model and voice (checked by the caller: synthesis.api.defaults)."""
    before = {"model": org.default_model, "voice": org.default_voice}
    org.default_model, org.default_voice = model, voice
    org.save(update_fields=["default_model", "default_voice"])
    audit.record_changes(org, "settings.speech_defaults", before, {"model": model, "voice": voice}, by)


def set_voice_aliases(org: Organization, aliases: dict, by) -> None:
    """The organization's voice aliases (checked by the caller: synthesis.api.aliases)."""
    before = {"aliases": org.voice_aliases}
    org.voice_aliases = aliases
    org.save(update_fields=["voice_aliases"])
    audit.record_changes(org, "settings.voice_aliases", before, {"aliases": aliases}, by)


@receiver(pre_delete, sender=get_user_model())
def _revoke_keys_of_deleted_user(sender, instance, **kwargs) -> None:
    """A user deleted however (the admin console too): their own keys are revoked, never left to
    become the organization's service keys when the owner field is emptied."""
    for key in ApiKey.objects.filter(owner=instance, revoked_at__isnull=True).select_related("organization"):
        revoke_key(key, instance)  # its owner: always allowed
