"""What a key action may give, through the real server: a key gives no scope it lacks itself, and
no limit or allowlist looser than its own, on every action on another key (create, change, rotate,
revoke, hand over) — a `keys:write` key cannot rotate an admin key and read the audit log with its
secret; a key cannot raise its own limits or widen its own allowlist; a member's own key does at
most what the member's role does, as the role is at each request."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts import keys
from accounts.auth import secret_valid
from accounts.models import ApiKey, Membership, hash_key
from tts_saas.errors import ApiError

pytestmark = pytest.mark.django_db(transaction=True)


def make(live_stack, by: str, **body) -> dict:
    with live_stack.client(by) as client:
        made = client.post("/keys", json={"name": f"key {ApiKey.objects.count()}", **body})
    assert made.status_code == 201, made.text
    return made.json()


def admin_key(owner) -> ApiKey:
    return owner.org.api_keys.get(name="Acme key")


def refused(response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    message = response.json()["error"]["message"]
    assert all(word in message for word in words), message


@pytest.fixture
def keys_only(live_stack, owner) -> dict:
    """A key scoped keys:write only: it manages keys, and nothing beyond what it holds."""
    return make(live_stack, owner.key, scopes=["keys:write"])


def test_a_keys_write_key_cannot_rotate_an_admin_key(live_stack, owner, keys_only):
    target = admin_key(owner)
    with live_stack.client(keys_only["key"]) as client:
        rotated = client.post(f"/keys/{target.prefix}/rotate", json={})
    refused(rotated, 403, target.prefix, "audit:read")
    assert rotated.json()["error"]["code"] == "insufficient_permissions" and "key" not in rotated.json()
    assert ApiKey.objects.get(pk=target.pk).hashed_key == target.hashed_key  # the admin's secret unchanged
    with live_stack.client(owner.key) as client:
        assert client.get("/audit_logs").status_code == 200  # the admin key still works


def test_a_keys_write_key_cannot_change_or_revoke_a_key_with_more_rights(live_stack, owner, keys_only):
    speaker = make(live_stack, owner.key, scopes=["speech:write"], allowed_ips=["203.0.113.0/24"])
    with live_stack.client(keys_only["key"]) as client:
        widened = client.patch(f"/keys/{speaker['id']}", json={"allowed_ips": []})
        renamed = client.patch(f"/keys/{speaker['id']}", json={"name": "mine now"})
        revoked = client.delete(f"/keys/{speaker['id']}")
        revoked_admin = client.delete(f"/keys/{admin_key(owner).prefix}")
        own = client.patch(f"/keys/{keys_only['id']}", json={"name": "keys only"})  # itself: within its rights
    for response in (widened, renamed, revoked, revoked_admin):
        refused(response, 403, "speech:write")
    assert own.status_code == 200, own.text
    stored = ApiKey.objects.get(prefix=speaker["id"])
    assert stored.revoked_at is None and stored.allowed_ips == ["203.0.113.0/24"] and stored.name != "mine now"
    assert ApiKey.objects.get(pk=admin_key(owner).pk).revoked_at is None


def test_a_key_creates_and_changes_keys_only_within_what_it_has(live_stack, owner):
    soon = (timezone.now() + timedelta(days=1)).isoformat()
    manager = make(
        live_stack, owner.key, scopes=["keys:write", "speech:write"], allowed_ips=["127.0.0.0/8"], expires_at=soon
    )
    with live_stack.client(manager["key"]) as client:
        broader_scope = client.post("/keys", json={"name": "a", "scopes": ["audit:read"], "allowed_ips": ["127.0.0.1"]})
        anywhere = client.post("/keys", json={"name": "b", "scopes": ["speech:write"], "expires_at": soon})
        forever = client.post("/keys", json={"name": "c", "scopes": ["speech:write"], "allowed_ips": ["127.0.0.1"]})
        within = client.post(
            "/keys", json={"name": "d", "scopes": ["speech:write"], "allowed_ips": ["127.0.0.1"], "expires_at": soon}
        )
        assert within.status_code == 201, within.text
        made = within.json()["id"]
        widened = client.patch(f"/keys/{made}", json={"allowed_ips": ["10.0.0.0/8"]})
    refused(broader_scope, 400, "audit:read")
    refused(anywhere, 400, "127.0.0.0/8")
    assert anywhere.json()["error"]["param"] == "allowed_ips"
    refused(forever, 400, "a life beyond")
    assert forever.json()["error"]["param"] == "expires_at"
    refused(widened, 400, "127.0.0.0/8")
    assert ApiKey.objects.get(prefix=made).allowed_ips == ["127.0.0.1/32"]


def test_a_key_with_a_cap_of_its_own_makes_no_keys_to_multiply_it(live_stack, owner):
    capped = make(live_stack, owner.key, scopes=["keys:write", "speech:write"], monthly_character_cap=4)
    other = make(live_stack, owner.key, scopes=["speech:write"], monthly_character_cap=2)
    with live_stack.client(capped["key"]) as client:
        child = client.post("/keys", json={"name": "child", "scopes": ["speech:write"], "monthly_character_cap": 4})
        raised = client.patch(f"/keys/{other['id']}", json={"monthly_character_cap": 4})
        renamed = client.patch(f"/keys/{other['id']}", json={"name": "still capped at 2"})
    for answer in (child, raised):
        refused(answer, 400, "monthly_character_cap of its own")
        assert answer.json()["error"]["param"] == "monthly_character_cap"
    assert renamed.status_code == 200, renamed.text  # what is not a limit it may change
    assert not ApiKey.objects.filter(name="child").exists()
    assert ApiKey.objects.get(prefix=other["id"]).monthly_character_cap == 2


def test_a_key_cannot_raise_its_own_limits_or_widen_its_own_allowlist(live_stack, owner):
    capped = make(
        live_stack,
        owner.key,
        scopes=["keys:write", "speech:write"],
        monthly_character_cap=1000,
        requests_per_minute=30,
        allowed_ips=["127.0.0.0/8"],
    )
    itself = f"/keys/{capped['id']}"
    with live_stack.client(capped["key"]) as client:
        cap_up = client.patch(itself, json={"monthly_character_cap": 5000})
        cap_off = client.patch(itself, json={"monthly_character_cap": None})
        rate_up = client.patch(itself, json={"requests_per_minute": 600})
        wider = client.patch(itself, json={"allowed_ips": ["127.0.0.0/8", "10.0.0.0/8"]})
        anywhere = client.patch(itself, json={"allowed_ips": []})
        narrower = client.patch(itself, json={"monthly_character_cap": 800, "allowed_ips": ["127.0.0.1"]})
    for response, field in (
        (cap_up, "monthly_character_cap"),
        (cap_off, "monthly_character_cap"),
        (rate_up, "requests_per_minute"),
        (wider, "allowed_ips"),
        (anywhere, "allowed_ips"),
    ):
        assert response.status_code == 400 and response.json()["error"]["param"] == field, response.text
    assert narrower.status_code == 200, narrower.text  # narrowing itself is always allowed
    with live_stack.client(owner.key) as client:  # a key with more rights may raise it
        raised = client.patch(itself, json={"monthly_character_cap": 5000, "allowed_ips": []})
    assert raised.status_code == 200, raised.text
    stored = ApiKey.objects.get(prefix=capped["id"])
    assert stored.monthly_character_cap == 5000 and stored.allowed_ips == []


def test_handing_keys_over_needs_the_rights_they_have(owner):
    """Handing over is an owner's action when a member leaves; a member's role does not cover an
    admin's keys, so it cannot hand them anywhere."""
    users = get_user_model().objects
    admin = users.create_user("ada@example.com", "ada@example.com", "pw")
    bob = users.create_user("bob@example.com", "bob@example.com", "pw")
    Membership.objects.create(user=admin, organization=owner.org, role="admin")
    bobs = Membership.objects.create(user=bob, organization=owner.org, role="member")
    owners = Membership.objects.create(
        user=users.create_user("o@example.com", "o@example.com", "pw"), organization=owner.org, role="owner"
    )
    key, _ = owner.org.create_api_key("ada's", kind="admin", owner=admin)
    with pytest.raises(ApiError) as exc:
        keys.hand_over_keys(owner.org, admin, "service", bobs)
    assert exc.value.status == 403 and "keys:write" in exc.value.message
    assert ApiKey.objects.get(pk=key.pk).owner == admin  # not handed over
    keys.hand_over_keys(owner.org, admin, "service", owners)
    assert ApiKey.objects.get(pk=key.pk).owner is None


def test_a_members_own_key_does_what_the_members_role_does_now(live_stack, owner):
    bob = get_user_model().objects.create_user("bob@example.com", "bob@example.com", "pw")
    membership = Membership.objects.create(user=bob, organization=owner.org, role="admin")
    _, raw = owner.org.create_api_key("bob's", kind="standard", owner=bob)
    entries = {"name": "names", "entries": [{"text": "SQL", "alias": "sequel"}]}
    with live_stack.client(raw) as client:
        as_admin = client.post("/lexicons", json=entries)
        assert as_admin.status_code == 201, as_admin.text
        Membership.objects.filter(pk=membership.pk).update(role="member")  # demoted: narrowed at once
        as_member = client.post("/lexicons", json={**entries, "name": "more"})
        read = client.get("/lexicons")
        spoken = client.post("/audio/speech", json={"model": "kokoro", "input": "Hi.", "voice": "af_heart"})
        Membership.objects.filter(pk=membership.pk).delete()  # gone without a hand-over
        gone = client.get("/lexicons")
    refused(as_member, 403, "'lexicons:write'")
    assert read.status_code == 200 and spoken.status_code == 200, spoken.text
    refused(gone, 401, "no longer a member")


def test_a_demoted_admins_key_is_still_out_of_reach_of_lesser_keys(live_stack, owner):
    """Its owner's role narrows what it does now, not what it holds: handed a new secret, a lesser key
    would get an admin key back the day its owner is promoted again."""
    ada = get_user_model().objects.create_user("ada@example.com", "ada@example.com", "pw")
    membership = Membership.objects.create(user=ada, organization=owner.org, role="admin")
    key, _ = owner.org.create_api_key("ada's", kind="admin", owner=ada)
    Membership.objects.filter(pk=membership.pk).update(role="member")
    lesser = make(live_stack, owner.key, scopes=["keys:write", "speech:write", "jobs:write", "voices:read"])
    with live_stack.client(lesser["key"]) as client:
        rotated = client.post(f"/keys/{key.prefix}/rotate", json={})
        changed = client.patch(f"/keys/{key.prefix}", json={"name": "mine"})
    refused(rotated, 403, "audit:read")
    refused(changed, 403, "audit:read")
    with live_stack.client(owner.key) as client:
        listed = {k["id"]: k for k in client.get("/keys").json()["data"]}
    assert listed[key.prefix]["kind"] == "admin"  # what it holds, and what it may do now
    assert "audit:read" not in listed[key.prefix]["effective_scopes"]
    assert "speech:write" in listed[key.prefix]["effective_scopes"]


def test_a_deleted_users_own_keys_are_revoked_not_made_service_keys(owner):
    bob = get_user_model().objects.create_user("bob@example.com", "bob@example.com", "pw")
    Membership.objects.create(user=bob, organization=owner.org, role="member")
    key, _ = owner.org.create_api_key("bob's", kind="admin", owner=bob)
    bob.delete()  # e.g. by staff in the admin console
    stored = ApiKey.objects.get(pk=key.pk)
    assert stored.revoked_at is not None and stored.owner is None


def test_two_rotations_at_once_never_bring_back_the_secret_one_ended(owner):
    key = admin_key(owner)
    first, second = ApiKey.objects.get(pk=key.pk), ApiKey.objects.get(pk=key.pk)  # both read before either writes
    old = owner.key
    keys.rotate_key(first, None)  # no grace: the old secret ends now
    keys.rotate_key(second, None, timedelta(hours=1))  # keeps the first rotation's secret for an hour, not the old
    stored = ApiKey.objects.get(pk=key.pk)
    assert not secret_valid(stored, hash_key(old))
    assert stored.previous_hashed_key == first.hashed_key


def test_a_stored_allowlist_no_api_would_take_can_still_be_fixed_or_revoked(live_stack, owner):
    broken = make(live_stack, owner.key, scopes=["speech:write"])
    ApiKey.objects.filter(prefix=broken["id"]).update(allowed_ips=["10.0.0.1/8"])  # an old row, a raw write
    fixer = make(live_stack, owner.key, scopes=["keys:write", "speech:write"], allowed_ips=["127.0.0.0/8"])
    with live_stack.client(broken["key"]) as client:
        used = client.post("/audio/speech", json={"model": "kokoro", "input": "Hi.", "voice": "af_heart"})
    refused(used, 403, "not a network", f"PATCH /v1/keys/{broken['id']}")
    assert used.json()["error"]["code"] == "invalid_ip_allowlist"
    with live_stack.client(fixer["key"]) as client:
        fixed = client.patch(f"/keys/{broken['id']}", json={"allowed_ips": ["127.0.0.1"]})
        revoked = client.delete(f"/keys/{broken['id']}")
    assert fixed.status_code == 200 and fixed.json()["allowed_ips"] == ["127.0.0.1/32"], fixed.text
    assert revoked.status_code == 200 and revoked.json()["revoked_at"], revoked.text
