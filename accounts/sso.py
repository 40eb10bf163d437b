"""Single sign-on: each organization may connect its own OpenID Connect provider (issuer, client id,
secret), prove an e-mail domain with a DNS TXT record, and require it of its members.

django-allauth speaks the protocol (redirect, code exchange, id_token checks); this module tells it
which provider serves which organization (`SsoAdapter.list_apps`: one app per proven connection,
never from the database's own social apps), refuses people outside the proven domain, makes members
just in time with the role their groups map to, and records it all in the audit log. Owners keep
a password sign-in when SSO is required (the break-glass, audited), so a broken provider never locks
an organization out."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

import dns.exception
import dns.resolver
from allauth.account.adapter import DefaultAccountAdapter
from allauth.account.signals import user_logged_in
from allauth.core.exceptions import ImmediateHttpResponse
from allauth.socialaccount.adapter import DefaultSocialAccountAdapter
from allauth.socialaccount.models import SocialApp
from django.conf import settings
from django.db import transaction
from django.dispatch import receiver
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from . import audit
from .models import Membership, Organization, SsoConnection

PROVIDER = "openid_connect"
SESSION_SSO_ORGS = "sso_organizations"  # the organizations this session signed in to through their provider
JOINABLE_ROLES = (Membership.Role.ADMIN, Membership.Role.MEMBER)  # never owner: owners are made by owners


class SsoProblem(Exception):
    """A connection's settings or its domain proof are refused; the message says why."""


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


def check_issuer(issuer: str) -> str:
    """An https issuer on a public address (its discovery, token and key URLs are fetched by this
    server): a tenant cannot point the server at the operator's own network, unless
    TTS_SSO_ALLOW_PRIVATE (tests, a provider on the LAN)."""
    parts = urlsplit(issuer)
    allow_private = settings.TTS_SSO_ALLOW_PRIVATE
    if parts.scheme != "https" and not (allow_private and parts.scheme == "http"):
        raise SsoProblem("The issuer must be an https:// URL.")
    if not parts.hostname or parts.username or parts.password or parts.query or parts.fragment:
        raise SsoProblem("The issuer must be a plain URL: scheme, host, optional port and path.")
    if not allow_private:
        try:
            addresses = {info[4][0] for info in socket.getaddrinfo(parts.hostname, parts.port or 443)}
        except (OSError, UnicodeError) as exc:
            raise SsoProblem(f"The issuer's host {parts.hostname} does not resolve.") from exc
        if not all(ipaddress.ip_address(str(a).split("%")[0]).is_global for a in addresses):
            raise SsoProblem("The issuer's host resolves to a private or reserved address.")
    return issuer.rstrip("/")


def verify_domain(connection: SsoConnection) -> SsoConnection:
    """Looks up `_tts-saas.<domain>` TXT; when it holds the connection's token, the domain is proven
    (once, for one organization: another organization's proven domain is refused)."""
    resolver = dns.resolver.Resolver(configure=not settings.TTS_DNS_NAMESERVERS)
    if settings.TTS_DNS_NAMESERVERS:
        resolver.nameservers = list(settings.TTS_DNS_NAMESERVERS)
        resolver.port = settings.TTS_DNS_PORT
    resolver.lifetime = 5.0
    try:
        answer = resolver.resolve(connection.txt_name, "TXT")
        found = {b"".join(r.strings).decode("utf-8", "replace") for r in answer}
    except (dns.resolver.NXDOMAIN, dns.resolver.NoAnswer):
        found = set()
    except dns.exception.DNSException as exc:
        raise SsoProblem(f"The DNS lookup of {connection.txt_name} failed ({type(exc).__name__}); try again.") from exc
    if connection.domain_token not in found:
        raise SsoProblem(f'No TXT record "{connection.domain_token}" at {connection.txt_name} yet.')
    taken = SsoConnection.objects.filter(domain=connection.domain, domain_verified_at__isnull=False)
    if taken.exclude(pk=connection.pk).exists():
        raise SsoProblem(f"{connection.domain} is proven by another organization already.")
    if connection.domain_verified_at is None:
        connection.domain_verified_at = timezone.now()
        connection.save(update_fields=["domain_verified_at"])
        audit.record(connection.organization, "sso.domain_verified", target=f"domain:{connection.domain}")
    return connection


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
    data = sociallogin.account.extra_data or {}
    return {**(data.get("id_token") or {}), **(data.get("userinfo") or {})}


def _refuse(request, message: str):
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
        if provider not in (None, PROVIDER):
            connections = connections.filter(provider_id=provider)
        if client_id:
            connections = connections.filter(client_id=client_id)
        return [app_for(c) for c in connections]

    def is_open_for_signup(self, request, sociallogin) -> bool:
        return True  # pre_social_login refused everyone outside the proven domain already

    def pre_social_login(self, request, sociallogin) -> None:
        connection = (
            SsoConnection.objects.select_related("organization")
            .filter(provider_id=sociallogin.account.provider, domain_verified_at__isnull=False)
            .first()
        )
        if connection is None:
            raise _refuse(request, "This single sign-on connection no longer exists.")
        claims = _claims(sociallogin)
        email = str(claims.get("email") or "").strip().lower()
        org = connection.organization
        if not email or domain_of(email) != connection.domain:
            audit.record(org, "sso.refused", None, target=f"member:{email or claims.get('sub', '')}"[:200])
            raise _refuse(request, f"{org.name} signs in addresses at {connection.domain} only.")
        if claims.get("email_verified") not in (True, "true", "True"):
            audit.record(org, "sso.refused", None, target=f"member:{email}")
            raise _refuse(request, "Your identity provider has not verified that e-mail address.")

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
            audit.record(org, "member.role_changed", "sso", target=f"member:{user.email}", before=before, after=role)
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
    never: their password sign-in is the break-glass, recorded at sign-in)."""
    if membership.role == Membership.Role.OWNER or membership.organization_id in session.get(SESSION_SSO_ORGS, []):
        return False
    return SsoConnection.objects.filter(
        organization_id=membership.organization_id, enforced=True, domain_verified_at__isnull=False
    ).exists()


SETTINGS = ("issuer", "client_id", "domain", "enforced", "default_role", "group_claim", "group_roles")


def save_connection(org: Organization, fields: dict, by) -> SsoConnection:
    """Creates or changes the organization's connection (`client_secret` kept when not sent). A new
    domain must be proven anew; SSO is required only of a proven domain."""
    current = SsoConnection.objects.filter(organization=org).first()
    if current is None and not fields.get("client_secret"):
        raise SsoProblem("client_secret is needed to connect a provider.")
    fields = {**fields, "issuer": check_issuer(fields["issuer"]), "domain": fields["domain"].lower()}
    connection = current or SsoConnection(organization=org)
    before = {name: getattr(connection, name) for name in SETTINGS} if current else {}
    for name in (*SETTINGS, "client_secret"):
        if name in fields and (name != "client_secret" or fields[name]):
            setattr(connection, name, fields[name])
    if current is not None and before["domain"] != connection.domain:
        connection.domain_verified_at = None
        connection.domain_token = SsoConnection._meta.get_field("domain_token").get_default()
    if connection.enforced and not connection.verified:
        raise SsoProblem(f"Prove {connection.domain} first: single sign-on can be required only of a proven domain.")
    connection.save()
    after = {name: getattr(connection, name) for name in SETTINGS}
    if "client_secret" in fields and fields["client_secret"] and current is not None:
        after["client_secret"] = "changed"
    audit.record_changes(org, "sso.updated", before, after, by)
    return connection


def delete_connection(org: Organization, by) -> bool:
    deleted, _ = SsoConnection.objects.filter(organization=org).delete()
    if deleted:
        audit.record(org, "sso.deleted", by)
    return bool(deleted)
