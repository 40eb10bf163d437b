"""Who may see a page: a signed-in member of the current organization (the session's choice, else
their first), with the principal accounts.auth makes for a member; and how pages are rendered."""

from __future__ import annotations

import functools

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from accounts.auth import check_active, principal_for_member
from accounts.mfa import second_factor_missing
from accounts.models import Membership
from accounts.sso import sso_required_for
from billing.limits import subscription_for
from billing.models import BillingStatus
from billing.stripe_events import grace_ends
from tts_saas.errors import ApiError
from tts_saas.request_id import actor_var

from .operator import contact_link, operator_contact

SESSION_ORG = "organization_id"


def current_membership(request) -> tuple[Membership | None, list[Membership]]:
    """The signed-in user's membership in the organization the session chose (else their first),
    and all their memberships."""
    memberships = list(Membership.objects.filter(user=request.user).select_related("organization", "organization__sso"))
    chosen = request.session.get(SESSION_ORG)
    current = next((m for m in memberships if m.organization_id == chosen), memberships[0] if memberships else None)
    return current, memberships


def member_required(view=None, *, gated: bool = True):
    """Sets `request.membership`, `request.memberships` and `request.principal`. Gated (all pages
    but switching organization): a member whose organization requires single sign-on is sent to
    its provider, and one whose organization requires a second factor to add one."""
    if view is None:
        return functools.partial(member_required, gated=gated)

    @login_required
    @functools.wraps(view)
    def wrapped(request, *args, **kwargs):
        membership, memberships = current_membership(request)
        if membership is None:  # staff of no organization: their own page, with the console's links
            return redirect("dashboard:staff" if request.user.is_staff else "dashboard:signup")
        org = membership.organization
        if gated and sso_required_for(membership, request.session):
            messages.info(request, f"{org.name} requires single sign-on: continue with its identity provider.")
            return redirect(f"{reverse('sso-start')}?{urlencode({'email': request.user.email})}")
        if gated and second_factor_missing(membership, request.session):
            messages.info(request, f"{org.name} requires a second factor: add an authenticator app or a passkey.")
            return redirect("mfa_index")
        request.membership, request.memberships = membership, memberships
        request.principal = principal_for_member(membership, active=False)  # a suspended org still reads
        actor_var.set(request.user)  # for the audit log
        return view(request, *args, **kwargs)

    return wrapped


def require_admin(request, what: str) -> None:
    require_active(request)
    if not request.principal.is_admin:
        raise PermissionDenied(f"Only owners and admins {what}.")


def require_active(request) -> None:
    """A suspended organization's pages can be read; nothing in it can be changed or used."""
    try:
        check_active(request.principal.organization)
    except ApiError as exc:
        raise PermissionDenied(exc.message) from exc


def billing_notice(sub) -> str:
    """A banner for every page while a payment is overdue or the organization is suspended for it."""
    if sub.billing_status == BillingStatus.PAST_DUE and sub.past_due_since is not None:
        ends = grace_ends(sub)
        return f"A payment failed. Service continues until {ends:%Y-%m-%d %H:%M} UTC; pay the open invoice to keep it."
    if sub.billing_status == BillingStatus.SUSPENDED:
        return "This organization is suspended for non-payment: pay the open invoice to resume service."
    return ""


def suspension(org, sub) -> dict | None:
    """A banner for every page while an operator has suspended the organization (a suspension for
    non-payment has the billing banner): the reason, and whom to ask."""
    if not org.is_suspended or sub.billing_status == BillingStatus.SUSPENDED:
        return None
    contact = operator_contact()
    return {"reason": org.suspension_reason, "contact": contact_link(contact), "contact_text": contact}


def page(request, template: str, nav: str, **context):
    org = request.membership.organization
    sub = subscription_for(org)  # read once for both banners
    context.update(
        billing_notice=billing_notice(sub),
        suspension=suspension(org, sub),
        nav=nav,
        current_org=org,
        memberships=request.memberships,
        membership=request.membership,
        now=timezone.now(),
    )
    return render(request, f"dashboard/{template}", context)
