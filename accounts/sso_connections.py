"""An organization's single sign-on connection, set and proven: the issuer checked (a public https
URL, judged by the server's one guard for what it fetches, tts_saas.outbound), the e-mail domain
proven by a DNS TXT record, changes recorded in the audit log. A new domain, issuer or client id
must be proven again before anyone signs in through it (accounts/sso.py)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from urllib.parse import urlsplit

import dns.exception
import dns.resolver
from django.conf import settings
from django.utils import timezone

from tts_saas import outbound

from . import audit
from .models import Organization, SsoConnection


class SsoProblem(Exception):
    """A connection's settings or its domain proof are refused; the message says why."""


def check_public(url: str, what: str = "The issuer", look_up: bool = True) -> None:
    """An https URL on a public address (the issuer's discovery, token, key and userinfo URLs are
    fetched by this server): a tenant cannot point the server at the operator's own network, unless
    TTS_SSO_ALLOW_PRIVATE (tests, a provider on the LAN). The addresses are judged by the server's
    one guard (tts_saas.outbound), which judges them again when a fetch connects; `look_up=False`
    checks the URL's form only and leaves the addresses to that."""
    try:
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port or 443
    except ValueError as exc:  # an unclosed [, a port out of range
        raise SsoProblem(f"{what} must be a plain URL: scheme, host, optional port and path.") from exc
    allow_private = settings.TTS_SSO_ALLOW_PRIVATE
    if parts.scheme != "https" and not (allow_private and parts.scheme == "http"):
        raise SsoProblem(f"{what} must be an https:// URL.")
    if not host or parts.username or parts.password:
        raise SsoProblem(f"{what} must be a plain URL: scheme, host, optional port and path.")
    if look_up and not allow_private:
        try:
            outbound.addresses(host, port, allow_private=False)
        except outbound.RefusedTarget as exc:
            if exc.reason == outbound.UNRESOLVED:
                raise SsoProblem(f"{what}'s host {host} does not resolve.") from exc
            raise SsoProblem(f"{what}'s host resolves to a private or reserved address.") from exc


def check_issuer(issuer: str) -> str:
    check_public(issuer)  # first: it refuses what urlsplit cannot read
    if urlsplit(issuer).query or urlsplit(issuer).fragment:
        raise SsoProblem("The issuer must be a plain URL: scheme, host, optional port and path.")
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


def first_connection(org: Organization) -> SsoConnection:
    """The connection `org` will have before it connects (not saved): its provider id (the redirect
    URI's last part) and its DNS TXT token are derived from the organization and the server's
    secret, so both can be registered at the provider and published in DNS before "Connect"."""

    def derived(what: str) -> bytes:
        return hmac.new(settings.SECRET_KEY.encode(), f"sso-{what}:{org.pk}".encode(), hashlib.sha256).digest()

    token = base64.urlsafe_b64encode(derived("domain-token")[:24]).decode()
    return SsoConnection(
        organization=org, provider_id="org-" + derived("provider").hex()[:12], domain_token=f"tts-verify={token}"
    )


SETTINGS = ("issuer", "client_id", "domain", "enforced", "default_role", "group_claim", "group_roles")


def save_connection(org: Organization, fields: dict, by) -> SsoConnection:
    """Creates or changes the organization's connection (`client_secret` kept when not sent). A new
    domain must be proven anew; SSO is required only of a proven domain."""
    current = SsoConnection.objects.filter(organization=org).first()
    if current is None and not fields.get("client_secret"):
        raise SsoProblem("client_secret is needed to connect a provider.")
    fields = {**fields, "issuer": check_issuer(fields["issuer"]), "domain": fields["domain"].lower()}
    connection = current or first_connection(org)
    before = {name: getattr(connection, name) for name in SETTINGS} if current else {}
    for name in (*SETTINGS, "client_secret"):
        if name in fields and (name != "client_secret" or fields[name]):
            setattr(connection, name, fields[name])
    if current is not None and before["domain"] != connection.domain:
        connection.domain_token = SsoConnection._meta.get_field("domain_token").get_default()
    provider_changed = any(before.get(f) != getattr(connection, f) for f in ("domain", "issuer", "client_id"))
    if current is not None and provider_changed and current.verified:
        # Whoever controls the domain's DNS says again that this provider speaks for it: an admin
        # cannot repoint a proven domain at a provider of their own.
        connection.domain_verified_at = None
        connection.enforced = False
    elif connection.enforced and not connection.verified:
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
