"""Signing in through an organization's identity provider: the e-mail address names the
organization (its proven domain); the provider's sign-in and callback are allauth's OpenID Connect
views, with the id_token's signature always checked against the provider's published keys."""

from __future__ import annotations

import jwt
from allauth.socialaccount.adapter import get_adapter
from allauth.socialaccount.internal import jwtkit
from allauth.socialaccount.models import SocialApp
from allauth.socialaccount.providers.oauth2.client import OAuth2Error
from allauth.socialaccount.providers.oauth2.views import OAuth2CallbackView, OAuth2LoginView
from allauth.socialaccount.providers.openid_connect.views import OpenIDConnectOAuth2Adapter
from django import forms
from django.http import Http404
from django.shortcuts import render

from accounts.sso import connection_for_email

from ..throttles import throttled

ASYMMETRIC = frozenset({"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"})


class SignedTokenAdapter(OpenIDConnectOAuth2Adapter):
    """allauth may skip the id_token's signature when it fetched the token itself over TLS (as the
    specification allows); here the signature is checked always, with the provider's published key
    (its `kid`, or the only signing key when the token names none), an asymmetric algorithm, and the
    issuer, audience and expiry. The keys are fetched through the adapter's requests session
    (accounts.sso.ProviderSession: public addresses checked at connect time, no redirects)."""

    def _decode_id_token(self, app: SocialApp, id_token: str) -> dict:
        try:
            header = jwt.get_unverified_header(id_token)
            if header.get("alg") not in ASYMMETRIC:
                raise OAuth2Error(f"id_token algorithm {header.get('alg')!r} refused")
            with get_adapter().get_requests_session() as session:
                response = session.get(self.openid_config["jwks_uri"])
                response.raise_for_status()
                published = [k for k in response.json().get("keys", []) if k.get("use", "sig") == "sig"]
            if header.get("kid"):
                published = [k for k in published if k.get("kid") == header["kid"]]
            if len(published) != 1:
                raise OAuth2Error("No single published key signs this id_token")
            data = jwt.decode(
                id_token,
                key=jwt.PyJWK(published[0], algorithm=header["alg"]),
                algorithms=[header["alg"]],
                issuer=self.openid_config["issuer"],
                audience=app.client_id,
                options={"require": ["iss", "aud", "exp", "sub"]},
            )
        except (jwt.PyJWTError, ValueError, KeyError) as exc:
            raise OAuth2Error("Invalid id_token") from exc
        jwtkit.verify_jti(data)
        return data


def provider_login(request, provider_id: str):
    """Always a sign-in: never `process=connect` (tying a provider identity to the signed-in account)."""
    if request.method == "POST":
        request.POST = request.POST.copy()
        request.POST["process"] = "login"
    else:
        request.GET = request.GET.copy()
        request.GET["process"] = "login"
    try:
        return OAuth2LoginView.adapter_view(SignedTokenAdapter(request, provider_id))(request)
    except SocialApp.DoesNotExist:
        raise Http404("No single sign-on connection by that name.") from None


def provider_callback(request, provider_id: str):
    try:
        return OAuth2CallbackView.adapter_view(SignedTokenAdapter(request, provider_id))(request)
    except SocialApp.DoesNotExist:
        raise Http404("No single sign-on connection by that name.") from None


class SsoForm(forms.Form):
    email = forms.EmailField(label="Work e-mail", widget=forms.EmailInput(attrs={"autocomplete": "username"}))


@throttled("sso", ("ip", "TTS_LOGIN_RATE"))
def sso_start(request):
    """The address's domain names the organization; a POST goes on to its provider."""
    form = SsoForm(request.POST or None, initial={"email": request.GET.get("email", "")})
    if request.method == "POST" and form.is_valid():
        connection = connection_for_email(form.cleaned_data["email"])
        if connection is not None:
            return provider_login(request, connection.provider_id)
        form.add_error("email", "No organization signs in with single sign-on at that address's domain.")
    return render(request, "registration/sso.html", {"form": form})


def sso_unfinished(request):
    """Where allauth would ask a newcomer to fill in a sign-up form: here the provider's claims must
    make the account by themselves, or it is refused."""
    message = "Your identity provider did not give a verified address of your organization's domain."
    return render(request, "registration/sso_refused.html", {"message": message}, status=403)
