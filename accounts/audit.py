"""The audit log: `record` appends one `AuditEvent` for what was done in an organization, by a
member, a key or staff, from the request's client address; sign-ins (success and failure) are
recorded from Django's auth signals. Reading: `events` with filters and a cursor (newest first)."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.admin.models import ADDITION, CHANGE, DELETION, LogEntry
from django.contrib.auth import get_user_model
from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.db.models import QuerySet
from django.db.models.signals import post_save
from django.dispatch import receiver
from django.utils import timezone

from tts_saas.request_id import actor_var, client_address_var

from .models import ApiKey, AuditEvent, Membership, Organization

# What is recorded, in the words the dashboard shows.
ACTIONS = {
    "signin.succeeded": "signed in",
    "signin.failed": "sign-in failed",
    "key.created": "API key created",
    "key.revoked": "API key revoked",
    "key.transferred": "API key handed over",
    "key.updated": "API key changed",
    "key.rotated": "API key's secret rotated",
    "access.ip_refused": "call refused by an IP allowlist",
    "ip_allowlist.updated": "IP allowlist changed",
    "webhook_secret.rotated": "webhook signing secret rotated",
    "webhook_endpoint.created": "webhook endpoint added",
    "webhook_endpoint.updated": "webhook endpoint changed",
    "webhook_endpoint.secret_rotated": "webhook endpoint's signing secret rotated",
    "webhook_endpoint.deleted": "webhook endpoint deleted",
    "settings.data_retention": "data retention changed",
    "settings.require_mfa": "two-factor requirement changed",
    "settings.speech_defaults": "default model and voice changed",
    "settings.voice_aliases": "voice aliases changed",
    "settings.browser_origins": "browser origins changed",
    "sso.updated": "single sign-on settings changed",
    "sso.deleted": "single sign-on removed",
    "sso.domain_verified": "single sign-on domain proven",
    "sso.signed_in": "signed in with single sign-on",
    "sso.refused": "single sign-on refused",
    "sso.break_glass": "owner signed in by password while single sign-on is required",
    "mfa.added": "second factor added",
    "mfa.removed": "second factor removed",
    "member.invited": "member invited",
    "member.joined": "member joined",
    "member.removed": "member removed",
    "member.role_changed": "member's role changed",
    "account.deleted": "member deleted their account",
    "member.left": "member left",
    "organization.renamed": "organization renamed",
    "organization.closed": "organization closed by its owner",
    "voice.created": "voice created",
    "voice.consent": "consent stated for a voice from a recording",
    "voice.deleted": "voice deleted",
    "lexicon.created": "lexicon created",
    "lexicon.updated": "lexicon changed",
    "lexicon.deleted": "lexicon deleted",
    "billing.plan_changed": "plan changed",
    "billing.limits_changed": "limits or billing terms changed",
    "staff.suspended": "organization suspended by staff",
    "staff.unsuspended": "organization unsuspended by staff",
    "staff.added": "staff added something in the admin console",
    "staff.changed": "staff changed something in the admin console",
    "staff.deleted": "staff deleted something in the admin console",
}


def label(action: str) -> str:
    """An action in words; one not in ACTIONS (recorded by a newer part) from its own name."""
    return ACTIONS.get(action) or action.replace("_", " ").replace(".", ": ", 1)


@dataclass(frozen=True)
class Actor:
    type: str
    id: str = ""
    label: str = ""


def actor_of(by, staff: bool = False) -> Actor:
    """The actor behind an API key, a principal (accounts.auth: its key or its member), a
    membership or a user (a member; staff when `staff=True` is recorded by the admin console)."""
    key = by if isinstance(by, ApiKey) else getattr(by, "api_key", None)
    if key is not None:
        return Actor(AuditEvent.Actor.KEY, key.prefix, key.name)
    user = getattr(by, "user", None) if isinstance(by, Membership) else by
    if user is not None and not hasattr(user, "email") and getattr(by, "user_id", None):
        user = get_user_model().objects.filter(pk=by.user_id).first()  # a member's principal
    if user is not None and hasattr(user, "email"):
        kind = AuditEvent.Actor.STAFF if staff else AuditEvent.Actor.MEMBER
        return Actor(kind, str(user.pk), user.email or user.username)
    if isinstance(by, str):  # a system's name, e.g. "stripe"
        return Actor(AuditEvent.Actor.SYSTEM, by, by)
    return Actor(AuditEvent.Actor.ANONYMOUS)


def _address(ip: str | None) -> str | None:
    ip = ip if ip is not None else client_address_var.get()
    try:
        return str(ipaddress.ip_address(ip or ""))
    except ValueError:
        return None


CURRENT = object()  # `by` not given: whoever acts in this request (tts_saas.request_id.actor_var)


def record(
    org: Organization,
    action: str,
    by=CURRENT,
    *,
    target: str = "",
    before=None,
    after=None,
    ip: str | None = None,
    staff: bool = False,
) -> AuditEvent:
    if by is CURRENT:
        by = actor_var.get()
    actor = actor_of(by, staff) if by is not None else Actor(AuditEvent.Actor.ANONYMOUS)
    return AuditEvent.objects.create(
        organization=org,
        action=action,
        actor_type=actor.type,
        actor_id=actor.id,
        actor_label=actor.label[:254],
        ip=_address(ip),
        target=target[:200],
        before=before,
        after=after,
    )


def record_changes(org: Organization, action: str, before: dict, after: dict, by=CURRENT, **context) -> None:
    """Record `action` with the fields whose values differ, before and after; nothing if none do."""
    changed = [field for field in after if after[field] != before.get(field)]
    if changed:
        was, now = {f: before.get(f) for f in changed}, {f: after[f] for f in changed}
        record(org, action, by, before=was, after=now, **context)


def events(
    org: Organization,
    *,
    action: str | None = None,
    actor_id: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    after: int | None = None,
) -> QuerySet[AuditEvent]:
    """The organization's events, newest first, filtered; `after` is a cursor (an event's id:
    those older than it)."""
    found = AuditEvent.objects.filter(organization=org).order_by("-id")
    if action:
        found = found.filter(action__startswith=action) if action.endswith(".") else found.filter(action=action)
    if actor_id:
        found = found.filter(actor_id=actor_id)
    if since:
        found = found.filter(created_at__gte=since)
    if until:
        found = found.filter(created_at__lt=until)
    if after:
        found = found.filter(id__lt=after)
    return found


def expire() -> int:
    """Delete events older than TTS_AUDIT_RETENTION_DAYS (the one way rows leave); the count."""
    cutoff = timezone.now() - timedelta(days=settings.TTS_AUDIT_RETENTION_DAYS)
    deleted, _ = AuditEvent.objects.filter(created_at__lt=cutoff).delete()
    return deleted


def removed_from(user) -> Organization | None:
    """The organization that last removed `user` (the audit log says so), for the page they land on."""
    event = (
        AuditEvent.objects.filter(action="member.removed", target=f"member:{user.email}")
        .select_related("organization")
        .order_by("-id")
        .first()
    )
    return event.organization if event is not None else None


@receiver(user_logged_in)
def _signed_in(sender, request, user, **kwargs) -> None:
    ip = request.META.get("REMOTE_ADDR") if request is not None else None
    for membership in Membership.objects.filter(user=user).select_related("organization"):
        record(membership.organization, "signin.succeeded", user, ip=ip)


@receiver(user_login_failed)
def _sign_in_failed(sender, credentials, request=None, **kwargs) -> None:
    """Recorded in the organizations of the account the e-mail names (none: nothing to record)."""
    name = str(credentials.get("username", ""))[:254]
    ip = request.META.get("REMOTE_ADDR") if request is not None else None
    for membership in Membership.objects.filter(user__username__iexact=name).select_related("organization"):
        record(membership.organization, "signin.failed", None, target=f"member:{name}", ip=ip)


@receiver(post_save, sender=LogEntry)
def _staff_acted(sender, instance: LogEntry, created: bool, **kwargs) -> None:
    """An action of staff in the admin console, in the audit log of the organization it touched
    (logged before a deletion, so the object is still there to say whose it is)."""
    if not created or instance.content_type is None:
        return
    model = instance.content_type.model_class()
    found = model._default_manager.filter(pk=instance.object_id).first() if model is not None else None
    org = found if isinstance(found, Organization) else getattr(found, "organization", None)
    if not isinstance(org, Organization):
        return
    verb = {ADDITION: "added", CHANGE: "changed", DELETION: "deleted"}.get(instance.action_flag, "changed")
    change = instance.get_change_message() or None
    record(
        org,
        f"staff.{verb}",
        instance.user,
        staff=True,
        target=f"{instance.content_type.model}:{instance.object_repr}"[:200],
        after={"change": change} if change else None,
    )
