"""Account operations as plain functions: each is one transaction, called alike by the dashboard,
management commands and tests (views only parse and call them)."""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.text import slugify

from . import audit
from .keys import (
    NotAllowed,
    create_key,
    hand_over_keys,
    revoke_key,
    rotate_key,
    set_data_retention,
    set_ip_allowlist,
    update_key,
)
from .models import Invitation, Membership, Organization, _invitation_token, _new_webhook_secret

# The key actions live in keys.py; callers reach every action here.
__all__ = [
    "NotAllowed",
    "create_key",
    "revoke_key",
    "rotate_key",
    "set_data_retention",
    "set_ip_allowlist",
    "update_key",
]

logger = logging.getLogger(__name__)


def unique_slug(name: str) -> str:
    base = slugify(name)[:90] or "org"
    slug, n = base, 1
    while Organization.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def create_organization(name: str, owner: User | None = None) -> Organization:
    """A new organization (its plan is the default one until an operator or billing changes it),
    with `owner`, when given, as its owner."""
    with transaction.atomic():
        org = Organization.objects.create(name=name, slug=unique_slug(name))
        if owner is not None:
            Membership.objects.create(user=owner, organization=org, role=Membership.Role.OWNER)
    return org


def has_account(email: str) -> bool:
    return get_user_model().objects.filter(username__iexact=email.strip()).exists()


def create_user(email: str, password: str) -> User:
    """A dashboard account; the e-mail address, lower-cased, is its user name."""
    email = email.lower()
    return get_user_model().objects.create_user(username=email, email=email, password=password)


def sign_up(email: str, password: str, organization_name: str) -> tuple[User, Organization]:
    """A new user with a new organization of which they are the owner."""
    with transaction.atomic():
        user = create_user(email, password)
        return user, create_organization(organization_name, owner=user)


class MailNotSent(Exception):
    """The mail server did not take the invitation e-mail; nothing was changed (see invite)."""


def invite(organization: Organization, email: str, role: str, invited_by, accept_url) -> Invitation:
    """Invite `email` to join with `role` and e-mail them the link (`accept_url(token)`). An
    expired invitation to the same address is replaced (its link was dead already).

    The e-mail is sent inside the transaction, as resend_invitation's is: if the mail server fails
    (MailNotSent), no invitation is made and nothing is replaced, so the page never shows an
    "invited" row whose e-mail never left; the inviter is told and tries again."""
    email = email.lower()
    with transaction.atomic():
        Invitation.objects.filter(
            organization=organization,
            email__iexact=email,
            accepted_at__isnull=True,
            created_at__lte=timezone.now() - Invitation.VALID_FOR,
        ).delete()
        invitation = Invitation.objects.create(organization=organization, email=email, role=role, invited_by=invited_by)
        _send_invitation(invitation, invited_by, accept_url)
        audit.record(organization, "member.invited", invited_by, target=f"member:{email}", after={"role": role})
    return invitation


def resend_invitation(acting: Membership, invitation_id: int, accept_url) -> Invitation:
    """An owner or admin sends a pending invitation of their organization again, open or expired:
    with a new link, valid for a week from now. The earlier link stops working, so that exactly one
    link (the newest, the one the page offers to copy) lets the invitee in, and an old e-mail,
    perhaps forwarded, never comes back to life. Raises Invitation.DoesNotExist for another
    organization's or an accepted one.

    The new link is e-mailed inside the transaction: if the mail server fails (MailNotSent), the
    new token is rolled back and the earlier link keeps working, rather than the invitee holding
    a dead link and no new one. (The row stays locked while the mail server answers, at most
    EMAIL_TIMEOUT: an acceptance of the same invitation waits that long.)"""
    if not acting.is_admin:
        raise NotAllowed("Only owners and admins resend invitations.")
    with transaction.atomic():
        invitation = Invitation.objects.select_for_update().get(
            organization=acting.organization, pk=invitation_id, accepted_at__isnull=True
        )
        invitation.token = _invitation_token()
        invitation.created_at = timezone.now()  # the week runs from the newest link
        invitation.save(update_fields=["token", "created_at"])
        _send_invitation(invitation, acting.user, accept_url)
    return invitation


def _send_invitation(invitation: Invitation, sender, accept_url) -> None:
    """E-mail the link; a mail server's failure (SMTP errors and socket errors are OSErrors) is
    raised as MailNotSent, inside the caller's transaction, which it rolls back."""
    organization = invitation.organization
    try:
        send_mail(
            f"Join {organization.name} on {settings.TTS_PRODUCT_NAME}",
            f"{sender.email} invites you to {organization.name} as {invitation.role}.\n\n"
            f"Accept within 7 days: {accept_url(invitation.token)}\n",
            None,
            [invitation.email],
        )
    except OSError as exc:
        logger.warning("invitation e-mail to %s not sent: %r", invitation.email, exc)
        raise MailNotSent(f"The e-mail to {invitation.email} could not be sent.") from exc


class InvitationUsed(Exception):
    """The invitation is no longer open by the link it was found by: accepted meanwhile (it works
    once), resent (a new link), withdrawn, or expired."""


def _claim(invitation: Invitation) -> Invitation:
    """Lock the invitation for this transaction, by its pk and the token it was found by: the
    caller looked it up by its link outside this transaction, and a resend (a new token) or a
    withdrawal may have committed since. Concurrent acceptances: one wins, once. Returns the row
    as locked."""
    locked = Invitation.objects.select_for_update().filter(pk=invitation.pk, token=invitation.token).first()
    if locked is None or not locked.is_open:
        raise InvitationUsed
    return locked


def address_of(user) -> str:
    """The user's e-mail address, lower case (accounts made by `createsuperuser` may hold another)."""
    return (user.email or user.get_username()).lower()


def _join(invitation: Invitation, user) -> Membership:
    """`user` joins; every other pending invitation of theirs to the same organization (open,
    expired, in any case) is done too, so that none stays on the team page as "invited"."""
    membership = invitation.accept(user)
    Invitation.objects.filter(
        organization=invitation.organization_id, email__iexact=address_of(user), accepted_at__isnull=True
    ).update(accepted_at=timezone.now())
    audit.record(membership.organization, "member.joined", user, after={"role": membership.role})
    return membership


def accept_invitation(invitation: Invitation, user) -> Membership:
    """`user` joins the invitation's organization (an existing member keeps their role)."""
    if address_of(user) != invitation.email.lower():
        raise NotAllowed(f"This invitation is for {invitation.email}.")
    with transaction.atomic():
        return _join(_claim(invitation), user)


def accept_invitation_as_new_user(invitation: Invitation, password: str) -> User:
    """The invited address has no account yet: make it, and join."""
    try:
        with transaction.atomic():
            locked = _claim(invitation)
            if has_account(locked.email):
                raise InvitationUsed
            user = create_user(locked.email, password)
            _join(locked, user)
    except IntegrityError:  # the same address signed up meanwhile (another invitation, or sign-up)
        raise InvitationUsed from None
    return user


def revoke_invitation(acting: Membership, invitation_id: int) -> Invitation:
    """An owner or admin withdraws a pending invitation of their organization (its link stops
    working); raises Invitation.DoesNotExist for another organization's or an accepted one."""
    if not acting.is_admin:
        raise NotAllowed("Only owners and admins revoke invitations.")
    with transaction.atomic():
        # Locked: an acceptance in progress finishes first, and then this finds it accepted.
        invitation = Invitation.objects.select_for_update().get(
            organization=acting.organization, pk=invitation_id, accepted_at__isnull=True
        )
        invitation.delete()
    return invitation


def remove_member(acting: Membership, membership_id: int, keys_to: str = "revoke") -> Membership | None:
    """An owner removes a member of their organization; the last owner stays. The member's own API
    keys are revoked, or handed over (`keys_to`: "service" makes them service keys, "member:<id>"
    another member's). Returns the removed membership, None if it was the last owner; raises
    NotAllowed (the acting member is not an owner, as their role is now, not as `acting` says; a
    member to hand keys to who is not one), Membership.DoesNotExist for another organization's id."""
    if acting.role != Membership.Role.OWNER:
        raise NotAllowed("Only owners remove members.")
    org = acting.organization
    with transaction.atomic():
        # The acting role and the target's are read under the locks: an owner demoted meanwhile
        # removes nobody, and two owners removing each other at once cannot both succeed.
        owners, target = lock_owners_and(org, membership_id)
        if acting.pk not in owners:  # demoted or removed since `acting` was read
            raise NotAllowed("Only owners remove members.")
        if target.role == Membership.Role.OWNER and owners == [target.pk]:
            return None
        target.delete()
        audit.record(org, "member.removed", acting, target=f"member:{target.user.email}", before={"role": target.role})
        hand_over_keys(org, target.user, keys_to, acting)
    return target


def lock_owners_and(org: Organization, membership_id: int) -> tuple[list[int], Membership]:
    """Inside a transaction: the organization's owners' rows locked (in pk order, so that two
    callers cannot deadlock), then the target membership's; the owners' pks and the target.
    Membership.DoesNotExist for another organization's id."""
    owners = list(
        Membership.objects.select_for_update()
        .filter(organization=org, role=Membership.Role.OWNER)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    target = (
        Membership.objects.select_related("user")
        .select_for_update(of=("self",))
        .get(organization=org, pk=membership_id)
    )
    return owners, target


class LastOwner(Exception):
    """The change would leave the organization without an owner."""


def assignable_roles(acting: Membership, target: Membership) -> list[str]:
    """The roles `acting` may give `target` (its current one included when it may change it at
    all; empty when it may not). Owners give any role to anyone; an admin may make a member an
    admin, as they may invite one, but demoting someone, like removing them, is for owners, and an
    owner's role is only for owners to touch. Whether the last owner may be demoted is
    change_role's question, asked under a lock."""
    if acting.role == Membership.Role.OWNER:
        return list(Membership.Role.values)
    if acting.role == Membership.Role.ADMIN and target.role == Membership.Role.MEMBER:
        return [Membership.Role.MEMBER, Membership.Role.ADMIN]
    return []


def change_role(acting: Membership, membership_id: int, role: str) -> tuple[Membership, bool]:
    """Give a member of the acting member's organization another role (see assignable_roles).
    Returns the membership and whether its role changed; raises NotAllowed, LastOwner (an
    organization always keeps an owner), Membership.DoesNotExist for another organization's id,
    ValueError for a role that is none."""
    if not acting.is_admin:
        raise NotAllowed("Only owners and admins change roles.")
    if role not in Membership.Role.values:
        raise ValueError(f"{role!r} is not a role.")
    org = acting.organization
    with transaction.atomic():
        # Two owners demoting each other at once cannot both succeed.
        owners, target = lock_owners_and(org, membership_id)
        current = Membership.objects.filter(pk=acting.pk).first()  # the acting role as it is now
        if current is None or role not in assignable_roles(current, target):
            raise NotAllowed(
                "Only owners change this role: admins may make a member an admin, nothing more."
                if acting.role == Membership.Role.ADMIN
                else "Only owners and admins change roles."
            )
        if role == target.role:
            return target, False
        if target.role == Membership.Role.OWNER and owners == [target.pk]:
            raise LastOwner(f"{target.user.email} is the only owner: make someone else owner first.")
        before, target.role = target.role, role
        target.save(update_fields=["role"])
        audit.record(
            org,
            "member.role_changed",
            acting,
            target=f"member:{target.user.email}",
            before={"role": before},
            after={"role": role},
        )
    return target, True


def rotate_webhook_secret(org: Organization, by=None, *, staff: bool = False) -> str:
    """A new webhook secret for `org`, returned (and set on `org`). The one it replaces keeps
    signing callbacks alongside for WEBHOOK_SECRET_GRACE, so receivers switch without losing a
    delivery. The row is locked, so of two concurrent rotations the second keeps the first's new
    secret as its previous one."""
    with transaction.atomic():
        locked = Organization.objects.select_for_update().get(pk=org.pk)
        locked.previous_webhook_secret = locked.webhook_secret
        locked.webhook_secret = _new_webhook_secret()
        locked.webhook_secret_rotated_at = timezone.now()
        locked.save(update_fields=["webhook_secret", "previous_webhook_secret", "webhook_secret_rotated_at"])
        audit.record(org, "webhook_secret.rotated", by, staff=staff)
    for field in ("webhook_secret", "previous_webhook_secret", "webhook_secret_rotated_at"):
        setattr(org, field, getattr(locked, field))
    return locked.webhook_secret
