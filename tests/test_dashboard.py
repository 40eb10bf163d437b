"""The developer dashboard through Django's test client (the browser tests come with the
playground): sign-up, scoping to the current organization, key management by role."""

from __future__ import annotations

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.utils import timezone

from accounts.auth import authenticate_key
from accounts.models import ApiKey, Invitation, Membership, Organization
from billing import quota
from billing.models import UsageEvent
from tts_saas.errors import ApiError

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


def test_pages_need_a_login(client):
    for path in ("/dashboard/", "/dashboard/keys", "/dashboard/jobs", "/dashboard/voices", "/dashboard/docs"):
        response = client.get(path)
        assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")


def test_an_owner_creates_a_key_shown_once_that_works_then_revokes_it(client):
    signup(client)
    created = client.post("/dashboard/keys", {"name": "backend", "kind": "standard"})
    assert created.status_code == 200
    raw = created.context["created"]["raw"]
    assert raw.encode() in created.content and b"shown only this once" in created.content
    assert raw.encode() not in client.get("/dashboard/keys").content
    assert authenticate_key(f"Bearer {raw}").organization.name == "Analytical Engines"
    prefix = ApiKey.objects.get(name="backend").prefix
    revoked = client.post(f"/dashboard/keys/{prefix}/revoke")
    assert revoked.status_code == 302
    with pytest.raises(ApiError):
        authenticate_key(f"Bearer {raw}")


def test_a_member_cannot_manage_keys(client):
    signup(client)
    org = Organization.objects.get()
    key, _ = org.create_api_key("existing")
    member = get_user_model().objects.create_user("bob@example.com", "bob@example.com", "correct horse battery")
    Membership.objects.create(user=member, organization=org, role="member")
    client.force_login(member)
    page = client.get("/dashboard/keys")
    assert page.status_code == 200 and b"can see keys but not create or revoke them" in page.content
    assert client.post("/dashboard/keys", {"name": "x", "kind": "standard"}).status_code == 403
    assert client.post(f"/dashboard/keys/{key.prefix}/revoke").status_code == 403
    assert ApiKey.objects.count() == 1 and ApiKey.objects.get().revoked_at is None


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
    page = client.get("/dashboard/")
    assert page.context["used"] == 200 and page.context["requests"] == 2
    assert page.context["audio_minutes"] == 1.0 and page.context["hit_rate"] == 50.0
    assert page.context["chart"]["total"] == 200
    assert b'id="stat-requests">2<' in page.content


def test_only_staff_open_the_operations_page(client, redis_client):
    signup(client)
    assert client.get("/ops/").status_code == 302  # to the admin login: not staff
    staff = get_user_model().objects.create_user("ops@example.com", "ops@example.com", "pw-for-ops-123", is_staff=True)
    client.force_login(staff)
    page = client.get("/ops/")
    assert page.status_code == 200
    ops = page.context["ops"]
    assert set(ops["queues"]) == {"tts", "default"} and ops["jobs_last_hour"] == 0
    assert b'id="queue-tts"' in page.content


def test_operators_suspend_and_unsuspend_from_the_admin(client):
    signup(client)
    org = Organization.objects.get()
    admin_user = get_user_model().objects.create_superuser("root@example.com", "root@example.com", "pw-root-12345")
    client.force_login(admin_user)
    response = client.post(
        "/admin/accounts/organization/", {"action": "suspend", "_selected_action": [org.pk]}, follow=True
    )
    assert response.status_code == 200
    org.refresh_from_db()
    assert org.is_suspended
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
    assert client.post(path, {"password": "short"}).status_code == 200  # field error, nobody created
    joined = client.post(path, {"password": "bobs long password"})
    assert joined.status_code == 302
    bob = Membership.objects.get(user__email="bob@example.com")
    assert bob.organization == org and bob.role == "member"
    assert client.get(path).status_code == 404  # used
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
    path = re.search(r"/accounts/reset/\S+/", mail.outbox[0].body).group(0)
    form_page = client.get(path, follow=True)
    set_url = form_page.redirect_chain[-1][0] if form_page.redirect_chain else path
    done = client.post(set_url, {"new_password1": "a brand new password", "new_password2": "a brand new password"})
    assert done.status_code == 302
    assert client.login(username="ada@example.com", password="a brand new password")


def test_the_api_reference_is_served_with_local_assets(client):
    page = client.get("/v1/docs")
    assert page.status_code == 200 and b"redoc" in page.content.lower()
    asset = re.search(rb'src="(/static/[^"]*redoc[^"]*)"', page.content)
    assert asset and client.get(asset.group(1).decode()).status_code == 200


def test_the_docs_page_shows_examples_with_the_key_prefix_and_the_websocket_protocol(client):
    signup(client)
    key, _ = Organization.objects.get().create_api_key("docs")
    page = client.get("/dashboard/docs")
    assert f"tts_{key.prefix}_".encode() in page.content
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
    assert client.post(path).status_code == 404  # once


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


def test_a_suspended_organization_can_read_its_pages_but_change_nothing(client):
    signup(client)
    Organization.objects.update(suspended_at=timezone.now(), suspension_reason="unpaid")
    assert client.get("/dashboard/keys").status_code == 200
    assert client.post("/dashboard/keys", {"name": "new", "kind": "standard"}).status_code == 403
    assert client.post("/dashboard/members", {"email": "e@example.com", "role": "member"}).status_code == 403
    assert client.post("/dashboard/playground/ticket").status_code == 403
    assert not ApiKey.objects.exists()
