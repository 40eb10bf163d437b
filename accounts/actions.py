"""Account operations as plain functions: each is one transaction, called alike by the dashboard,
management commands and tests (views only parse and call them)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone
from django.utils.text import slugify

from .models import Invitation, Membership, Organization, _invitation_token, _new_webhook_secret


class NotAllowed(Exception):
    """The acting member's role does not allow the operation."""


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


def invite(organization: Organization, email: str, role: str, invited_by, accept_url) -> Invitation:
    """Invite `email` to join with `role` and e-mail them the link (`accept_url(token)`). An
    expired invitation to the same address is replaced (its link was dead already)."""
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
    return invitation


def resend_invitation(acting: Membership, invitation_id: int, accept_url) -> Invitation:
    """An owner or admin sends a pending invitation of their organization again, open or expired:
    with a new link, valid for a week from now. The earlier link stops working, so that exactly one
    link (the newest, the one the page offers to copy) lets the invitee in, and an old e-mail,
    perhaps forwarded, never comes back to life. Raises Invitation.DoesNotExist for another
    organization's or an accepted one."""
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
    organization = invitation.organization
    send_mail(
        f"Join {organization.name} on {settings.TTS_PRODUCT_NAME}",
        f"{sender.email} invites you to {organization.name} as {invitation.role}.\n\n"
        f"Accept within 7 days: {accept_url(invitation.token)}\n",
        None,
        [invitation.email],
    )


class InvitationUsed(Exception):
    """The invitation was accepted meanwhile (it works once)."""


def _claim(invitation: Invitation) -> None:
    """Lock the invitation for this transaction; concurrent acceptances: one wins, once."""
    locked = Invitation.objects.select_for_update().get(pk=invitation.pk)
    if not locked.is_open:
        raise InvitationUsed


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
    return membership


def accept_invitation(invitation: Invitation, user) -> Membership:
    """`user` joins the invitation's organization (an existing member keeps their role)."""
    if address_of(user) != invitation.email.lower():
        raise NotAllowed(f"This invitation is for {invitation.email}.")
    with transaction.atomic():
        _claim(invitation)
        return _join(invitation, user)


def accept_invitation_as_new_user(invitation: Invitation, password: str) -> User:
    """The invited address has no account yet: make it, and join."""
    with transaction.atomic():
        _claim(invitation)
        if has_account(invitation.email):
            raise InvitationUsed
        user = create_user(invitation.email, password)
        _join(invitation, user)
    return user


def revoke_invitation(acting: Membership, invitation_id: int) -> Invitation:
    """An owner or admin withdraws a pending invitation of their organization (its link stops
    working); raises Invitation.DoesNotExist for another organization's or an accepted one."""
    if not acting.is_admin:
        raise NotAllowed("Only owners and admins revoke invitations.")
    invitation = Invitation.objects.get(organization=acting.organization, pk=invitation_id, accepted_at__isnull=True)
    invitation.delete()
    return invitation


def remove_member(acting: Membership, membership_id: int) -> Membership | None:
    """An owner removes a member of their organization; the last owner stays. Returns the removed
    membership, None if it was the last owner; raises Membership.DoesNotExist for another
    organization's id."""
    if acting.role != Membership.Role.OWNER:
        raise NotAllowed("Only owners remove members.")
    org = acting.organization
    target = Membership.objects.select_related("user").get(organization=org, pk=membership_id)
    with transaction.atomic():
        owners = Membership.objects.select_for_update().filter(organization=org, role=Membership.Role.OWNER)
        if target.role == Membership.Role.OWNER and len(owners.values_list("pk", flat=True)) == 1:
            return None
        target.delete()
    return target


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
        # The owners' rows locked first (as remove_member does): two owners demoting each other
        # at once cannot both succeed.
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
        target.role = role
        target.save(update_fields=["role"])
    return target, True


def rotate_webhook_secret(org: Organization) -> str:
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
    for field in ("webhook_secret", "previous_webhook_secret", "webhook_secret_rotated_at"):
        setattr(org, field, getattr(locked, field))
    return locked.webhook_secret
