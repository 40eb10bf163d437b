"""The audit log: what was done in an organization, by whom and from where, append-only; read with
`GET /v1/audit_logs` (filters, cursor paging, `audit:read`) and on the dashboard's Audit log page
(owners and admins, filters, CSV)."""

from __future__ import annotations

import csv
import io

import pytest

from accounts.models import AuditEvent, Membership, Organization

pytestmark = pytest.mark.django_db(transaction=True)


def test_key_and_allowlist_changes_are_recorded_and_read_back_with_filters_and_a_cursor(live_stack, owner, outsider):
    with live_stack.client(owner.key) as client:
        created = client.post("/keys", json={"name": "ci", "scopes": ["speech:write"], "allowed_ips": ["10.0.0.0/8"]})
        key_id = created.json()["id"]
        client.delete(f"/keys/{key_id}")
        client.delete(f"/keys/{key_id}")  # revoking twice records it once
        client.put("/organization/ip_allowlist", json={"allowed_ips": ["127.0.0.0/8"]})
        client.post("/webhooks/secret/rotate")
    with live_stack.client(created.json()["key"]) as revoked:
        assert revoked.get("/voices").status_code == 401  # refused, but not by an allowlist: not recorded
    with live_stack.client(owner.key) as client:
        listed = client.get("/audit_logs")
        assert listed.status_code == 200, listed.text
        body = listed.json()
        actions = [event["action"] for event in body["data"]]
        # The oldest: the test's persona got its rate limit raised (an override of its plan).
        assert actions == [
            "webhook_secret.rotated",
            "ip_allowlist.updated",
            "key.revoked",
            "key.created",
            "billing.limits_changed",
        ]
        created_event = body["data"][-2]
        owner_key = owner.org.api_keys.get(name="Acme key")
        assert created_event["actor"] == {"type": "key", "id": owner_key.prefix, "label": "Acme key"}
        assert created_event["ip"] == "127.0.0.1" and created_event["target"] == f"key:{key_id}"
        assert created_event["after"]["scopes"] == ["speech:write"]
        assert created_event["after"]["allowed_ips"] == ["10.0.0.0/8"]
        allowlist = body["data"][1]
        assert allowlist["before"] == {"allowed_ips": []} and allowlist["after"] == {"allowed_ips": ["127.0.0.0/8"]}
        keys_only = client.get("/audit_logs", params={"action": "key."}).json()["data"]
        assert [e["action"] for e in keys_only] == ["key.revoked", "key.created"]
        first = client.get("/audit_logs", params={"limit": 3}).json()
        assert first["has_more"] and len(first["data"]) == 3 and first["last_id"] == first["data"][-1]["id"]
        rest = client.get("/audit_logs", params={"limit": 3, "after": first["last_id"]}).json()
        assert [e["action"] for e in rest["data"]] == ["key.created", "billing.limits_changed"]
        assert not rest["has_more"]
        for bad in ({"limit": 0}, {"after": "17"}, {"since": "yesterday"}, {"actor": "x"}):
            refused = client.get("/audit_logs", params=bad)
            assert refused.status_code == 400, (bad, refused.text)
            assert refused.json()["error"]["param"] == next(iter(bad))
    with live_stack.client(outsider.key) as other:
        theirs = other.get("/audit_logs").json()["data"]
        assert [e["action"] for e in theirs] == ["billing.limits_changed"]  # its own only, none of Acme's
    _, standard = owner.org.create_api_key("app")
    with live_stack.client(standard) as app:
        refused = app.get("/audit_logs")
        assert refused.status_code == 403 and "'audit:read'" in refused.json()["error"]["message"]


def test_a_call_refused_by_an_allowlist_is_recorded_with_its_address(live_stack, owner):
    with live_stack.client(owner.key) as client:
        fenced = client.post("/keys", json={"name": "fenced", "allowed_ips": ["203.0.113.0/24"]}).json()
    with live_stack.client(fenced["key"]) as client:
        assert client.get("/voices").status_code == 403
    event = AuditEvent.objects.get(organization=owner.org, action="access.ip_refused")
    assert (event.actor_type, event.actor_id, event.ip) == ("key", fenced["id"], "127.0.0.1")


def test_events_are_append_only():
    org = Organization.objects.create(name="Initech", slug="initech")
    event = AuditEvent.objects.create(organization=org, action="key.created", actor_type="key")
    event.action = "key.revoked"
    with pytest.raises(TypeError):
        event.save()
    with pytest.raises(TypeError):
        AuditEvent.objects.filter(pk=event.pk).update(action="key.revoked")
    assert AuditEvent.objects.get(pk=event.pk).action == "key.created"


def signup(client, email: str, org: str = "Analytical Engines"):
    return client.post("/dashboard/signup", {"email": email, "password": "correct horse battery", "organization": org})


def test_sign_ins_and_team_changes_appear_on_the_audit_page_and_its_csv(client):
    signup(client, "ada@example.com")
    client.logout()
    attempt = {"username": "ADA@example.com", "password": "not it"}
    wrong = client.post("/accounts/login/", attempt, REMOTE_ADDR="192.0.2.5")
    assert wrong.status_code == 200
    assert client.post("/accounts/login/", {"username": "ada@example.com", "password": "correct horse battery"})
    client.post("/dashboard/keys", {"name": "backend", "kind": "speech", "expires": "never", "allowed_ips": ""})
    page = client.get("/dashboard/audit")
    assert page.status_code == 200
    text = page.content.decode()
    for words in ("sign-in failed", "signed in", "API key created", "192.0.2.5", "ada@example.com"):
        assert words in text, words
    only_keys = client.get("/dashboard/audit", {"action": "key."}).content.decode()
    assert "API key created" in only_keys and "sign-in failed" not in only_keys
    rows = list(csv.reader(io.StringIO(client.get("/dashboard/audit.csv").content.decode())))
    assert rows[0][:3] == ["time", "action", "actor_type"]
    assert [row[1] for row in rows[1:]][:3] == ["key.created", "signin.succeeded", "signin.failed"]
    assert '"speech:write"' in rows[1][8]  # the key's scopes, after
    # A member (not an owner or admin) neither sees the page nor its link.
    org = Organization.objects.get(name="Analytical Engines")
    client.logout()
    signup(client, "bob@example.com", "Bob's")
    Membership.objects.create(organization=org, user=Membership.objects.get(user__email="bob@example.com").user)
    client.post("/dashboard/switch", {"organization": org.pk})
    assert client.get("/dashboard/audit").status_code == 403


def test_voices_and_lexicons_are_recorded_with_the_key_that_changed_them(live_stack, owner):
    with live_stack.client(owner.key) as client:
        lexicon = client.post("/lexicons", json={"name": "brands", "entries": [{"text": "Acme", "alias": "Ack me"}]})
        lexicon_id = lexicon.json()["id"]
        client.patch(f"/lexicons/{lexicon_id}", json={"name": "brand names"})
        client.delete(f"/lexicons/{lexicon_id}")
        voice = client.post("/audio/voices", json={"name": "Narrator", "model": "chattts", "seed": 42})
        assert voice.status_code == 201, voice.text
        client.delete(f"/audio/voices/{voice.json()['id']}")
        actions = [
            e["action"] for e in client.get("/audit_logs").json()["data"] if not e["action"].startswith("billing.")
        ]
    assert actions == ["voice.deleted", "voice.created", "lexicon.deleted", "lexicon.updated", "lexicon.created"]
    event = AuditEvent.objects.get(action="lexicon.updated")
    assert event.actor_type == "key" and event.after["name"] == "brand names" and event.ip == "127.0.0.1"


def test_billing_terms_and_staff_actions_are_recorded(client, admin_client):
    signup(client, "ada@example.com")
    org = Organization.objects.get(name="Analytical Engines")
    client.post("/dashboard/billing/spending-limit", {"spending_limit": "25"})
    changed = AuditEvent.objects.get(organization=org, action="billing.limits_changed")
    assert changed.before == {"spending_limit_cents": None} and changed.after == {"spending_limit_cents": 2500}
    assert (changed.actor_type, changed.actor_label) == ("member", "ada@example.com")
    # Staff in the admin console: an action, and a change through a form.
    admin_client.post(
        "/admin/accounts/organization/",
        {"action": "suspend", "_selected_action": [org.pk], "apply": "Suspend", "reason": "a test of the log"},
    )
    suspended = AuditEvent.objects.get(organization=org, action="staff.suspended")
    assert suspended.actor_type == "staff"
    page = client.get("/dashboard/audit", {"action": "staff."}).content.decode()
    assert "organization suspended by staff" in page
