"""Second factors (django-allauth's MFA) with the dashboard's password sign-in: a member enrols an
authenticator app (TOTP) and gets recovery codes; the next sign-in asks for a code, refusing a
wrong one (audited); an organization may require a second factor, which sends its members to add
one before any page, and leaves API keys alone."""

from __future__ import annotations

import pytest
from allauth.mfa.models import Authenticator
from allauth.mfa.totp.internal.auth import format_hotp_value, hotp_value, yield_hotp_counters_from_time
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.models import AuditEvent, Membership
from tests.conftest import PERSONA_RATE, make_persona

pytestmark = pytest.mark.django_db(transaction=True)

PASSWORD = "correct horse battery"


def code(secret: str, ahead: int = 0) -> str:
    counter = next(iter(yield_hotp_counters_from_time()))
    return format_hotp_value(hotp_value(secret, counter + ahead))


def person(org, email: str, role: str = "member"):
    user = get_user_model().objects.create_user(email, email, PASSWORD)
    Membership.objects.create(user=user, organization=org, role=role)
    return user


def sign_in(client: Client, email: str):
    return client.post("/accounts/login/", {"username": email, "password": PASSWORD})


def enrol_totp(client: Client) -> str:
    asked = client.get("/accounts/2fa/totp/activate/")  # changing second factors asks for the password again
    assert asked["Location"] == "/accounts/reauthenticate/?next=%2Faccounts%2F2fa%2Ftotp%2Factivate%2F"
    assert client.post(asked["Location"], {"password": "not it"}).status_code == 200
    back = client.post(asked["Location"], {"password": PASSWORD})
    assert back["Location"] == "/accounts/2fa/totp/activate/"
    page = client.get(back["Location"])
    assert page.status_code == 200
    secret = page.context["form"].secret
    assert secret in page.content.decode()  # shown to type into an app that cannot scan the QR code
    wrong = client.post("/accounts/2fa/totp/activate/", {"code": "000000" if code(secret) != "000000" else "111111"})
    assert wrong.status_code == 200 and b"Incorrect code" in wrong.content
    done = client.post("/accounts/2fa/totp/activate/", {"code": code(secret)})
    assert done.status_code == 302
    return secret


def test_a_member_enrols_totp_and_the_next_sign_in_asks_for_a_code(settings):
    settings.MFA_TOTP_TOLERANCE = 1  # the enrolment used this period's code; the sign-in uses the next one
    acme = make_persona("Acme", requests_per_minute=PERSONA_RATE)
    ada = person(acme.org, "ada@example.com")
    client = Client()
    assert sign_in(client, "ada@example.com")["Location"] == "/dashboard/"
    secret = enrol_totp(client)
    kinds = set(Authenticator.objects.filter(user=ada).values_list("type", flat=True))
    assert kinds == {"totp", "recovery_codes"}
    codes = client.get("/accounts/2fa/recovery-codes/")
    recovery = codes.context["unused_codes"]
    assert len(recovery) == 10 and recovery[0] in codes.content.decode()
    security = client.get("/dashboard/security").content.decode()
    assert "You sign in with a password and: an authenticator app, recovery codes." in security

    later = Client()
    asked = sign_in(later, "ada@example.com")
    assert asked.status_code == 302 and asked["Location"] == "/accounts/2fa/authenticate/"
    assert later.get("/dashboard/")["Location"].startswith("/accounts/login/")  # not signed in yet
    refused = later.post("/accounts/2fa/authenticate/", {"code": "12345"})
    assert refused.status_code == 200 and b"Incorrect code" in refused.content
    passed = later.post("/accounts/2fa/authenticate/", {"code": code(secret, ahead=1)})
    assert passed.status_code == 302 and later.get("/dashboard/").status_code == 200

    by_recovery = Client()
    sign_in(by_recovery, "ada@example.com")
    assert by_recovery.post("/accounts/2fa/authenticate/", {"code": recovery[0]}).status_code == 302
    again = Client()
    sign_in(again, "ada@example.com")
    assert again.post("/accounts/2fa/authenticate/", {"code": recovery[0]}).status_code == 200  # used once only

    events = AuditEvent.objects.filter(organization=acme.org)
    assert set(events.filter(action="mfa.added").values_list("target", flat=True)) == {
        "mfa:totp",
        "mfa:recovery_codes",
    }
    assert events.filter(action="signin.failed", target="mfa:ada@example.com").count() == 2
    assert events.filter(action="signin.succeeded", actor_label="ada@example.com").count() == 3


def test_an_organization_requiring_a_second_factor_sends_members_to_add_one(client, settings):
    acme = make_persona("Acme", requests_per_minute=PERSONA_RATE)
    person(acme.org, "bo@example.com")
    person(acme.org, "olive@example.com", role="owner")
    required = client.put(
        "/v1/organization/mfa",
        data={"require_mfa": True},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {acme.key}",
    )
    assert required.status_code == 200
    member = Client()
    sign_in(member, "bo@example.com")
    held = member.get("/dashboard/keys")
    assert held.status_code == 302 and held["Location"] == "/accounts/2fa/"
    told = member.get("/accounts/2fa/").content.decode()
    assert "Acme requires a second factor" in told
    assert member.post("/dashboard/security", {"action": "require-mfa"}).status_code == 302  # held, not changed
    enrol_totp(member)
    assert member.get("/dashboard/keys").status_code == 200
    assert member.post("/dashboard/security", {"action": "require-mfa"}).status_code == 403  # owners and admins
    # API keys are not sessions: unaffected.
    assert client.get("/v1/voices", HTTP_AUTHORIZATION=f"Bearer {acme.key}").status_code == 200
    owner = Client()
    sign_in(owner, "olive@example.com")
    assert owner.get("/dashboard/keys")["Location"] == "/accounts/2fa/"  # owners too
    assert owner.get("/dashboard/security")["Location"] == "/accounts/2fa/"
    settings.MFA_TOTP_TOLERANCE = 1
    enrol_totp(owner)
    assert owner.post("/dashboard/security", {"action": "require-mfa"}).status_code == 302  # unticked: off
    acme.org.refresh_from_db()
    assert acme.org.require_mfa is False
    changes = AuditEvent.objects.filter(organization=acme.org, action="settings.require_mfa").order_by("id")
    assert [(e.before, e.after, e.actor_label) for e in changes] == [
        ({"require_mfa": False}, {"require_mfa": True}, "Acme key"),
        ({"require_mfa": True}, {"require_mfa": False}, "olive@example.com"),
    ]


def test_the_sign_in_offers_an_app_user_the_code_box_and_recovery_codes_on_their_own_path(settings):
    settings.MFA_TOTP_TOLERANCE = 1
    acme = make_persona("Acme", requests_per_minute=PERSONA_RATE)
    person(acme.org, "cy@example.com")
    client = Client()
    sign_in(client, "cy@example.com")
    enrol_totp(client)
    recovery = client.get("/accounts/2fa/recovery-codes/").context["unused_codes"]

    later = Client()
    sign_in(later, "cy@example.com")
    step = later.get("/accounts/2fa/authenticate/").content.decode()
    assert "Code from your authenticator app" in step
    assert "Passkey or security key" not in step and "mfa_webauthn_authenticate" not in step  # none added
    assert 'href="/accounts/2fa/authenticate/?with=recovery"' in step and "Use a recovery code" in step
    by_code = later.get("/accounts/2fa/authenticate/?with=recovery").content.decode()
    assert "Recovery code" in by_code and "Each code works once." in by_code
    assert "Code from your authenticator app" not in by_code
    wrong = later.post("/accounts/2fa/authenticate/?with=recovery", {"code": "00000000"})
    assert wrong.status_code == 200 and "Recovery code" in wrong.content.decode()  # still on the recovery path
    assert "Incorrect code" in wrong.content.decode()
    assert later.post("/accounts/2fa/authenticate/?with=recovery", {"code": recovery[0]}).status_code == 302
    assert later.get("/dashboard/").status_code == 200
