"""The team: members and their roles, invitations (invite, copy the link, resend or renew,
withdraw), removing a member. Who may do what is accounts.actions' rule; these views parse, call
and say what happened, and where this server sends no e-mail they say so and give the link."""

from __future__ import annotations

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import Http404
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts import actions
from accounts.models import ApiKey, Invitation, Membership

from ..access import member_required, page, require_active, require_admin
from ..forms import InviteForm
from ..mail import delivers_nothing
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
            try:
                invitation = actions.invite(
                    org,
                    form.cleaned_data["email"],
                    form.cleaned_data["role"],
                    invited_by=request.user,
                    accept_url=lambda token: _accept_url(request, token),
                )
            except actions.MailNotSent:  # nothing was made: the form comes back, filled in
                form.add_error(
                    "email",
                    f"The invitation e-mail to {form.cleaned_data['email'].lower()} could not be sent (the mail "
                    "server did not take it), so no invitation was made. Try again later.",
                )
            else:
                if delivers_nothing():  # say so rather than claim it was sent
                    messages.info(
                        request,
                        f"Invitation created for {invitation.email}. This server does not send e-mail (its "
                        "operator has not set up a mail server): send them the link yourself: "
                        f"{_accept_url(request, invitation.token)}",
                    )
                else:
                    messages.info(request, f"Invitation e-mailed to {invitation.email}.")
                return redirect("dashboard:members")
    team = list(Membership.objects.filter(organization=org).select_related("user").order_by("created_at"))
    owners = sum(m.role == Membership.Role.OWNER for m in team)
    for m in team:
        m.sole_owner = m.role == Membership.Role.OWNER and owners == 1
        # The last owner's role is not offered for change: it would only be refused.
        m.roles = [] if m.sole_owner else actions.assignable_roles(request.membership, m)
        m.own_keys = ApiKey.objects.filter(organization=org, owner=m.user_id, revoked_at__isnull=True).count()
    # An invitation to someone who is a member already (made by an operator, or before the rule
    # that acceptance closes them all) is not "invited": it is not shown.
    addresses = {a.lower() for m in team for a in (m.user.email, m.user.get_username()) if a}
    pending = [
        i
        for i in Invitation.objects.filter(organization=org, accepted_at__isnull=True).order_by("created_at")
        if i.email.lower() not in addresses
    ]
    for invitation in pending:
        invitation.url = _accept_url(request, invitation.token)
    response = page(
        request,
        "members.html",
        "members",
        team=team,
        pending=pending,
        form=form,
        can_manage=request.principal.is_admin,
        # The Actions column only when the viewer has some in it: an owner removes others, admins
        # act on invitations.
        actions_column=request.principal.is_admin
        and bool(pending or (request.membership.role == Membership.Role.OWNER and len(team) > 1)),
        delivers_mail=not delivers_nothing(),
    )
    response["Cache-Control"] = "no-store"  # invitation links: whoever holds one may join
    return response


# E-mail backends that deliver nothing to the invitee (the default one prints to the console).
def _accept_url(request, token: str) -> str:
    return request.build_absolute_uri(reverse("dashboard:accept-invitation", args=[token]))


def _refuse_twice(form: InviteForm, org) -> None:
    """One open invitation per address, and none for a member already (addresses in any case:
    operators' invitations and older accounts may hold another). An expired invitation does not
    count: inviting anew replaces it."""
    email = form.cleaned_data["email"].lower()
    member = Q(user__username__iexact=email) | Q(user__email__iexact=email)
    if Membership.objects.filter(member, organization=org).exists():
        form.add_error("email", f"{email} is a member already.")
    elif any(
        i.is_open for i in Invitation.objects.filter(organization=org, email__iexact=email, accepted_at__isnull=True)
    ):
        form.add_error("email", f"{email} is invited already: copy the link below, resend it, or withdraw it.")


@require_POST
@member_required
@throttled("invite", (by_user, "TTS_INVITE_RATE"))  # the same counter as inviting: e-mails per user
def resend_invitation(request, invitation_id: int):
    """A new link, valid for a week, e-mailed (or offered) again; the earlier link stops working.
    An expired invitation is renewed the same way."""
    require_active(request)
    try:
        invitation = actions.resend_invitation(
            request.membership, invitation_id, accept_url=lambda token: _accept_url(request, token)
        )
    except actions.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from exc
    except Invitation.DoesNotExist:
        raise Http404 from None
    except actions.MailNotSent:  # rolled back: the invitation and its link are as they were
        still = Invitation.objects.filter(pk=invitation_id, organization=request.membership.organization).first()
        link = "the earlier link still works" if still is not None and still.is_open else "its link stays expired"
        messages.error(
            request,
            f"The invitation could not be e-mailed again (the mail server did not take it): nothing changed, "
            f"{link}. Try again later.",
        )
        return redirect("dashboard:members")
    until = f"{invitation.expires_at:%Y-%m-%d %H:%M} UTC"
    if delivers_nothing():
        messages.info(
            request,
            f"New link for {invitation.email}, valid until {until}; the earlier link no longer works. This server "
            f"does not send e-mail (its operator has not set up a mail server): send them the link yourself: "
            f"{_accept_url(request, invitation.token)}",
        )
    else:
        messages.info(
            request,
            f"Invitation e-mailed again to {invitation.email} with a new link, valid until {until}; "
            "the earlier link no longer works.",
        )
    return redirect("dashboard:members")


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
def change_role(request, membership_id: int):
    """The role select of a member's row."""
    require_active(request)
    try:
        changed, done = actions.change_role(request.membership, membership_id, request.POST.get("role", ""))
    except actions.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from exc
    except Membership.DoesNotExist:
        raise Http404 from None
    except actions.LastOwner as exc:
        messages.info(request, f"Not changed: {exc}")
    except ValueError:
        messages.info(request, "Not changed: choose owner, admin or member.")
    else:
        who = "You are" if changed.pk == request.membership.pk else f"{changed.user.email} is"
        messages.info(request, f"{who} {'now' if done else 'already'} {changed.role}.")
    return redirect("dashboard:members")


@require_POST
@member_required
def remove_member(request, membership_id: int):
    try:
        removed = actions.remove_member(request.membership, membership_id, request.POST.get("keys", "revoke"))
    except actions.NotAllowed as exc:
        raise PermissionDenied(str(exc)) from exc
    except Membership.DoesNotExist:
        raise Http404 from None
    if removed is None:
        messages.info(request, "The last owner cannot be removed.")
    else:
        messages.info(request, f"{removed.user.email} no longer belongs to {removed.organization.name}.")
    return redirect("dashboard:members")
