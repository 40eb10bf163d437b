"""A member's own keys and service keys: a member's keys are revoked when an owner removes them,
unless handed over (made service keys, or given to another member); service keys outlive whoever
made them. Keys made through the API (by a key, not a person) are service keys."""

from __future__ import annotations

import pytest

from accounts import actions
from accounts.models import ApiKey, AuditEvent, Membership, Organization
from tests.test_dashboard_team import add_member, signup, text

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(client):
    """Ada (owner, signed in) and Bob (member), Bob with a key of his own and a service key he made."""
    ada = signup(client)
    bob = add_member(ada.organization, "bob@example.com")
    own, _ = ada.organization.create_api_key("bob's laptop", created_by=bob.user, owner=bob.user)
    service, _ = ada.organization.create_api_key("ci", created_by=bob.user)
    return ada, bob, own, service


def fresh(key: ApiKey) -> ApiKey:
    return ApiKey.objects.get(pk=key.pk)


def test_removing_a_member_revokes_their_own_keys_and_never_service_keys(client, team):
    ada, bob, own, service = team
    page = text(client.get("/dashboard/members"))
    assert "revoke their 1 key" in page and "keep as service key" in page and "give to ada@example.com" in page
    assert client.post(f"/dashboard/members/{bob.pk}/remove").status_code == 302  # the default: revoke
    assert fresh(own).revoked_at is not None and fresh(service).revoked_at is None
    revoked = AuditEvent.objects.get(action="key.revoked")
    assert revoked.target == f"key:{own.prefix}" and revoked.actor_label == "ada@example.com"


@pytest.mark.parametrize("keys_to", ["service", "heir"])
def test_a_members_keys_can_be_handed_over_when_they_leave(client, team, keys_to):
    ada, bob, own, _ = team
    choice = "service" if keys_to == "service" else f"member:{ada.pk}"
    client.post(f"/dashboard/members/{bob.pk}/remove", {"keys": choice})
    kept = fresh(own)
    assert kept.revoked_at is None
    assert kept.owner_id == (None if keys_to == "service" else ada.user_id)
    moved = AuditEvent.objects.get(action="key.transferred")
    assert moved.before == {"owner": "bob@example.com"}
    assert moved.after == {"owner": None if keys_to == "service" else "ada@example.com"}
    keys_page = text(client.get("/dashboard/keys"))
    owner = "service key" if keys_to == "service" else "ada@example.com's"
    assert f"bob's laptop tts_{own.prefix}_… · {owner}" in keys_page  # the list: name, then prefix and owner


def test_keys_cannot_go_to_someone_outside_and_then_nobody_is_removed(client, team):
    ada, bob, own, _ = team
    stranger = add_member(Organization.objects.create(name="Elsewhere", slug="elsewhere"), "eve@example.com")
    with pytest.raises(actions.NotAllowed):
        actions.remove_member(ada, bob.pk, f"member:{stranger.pk}")
    with pytest.raises(actions.NotAllowed):
        actions.remove_member(ada, bob.pk, "member:bob")
    assert Membership.objects.filter(pk=bob.pk).exists() and fresh(own).revoked_at is None


def test_the_dashboard_makes_own_keys_by_default_and_service_keys_on_request(client, team):
    ada = team[0]
    client.post("/dashboard/keys", {"name": "mine", "kind": "standard", "expires": "never"})
    client.post("/dashboard/keys", {"name": "deploys", "kind": "standard", "expires": "never", "owner": "service"})
    assert ApiKey.objects.get(name="mine").owner_id == ada.user_id
    assert ApiKey.objects.get(name="deploys").owner_id is None
