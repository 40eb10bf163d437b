"""Key management over the API, and tenant isolation: another tenant's ids are 404."""

from __future__ import annotations

import httpx
import pytest
from django.utils import timezone

from accounts.models import ApiKey
from accounts.tenancy import TenantScopedViewSet
from tests import stack

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_admin_key_creates_a_key_whose_secret_is_shown_once(live_stack, owner):
    with live_stack.client(owner.key) as client:
        created = client.post("/keys", json={"name": "ci"})
        assert created.status_code == 201, created.text
        body = created.json()
        raw = body["key"]
        assert raw.startswith(f"tts_{body['id']}_") and body["kind"] == "standard"
        listed = client.get("/keys").json()["data"]
        assert {k["id"] for k in listed} == {body["id"], owner.org.api_keys.exclude(prefix=body["id"]).get().prefix}
        assert raw not in client.get("/keys").text
        assert raw.rsplit("_", 1)[1] not in client.get(f"/keys/{body['id']}").text
    with live_stack.client(raw) as client:
        assert client.get("/voices").status_code == 200


def test_creating_a_key_validates_its_fields(live_stack, owner):
    with live_stack.client(owner.key) as client:
        no_name = client.post("/keys", json={})
        past = client.post("/keys", json={"name": "old", "expires_at": "2001-01-01T00:00:00Z"})
        bad_kind = client.post("/keys", json={"name": "x", "kind": "root"})
    assert no_name.status_code == past.status_code == bad_kind.status_code == 400
    assert no_name.json()["error"]["param"] == "name"
    assert past.json()["error"]["param"] == "expires_at"
    assert bad_kind.json()["error"]["param"] == "kind"


def test_a_standard_key_cannot_manage_keys(live_stack, member):
    with live_stack.client(member.key) as client:
        for response in (client.get("/keys"), client.post("/keys", json={"name": "x"})):
            assert response.status_code == 403
            assert response.json()["error"]["code"] == "insufficient_permissions"


def test_revocation_is_immediate_on_every_web_process(live_stack, owner, tmp_path, settings):
    with live_stack.client(owner.key) as client:
        created = client.post("/keys", json={"name": "doomed"}).json()
    other_web, other_base = stack.start_web(stack.stack_env(settings.REDIS_URL), tmp_path)
    try:
        headers = {"Authorization": f"Bearer {created['key']}"}
        assert httpx.get(f"{other_base}/v1/voices", headers=headers).status_code == 200
        with live_stack.client(owner.key) as client:
            revoked = client.delete(f"/keys/{created['id']}")
        assert revoked.status_code == 200 and revoked.json()["revoked_at"]
        refused = httpx.get(f"{other_base}/v1/voices", headers=headers)
        assert refused.status_code == 401
        assert refused.json()["error"]["code"] == "invalid_api_key"
    finally:
        other_web.stop()


def test_an_outsider_gets_404_for_every_id_of_another_tenant(live_stack, owner, outsider):
    victim = owner.org.api_keys.get().prefix
    with live_stack.client(outsider.key) as client:
        assert client.get(f"/keys/{victim}").status_code == 404
        deleted = client.delete(f"/keys/{victim}")
        assert deleted.status_code == 404
        assert deleted.json()["error"]["type"] == "not_found_error"
        assert victim not in client.get("/keys").text
    assert ApiKey.objects.get(prefix=victim).revoked_at is None


def test_an_unknown_key_id_is_404(live_stack, owner):
    with live_stack.client(owner.key) as client:
        assert client.delete("/keys/doesnotexist").status_code == 404


def test_a_suspended_organization_is_refused_on_every_endpoint(live_stack, owner):
    type(owner.org).objects.filter(pk=owner.org.pk).update(suspended_at=timezone.now())
    with live_stack.client(owner.key) as client:
        for response in (
            client.get("/voices"),
            client.get("/keys"),
            client.get("/usage"),
            client.get("/subscription"),
            client.post("/audio/speech", json={"input": "hi"}),
        ):
            assert response.status_code == 403
            assert response.json()["error"]["code"] == "organization_suspended"


def test_a_view_cannot_opt_out_of_tenant_scoping():
    with pytest.raises(TypeError, match="tenant scoping"):

        class Leaky(TenantScopedViewSet):
            def get_queryset(self):
                return ApiKey.objects.all()
