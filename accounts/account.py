"""A person's own account: deleting it, which leaves every organization they belong to (their own
API keys revoked, as when an owner removes them), unless they are the last owner of one."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Count, Q

from . import audit
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


class LastOwner(Exception):
    """The account is the last owner of an organization (named in the message)."""


def delete_account(user) -> None:
    with transaction.atomic():
        if orphaned := last_owner_of(user):
            raise LastOwner(f"You are the last owner of {', '.join(o.name for o in orphaned)}.")
        for membership in Membership.objects.select_related("organization").filter(user=user):
            hand_over_keys(membership.organization, user, "revoke", membership)
            audit.record(membership.organization, "account.deleted", user, target=f"member:{user.email}")
        user.delete()
