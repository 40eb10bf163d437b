"""The developer dashboard through Django's test client (the browser tests come with the
playground): sign-up, scoping to the current organization, key management by role, voices and
pronunciation lexicons (made through the API's own functions, shown as the API words them)."""

from __future__ import annotations

import html
import lzma
import re

import numpy as np
import pybase16384 as b14
import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts import scopes
from accounts.auth import authenticate_key
from accounts.models import ApiKey, AuditEvent, Invitation, Membership, Organization
from billing import quota
from billing.models import UsageEvent
from tests.factories import own_plan
from tts_saas.errors import ApiError
from tts_saas.redis import get_redis
from voices.actions import create_voice
from voices.lexicons import save_lexicon
from voices.models import Lexicon, Voice

pytestmark = pytest.mark.django_db


def signup(client, email="ada@example.com", org="Analytical Engines"):
    return client.post("/dashboard/signup", {"email": email, "password": "correct horse battery", "organization": org})


def test_signup_creates_an_owner_and_an_organization_on_the_free_plan(client):
    response = signup(client)
    assert response.status_code == 302 and response["Location"] == "/dashboard/"
    membership = Membership.objects.get(user__email="ada@example.com")
    assert membership.role == "owner" and membership.organization.name == "Analytical Engines"
    page = client.get("/dashboard/")
    assert page.status_code == 200
    assert b"Analytical Engines" in page.content and b"Free plan" in page.content
    assert b'id="quota-meter"' in page.content


def test_signup_shows_field_errors(client):
    signup(client)
    client.logout()
    response = client.post("/dashboard/signup", {"email": "ada@example.com", "password": "short", "organization": ""})
    assert response.status_code == 200
    assert b"exists already" in response.content and b"at least 10 characters" in response.content
    assert get_user_model().objects.count() == 1


def test_an_e_mail_address_signs_in_in_any_case_existing_accounts_included(client):
    signup(client, email="Dana.Dev@Example.com")  # what a password manager saves is what was typed
    assert ">E-mail</label>" in client.get("/accounts/password_reset/").content.decode()  # before: "Email"
    client.logout()
    form = client.get("/accounts/login/").content.decode()  # a phone shows its e-mail keyboard (was type=text)
    assert re.search(r'<input type="email" name="username"[^>]*autocomplete="username"', form), form
    for typed in ("Dana.Dev@Example.com", "dana.dev@example.com", " DANA.DEV@EXAMPLE.COM"):
        response = client.post("/accounts/login/", {"username": typed, "password": "correct horse battery"})
        assert response.status_code == 302, typed  # signed in: sent on to the dashboard
        client.logout()
    wrong = client.post("/accounts/login/", {"username": "Dana.Dev@Example.com", "password": "not the password"})
    assert wrong.status_code == 200
    # Before: "Please enter a correct username and password. Note that both fields may be case-sensitive."
    assert b"That e-mail address and password do not match an account" in wrong.content
    # An account made before addresses were stored lower case (or by createsuperuser).
    get_user_model().objects.create_user(
        username="Old.Case@Example.com", email="Old.Case@Example.com", password="p4ssw0rd!x"
    )
    assert (
        client.post("/accounts/login/", {"username": "old.case@example.com", "password": "p4ssw0rd!x"}).status_code
        == 302
    )
    client.logout()
    again = client.post(
        "/dashboard/signup", {"email": "DANA.dev@example.com", "password": "another horse", "organization": "X"}
    )
    assert again.status_code == 200 and b"exists already" in again.content  # one account per address, any case


def test_the_quota_meter_warns_from_80_percent_and_says_what_to_do_when_full(client):
    signup(client)  # the free plan: 10,000 characters a month
    org = Organization.objects.get()
    healthy = client.get("/dashboard/")
    assert b'id="quota-warning"' not in healthy.content
    assert b'aria-label="Characters used this month"' in healthy.content
    assert b'optimum="0" low="8000" high="9999"' in healthy.content  # amber from 80 %, red when used up
    quota.charge(org, 8_500, 10_000)
    warned = html.unescape(client.get("/dashboard/").content.decode())
    assert '<p id="quota-warning" class="warning"' in warned and "85.0% of this month's characters are used." in warned
    quota.charge(org, 1_500, 10_000)
    full = html.unescape(client.get("/dashboard/").content.decode())
    assert '<p id="quota-warning" class="error"' in full
    assert "This month's characters are used up" in full and "Ask your operator for a larger plan." in full


def test_dashboard_errors_are_pages_with_navigation_and_the_api_keeps_json(client):
    anonymous = client.get("/dashboard/nope")
    assert anonymous.status_code == 404 and anonymous["Content-Type"].startswith("text/html")
    assert b"Page not found" in anonymous.content and b"There is no page at /dashboard/nope." in anonymous.content
    assert b'href="/accounts/login/"' in anonymous.content
    signup(client)
    mine = client.get("/dashboard/nope")
    assert mine.status_code == 404 and b"Back to the overview" in mine.content
    assert b'href="/dashboard/keys"' in mine.content  # the navigation is there
    api = client.get("/v1/nope")
    assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"
    # Elsewhere a browser (Accept: text/html) gets the page, an API client the JSON error.
    browser = client.get("/this-does-not-exist", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    assert browser.status_code == 404 and browser["Content-Type"].startswith("text/html")
    assert b"There is no page at /this-does-not-exist." in browser.content
    script = client.get("/this-does-not-exist", HTTP_ACCEPT="application/json")
    assert script.status_code == 404 and script.json()["error"]["code"] == "not_found"
    from_a_browser = client.get("/v1/nope", HTTP_ACCEPT="text/html")
    assert from_a_browser.json()["error"]["code"] == "not_found"  # the API answers JSON whoever asks


def test_pages_have_landmarks_a_skip_link_and_the_operators_product_name(client, settings):
    settings.TTS_PRODUCT_NAME = "Acme Voice"
    signup(client)
    page = client.get("/dashboard/keys").content.decode()
    assert '<a class="skip" href="#main">Skip to content</a>' in page and '<main id="main">' in page
    assert '<nav aria-label="Dashboard">' in page
    assert 'class="active" aria-current="page">API keys</a>' in page and page.count('aria-current="page"') == 1
    assert '<span class="brand">Acme Voice</span>' in page and "<title>API keys · Acme Voice</title>" in page
    assert "tts_saas" not in page
    settings.TTS_PRODUCT_LOGO = "/static/acme.svg"
    page = client.get("/dashboard/keys").content.decode()
    assert '<span class="brand"><img src="/static/acme.svg" alt="">Acme Voice</span>' in page


def test_pages_need_a_login(client):
    for path in ("/dashboard/", "/dashboard/keys", "/dashboard/jobs", "/dashboard/voices", "/dashboard/docs"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_an_owner_creates_a_key_shown_once_that_works_then_revokes_it(client):
    signup(client)
    created = client.post("/dashboard/keys", {"name": "backend", "kind": "standard", "expires": "never"})
    assert created.status_code == 302 and created["Location"] == "/dashboard/keys"  # a reload makes no key
    shown = client.get("/dashboard/keys")
    raw = shown.context["created"]["raw"]
    assert raw.encode() in shown.content and b"shown only this once" in shown.content
    assert (
        f"export TTS_API_KEY={raw}".encode() in shown.content and b"http://testserver/v1/audio/speech" in shown.content
    )
    assert raw.encode() not in client.get("/dashboard/keys").content  # once
    assert ApiKey.objects.filter(name="backend").count() == 1
    assert authenticate_key(f"Bearer {raw}").organization.name == "Analytical Engines"
    prefix = ApiKey.objects.get(name="backend").prefix
    revoked = client.post(f"/dashboard/keys/{prefix}/revoke")
    assert revoked.status_code == 302
    with pytest.raises(ApiError):
        authenticate_key(f"Bearer {raw}")
    # Revoked keys leave the list (before: they stayed forever), behind a filter that brings them back.
    listed = client.get("/dashboard/keys").content.decode()
    assert f"tts_{prefix}_" not in listed and "No active keys." in listed
    assert '<a href="?revoked=1">Show 1 revoked key</a>' in listed
    everything = client.get("/dashboard/keys?revoked=1").content.decode()
    assert f"tts_{prefix}_" in everything and "Hide revoked keys" in everything
    # Each key's name leads to its own page.
    assert f'<a href="/dashboard/keys/{prefix}">backend</a>' in everything


def test_key_names_are_unique_and_expiry_is_a_preset_or_a_date(client):
    signup(client)
    client.post("/dashboard/keys", {"name": "ci", "kind": "standard", "expires": "30"})
    key = ApiKey.objects.get(name="ci")
    assert abs((key.expires_at - timezone.now()).days - 30) <= 1 and key.created_by.email == "ada@example.com"
    again = client.post("/dashboard/keys", {"name": "CI", "kind": "standard", "expires": "never"})
    assert again.status_code == 200 and "A key named “CI” exists already" in again.content.decode()
    past = client.post(
        "/dashboard/keys", {"name": "old", "kind": "standard", "expires": "date", "expires_on": "2020-01-01"}
    )
    assert past.status_code == 200 and b"The expiry must be in the future." in past.content
    dated = client.post(
        "/dashboard/keys", {"name": "dated", "kind": "admin", "expires": "date", "expires_on": "2099-05-01"}
    )
    assert dated.status_code == 302
    assert ApiKey.objects.get(name="dated").expires_at.date().isoformat() == "2099-05-01"
    page = client.get("/dashboard/keys").content.decode()
    assert "ada@example.com" in page and "2099-05-01" in page and "Admin keys can" in page


def test_a_member_makes_and_manages_only_their_own_keys(client):
    """Before: a member could only look at every key; now (as on OpenAI) they make their own, see
    and manage only those, and cannot make an admin key; owners and admins see and revoke all."""
    signup(client)
    org = Organization.objects.get()
    key, _ = org.create_api_key("existing")
    member = get_user_model().objects.create_user("bob@example.com", "bob@example.com", "correct horse battery")
    Membership.objects.create(user=member, organization=org, role="member")
    client.force_login(member)
    page = client.get("/dashboard/keys").content.decode()
    assert "you make and see your own keys" in page and "existing" not in page
    assert 'value="admin"' not in page and 'name="owner"' not in page
    refused = client.post("/dashboard/keys", {"name": "x", "kind": "admin", "expires": "never"})
    assert refused.status_code == 200 and not ApiKey.objects.filter(name="x").exists()  # not a choice
    made = client.post("/dashboard/keys", {"name": "bob's", "kind": "standard", "expires": "never"})
    assert made.status_code == 302
    mine = ApiKey.objects.get(name="bob's")
    # "Standard" as far as a member's role goes: speech and jobs, reading voices and lexicons.
    assert mine.owner == member and frozenset(mine.scopes) == scopes.MEMBER
    assert "voices:write" not in mine.scopes and "lexicons:read" in mine.scopes
    assert client.post(f"/dashboard/keys/{key.prefix}/revoke").status_code == 404  # not theirs: not found
    assert client.post(f"/dashboard/keys/{key.prefix}/change", {"action": "rename", "name": "y"}).status_code == 404
    renamed = client.post(f"/dashboard/keys/{mine.prefix}/change", {"action": "rename", "name": "bob's app"})
    assert renamed.status_code == 302 and ApiKey.objects.get(pk=mine.pk).name == "bob's app"
    rotated = client.post(f"/dashboard/keys/{mine.prefix}/change", {"action": "rotate", "grace": "3600"})
    assert rotated.status_code == 302 and rotated["Location"] == f"/dashboard/keys/{mine.prefix}"  # its page
    answer = client.get(rotated["Location"])
    assert answer["Cache-Control"] == "no-store"  # it shows the new secret
    shown = answer.content.decode()
    raw = re.search(r'id="new-key">(tts_\w+)<', shown).group(1)
    assert "The new secret of “bob's app”" in html.unescape(shown) and raw.startswith(f"tts_{mine.prefix}_")
    mine.refresh_from_db()
    assert mine.matches(raw) and mine.previous_valid_until is not None  # the old one for an hour more
    assert client.post(f"/dashboard/keys/{mine.prefix}/revoke").status_code == 302
    assert ApiKey.objects.get(pk=key.pk).revoked_at is None and ApiKey.objects.get(pk=mine.pk).revoked_at


def test_another_organizations_key_and_job_are_404(client):
    signup(client)
    other = Organization.objects.create(name="Globex", slug="globex")
    key, _ = other.create_api_key("theirs")
    assert client.post(f"/dashboard/keys/{key.prefix}/revoke").status_code == 404
    assert client.get("/dashboard/jobs/00000000-0000-0000-0000-000000000000/audio").status_code == 404
    assert b"theirs" not in client.get("/dashboard/keys").content
    assert ApiKey.objects.get(pk=key.pk).revoked_at is None


def test_a_user_in_two_organizations_switches_between_them(client):
    signup(client)
    user = get_user_model().objects.get()
    second = Organization.objects.create(name="Second Co", slug="second-co")
    Membership.objects.create(user=user, organization=second, role="admin")
    assert b"<h1>Analytical Engines</h1>" in client.get("/dashboard/").content
    client.post("/dashboard/switch", {"organization": second.pk})
    assert b"<h1>Second Co</h1>" in client.get("/dashboard/").content
    stranger = Organization.objects.create(name="Stranger", slug="stranger")
    assert client.post("/dashboard/switch", {"organization": stranger.pk}).status_code == 404


def test_the_overview_shows_this_months_usage_from_the_ledger(client):
    signup(client)
    org = Organization.objects.get()
    for chars, cached in ((120, False), (80, True)):
        UsageEvent.objects.create(
            organization=org, characters=chars, audio_seconds=30, model="chattts", voice="alloy", cached=cached
        )

    quota.charge(org, 200, 10_000)
    page = client.get("/dashboard/").content.decode()
    assert 'id="quota-used">200<' in page and 'id="stat-requests">2<' in page
    assert 'id="stat-minutes">1.0<' in page and 'id="stat-hit-rate">50.0%<' in page
    assert 'id="overview-chart-total">200 characters in 30 days' in page


def test_only_staff_open_the_operations_page(client, redis_client):
    signup(client)
    assert client.get("/ops/").status_code == 302  # to the admin login: not staff
    staff = get_user_model().objects.create_user("ops@example.com", "ops@example.com", "pw-for-ops-123", is_staff=True)
    client.force_login(staff)
    page = client.get("/ops/")
    assert page.status_code == 200
    ops = page.context["ops"]
    assert set(ops["queues"]) == {"tts-chattts", "tts-kokoro", "default"} and ops["jobs_last_hour"] == 0
    assert b'id="queue-tts-chattts"' in page.content and b'id="queue-tts-kokoro"' in page.content


def test_operators_suspend_and_unsuspend_from_the_admin(client):
    signup(client)
    org = Organization.objects.get()
    admin_user = get_user_model().objects.create_superuser("root@example.com", "root@example.com", "pw-root-12345")
    client.force_login(admin_user)
    asked = client.post("/admin/accounts/organization/", {"action": "suspend", "_selected_action": [org.pk]})
    # Before: suspended at once, the reason always "suspended by an operator". Now a confirmation, with the reason.
    assert asked.status_code == 200 and b'name="reason"' in asked.content and b"Analytical Engines" in asked.content
    org.refresh_from_db()
    assert not org.is_suspended
    chosen = {"action": "suspend", "_selected_action": [org.pk], "apply": "Suspend"}
    blank = client.post("/admin/accounts/organization/", {**chosen, "reason": "  "})
    assert b"This field is required." in blank.content
    response = client.post(
        "/admin/accounts/organization/", {**chosen, "reason": "abuse reports; write to abuse@op.example."}, follow=True
    )
    assert response.status_code == 200
    org.refresh_from_db()
    assert org.is_suspended and org.suspension_reason == "abuse reports; write to abuse@op.example"
    event = AuditEvent.objects.get(organization=org, action="staff.suspended")
    assert event.after == {"suspension_reason": org.suspension_reason}
    tenant = Client()
    tenant.force_login(get_user_model().objects.get(email="ada@example.com"))
    shown = tenant.get("/dashboard/").content.decode()  # the tenant's banner says it word for word
    assert "is suspended</strong>: abuse reports; write to abuse@op.example." in html.unescape(shown)
    client.post("/admin/accounts/organization/", {"action": "unsuspend", "_selected_action": [org.pk]})
    org.refresh_from_db()
    assert not org.is_suspended
    for path in (
        "/admin/billing/plan/",
        "/admin/billing/usageevent/",
        "/admin/synthesis/job/",
        f"/admin/accounts/organization/{org.pk}/change/",
        "/admin/accounts/apikey/",
    ):
        assert client.get(path).status_code == 200, path


def test_an_owner_invites_a_teammate_who_joins_and_can_be_removed(client):
    signup(client)
    org = Organization.objects.get()
    response = client.post("/dashboard/members", {"email": "Bob@Example.com", "role": "member"})
    assert response.status_code == 302
    assert len(mail.outbox) == 1 and mail.outbox[0].to == ["bob@example.com"]
    link = re.search(r"http://\S+/dashboard/invite/\S+", mail.outbox[0].body).group(0)
    path = link.split("testserver", 1)[1]
    owner_client_session = client.session.session_key
    client.logout()
    form = client.get(path).content.decode()  # a password manager saves the address with the password
    assert 'value="bob@example.com" autocomplete="username" readonly' in form
    assert 'autocomplete="new-password"' in form
    assert client.post(path, {"password": "short"}).status_code == 200  # field error, nobody created
    joined = client.post(path, {"password": "bobs long password"})
    assert joined.status_code == 302
    bob = Membership.objects.get(user__email="bob@example.com")
    assert bob.organization == org and bob.role == "member"
    assert client.get(path).status_code == 410  # used: it says so
    assert client.post("/dashboard/members", {"email": "eve@example.com", "role": "admin"}).status_code == 403
    assert owner_client_session
    ada = get_user_model().objects.get(email="ada@example.com")
    client.force_login(ada)
    client.post(f"/dashboard/members/{bob.pk}/remove")
    assert not Membership.objects.filter(pk=bob.pk).exists()
    owner = Membership.objects.get(user=ada)
    client.post(f"/dashboard/members/{owner.pk}/remove")
    assert Membership.objects.filter(pk=owner.pk).exists()  # the last owner stays


def test_password_reset_by_email(client):
    signup(client)
    client.logout()
    client.post("/accounts/password_reset/", {"email": "ada@example.com"})
    assert len(mail.outbox) == 1
    body = mail.outbox[0].body
    # Before: signed "The 127.0.0.1:8123 team" (the host and port), a placeholder site once sites came in.
    assert "http://testserver/accounts/reset/" in body and "The tts_saas team" in body
    assert "example.com/" not in body and "example.com team" not in body
    path = re.search(r"/accounts/reset/\S+/", body).group(0)
    form_page = client.get(path, follow=True)
    set_url = form_page.redirect_chain[-1][0] if form_page.redirect_chain else path
    done = client.post(set_url, {"new_password1": "a brand new password", "new_password2": "a brand new password"})
    assert done.status_code == 302
    assert client.login(username="ada@example.com", password="a brand new password")


def test_where_the_server_sends_no_mail_the_reset_says_so_and_whom_to_ask(client, settings):
    """Before: "an e-mail with a link is on its way" from a server whose mail goes to its console."""
    settings.EMAIL_BACKEND = "django.core.mail.backends.console.EmailBackend"  # scripts/run's default
    settings.TTS_OPERATOR_CONTACT = "help@operator.example"
    asked = html.unescape(client.get("/accounts/password_reset/").content.decode())
    assert "This server sends no e-mail, so no reset link can reach you." in asked
    assert 'href="mailto:help@operator.example"' in asked and "manage.py changepassword" in asked
    done = html.unescape(
        client.post("/accounts/password_reset/", {"email": "ada@example.com"}, follow=True).content.decode()
    )
    assert "No e-mail was sent." in done and "on its way" not in done
    settings.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"  # configured: as before
    assert "sends no e-mail" not in client.get("/accounts/password_reset/").content.decode()
    assert "on its way" in client.get("/accounts/password_reset/done/").content.decode()


def test_the_api_reference_is_served_with_local_assets(client):
    page = client.get("/v1/docs")
    assert page.status_code == 200 and b"redoc" in page.content.lower()
    asset = re.search(rb'src="(/static/[^"]*redoc[^"]*)"', page.content)
    assert asset and client.get(asset.group(1).decode()).status_code == 200


def test_the_docs_page_shows_examples_with_a_key_placeholder_and_the_websocket_protocol(client):
    signup(client)
    key, _ = Organization.objects.get().create_api_key("docs")
    page = client.get("/dashboard/docs")
    assert key.prefix.encode() not in page.content and b"$TTS_API_KEY" in page.content  # no key cut short
    assert b"tts.v1" in page.content and b"/v1/audio/stream/tickets" in page.content
    assert b'href="/v1/docs"' in page.content


def test_a_signed_in_invitee_joins_only_by_confirming_never_by_following_a_link(client):
    signup(client)
    client.post("/dashboard/members", {"email": "carol@example.com", "role": "member"})
    path = re.search(r"/dashboard/invite/\S+", mail.outbox[0].body).group(0)
    carol = get_user_model().objects.create_user("carol@example.com", "carol@example.com", "carols long password")
    client.force_login(carol)
    page = client.get(path)  # a link from anywhere: shows the invitation, changes nothing
    assert page.status_code == 200 and b"Join" in page.content
    assert not Membership.objects.filter(user=carol).exists()
    assert client.post(path).status_code == 302
    assert Membership.objects.filter(user=carol).count() == 1
    assert client.post(path).status_code == 410  # once


def test_a_password_reset_refuses_a_weak_password(client):
    signup(client)
    client.logout()
    client.post("/accounts/password_reset/", {"email": "ada@example.com"})
    path = re.search(r"/accounts/reset/\S+/", mail.outbox[0].body).group(0)
    form_page = client.get(path, follow=True)
    set_url = form_page.redirect_chain[-1][0] if form_page.redirect_chain else path
    weak = client.post(set_url, {"new_password1": "x", "new_password2": "x"})
    assert weak.status_code == 200  # the form again, with the validators' errors
    assert not client.login(username="ada@example.com", password="x")


def test_an_address_is_invited_once_and_the_link_is_offered_when_no_mail_is_sent(client):
    signup(client)
    sent = client.post("/dashboard/members", {"email": "Dave@Example.com", "role": "member"}, follow=True)
    link = re.search(r"/dashboard/invite/\S+", mail.outbox[0].body).group(0)
    shown = html.unescape(sent.content.decode())
    # The test settings' e-mail backend delivers nothing to anyone: the page says so and gives the link.
    assert "This server does not send e-mail" in shown and f"http://testserver{link}" in shown
    assert "EMAIL_BACKEND" not in shown  # before: an operator's setting named to tenants
    assert f'data-link="http://testserver{link}"' in shown  # Copy link on the pending row
    twice = client.post("/dashboard/members", {"email": "dave@example.com", "role": "admin"})
    assert twice.status_code == 200 and "dave@example.com is invited already" in twice.content.decode()
    member = client.post("/dashboard/members", {"email": "ADA@example.com", "role": "member"})
    assert member.status_code == 200 and "ada@example.com is a member already" in member.content.decode()
    assert Invitation.objects.count() == 1 and len(mail.outbox) == 1


def test_an_admin_withdraws_a_pending_invitation_and_its_link_stops_working(client):
    signup(client)
    client.post("/dashboard/members", {"email": "dave@example.com", "role": "member"})
    invitation = Invitation.objects.get(email="dave@example.com")
    path = re.search(r"/dashboard/invite/\S+", mail.outbox[0].body).group(0)
    assert client.post(f"/dashboard/invitations/{invitation.pk}/revoke").status_code == 302
    assert not Invitation.objects.filter(pk=invitation.pk).exists()
    client.logout()
    assert client.get(path).status_code == 404
    other = Organization.objects.create(name="Elsewhere", slug="elsewhere")
    foreign = Invitation.objects.create(organization=other, email="x@example.com")
    ada = get_user_model().objects.get(email="ada@example.com")
    client.force_login(ada)
    assert client.post(f"/dashboard/invitations/{foreign.pk}/revoke").status_code == 404  # not theirs
    assert Invitation.objects.filter(pk=foreign.pk).exists()


def test_a_suspended_organization_can_read_its_pages_but_change_nothing(client, settings):
    signup(client)
    Organization.objects.get().create_api_key("ci")
    settings.TTS_OPERATOR_CONTACT = "help@operator.example"
    Organization.objects.update(suspended_at=timezone.now(), suspension_reason="unpaid")
    keys = client.get("/dashboard/keys")
    assert keys.status_code == 200
    # Told on every page: why, what it means, whom to ask (before: nothing; keys said "active").
    banner = re.search(r'<div class="notice" id="suspended-banner" role="alert">(.*?)</div>', keys.content.decode())
    assert banner and "is suspended</strong>: unpaid." in banner.group(1)
    assert 'href="mailto:help@operator.example"' in banner.group(1)
    assert "refused while suspended" in text(keys) and "No key can be made while" in text(keys)
    assert 'id="suspended-banner"' in client.get("/dashboard/voices").content.decode()
    preview = client.get("/dashboard/voices/alloy/preview")
    assert preview.status_code == 403 and "suspended: unpaid" in preview.json()["error"]["message"]
    ticket = client.post("/dashboard/playground/ticket")  # what Play asks first: the reason, as JSON
    assert ticket.status_code == 403 and "suspended: unpaid" in ticket.json()["error"]["message"]
    assert client.post("/dashboard/keys", {"name": "new", "kind": "standard"}).status_code == 403
    assert client.post("/dashboard/members", {"email": "e@example.com", "role": "member"}).status_code == 403
    encode = client.post("/dashboard/playground/encode?format=mp3", b"\0\0", content_type="application/octet-stream")
    assert encode.status_code == 403
    assert ApiKey.objects.count() == 1  # only the one made before


def add_member(org, email="bob@example.com"):
    """A signed-up member (read-only role) of `org`."""
    user = get_user_model().objects.create_user(email, email, "correct horse battery")
    Membership.objects.create(user=user, organization=org, role="member")
    return user


def embedding(seed: int = 3) -> str:
    """A ChatTTS speaker embedding string: base16384 of LZMA2-compressed float16 values."""
    values = np.random.default_rng(seed).standard_normal(768).astype(np.float16).tobytes()
    filters = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
    return b14.encode_to_string(lzma.compress(values, format=lzma.FORMAT_RAW, filters=filters))


def text(response) -> str:
    """The page as a user reads it: tags dropped, entities such as &#x27; decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def test_an_owner_creates_voices_uses_one_in_the_playground_and_deletes_it(client):
    signup(client)
    page = client.get("/dashboard/voices")
    assert "0 of 3 voices of your own used" in text(page) and "alloy" in text(page)
    shown = page.content.decode()  # the library first, then the form (before: the form above the library)
    assert shown.index('id="builtin-title"') < shown.index("<h2>Create a voice</h2>")
    assert '<a href="#create-voice">Create a voice of your own</a>' in shown
    created = client.post(
        "/dashboard/voices",
        {"name": "Narrator", "description": "Calm and slow.", "model": "chattts", "source": "seed", "seed": "42"},
    )
    assert created.status_code == 302 and created["Location"] == "/dashboard/voices"
    voice = Voice.objects.get()
    assert (voice.name, voice.model, voice.source, voice.seed, voice.description) == (
        "Narrator",
        "chattts",
        "seed",
        42,
        "Calm and slow.",
    )
    page = client.post(
        "/dashboard/voices",
        {"name": "Kept", "model": "chattts", "source": "embedding", "speaker": embedding()},
        follow=True,
    )
    shown = text(page)
    assert "Voice Kept created" in shown and "2 of 3 voices of your own used" in shown
    assert f"Narrator {voice.id} ChatTTS Calm and slow. seed 42 Preview not billed Use in playground" in shown
    assert "Kept" in shown and "embedding" in shown
    assert f'href="/dashboard/playground?model=chattts&amp;voice={voice.id}"'.encode() in page.content
    assert f'data-url="/dashboard/voices/{voice.id}/preview"'.encode() in page.content  # its own model

    playground = client.get(f"/dashboard/playground?voice={voice.id}")
    assert f'<option value="{voice.id}" selected>Narrator</option>'.encode() in playground.content
    built_in = '<option value="alloy">alloy · Seed 1111: a fixed random speaker</option>'  # built-in first
    assert built_in in playground.content.decode()
    assert b'<option value="nova" selected>' in client.get("/dashboard/playground?voice=nova").content

    deleted = client.post(f"/dashboard/voices/{voice.id}/delete")
    assert deleted.status_code == 302 and deleted["Location"] == "/dashboard/voices"
    assert "Voice Narrator deleted" in text(client.get("/dashboard/voices"))
    page = text(client.get("/dashboard/voices"))  # the message shown once
    assert "Narrator" not in page and "1 of 3 voices of your own used" in page
    assert list(Voice.objects.values_list("name", flat=True)) == ["Kept"]


def test_the_voice_form_shows_the_apis_errors_and_the_plans_limit(client):
    signup(client)

    def refused(**fields) -> str:
        response = client.post("/dashboard/voices", {"model": "chattts", "source": "seed", **fields})
        assert response.status_code == 200
        return text(response)

    assert "'alloy' is a built-in voice's name" in refused(name="alloy", seed="1")
    # Plain words on the field (before: the API's "name: This field may not be blank.", "speaker is not a
    # ChatTTS speaker embedding string (base16384 of LZMA2-compressed float16 values)").
    assert "Give it a name." in refused(name="", seed="1")
    assert "Enter a whole number." in refused(name="Seedless", seed="")
    page = refused(name="Broken", source="embedding", speaker="not an embedding")
    assert "That is not a speaker embedding: paste the whole string" in page
    assert "base16384" not in page and "This field may not be blank" not in page
    assert (
        'value="Broken"'
        in client.post(
            "/dashboard/voices", {"name": "Broken", "model": "chattts", "source": "embedding", "speaker": "x"}
        ).content.decode()
    )  # what was typed stays
    assert not Voice.objects.exists()
    for n in range(3):
        created = client.post("/dashboard/voices", {"name": f"V{n}", "model": "chattts", "source": "seed", "seed": n})
        assert created.status_code == 302
    page = refused(name="V3", seed="3")
    assert "Your plan allows 3 voices of your own; delete one first." in page and "3 of 3 voices" in page
    Voice.objects.filter(name="V2").delete()
    assert "A voice named 'V0' exists already." in refused(name="V0", seed="9")
    assert Voice.objects.count() == 2


def test_a_member_sees_voices_and_lexicons_but_cannot_change_them(client):
    signup(client)
    org = Organization.objects.get()
    voice = create_voice(org, {"name": "Narrator", "seed": 42})
    lexicon = save_lexicon(Lexicon(organization=org), {"name": "Brands", "entries": [{"text": "SQL", "alias": "x"}]})
    client.force_login(add_member(org))
    voices = text(client.get("/dashboard/voices"))
    assert "Narrator" in voices and "Preview" in voices and "Use in playground" in voices
    assert "can see and preview voices but not create or delete them" in voices
    assert "Create a voice" not in voices and "Delete" not in voices
    assert (
        client.post(
            "/dashboard/voices", {"name": "Mine", "model": "chattts", "source": "seed", "seed": "1"}
        ).status_code
        == 403
    )
    assert client.post(f"/dashboard/voices/{voice.id}/delete").status_code == 403
    lexicons = text(client.get("/dashboard/lexicons"))
    assert "Brands" in lexicons and "can see lexicons but not change them" in lexicons and "Delete" not in lexicons
    edit = client.get(f"/dashboard/lexicons/{lexicon.id}")
    assert edit.status_code == 200 and b"<fieldset disabled>" in edit.content and b"SQL = x" in edit.content
    assert client.post("/dashboard/lexicons", {"name": "Mine", "entries": "a = b"}).status_code == 403
    assert client.post(f"/dashboard/lexicons/{lexicon.id}", {"name": "Renamed", "entries": ""}).status_code == 403
    assert client.post(f"/dashboard/lexicons/{lexicon.id}/delete").status_code == 403
    assert Voice.objects.count() == 1 and list(Lexicon.objects.values_list("name", "entries")) == [
        ("Brands", [{"text": "SQL", "alias": "x", "phonemes": "", "case_sensitive": False}])
    ]


def test_another_organizations_voices_and_lexicons_are_404(client):
    signup(client)
    other = Organization.objects.create(name="Globex", slug="globex")
    voice = create_voice(other, {"name": "Theirs", "seed": 7})
    lexicon = save_lexicon(Lexicon(organization=other), {"name": "Their words", "entries": []})
    assert client.post(f"/dashboard/voices/{voice.id}/delete").status_code == 404
    assert client.get(f"/dashboard/lexicons/{lexicon.id}").status_code == 404
    assert client.post(f"/dashboard/lexicons/{lexicon.id}", {"name": "Mine now", "entries": ""}).status_code == 404
    assert client.post(f"/dashboard/lexicons/{lexicon.id}/delete").status_code == 404
    assert client.post("/dashboard/voices/alloy/delete").status_code == 404  # built-in voices are read-only
    assert "Theirs" not in text(client.get("/dashboard/voices"))
    assert "Their words" not in text(client.get("/dashboard/lexicons"))
    assert voice.id.encode() not in client.get(f"/dashboard/playground?voice={voice.id}").content
    assert Voice.objects.filter(pk=voice.pk).exists()
    assert Lexicon.objects.get(pk=lexicon.pk).name == "Their words"


def test_an_owner_creates_edits_and_deletes_a_lexicon(client):
    signup(client)
    page = text(client.get("/dashboard/lexicons"))
    assert "No lexicons yet." in page and "0 of 100 entries used" in page
    created = client.post(
        "/dashboard/lexicons",
        {"name": "Brands", "is_default": "on", "entries": "SQL = sequel\r\n\r\n  nginx = engine x (case)\r\n"},
    )
    assert created.status_code == 302 and created["Location"] == "/dashboard/lexicons"
    lexicon = Lexicon.objects.get()
    assert lexicon.is_default and lexicon.entries == [
        {"text": "SQL", "alias": "sequel", "phonemes": "", "case_sensitive": False},
        {"text": "nginx", "alias": "engine x", "phonemes": "", "case_sensitive": True},
    ]
    page = text(client.get("/dashboard/lexicons"))
    assert "Lexicon Brands created with 2 entries, applied to every request." in page
    assert f"Brands {lexicon.id} 2 yes" in page and "2 of 100 entries used" in page

    edit = client.get(f"/dashboard/lexicons/{lexicon.id}")
    assert b"SQL = sequel\nnginx = engine x (case)</textarea>" in edit.content
    assert b'name="is_default" id="id_is_default" checked' in edit.content
    entries = "SQL = sequel\n3M = three em\nk8s=kates"
    saved = client.post(f"/dashboard/lexicons/{lexicon.id}", {"name": "Brand names", "entries": entries})
    assert saved.status_code == 302 and saved["Location"] == "/dashboard/lexicons"
    lexicon.refresh_from_db()
    assert lexicon.name == "Brand names" and not lexicon.is_default
    assert [(e["text"], e["alias"]) for e in lexicon.entries] == [
        ("SQL", "sequel"),
        ("3M", "three em"),
        ("k8s", "kates"),
    ]
    page = text(client.get("/dashboard/lexicons"))
    assert "Lexicon Brand names saved with 3 entries." in page and f"Brand names {lexicon.id} 3 no" in page

    assert client.post(f"/dashboard/lexicons/{lexicon.id}/delete").status_code == 302
    assert "Lexicon Brand names deleted" in text(client.get("/dashboard/lexicons")) and not Lexicon.objects.exists()


def test_the_lexicon_form_shows_the_apis_errors_by_line_and_the_plans_limit(client):
    signup(client)

    def refused(entries: str, name: str = "Words", path: str = "/dashboard/lexicons") -> str:
        response = client.post(path, {"name": name, "entries": entries})
        assert response.status_code == 200
        return text(response)

    assert "Line 3: 'sql' repeats line 1." in refused("SQL = sequel\n\nsql = ess queue ell")
    assert re.search(r"Line 2( \(alias\))?: give an alias", refused("SQL = sequel\nnginx ="), re.IGNORECASE)
    assert "Line 2: write an entry as text = alias, or text = /phonemes/." in refused("SQL = sequel\njust words")
    assert "Give it a name." in refused("SQL = sequel", name="")
    page = refused("\n".join(f"word{n} = alias" for n in range(101)))
    assert "Your plan allows 100 lexicon entries in all; this would make 101." in page
    response = client.post("/dashboard/lexicons", {"name": "Words", "entries": "SQL = sequel\nsql = again"})
    assert b"SQL = sequel\nsql = again</textarea>" in response.content  # what was typed stays
    assert not Lexicon.objects.exists()

    client.post("/dashboard/lexicons", {"name": "Taken", "entries": "a = b"})
    client.post("/dashboard/lexicons", {"name": "Words", "entries": "c = d"})
    words = Lexicon.objects.get(name="Words")
    page = refused("c = d", name="Taken", path=f"/dashboard/lexicons/{words.id}")
    assert "A lexicon named 'Taken' exists already." in page and "Lexicon Words" in page
    assert "2 of 100 entries used" in page
    assert Lexicon.objects.get(pk=words.pk).name == "Words"


def test_the_playground_encodes_what_it_generated_in_the_formats_the_plan_allows(client):
    signup(client)
    org = Organization.objects.get()
    page = client.get("/dashboard/playground").content.decode()
    assert '<option value="mp3" data-extension="mp3">mp3</option>' in page
    assert '<option value="ulaw_8000" data-extension="ulaw">ulaw_8000</option>' in page
    tone = (np.sin(np.arange(24_000) * 2 * np.pi * 440 / 24_000) * 8000).astype("<i2").tobytes()  # 1 s

    def encode(name: str, body: bytes = tone):
        return client.post(f"/dashboard/playground/encode?format={name}", body, content_type="application/octet-stream")

    flac = encode("flac")
    assert flac.status_code == 200 and flac["Content-Type"] == "audio/flac"
    assert flac["Content-Disposition"] == 'attachment; filename="speech.flac"' and flac.content[:4] == b"fLaC"
    ulaw = encode("ulaw_8000")
    assert ulaw.status_code == 200 and len(ulaw.content) == 8_000  # one second at 8 kHz, a byte a sample
    assert UsageEvent.objects.count() == 0  # encoded, not generated: nothing billed

    odd = encode("mp3", tone[:-1])
    assert odd.status_code == 400 and odd.json()["error"]["code"] == "invalid_audio"
    unknown = encode("mp4")
    assert unknown.status_code == 400 and unknown.json()["error"]["param"] == "format"
    minute = encode("ulaw_8000", tone * 60)  # larger than other bodies may be (2 MiB)
    assert minute.status_code == 200 and len(minute.content) == 60 * 8_000
    too_long = encode("mp3", bytes(601 * 24_000 * 2))  # over ten minutes
    assert too_long.status_code == 413 and too_long.json()["error"]["code"] == "request_too_large"
    assert client.post("/dashboard/keys", bytes(3 << 20), content_type="application/octet-stream").status_code == 413
    as_json = client.post("/dashboard/playground/encode?format=mp3", bytes(3 << 20), content_type="application/json")
    assert as_json.status_code == 413  # the larger limit is for PCM only

    lock = f"tts:playground-encode:{org.pk}"
    get_redis().set(lock, "another download", ex=60)  # one encode at a time per organization
    busy = encode("flac")
    assert busy.status_code == 429 and busy.json()["error"]["code"] == "encoding_busy" and busy["Retry-After"] == "5"
    get_redis().delete(lock)
    assert encode("flac").status_code == 200 and not get_redis().exists(lock)  # released after

    own_plan(org, "fewer-codecs", allowed_formats=["mp3", "wav"])  # a plan that sells fewer codecs
    page = client.get("/dashboard/playground").content.decode()
    assert 'value="mp3"' in page and 'value="flac"' not in page
    assert encode("flac").status_code == 400 and encode("mp3").status_code == 200
    assert client.get("/dashboard/playground/encode?format=mp3").status_code == 405


def test_form_errors_are_tied_to_their_fields(client):
    signup(client)
    client.post("/dashboard/keys", {"name": "ci", "kind": "standard", "expires": "never"})
    page = client.post("/dashboard/keys", {"name": "CI", "kind": "standard", "expires": "date"}).content.decode()
    assert 'aria-invalid="true" aria-describedby="id_name_error"' in page
    assert '<div class="error" id="id_name_error">A key named “CI” exists already: choose another name.</div>' in page
    assert 'aria-describedby="id_expires_on_helptext id_expires_on_error"' in page
    assert '<div class="muted help" id="id_expires_on_helptext">with “On a date”</div>' in page
    client.logout()
    login = client.post("/accounts/login/", {"username": "ada@example.com", "password": "wrong"}).content.decode()
    assert '<p class="error" role="alert" id="login-error">' in login
    assert 'autocomplete="username"' in login and 'autocomplete="current-password"' in login


def test_the_overview_and_usage_count_the_same_requests(client):
    """Before: the overview counted only succeeded requests (6, 16.7 % from the cache) where Usage
    counted every request (7, 14.3 %) for the same day."""
    signup(client)
    org = Organization.objects.get()
    outcomes = [("succeeded", False)] * 5 + [("succeeded", True), ("failed", False)]
    for status, cached in outcomes:
        UsageEvent.objects.create(organization=org, characters=10, model="chattts", status=status, cached=cached)
    overview = client.get("/dashboard/").content.decode()
    usage = client.get("/dashboard/usage").content.decode()
    assert 'id="stat-requests">7<' in overview and "requests this month (1 failed)" in overview
    assert 'id="stat-hit-rate">14.3%<' in overview
    assert 'id="total-requests">7<' in usage and "14.3" in usage


def test_history_and_usage_say_precisely_that_refused_calls_are_not_listed(client):
    """Before: the pages said "Every request" while a 400 or 401 answer showed on neither."""
    signup(client)
    org = Organization.objects.get()
    _, raw = org.create_api_key("ci", kind="standard")
    refused = client.post(
        "/v1/lexicons", {"name": ""}, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}"
    )
    assert refused.status_code == 400, refused.content
    history = client.get("/dashboard/history").content.decode()
    assert "Every request the service accepted" in history and "(a bad request 400, a wrong key 401" in history
    assert 'id="history-count" class="muted"></p>' in history  # the refused call is not a row
    usage = client.get("/dashboard/usage").content.decode()
    assert "Calls refused at the door (400, 401, 429) are not counted." in usage


def test_a_new_organization_is_led_from_a_key_to_a_call_to_the_playground(client):
    """Before: the first run led nowhere: an empty overview."""
    signup(client)
    org = Organization.objects.get()
    first = client.get("/dashboard/").content.decode()
    assert 'id="getting-started"' in first and '<a href="/dashboard/keys">Create an API key</a>' in first
    key, _ = org.create_api_key("ci", kind="standard")
    UsageEvent.objects.create(organization=org, api_key=key, characters=5, model="chattts")
    then = client.get("/dashboard/").content.decode()
    assert "<s>Create an API key</s>" in then and "<s>Call the API with it" in then
    assert '<a href="/dashboard/playground">Hear the voices in the playground</a>' in then
    UsageEvent.objects.create(organization=org, characters=5, model="chattts")  # a play: no key
    with CaptureQueriesContext(connection) as found:
        assert 'id="getting-started"' not in client.get("/dashboard/").content.decode()  # all done: gone
    with CaptureQueriesContext(connection) as later:
        assert 'id="getting-started"' not in client.get("/dashboard/").content.decode()
    assert len(later.captured_queries) <= len(found.captured_queries) - 3  # its three look-ups: not again
