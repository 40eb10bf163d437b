"""Single sign-on by OpenID Connect, against a real provider on loopback (tests/identity.py): an
organization connects it through the API, proves its e-mail domain with a DNS TXT record (a DNS
server on loopback), and its people sign in: the full redirect, code exchange, id_token signature
and claims checks are allauth's, the membership made just in time with the role their groups map to.
Requiring SSO holds members to it while owners keep a password (the break-glass, audited)."""

from __future__ import annotations

import time
from urllib.parse import urlsplit

import jwt
import pytest
import requests
from allauth.socialaccount.providers.oauth2.client import OAuth2Error
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory

from accounts import sso
from accounts.models import AuditEvent, Membership, SsoConnection
from dashboard.views.sso import SignedTokenAdapter
from tests.conftest import PERSONA_RATE, make_persona
from tests.identity import authorize, dns_server, oidc_provider

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery"


@pytest.fixture
def idp():
    with oidc_provider() as provider:
        yield provider


@pytest.fixture
def dns(settings):
    with dns_server() as server:
        settings.TTS_DNS_NAMESERVERS = ["127.0.0.1"]
        settings.TTS_DNS_PORT = server.port
        settings.TTS_SSO_ALLOW_PRIVATE = True  # the provider listens on loopback
        yield server


def api(client: Client, key: str, method: str, path: str, body=None):
    kwargs = {"content_type": "application/json", "data": body} if body is not None else {}
    return getattr(client, method)(f"/v1/organization/{path}", HTTP_AUTHORIZATION=f"Bearer {key}", **kwargs)


def connect(client, persona, idp, dns, domain="acme.example", **extra):
    body = {"issuer": idp.issuer, "client_id": "tts", "client_secret": "s3cret", "domain": domain, **extra}
    made = api(client, persona.key, "put", "sso", {**body, "enforced": False})
    assert made.status_code == 200, made.content
    dns.records[made.json()["domain_record_name"]] = [made.json()["domain_record_value"]]
    proven = api(client, persona.key, "post", "sso/verify_domain")
    assert proven.status_code == 200, proven.content
    if extra.get("enforced"):  # only a proven domain's SSO can be required
        proven = api(client, persona.key, "put", "sso", body)
        assert proven.status_code == 200 and proven.json()["enforced"], proven.content
    return proven.json()


def sso_sign_in(client: Client, idp, sub: str, email: str):
    """The browser's path, by hand: our form, the provider's page, our callback."""
    started = client.post("/accounts/sso/", {"email": email})
    assert started.status_code == 302, started.content
    at_provider = started["Location"]
    assert at_provider.startswith(idp.authorization_endpoint)
    back = authorize(requests.Session(), at_provider, sub)
    parts = urlsplit(back)
    assert parts.path.endswith("/login/callback/")
    return client.get(f"{parts.path}?{parts.query}")


def test_connecting_a_provider_through_the_api_and_proving_the_domain(client, idp, dns):
    acme, globex = (
        make_persona("Acme", requests_per_minute=PERSONA_RATE),
        make_persona("Globex", requests_per_minute=PERSONA_RATE),
    )
    assert api(client, acme.key, "get", "sso").status_code == 404
    body = {"issuer": idp.issuer, "client_id": "tts", "domain": "Acme.Example"}
    no_secret = api(client, acme.key, "put", "sso", body)
    assert no_secret.status_code == 400 and "client_secret" in no_secret.json()["error"]["message"]
    unknown = api(client, acme.key, "put", "sso", {**body, "client_secret": "x", "tenant": "acme"})
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "tenant"
    early = api(client, acme.key, "put", "sso", {**body, "client_secret": "x", "enforced": True})
    assert early.status_code == 400 and "Prove acme.example first" in early.json()["error"]["message"]
    made = api(client, acme.key, "put", "sso", {**body, "client_secret": "x"})
    assert made.status_code == 200
    shown = made.json()
    assert "client_secret" not in shown and shown["domain"] == "acme.example" and shown["domain_verified_at"] is None
    assert shown["redirect_uri"] == f"http://testserver/accounts/sso/{shown['provider_id']}/login/callback/"
    assert shown["domain_record_name"] == "_tts-saas.acme.example"
    missing = api(client, acme.key, "post", "sso/verify_domain")
    assert missing.status_code == 409 and missing.json()["error"]["code"] == "domain_not_verified"
    dns.records["_tts-saas.acme.example"] = ["v=spf1 -all", shown["domain_record_value"]]
    assert api(client, acme.key, "post", "sso/verify_domain").json()["domain_verified_at"]
    # Another organization cannot prove the same domain, even with its own record there.
    theirs = api(client, globex.key, "put", "sso", {**body, "client_secret": "y"}).json()
    dns.records["_tts-saas.acme.example"].append(theirs["domain_record_value"])
    taken = api(client, globex.key, "post", "sso/verify_domain")
    assert taken.status_code == 409 and "another organization" in taken.json()["error"]["message"]
    # A new domain must be proven anew; then SSO can be required.
    assert api(client, acme.key, "put", "sso", {**body, "enforced": True}).status_code == 200
    moved = api(client, acme.key, "put", "sso", {**body, "domain": "other.example"})
    assert moved.status_code == 200 and moved.json()["domain_verified_at"] is None
    actions = list(AuditEvent.objects.filter(organization=acme.org).values_list("action", flat=True))
    assert actions.count("sso.updated") == 3 and "sso.domain_verified" in actions
    assert api(client, acme.key, "delete", "sso").status_code == 204
    assert api(client, acme.key, "get", "sso").status_code == 404


def test_only_an_organization_key_may_see_or_change_sign_in_rules(client, idp, dns, settings):
    acme = make_persona("Acme", requests_per_minute=PERSONA_RATE)
    standard = make_persona("Initech", kind="standard", requests_per_minute=PERSONA_RATE)
    refused = api(client, standard.key, "put", "mfa", {"require_mfa": True})
    assert refused.status_code == 403 and "organization:write" in refused.json()["error"]["message"]
    assert api(client, acme.key, "put", "mfa", {"require_mfa": "maybe"}).status_code == 400
    assert api(client, acme.key, "put", "mfa", {"require_mfa": True}).json() == {"require_mfa": True}
    settings.TTS_SSO_ALLOW_PRIVATE = False
    private = {"issuer": "https://127.0.0.1:9/", "client_id": "a", "client_secret": "b", "domain": "acme.example"}
    answer = api(client, acme.key, "put", "sso", private)
    assert answer.status_code == 400 and "private or reserved" in answer.json()["error"]["message"]
    plain = api(client, acme.key, "put", "sso", {**private, "issuer": "http://idp.example"})
    assert plain.status_code == 400 and "https" in plain.json()["error"]["message"]


@pytest.mark.parametrize(
    "issuer",
    [
        "https://[64:ff9b::a9fe:a9fe]/",  # NAT64 of 169.254.169.254
        "https://[2002:a9fe:a9fe::]/",  # 6to4 of 169.254.169.254
        "https://[::127.0.0.1]/",  # IPv4-compatible loopback
        "https://[::a9fe:a9fe]/",  # IPv4-compatible 169.254.169.254
        "https://[::ffff:169.254.169.254]/",  # IPv4-mapped
    ],
)
def test_an_issuer_reaching_a_private_address_through_an_ipv6_form_is_refused(client, settings, issuer):
    settings.TTS_SSO_ALLOW_PRIVATE = False
    acme = make_persona("Acme", requests_per_minute=PERSONA_RATE)
    body = {"issuer": issuer, "client_id": "a", "client_secret": "b", "domain": "acme.example"}
    answer = api(client, acme.key, "put", "sso", body)
    assert answer.status_code == 400, answer.content
    assert "private or reserved" in answer.json()["error"]["message"]
    assert not SsoConnection.objects.filter(organization=acme.org).exists()


def test_people_of_the_domain_join_just_in_time_with_the_role_their_groups_map_to(client, idp, dns):
    acme = make_persona("Acme", requests_per_minute=PERSONA_RATE)
    connect(client, acme, idp, dns, group_roles={"tts-admins": "admin"})
    idp.set_user("dana", email="Dana@Acme.example", email_verified=True, groups=["staff"])
    idp.set_user("ed", email="ed@acme.example", email_verified=True, groups=["tts-admins"])
    landed = sso_sign_in(client, idp, "dana", "dana@acme.example")
    assert landed.status_code == 302 and landed["Location"] == "/dashboard/"
    dana = get_user_model().objects.get(username="dana@acme.example")
    assert Membership.objects.get(user=dana, organization=acme.org).role == "member"
    assert client.get("/dashboard/").status_code == 200  # signed in, in Acme
    other = Client()
    sso_sign_in(other, idp, "ed", "ed@acme.example")
    ed = Membership.objects.get(user__username="ed@acme.example", organization=acme.org)
    assert ed.role == "admin"
    # The groups change at the provider: the role follows at the next sign-in.
    idp.set_user("ed", email="ed@acme.example", email_verified=True, groups=[])
    sso_sign_in(Client(), idp, "ed", "ed@acme.example")
    ed.refresh_from_db()
    assert ed.role == "member"
    events = AuditEvent.objects.filter(organization=acme.org)
    assert events.filter(action="member.joined", target="member:dana@acme.example").exists()
    assert events.filter(action="sso.signed_in", actor_label="ed@acme.example").count() == 2
    joined = events.get(action="member.joined", target="member:ed@acme.example")
    assert joined.after == {"role": "admin", "via": "sso"}
    changed = events.get(action="member.role_changed", target="member:ed@acme.example")
    assert (changed.before, changed.after, changed.actor_id) == ({"role": "admin"}, {"role": "member"}, "sso")


def test_addresses_outside_the_proven_domain_or_unverified_are_refused(client, idp, dns):
    acme = make_persona("Acme", requests_per_minute=PERSONA_RATE)
    connect(client, acme, idp, dns)
    idp.set_user("mallory", email="mallory@evil.example", email_verified=True)
    refused = sso_sign_in(client, idp, "mallory", "someone@acme.example")
    assert refused.status_code == 403 and b"signs in addresses at acme.example only" in refused.content
    idp.set_user("vic", email="vic@acme.example", email_verified=False)
    unverified = sso_sign_in(Client(), idp, "vic", "vic@acme.example")
    assert unverified.status_code == 403 and b"not verified that e-mail address" in unverified.content
    assert not get_user_model().objects.filter(username__in=["mallory@evil.example", "vic@acme.example"]).exists()
    assert AuditEvent.objects.filter(organization=acme.org, action="sso.refused").count() == 2
    unknown = client.post("/accounts/sso/", {"email": "x@nowhere.example"})
    assert b"No organization signs in with single sign-on" in unknown.content


def test_an_id_token_signed_by_another_key_is_refused(client, idp, dns):
    acme = make_persona("Acme", requests_per_minute=PERSONA_RATE)
    shown = connect(client, acme, idp, dns)
    request = RequestFactory().get("/")
    adapter = SignedTokenAdapter(request, shown["provider_id"])
    app = sso.app_for(SsoConnection.objects.get(organization=acme.org))
    claims = {"iss": idp.issuer, "aud": "tts", "sub": "dana", "exp": int(time.time()) + 300, "iat": int(time.time())}
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(OAuth2Error):
        adapter._decode_id_token(app, jwt.encode(claims, forger, algorithm="RS256"))


def test_required_sso_holds_members_to_it_and_owners_keep_a_password(client, idp, dns):
    acme = make_persona("Acme", requests_per_minute=PERSONA_RATE)
    connect(client, acme, idp, dns, enforced=True)
    users = get_user_model().objects
    owner = users.create_user("olive@acme.example", "olive@acme.example", PASSWORD)
    member = users.create_user("max@acme.example", "max@acme.example", PASSWORD)
    Membership.objects.create(user=owner, organization=acme.org, role="owner")
    Membership.objects.create(user=member, organization=acme.org, role="member")
    by_password = Client()
    signed_in = by_password.post("/accounts/login/", {"username": "max@acme.example", "password": PASSWORD})
    assert signed_in.status_code == 302
    held = by_password.get("/dashboard/keys")
    assert held.status_code == 302 and held["Location"] == "/accounts/sso/?email=max%40acme.example"
    idp.set_user("max", email="max@acme.example", email_verified=True)
    again = sso_sign_in(by_password, idp, "max", "max@acme.example")
    assert again.status_code == 302, again.content
    assert again["Location"] == "/dashboard/", again["Location"]
    assert by_password.get("/dashboard/keys").status_code == 200
    glass = Client()
    assert glass.post("/accounts/login/", {"username": "olive@acme.example", "password": PASSWORD}).status_code == 302
    assert glass.get("/dashboard/keys").status_code == 200
    assert AuditEvent.objects.filter(organization=acme.org, action="sso.break_glass", actor_label=owner.email).exists()


def test_a_provider_speaks_only_for_accounts_of_its_own_organization_and_keeps_their_passwords(client, idp, dns):
    """From a review: allauth's e-mail authentication would have signed the provider in to any
    account of the domain (staff, other tenants' people) and wiped its password (the owners'
    break-glass); repointing a proven domain at another provider needed no new proof."""
    acme, globex = (make_persona(n, requests_per_minute=PERSONA_RATE) for n in ("Acme", "Globex"))
    connect(client, acme, idp, dns, enforced=True)
    users = get_user_model().objects
    owner = users.create_user("olive@acme.example", "olive@acme.example", PASSWORD)
    Membership.objects.create(user=owner, organization=acme.org, role="owner")
    users.create_user("root@acme.example", "root@acme.example", PASSWORD, is_staff=True)
    elsewhere = users.create_user("gil@acme.example", "gil@acme.example", PASSWORD)
    Membership.objects.create(user=elsewhere, organization=globex.org, role="owner")
    for sub, email, why in (
        ("root", "root@acme.example", b"is the operator"),
        ("gil", "gil@acme.example", b"belongs to other organizations"),
    ):
        idp.set_user(sub, email=email, email_verified=True)
        refused = sso_sign_in(Client(), idp, sub, email)
        assert refused.status_code == 403 and why in refused.content
    assert not Membership.objects.filter(user=elsewhere, organization=acme.org).exists()
    idp.set_user("olive", email="olive@acme.example", email_verified=True)
    assert sso_sign_in(Client(), idp, "olive", "olive@acme.example")["Location"] == "/dashboard/"
    owner.refresh_from_db()
    assert owner.check_password(PASSWORD)  # the break-glass still works
    # An admin key repoints the connection: the domain must be proven again, and SSO is no longer required.
    moved = api(
        client, acme.key, "put", "sso", {"issuer": "http://127.0.0.1:9", "client_id": "x", "domain": "acme.example"}
    )
    assert moved.status_code == 200 and moved.json()["domain_verified_at"] is None and not moved.json()["enforced"]
    assert client.post("/accounts/sso/", {"email": "olive@acme.example"}).status_code == 200  # no proven connection
    assert client.get("/accounts/sso/openid_connect/login/").status_code == 404  # the generic name is no one's


def test_the_server_fetches_nothing_private_from_a_provider(settings):
    settings.TTS_SSO_ALLOW_PRIVATE = False
    with pytest.raises(requests.exceptions.InvalidURL, match="private or reserved"):
        sso.ProviderSession().get("https://127.0.0.1/.well-known/openid-configuration")
    with pytest.raises(requests.exceptions.InvalidURL, match="https"):
        sso.ProviderSession().get("http://idp.example/token")
