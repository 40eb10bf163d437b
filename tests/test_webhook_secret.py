"""The webhook signing secret: read and rotated with an admin key (GET /v1/webhooks/secret, POST
/v1/webhooks/secret/rotate); never cached, never another organization's, never shown to a standard
key."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.test import Client
from django.utils import timezone

from accounts import actions
from accounts.models import Organization

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
