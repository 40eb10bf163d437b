"""The team: members, invitations, removing a member."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts import actions
from accounts.models import Invitation, Membership

from ..access import member_required, page, require_admin
from ..forms import InviteForm
from ..throttles import by_user, throttled


@member_required
@throttled("invite", (by_user, "TTS_INVITE_RATE"))
def members(request):
    org = request.principal.organization
    form = InviteForm(request.POST or None)
    if request.method == "POST":
        require_admin(request, "invite people")
        if form.is_valid():
            _refuse_twice(form, org)
        if form.is_valid():
            invitation = actions.invite(
                org,
                form.cleaned_data["email"],
                form.cleaned_data["role"],
                invited_by=request.user,
                accept_url=lambda token: request.build_absolute_uri(
                    reverse("dashboard:accept-invitation", args=[token])
                ),
            )
            if settings.EMAIL_BACKEND in UNDELIVERED:  # say so rather than claim it was sent
                messages.info(
                    request,
                    f"Invitation created for {invitation.email}. This server does not send e-mail "
                    f"(EMAIL_BACKEND): send them the link yourself: {_accept_url(request, invitation)}",
                )
            else:
                messages.info(request, f"Invitation e-mailed to {invitation.email}.")
            return redirect("dashboard:members")
    team = Membership.objects.filter(organization=org).select_related("user").order_by("created_at")
    pending = [i for i in Invitation.objects.filter(organization=org, accepted_at__isnull=True) if i.is_open]
    for invitation in pending:
        invitation.url = _accept_url(request, invitation)
    return page(
        request, "members.html", "members", team=team, pending=pending, form=form, can_manage=request.principal.is_admin
    )


# E-mail backends that deliver nothing to the invitee (the default one prints to the console).
UNDELIVERED = (
    "django.core.mail.backends.console.EmailBackend",
    "django.core.mail.backends.filebased.EmailBackend",
    "django.core.mail.backends.locmem.EmailBackend",
    "django.core.mail.backends.dummy.EmailBackend",
)


def _accept_url(request, invitation: Invitation) -> str:
    return request.build_absolute_uri(reverse("dashboard:accept-invitation", args=[invitation.token]))


def _refuse_twice(form: InviteForm, org) -> None:
    """One open invitation per address, and none for a member already."""
    email = form.cleaned_data["email"].lower()
    if Membership.objects.filter(organization=org, user__username__iexact=email).exists():
        form.add_error("email", f"{email} is a member already.")
    elif any(i.is_open for i in Invitation.objects.filter(organization=org, email=email, accepted_at__isnull=True)):
        form.add_error("email", f"{email} is invited already: copy the link below, or withdraw it and invite again.")


@require_POST
@member_required
def revoke_invitation(request, invitation_id: int):
    try:
        revoked = actions.revoke_invitation(request.membership, invitation_id)
    except actions.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from exc
    except Invitation.DoesNotExist:
        raise Http404 from None
    messages.info(request, f"The invitation to {revoked.email} was withdrawn.")
    return redirect("dashboard:members")


@require_POST
@member_required
def remove_member(request, membership_id: int):
    try:
        removed = actions.remove_member(request.membership, membership_id)
    except actions.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from exc
    except Membership.DoesNotExist:
        raise Http404 from None
    if removed is None:
        messages.info(request, "The last owner cannot be removed.")
    else:
        messages.info(request, f"{removed.user.email} no longer belongs to {removed.organization.name}.")
    return redirect("dashboard:members")
