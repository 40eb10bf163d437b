"""A key's own page (/dashboard/keys/<id>) through Django's test client: what it shows (access in
words, owner, expiry, last use with its address), what it changes as PATCH /v1/keys/{id} does
(name, scopes as a preset or any combination, allowed networks, cap, rate), never more than the
viewer may give, and 404 for keys the viewer may not see."""

from __future__ import annotations

import html
import re

import pytest
from django.contrib.auth import get_user_model

from accounts import scopes
from accounts.auth import authenticate_key, require
from accounts.models import ApiKey, AuditEvent, Membership, Organization
from tests.test_dashboard import signup
from tests.test_dashboard_team import messages_of
from tts_saas.errors import ApiError

pytestmark = pytest.mark.django_db

SETTINGS = {
    "name": "app",
    "access": "standard",
    "allowed_ips": "",
    "monthly_character_cap": "",
    "requests_per_minute": "",
}


def text(response) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def test_the_list_names_presets_and_custom_keys_and_links_each_page(client):
    signup(client)
    org = Organization.objects.get()
    for name, preset in (("talker", "speech"), ("reader", "read_only"), ("tool", "admin")):
        org.create_api_key(name, scopes=sorted(scopes.PRESETS[preset]))
    custom, _ = org.create_api_key("minter", scopes=["speech:write", "tokens:write"])
    listed = client.get("/dashboard/keys").content.decode()
    rows = {
        name: " ".join(html.unescape(re.sub(r"<[^>]+>", " ", row)).split())
        for name, row in re.findall(r'<tr>\s*<td class="key-name"><a href="[^"]+">([^<]+)</a>(.*?)</tr>', listed, re.S)
    }
    assert {name: row.split(" ")[row.split(" ").index("key") + 1] for name, row in rows.items()} == {
        "talker": "speech",
        "reader": "read-only",
        "tool": "admin",
        "minter": "custom",
    }
    assert "restricted" not in listed
    assert f'<a href="/dashboard/keys/{custom.prefix}">minter</a>' in listed


def test_an_owner_gives_a_key_any_combination_and_it_mints_client_tokens_without_being_admin(client):
    signup(client)
    org = Organization.objects.get()
    key, raw = org.create_api_key("app")
    page = client.get(f"/dashboard/keys/{key.prefix}")
    assert page.status_code == 200 and page["Cache-Control"] == "no-store"
    shown = text(page)
    assert "Access standard:" in shown and "Owner service key" in shown and "Last used never" in shown
    authenticate_key(f"Bearer {raw}", "203.0.113.9")  # a call from that address
    assert "Last used " in text(client.get(f"/dashboard/keys/{key.prefix}"))
    assert "from 203.0.113.9" in text(client.get(f"/dashboard/keys/{key.prefix}"))

    body = {**SETTINGS, "name": "minter", "access": "custom", "scope_speech": "write", "scope_tokens": "write"}
    body |= {"allowed_ips": "10.0.0.0/8, 203.0.113.0/24", "monthly_character_cap": "500", "requests_per_minute": "30"}
    saved = client.post(f"/dashboard/keys/{key.prefix}", body, follow=True)
    assert "Key minter saved" in messages_of(saved)
    key.refresh_from_db()
    assert sorted(key.scopes) == ["speech:write", "tokens:write"] and key.kind == "restricted"
    assert (key.allowed_ips, key.monthly_character_cap, key.requests_per_minute) == (
        ["10.0.0.0/8", "203.0.113.0/24"],
        500,
        30,
    )
    assert "Access custom: speech:write, tokens:write" in text(saved)
    principal = authenticate_key(f"Bearer {raw}", "10.1.2.3")
    require(principal, "tokens:write", "minting a client token")  # allowed now
    with pytest.raises(ApiError):
        require(principal, "keys:read", "listing keys")  # and no more
    assert AuditEvent.objects.filter(action="key.updated", target=f"key:{key.prefix}").exists()

    back = client.post(f"/dashboard/keys/{key.prefix}", {**SETTINGS, "name": "minter", "access": "speech"})
    assert back.status_code == 302
    key.refresh_from_db()
    assert key.scopes == ["speech:write"] and key.allowed_ips == [] and key.monthly_character_cap is None
    empty = client.post(f"/dashboard/keys/{key.prefix}", {**SETTINGS, "name": "minter", "access": "custom"})
    assert empty.status_code == 200 and "Choose at least one scope below, or a preset." in text(empty)
    bad = client.post(f"/dashboard/keys/{key.prefix}", {**SETTINGS, "name": "minter", "allowed_ips": "not a net"})
    assert bad.status_code == 200 and 'id="id_allowed_ips_error"' in bad.content.decode()


def test_a_member_gives_their_own_key_no_more_than_their_role(client):
    signup(client)
    org = Organization.objects.get()
    bob = get_user_model().objects.create_user("bob@example.com", "bob@example.com", "correct horse battery")
    Membership.objects.create(user=bob, organization=org, role="member")
    theirs, _ = org.create_api_key("owner's")
    mine, _ = org.create_api_key("bob's", scopes=["speech:write"], owner=bob)
    client.force_login(bob)
    page = client.get(f"/dashboard/keys/{mine.prefix}").content.decode()
    assert (
        '<option value="admin"' not in page
        and '<option value="write">' not in page.split('id="id_scope_keys"')[1][:300]
    )
    refused = client.post(
        f"/dashboard/keys/{mine.prefix}", {**SETTINGS, "name": "bob's", "access": "custom", "scope_keys": "write"}
    )
    assert refused.status_code == 200 and "Select a valid choice" in text(refused)  # not offered
    assert ApiKey.objects.get(pk=mine.pk).scopes == ["speech:write"]
    capped = client.post(f"/dashboard/keys/{mine.prefix}", {**SETTINGS, "name": "bob's app", "access": "speech"})
    assert capped.status_code == 302 and ApiKey.objects.get(pk=mine.pk).name == "bob's app"
    assert client.get(f"/dashboard/keys/{theirs.prefix}").status_code == 404  # not theirs: not found
    # A key made while Bob was an admin is never narrowed silently by a save: renaming it is refused
    # as the API refuses it (more than his role gives, named), and its access stays until he picks less.
    stored = sorted(scopes.PRESETS["admin"])
    earlier, _ = org.create_api_key("bob's earlier", scopes=stored, owner=bob)
    renamed = client.post(f"/dashboard/keys/{earlier.prefix}", {**SETTINGS, "name": "renamed", "access": "admin"})
    assert renamed.status_code == 200 and "more than your role gives" in text(renamed)
    earlier.refresh_from_db()
    assert (earlier.name, sorted(earlier.scopes)) == ("bob's earlier", stored)
    narrowed = client.post(f"/dashboard/keys/{earlier.prefix}", {**SETTINGS, "name": "renamed", "access": "speech"})
    assert narrowed.status_code == 302
    earlier.refresh_from_db()
    assert (earlier.name, earlier.scopes) == ("renamed", ["speech:write"])
    assert client.post(f"/dashboard/keys/{theirs.prefix}", {**SETTINGS, "name": "x"}).status_code == 404


def test_another_organizations_key_page_is_404(client):
    signup(client)
    other = Organization.objects.create(name="Globex", slug="globex")
    key, _ = other.create_api_key("theirs")
    assert client.get(f"/dashboard/keys/{key.prefix}").status_code == 404
    assert client.post(f"/dashboard/keys/{key.prefix}", {**SETTINGS, "name": "mine now"}).status_code == 404
    assert ApiKey.objects.get(pk=key.pk).name == "theirs"


def test_a_revoked_key_page_shows_it_and_changes_nothing(client):
    signup(client)
    key, _ = Organization.objects.get().create_api_key("gone")
    client.post(f"/dashboard/keys/{key.prefix}/revoke")
    page = client.get(f"/dashboard/keys/{key.prefix}")
    assert "Status revoked" in text(page) and "Save changes" not in text(page) and "Rotate" not in text(page)
    assert client.post(f"/dashboard/keys/{key.prefix}", {**SETTINGS, "name": "back"}).status_code == 404
