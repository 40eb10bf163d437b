"""The webhook signing secret: read and rotated with an admin key (GET /v1/webhooks/secret, POST
/v1/webhooks/secret/rotate) or by an owner/admin on the dashboard's keys page; never cached, never
another organization's, never shown to a standard key or a plain member."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from accounts import actions
from accounts.models import Membership, Organization

SECRET_URL = "/v1/webhooks/secret"
ROTATE_URL = "/v1/webhooks/secret/rotate"


def api(key: str) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Bearer {key}")


def stored_secret(org) -> str:
    return Organization.objects.get(pk=org.pk).webhook_secret


def test_an_admin_key_reads_its_organizations_secret(owner):
    response = api(owner.key).get(SECRET_URL)
    assert response.status_code == 200
    assert response.json() == {"secret": stored_secret(owner.org), "rotated_at": None, "previous_valid_until": None}
    assert response["Cache-Control"] == "no-store"


def test_rotating_returns_a_new_secret_and_the_previous_ones_end_of_grace(owner):
    old = stored_secret(owner.org)
    response = api(owner.key).post(ROTATE_URL)
    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    body = response.json()
    assert body["secret"] != old and body["secret"] == stored_secret(owner.org)
    assert body["secret"].startswith("whsec_")
    rotated_at = datetime.fromisoformat(body["rotated_at"])
    valid_until = datetime.fromisoformat(body["previous_valid_until"])
    assert abs(rotated_at - timezone.now()) < timedelta(minutes=1)
    assert abs(valid_until - (timezone.now() + timedelta(hours=24))) < timedelta(minutes=1)
    assert api(owner.key).get(SECRET_URL).json() == body
    assert Organization.objects.get(pk=owner.org.pk).previous_webhook_secret == old


def test_after_the_grace_period_there_is_no_previous_secret_to_report(owner):
    actions.rotate_webhook_secret(owner.org)
    Organization.objects.filter(pk=owner.org.pk).update(webhook_secret_rotated_at=timezone.now() - timedelta(days=2))
    assert api(owner.key).get(SECRET_URL).json()["previous_valid_until"] is None


def test_a_standard_key_gets_403_and_changes_nothing(member):
    before = stored_secret(member.org)
    for response in (api(member.key).get(SECRET_URL), api(member.key).post(ROTATE_URL)):
        assert response.status_code == 403
        error = response.json()["error"]
        assert error["type"] == "permission_error" and error["code"] == "insufficient_permissions"
        assert before not in response.content.decode()
    assert stored_secret(member.org) == before


def test_without_a_key_it_is_401():
    assert Client().get(SECRET_URL).status_code == 401


def test_another_organizations_secret_is_never_shown_or_rotated(owner, outsider):
    victim = stored_secret(owner.org)
    read = api(outsider.key).get(SECRET_URL)
    assert read.json()["secret"] == stored_secret(outsider.org) != victim
    rotated = api(outsider.key).post(ROTATE_URL)
    assert victim not in read.content.decode() + rotated.content.decode()
    assert stored_secret(owner.org) == victim


def test_a_suspended_organization_cannot_rotate(owner):
    before = stored_secret(owner.org)
    Organization.objects.filter(pk=owner.org.pk).update(suspended_at=timezone.now())
    response = api(owner.key).post(ROTATE_URL)
    assert response.status_code == 403 and response.json()["error"]["code"] == "organization_suspended"
    assert stored_secret(owner.org) == before


def test_the_openapi_schema_describes_both_endpoints(db):
    schema = Client().get("/v1/openapi.json").json()
    ref = {"$ref": "#/components/schemas/WebhookSecret"}
    assert (
        schema["paths"]["/v1/webhooks/secret"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        == ref
    )
    rotate = schema["paths"]["/v1/webhooks/secret/rotate"]["post"]
    assert rotate["responses"]["200"]["content"]["application/json"]["schema"] == ref
    assert "requestBody" not in rotate
    assert set(schema["components"]["schemas"]["WebhookSecret"]["properties"]) == {
        "secret",
        "rotated_at",
        "previous_valid_until",
    }


# Dashboard -------------------------------------------------------------------------------------


@pytest.fixture
def dashboard_owner(db):
    user, org = actions.sign_up("ada@example.com", "correct horse battery", "Analytical Engines")
    client = Client()
    client.force_login(user)
    return client, org


def rotate_on_dashboard(client: Client):
    return client.post("/dashboard/keys", {"action": "rotate-webhook-secret"})


def test_an_owner_sees_the_secret_and_rotates_it_on_the_keys_page(dashboard_owner):
    client, org = dashboard_owner
    old = stored_secret(org)
    page = client.get("/dashboard/keys")
    assert b"Webhook signing secret" in page.content and old.encode() in page.content
    rotated = rotate_on_dashboard(client)
    assert rotated.status_code == 302 and rotated["Location"] == "/dashboard/keys"
    new = stored_secret(org)
    assert new != old
    page = client.get("/dashboard/keys")
    assert new.encode() in page.content and old.encode() not in page.content
    assert b"previous secret stays valid for 24 h" in page.content


def test_a_plain_member_neither_sees_nor_rotates_the_secret(dashboard_owner):
    _, org = dashboard_owner
    bob = get_user_model().objects.create_user("bob@example.com", "bob@example.com", "correct horse battery")
    Membership.objects.create(user=bob, organization=org, role="member")
    client = Client()
    client.force_login(bob)
    secret = stored_secret(org)
    page = client.get("/dashboard/keys")
    assert page.status_code == 200 and secret.encode() not in page.content
    assert b"Only owners and admins see the webhook signing secret" in page.content
    assert rotate_on_dashboard(client).status_code == 403
    assert stored_secret(org) == secret


def test_a_suspended_organizations_owner_cannot_rotate(dashboard_owner):
    client, org = dashboard_owner
    secret = stored_secret(org)
    Organization.objects.filter(pk=org.pk).update(suspended_at=timezone.now())
    assert rotate_on_dashboard(client).status_code == 403
    assert stored_secret(org) == secret
