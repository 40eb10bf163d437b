"""Single sign-on: each organization may connect its own OpenID Connect provider (issuer, client id,
secret), prove an e-mail domain with a DNS TXT record, and require it of its members.

django-allauth speaks the protocol (redirect, code exchange, id_token checks); this module tells it
which provider serves which organization (`SsoAdapter.list_apps`: one app per proven connection,
never from the database's own social apps), refuses people outside the proven domain, makes members
just in time with the role their groups map to, and records it all in the audit log. Owners keep
a password sign-in when SSO is required (the break-glass, audited), so a broken provider never locks
an organization out. What the server fetches from a provider goes through `ProviderSession`, over
the server's one outbound guard (tts_saas.outbound)."""

from __future__ import annotations

import requests
from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.signals import user_logged_in
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialApp
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.dispatch import receiver
from django.shortcuts import render
from django.urls import reverse

from tts_saas import outbound

from . import audit
from .models import Membership, Organization, SsoConnection
from .sso_connections import SsoProblem, check_public

PROVIDER = "openid_connect"
SESSION_SSO_ORGS = "sso_organizations"  # the organizations this session signed in to through their provider
JOINABLE_ROLES = (Membership.Role.ADMIN, Membership.Role.MEMBER)  # never owner: owners are made by owners
PROVIDER_TIMEOUT = 10  # seconds, for each connect and each read from a provider


def domain_of(email: str) -> str:
    return email.rpartition("@")[2].strip().lower()


def connection_for_email(email: str) -> SsoConnection | None:
    """The proven connection for the address's domain, if an organization has one."""
    domain = domain_of(email)
    if not domain:
        return None
    return (
        SsoConnection.objects.select_related("organization")
        .filter(domain=domain, domain_verified_at__isnull=False)
        .first()
    )


class ProviderSession(requests.Session):
    """What the server fetches from a provider (discovery, keys, token, userinfo): https URLs only
    (http too with TTS_SSO_ALLOW_PRIVATE), through the server's one guard (tts_saas.outbound): the
    host resolved when connecting, every address it answers checked, the connection made to the
    checked address (no second lookup to rebind). Redirects are not followed: a 3xx answer is a
    failure. No proxy from the environment (it would resolve the name itself)."""

    def __init__(self) -> None:
        super().__init__()
        self.trust_env = False
        guarded = outbound.GuardedAdapter(allow_private=settings.TTS_SSO_ALLOW_PRIVATE)
        self.mount("http://", guarded)
        self.mount("https://", guarded)

    def request(self, method, url, *args, **kwargs):
        try:
            check_public(url, "A provider URL", look_up=False)  # its addresses: when connecting
        except SsoProblem as exc:
            raise requests.exceptions.InvalidURL(str(exc)) from exc
        kwargs["allow_redirects"] = False
        kwargs.setdefault("timeout", PROVIDER_TIMEOUT)
        try:
            response = super().request(method, url, *args, **kwargs)
        except outbound.RefusedTarget as exc:
            message = "A provider URL's host resolves to a private or reserved address."
            raise requests.exceptions.InvalidURL(message) from exc
        if 300 <= response.status_code < 400:
            response.close()
            message = f"The provider answered {response.status_code} (a redirect): redirects are not followed."
            raise requests.exceptions.HTTPError(message, response=response)
        return response


def redirect_uri(connection: SsoConnection, request) -> str:
    """The callback URL the organization registers at its provider."""
    return request.build_absolute_uri(
        reverse("openid_connect_callback", kwargs={"provider_id": connection.provider_id})
    )


def app_for(connection: SsoConnection) -> SocialApp:
    """allauth's app for a connection (not saved: the connection is the record)."""
    return SocialApp(
        provider=PROVIDER,
        provider_id=connection.provider_id,
        name=connection.organization.name,
        client_id=connection.client_id,
        secret=connection.client_secret,
        settings={"server_url": connection.issuer},
    )


def role_for(connection: SsoConnection, claims: dict) -> str:
    """The highest role any of the person's groups maps to, else the connection's default."""
    groups = claims.get(connection.group_claim) or []
    if isinstance(groups, str):
        groups = [groups]
    mapped = {connection.group_roles.get(str(g)) for g in groups if isinstance(g, str | int)}
    for role in JOINABLE_ROLES:
        if role in mapped:
            return role
    return connection.default_role


def _claims(sociallogin) -> dict:
    """Both claim sets merged (for the groups, which a provider may put in either)."""
    data = sociallogin.account.extra_data or {}
    return {**(data.get("id_token") or {}), **(data.get("userinfo") or {})}


def _identity(sociallogin) -> dict:
    """The claims allauth takes the person from: userinfo when it was fetched, else the id_token
    (never a mix: the address checked is the address allauth signs in). Its `sub` must be the
    id_token's, whose signature was checked."""
    data = sociallogin.account.extra_data or {}
    userinfo, token = data.get("userinfo") or {}, data.get("id_token") or {}
    if userinfo and token and str(userinfo.get("sub")) != str(token.get("sub")):
        return {}
    return userinfo or token


def _eligible(user, org: Organization) -> str:
    """Why an existing account may not be signed in by `org`'s provider ("" if it may): staff, and
    people in other organizations, keep the sign-in they have (a provider speaks for one tenant)."""
    if user.is_staff or user.is_superuser:
        return "This account is the operator's staff: sign in with its password."
    elsewhere = Membership.objects.filter(user=user).exclude(organization=org).exists()
    if elsewhere:
        return "This account belongs to other organizations too: sign in with its password."
    return ""


def _refuse(request, message: str, org: Organization | None = None, who: str = ""):
    """The page that says why; recorded as `sso.refused` in `org`'s audit log when one is named."""
    if org is not None:
        audit.record(org, "sso.refused", None, target=f"member:{who}"[:200])
    response = render(request, "registration/sso_refused.html", {"message": message}, status=403)
    return ImmediateHttpResponse(response)


class AccountAdapter(DefaultAccountAdapter):
    def is_open_for_signup(self, request) -> bool:
        return False  # accounts come from sign-up, invitations and SSO (SsoAdapter)

    def get_login_redirect_url(self, request) -> str:
        return reverse("dashboard:overview")

    def add_message(self, request, level, message_template=None, message_context=None, extra_tags="", message=None):
        if message_template == "account/messages/logged_in.txt":
            return  # the dashboard says nothing on a sign-in, however it was made
        super().add_message(request, level, message_template, message_context, extra_tags, message)


class SsoAdapter(DefaultSocialAccountAdapter):
    def list_apps(self, request, provider=None, client_id=None) -> list[SocialApp]:
        connections = SsoConnection.objects.select_related("organization").filter(domain_verified_at__isnull=False)
        if provider == PROVIDER:
            return []  # the generic name is no organization's: each connection answers to its own id
        if provider is not None:
            connections = connections.filter(provider_id=provider)
        if client_id:
            connections = connections.filter(client_id=client_id)
        return [app_for(c) for c in connections]

    def get_requests_session(self):
        return ProviderSession()

    def is_open_for_signup(self, request, sociallogin) -> bool:
        return True  # pre_social_login refused everyone outside the proven domain already

    def pre_social_login(self, request, sociallogin) -> None:
        """Only a verified address of the proven domain gets in; an existing account of that address
        (one of this organization's, or no one's) is connected here (not by allauth's e-mail
        authentication, which would wipe its password: the owners' break-glass)."""
        connection = (
            SsoConnection.objects.select_related("organization")
            .filter(provider_id=sociallogin.account.provider, domain_verified_at__isnull=False)
            .first()
        )
        if connection is None or sociallogin.state.get("process", "login") != "login":
            raise _refuse(request, "This single sign-on connection no longer exists.")
        org = connection.organization
        identity = _identity(sociallogin)
        email = str(identity.get("email") or "").strip().lower()
        verified = [a for a in sociallogin.email_addresses if a.verified and a.email.lower() == email]
        if not email or domain_of(email) != connection.domain:
            who = email or str(identity.get("sub", ""))
            raise _refuse(request, f"{org.name} signs in addresses at {connection.domain} only.", org, who)
        if identity.get("email_verified") not in (True, "true", "True") or not verified:
            raise _refuse(request, "Your identity provider has not verified that e-mail address.", org, email)
        user = sociallogin.user if sociallogin.is_existing else None
        if user is None:
            user = get_user_model().objects.filter(username__iexact=email).first()
        if user is not None and (why := _eligible(user, org)):
            raise _refuse(request, why, org, email)
        if user is not None and not sociallogin.is_existing:
            sociallogin.connect(request, user)

    def populate_user(self, request, sociallogin, data):
        user = super().populate_user(request, sociallogin, data)
        user.email = user.username = (user.email or "").lower()  # the address is the user name here
        return user


@receiver(user_logged_in)
def _joined_by_sso(sender, request, user, **kwargs) -> None:
    """After a sign-in through an organization's provider: its member (just in time, or with the role
    their groups now map to, never changing an owner), and the session remembers it."""
    sociallogin = kwargs.get("sociallogin")
    if sociallogin is None or request is None:
        return
    connection = SsoConnection.objects.select_related("organization").get(provider_id=sociallogin.account.provider)
    org, role = connection.organization, role_for(connection, _claims(sociallogin))
    with transaction.atomic():
        membership = Membership.objects.select_for_update().filter(user=user, organization=org).first()
        if membership is None:
            Membership.objects.create(user=user, organization=org, role=role)
            audit.record(org, "member.joined", user, target=f"member:{user.email}", after={"role": role, "via": "sso"})
        elif membership.role != role and membership.role != Membership.Role.OWNER:
            before = membership.role
            membership.role = role
            membership.save(update_fields=["role"])
            who = f"member:{user.email}"
            audit.record(org, "member.role_changed", "sso", target=who, before={"role": before}, after={"role": role})
    audit.record(org, "sso.signed_in", user, ip=request.META.get("REMOTE_ADDR"))
    orgs = set(request.session.get(SESSION_SSO_ORGS, []))
    request.session[SESSION_SSO_ORGS] = sorted(orgs | {org.pk})
    request.session["organization_id"] = org.pk


@receiver(user_logged_in)
def _break_glass(sender, request, user, **kwargs) -> None:
    """An owner signing in by password to an organization that requires SSO: allowed, recorded."""
    if kwargs.get("sociallogin") is not None or request is None:
        return
    owned = Membership.objects.filter(
        user=user, role=Membership.Role.OWNER, organization__sso__enforced=True
    ).select_related("organization")
    for membership in owned:
        audit.record(membership.organization, "sso.break_glass", user, ip=request.META.get("REMOTE_ADDR"))


def sso_required_for(membership: Membership, session) -> bool:
    """Whether this member must sign in through the organization's provider before using it (owners
    never: their password sign-in is the break-glass, recorded at sign-in). The connection is read
    with the membership when the caller selected `organization__sso` (no query of its own)."""
    if membership.role == Membership.Role.OWNER or membership.organization_id in session.get(SESSION_SSO_ORGS, []):
        return False
    try:
        connection = membership.organization.sso
    except SsoConnection.DoesNotExist:
        return False
    return connection.enforced and connection.verified
