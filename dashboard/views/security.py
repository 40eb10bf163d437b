"""Security: every member's own second factors (allauth's pages), and for owners and admins the
organization's single sign-on (provider, domain proof, requiring it) and second-factor rule."""

from __future__ import annotations

from allauth.mfa.models import Authenticator
from django import forms
from django.contrib import messages
from django.shortcuts import redirect

from accounts import mfa, sso_connections
from accounts.identity_serializers import ROLES, checked_domain
from accounts.models import SsoConnection
from accounts.sso import redirect_uri

from ..access import member_required, page, require_admin

CONNECT = "sso"
VERIFY = "verify-domain"
DISCONNECT = "disconnect-sso"
REQUIRE_MFA = "require-mfa"
FACTOR_NAMES = {
    Authenticator.Type.TOTP: "an authenticator app",
    Authenticator.Type.WEBAUTHN: "a passkey or security key",
    Authenticator.Type.RECOVERY_CODES: "recovery codes",
}


class SsoForm(forms.Form):
    issuer = forms.URLField(max_length=500, help_text="Its discovery document is at /.well-known/openid-configuration.")
    client_id = forms.CharField(max_length=255, label="Client ID")
    client_secret = forms.CharField(
        max_length=500,
        required=False,
        widget=forms.PasswordInput(attrs={"autocomplete": "off"}, render_value=True),  # kept after a refused save
        help_text="Kept when left empty.",
    )
    domain = forms.CharField(max_length=253, label="E-mail domain", help_text="e.g. example.com")
    default_role = forms.ChoiceField(choices=ROLES, label="Role of a new member")
    group_roles = forms.CharField(
        required=False,
        label="Groups that make admins",
        help_text="Names in the provider's groups claim, separated by commas.",
    )
    enforced = forms.BooleanField(
        required=False, label="Require single sign-on of members (owners keep their password sign-in)"
    )

    def clean_domain(self):
        try:
            return checked_domain(self.cleaned_data["domain"])
        except ValueError as exc:
            raise forms.ValidationError(str(exc)) from None

    def settings(self) -> dict:
        data = dict(self.cleaned_data)
        admins = [g.strip() for g in data.pop("group_roles").split(",") if g.strip()]
        return {**data, "group_roles": dict.fromkeys(admins, "admin"), "group_claim": "groups"}


class RequireMfaForm(forms.Form):
    require_mfa = forms.BooleanField(required=False, label="Require a second factor of every member")


def _initial(connection: SsoConnection | None) -> dict | None:
    if connection is None:
        return None
    admins = ", ".join(g for g, role in connection.group_roles.items() if role == "admin")
    fields = ("issuer", "client_id", "domain", "default_role", "enforced")
    return {**{f: getattr(connection, f) for f in fields}, "group_roles": admins}


@member_required
def security(request):
    org = request.principal.organization
    connection = SsoConnection.objects.filter(organization=org).first()
    posted = request.POST.get("action") if request.method == "POST" else None
    sso_form = SsoForm(request.POST if posted == CONNECT else None, initial=_initial(connection))
    if connection is None:  # nothing kept yet: the first connection needs one
        sso_form.fields["client_secret"].required = True
        sso_form.fields["client_secret"].help_text = "Your provider gives it with the client ID."
    mfa_form = RequireMfaForm(initial={"require_mfa": org.require_mfa})
    if posted:
        require_admin(request, "change the organization's sign-in rules")
    try:
        if posted == CONNECT and sso_form.is_valid():
            sso_connections.save_connection(org, sso_form.settings(), request.user)
            messages.info(request, "Single sign-on saved.")
            return redirect("dashboard:security")
        if posted == VERIFY and connection is not None:
            sso_connections.verify_domain(connection)
            messages.info(request, f"{connection.domain} is proven: its people can sign in through your provider.")
            return redirect("dashboard:security")
    except sso_connections.SsoProblem as exc:
        if posted == CONNECT:
            sso_form.add_error(None, str(exc))
        else:
            messages.error(request, str(exc))
    if posted == DISCONNECT:
        sso_connections.delete_connection(org, request.user)
        messages.info(request, "Single sign-on removed: members sign in with their passwords.")
        return redirect("dashboard:security")
    if posted == REQUIRE_MFA:
        mfa.set_require_mfa(org, bool(request.POST.get("require_mfa")), request.user)
        messages.info(request, "Second-factor rule saved.")
        return redirect("dashboard:security")
    factors = Authenticator.objects.filter(user=request.user).values_list("type", flat=True)
    # What the provider and the DNS need before the first "Connect": the first connection's own.
    setup = connection or sso_connections.first_connection(org)
    response = page(
        request,
        "security.html",
        "security",
        connection=connection,
        setup=setup,
        typed_domain=sso_form["domain"].value() or "",
        callback=redirect_uri(setup, request),
        sso_form=sso_form,
        mfa_form=mfa_form,
        factors=[label for kind, label in FACTOR_NAMES.items() if kind in set(factors)],
    )
    response["Cache-Control"] = "no-store"  # a client secret typed into a refused save comes back in it
    return response
