"""A person's own account: deleting it, which leaves every organization they belong to (their own
API keys revoked, as when an owner removes them), unless they are the last owner of one."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count, Q

from . import audit
from .actions import LastOwner, lock_owners_and
from .keys import hand_over_keys
from .models import Membership, Organization


def last_owner_of(user) -> list[Organization]:
    """The organizations of which `user` is the only owner (deleting the account would orphan them)."""
    owned = Membership.objects.filter(user=user, role=Membership.Role.OWNER).values("organization")
    return list(
        Organization.objects.filter(pk__in=owned)
        .annotate(owners=Count("memberships", filter=Q(memberships__role=Membership.Role.OWNER)))
        .filter(owners=1)
        .order_by("name")
    )


def delete_account(user) -> None:
    with transaction.atomic():
        # The owners of the user's organizations locked first: two owners deleting their accounts at
        # once cannot both pass the check and leave an organization with none.
        owned = Membership.objects.filter(user=user, role=Membership.Role.OWNER).values("organization")
        list(Membership.objects.select_for_update().filter(organization__in=owned, role=Membership.Role.OWNER))
        if orphaned := last_owner_of(user):
            raise LastOwner(f"You are the last owner of {', '.join(o.name for o in orphaned)}.")
        for membership in Membership.objects.select_related("organization").filter(user=user):
            hand_over_keys(membership.organization, user, "revoke", membership)
            audit.record(membership.organization, "account.deleted", user, target=f"member:{user.email}")
        user.delete()


def leave(membership: Membership) -> None:
    """A member leaves an organization (their own keys revoked); the last owner cannot."""
    org, user = membership.organization, membership.user
    with transaction.atomic():
        owners, _ = lock_owners_and(org, membership.pk)
        if owners == [membership.pk]:
            raise LastOwner(f"You are the last owner of {org.name}: make another member an owner first.")
        hand_over_keys(org, user, "revoke", membership)
        Membership.objects.filter(pk=membership.pk).delete()
        audit.record(org, "member.left", user, target=f"member:{user.email}", before={"role": membership.role})


def rename(org: Organization, name: str, by) -> None:
    before, org.name = org.name, name
    org.save(update_fields=["name"])
    audit.record_changes(org, "organization.renamed", {"name": before}, {"name": name}, by)
