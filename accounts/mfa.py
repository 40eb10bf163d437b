"""Second factors (django-allauth's MFA: TOTP, WebAuthn/passkeys, recovery codes): an organization
may require one of its members; adding and removing one is in the audit log of each of the
member's organizations, and so is a failed second-factor check. The sign-in's second step knows
which factors the person has, so that it offers those and no other. Every sign-in (the password
form, sign-up, an accepted invitation) is listed on the person's sessions page."""

from __future__ import annotations

from functools import cached_property

from allauth.mfa.base.forms import AuthenticateForm
from allauth.mfa.models import Authenticator
from allauth.mfa.signals import authentication_failed, authenticator_added, authenticator_removed
from allauth.mfa.utils import is_mfa_enabled
from allauth.usersessions.models import UserSession
from django.contrib.auth.signals import user_logged_in
from django.dispatch import receiver

from . import audit
from .models import Membership, Organization
from .sso import SESSION_SSO_ORGS

FACTORS = [Authenticator.Type.TOTP, Authenticator.Type.WEBAUTHN]  # recovery codes back these up


def second_factor_missing(membership: Membership, session) -> bool:
    """The organization requires a second factor and this member has none. A session that came
    through the organization's own identity provider is the provider's to check."""
    if not membership.organization.require_mfa:
        return False
    if membership.organization_id in session.get(SESSION_SSO_ORGS, []):
        return False
    return not is_mfa_enabled(membership.user, types=FACTORS)


class SecondFactorForm(AuthenticateForm):
    """allauth's code form at sign-in (MFA_FORMS), with the kinds of factor the user has."""

    @cached_property
    def factor_types(self) -> set[str]:
        return set(Authenticator.objects.filter(user=self.user).values_list("type", flat=True))


def set_require_mfa(org: Organization, required: bool, by) -> None:
    before, org.require_mfa = org.require_mfa, required
    org.save(update_fields=["require_mfa"])
    audit.record_changes(org, "settings.require_mfa", {"require_mfa": before}, {"require_mfa": required}, by)


def _each_org(user, action: str, request, by, target: str) -> None:
    """`action` in the audit log of each of `user`'s organizations."""
    ip = request.META.get("REMOTE_ADDR") if request is not None else None
    for membership in Membership.objects.filter(user=user).select_related("organization"):
        audit.record(membership.organization, action, by, target=target, ip=ip)


@receiver(authenticator_added)
def _added(sender, request, user, authenticator, **kwargs) -> None:
    _each_org(user, "mfa.added", request, user, f"mfa:{authenticator.type}")


@receiver(authenticator_removed)
def _removed(sender, request, user, authenticator, **kwargs) -> None:
    _each_org(user, "mfa.removed", request, user, f"mfa:{authenticator.type}")


@receiver(authentication_failed)
def _failed(sender, request, user, **kwargs) -> None:
    _each_org(user, "signin.failed", request, None, f"mfa:{user.email}")


@receiver(user_logged_in)
def _listed(sender, request, user, **kwargs) -> None:
    """allauth lists only the sessions its own flow signed in; the dashboard's sign-up and
    invitations sign in with Django's `login`. (A request without an address is a test's.)"""
    if request is not None and request.META.get("REMOTE_ADDR"):
        UserSession.objects.create_from_request(request)
