"""Getting in: sign-in and password reset (Django's views, throttled), sign-up, switching
organization, accepting an invitation."""

from __future__ import annotations

from allauth.account.internal.flows.login import perform_password_login
from allauth.account.models import Login
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm, PasswordResetForm
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from accounts import actions, audit
from accounts.models import Invitation, Membership
from billing.stripe_client import configured as stripe_configured

from ..access import SESSION_ORG, member_required
from ..forms import AcceptForm, OrganizationForm, SignupForm
from ..mail import delivers_nothing
from ..operator import contact_link
from ..throttles import posted, throttled

BACKEND = "accounts.backends.CaseInsensitiveEmailBackend"  # the one in settings.AUTHENTICATION_BACKENDS


class SignInForm(AuthenticationForm):
    error_messages = {
        **AuthenticationForm.error_messages,
        "invalid_login": "That e-mail address and password do not match an account (the address may be in any case).",
    }

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The account's name is its e-mail address: a phone's keyboard with "@" (autocomplete stays
        # "username": what password managers save the sign-in under).
        field = self.fields["username"]
        field.widget = forms.EmailInput(attrs=field.widget.attrs)


class SignInView(auth_views.LoginView):
    """Django's sign-in form; a checked password goes on through allauth's login flow, which asks
    for a second factor when the user has one (and records how the session was signed in, for
    the re-authentication asked before second factors change)."""

    authentication_form = SignInForm

    def form_valid(self, form):
        user = form.get_user()
        login = Login(user=user, redirect_url=self.get_success_url(), email_verification="none")
        return perform_password_login(self.request, {"email": user.email}, login)


sign_in = throttled("login", ("ip", "TTS_LOGIN_RATE"), (posted("username"), "TTS_LOGIN_ACCOUNT_RATE"))(
    SignInView.as_view()
)


class ResetForm(PasswordResetForm):
    email = forms.EmailField(label="E-mail", max_length=254, widget=forms.EmailInput(attrs={"autocomplete": "email"}))


def _mail_context() -> dict:
    """What the reset pages say where this server sends no e-mail: whom to ask instead, as the
    operator published it (not the first superuser's address: these pages are for anyone)."""
    contact = settings.TTS_OPERATOR_CONTACT
    return {"delivers_mail": not delivers_nothing(), "contact": contact_link(contact), "contact_text": contact}


class PasswordResetView(auth_views.PasswordResetView):
    """The reset mail's link is to the host the request came to, and it is signed with the product's
    name (not the sites framework's placeholder site, nor a host and port). Where the server sends
    no e-mail, the page says so before anyone waits for one, and whom to ask."""

    form_class = ResetForm

    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), **_mail_context()}

    def form_valid(self, form):
        self.extra_email_context = {"site_name": settings.TTS_PRODUCT_NAME, "domain": self.request.get_host()}
        return super().form_valid(form)


class PasswordResetDoneView(auth_views.PasswordResetDoneView):
    def get_context_data(self, **kwargs):
        return {**super().get_context_data(**kwargs), **_mail_context()}


password_reset_done = PasswordResetDoneView.as_view()
password_reset = throttled("reset", ("ip", "TTS_PASSWORD_RESET_RATE"), (posted("email"), "TTS_PASSWORD_RESET_RATE"))(
    PasswordResetView.as_view()
)


@throttled("signup", ("ip", "TTS_SIGNUP_RATE"))
def signup(request):
    """A new user and organization (on the default plan), with the user as its owner; a signed-in
    user (one removed from their organization, or one starting another) names the organization only."""
    if request.user.is_authenticated:
        return new_organization(request)
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user, org = actions.sign_up(
            form.cleaned_data["email"], form.cleaned_data["password"], form.cleaned_data["organization"]
        )
        login(request, user, backend=BACKEND)
        request.session[SESSION_ORG] = org.pk
        return redirect("dashboard:overview")
    return render(request, "dashboard/signup.html", {"form": form, "plans_sold": stripe_configured()})


def new_organization(request):
    form = OrganizationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        org = actions.create_organization(form.cleaned_data["organization"], owner=request.user)
        request.session[SESSION_ORG] = org.pk
        messages.info(request, f"{org.name} is made, with you as its owner.")
        return redirect("dashboard:overview")
    memberships = Membership.objects.filter(user=request.user).select_related("organization")
    removed_from = None if memberships else audit.removed_from(request.user)
    context = {"form": form, "memberships": memberships, "removed_from": removed_from}
    return render(request, "dashboard/new_organization.html", context)


@require_POST
@member_required(gated=False)  # a member held at one organization's gate can still go to another
def switch(request):
    try:
        chosen = int(request.POST.get("organization", 0))
    except ValueError:
        raise Http404 from None
    if not any(m.organization_id == chosen for m in request.memberships):
        raise Http404
    request.session[SESSION_ORG] = chosen
    then = request.POST.get("next", "")  # a page of the dashboard in the organization chosen
    if then.startswith("/dashboard/") and url_has_allowed_host_and_scheme(then, allowed_hosts=None):
        return redirect(then)
    return redirect("dashboard:overview")


@throttled("accept", ("ip", "TTS_LOGIN_RATE"))
def accept_invitation(request, token: str):
    """The invitation link: join as the invited address (creating the account if it has none)."""
    invitation = Invitation.objects.select_related("organization").filter(token=token).first()
    if invitation is None or not invitation.is_open:
        return invitation_gone(request, invitation)
    org = invitation.organization
    if request.user.is_authenticated:
        if actions.address_of(request.user) != invitation.email.lower():  # in any case: an operator may have typed it
            raise PermissionDenied(f"This invitation is for {invitation.email}.")
        if request.method != "POST":  # joining changes the account: a confirmed POST, never a link
            member = Membership.objects.filter(user=request.user, organization=org).first()
            context = {"invitation": invitation, "signed_in": True, "member": member}
            return render(request, "dashboard/accept.html", context)
        try:
            joined = actions.accept_invitation(invitation, request.user)
        except actions.InvitationUsed:
            return invitation_gone(request, invitation)
        request.session[SESSION_ORG] = invitation.organization_id
        messages.info(
            request, f"You are a member of {org.name}, as {joined.role}."
        )  # a member already keeps their role
        return redirect("dashboard:overview")
    existing = actions.has_account(invitation.email)
    form = AcceptForm(request.POST or None)
    if not existing and request.method == "POST" and form.is_valid():
        try:
            user = actions.accept_invitation_as_new_user(invitation, form.cleaned_data["password"])
        except actions.InvitationUsed:
            return invitation_gone(request, invitation)
        login(request, user, backend=BACKEND)
        request.session[SESSION_ORG] = invitation.organization_id
        messages.info(request, f"Welcome to {org.name}: you joined as {invitation.role}.")
        return redirect("dashboard:overview")
    return render(request, "dashboard/accept.html", {"invitation": invitation, "form": form, "existing": existing})


def invitation_gone(request, invitation: Invitation | None):
    """A link that was used or has expired says so (410), with the ways on; an unknown one: 404."""
    status = 404 if invitation is None else 410
    return render(request, "dashboard/invitation_gone.html", {"invitation": invitation}, status=status)
