"""Scoped keys and IP allowlists, through the real server: what a key may do is its scopes
(`area:level`), refused with 403 `insufficient_permissions` naming the missing one; where it may call
from is its allowlist and its organization's, refused with 403 `ip_not_allowed`. The client's
address is the socket's: uvicorn believes `X-Forwarded-For` only from the trusted proxy
(127.0.0.2 in the test stack), so a client cannot choose its address with a header."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets

from accounts.models import ApiKey
from tests import stack
from tests.test_websocket import collect, ws_url

pytestmark = pytest.mark.django_db(transaction=True)

SPEAK = {"model": "kokoro", "input": "Hello there.", "voice": "af_heart", "response_format": "wav"}


def make_key(live_stack, admin_key: str, **body) -> dict:
    with live_stack.client(admin_key) as client:
        created = client.post("/keys", json={"name": f"key {len(body)}-{id(body)}", **body})
    assert created.status_code == 201, created.text
    return created.json()


def refused_for(response: httpx.Response, scope: str) -> None:
    assert response.status_code == 403, response.text
    error = response.json()["error"]
    assert error["code"] == "insufficient_permissions" and f"'{scope}'" in error["message"]


def test_a_speech_only_key_speaks_and_nothing_else(live_stack, owner):
    key = make_key(live_stack, owner.key, scopes=["speech:write"])
    assert key["kind"] == "restricted" and key["scopes"] == ["speech:write"]
    with live_stack.client(key["key"]) as client:
        spoken = client.post("/audio/speech", json=SPEAK)
        assert spoken.status_code == 200 and spoken.content[:4] == b"RIFF"
        refused_for(client.get("/usage"), "usage:read")
        refused_for(client.get("/jobs"), "jobs:read")
        refused_for(client.post("/keys", json={"name": "more"}), "keys:write")
        refused_for(client.get("/webhooks/secret"), "webhooks:read")
        assert client.get("/models").status_code == 200  # the public lists need no scope


def test_a_read_only_key_reads_but_neither_speaks_nor_writes(live_stack, owner):
    key = make_key(live_stack, owner.key, scopes=["read_only"])
    with live_stack.client(key["key"]) as client:
        assert client.get("/jobs").status_code == 200
        assert client.get("/usage").status_code == 200
        assert client.get("/lexicons").status_code == 200
        refused_for(client.post("/audio/speech", json=SPEAK), "speech:write")
        refused_for(client.post("/lexicons", json={"name": "x", "entries": []}), "lexicons:write")
        refused_for(client.post("/audio/stream/tickets"), "speech:write")


def test_a_management_key_is_refused_on_speech(live_stack, owner):
    key = make_key(live_stack, owner.key, scopes=["keys:write", "audit:read"])
    with live_stack.client(key["key"]) as client:
        assert client.get("/keys").status_code == 200  # write includes read
        refused_for(client.post("/audio/speech", json=SPEAK), "speech:write")
        # A key gives no scope it lacks itself.
        escalated = client.post("/keys", json={"name": "speaker", "scopes": ["speech:write"]})
        assert escalated.status_code == 400 and "speech:write" in escalated.json()["error"]["message"]
        allowed = client.post("/keys", json={"name": "auditor", "scopes": ["audit:read"]})
        assert allowed.status_code == 201 and allowed.json()["scopes"] == ["audit:read"]


def test_bad_scopes_and_unknown_fields_are_refused_by_name(live_stack, owner):
    with live_stack.client(owner.key) as client:
        unknown_scope = client.post("/keys", json={"name": "x", "scopes": ["speech:admin"]})
        unknown_area = client.post("/keys", json={"name": "x", "scopes": ["secrets:read"]})
        both = client.post("/keys", json={"name": "x", "kind": "admin", "scopes": ["speech:write"]})
        empty = client.post("/keys", json={"name": "x", "scopes": []})
        typo = client.post("/keys", json={"name": "x", "scope": ["speech:write"]})
        key_id = client.get("/keys").json()["data"][0]["id"]
        revoke_with_body = client.request("DELETE", f"/keys/{key_id}", json={"reason": "x"})
        rotate_with_body = client.post("/webhooks/secret/rotate", json={"grace": 0})
        allowlist_typo = client.put("/organization/ip_allowlist", json={"allowed_ip": []})
    for response, param, word in [
        (unknown_scope, "scopes", "speech:admin"),
        (unknown_area, "scopes", "secrets:read"),
        (both, "scopes", "not both"),
        (empty, "scopes", "non-empty"),
        (typo, "scope", "Unknown parameter: 'scope'"),
        (revoke_with_body, "reason", "Unknown parameter: 'reason'"),
        (rotate_with_body, "grace", "Unknown parameter: 'grace'"),
        (allowlist_typo, "allowed_ip", "Unknown parameter: 'allowed_ip'"),
    ]:
        assert response.status_code == 400, (param, response.text)
        error = response.json()["error"]
        assert error["param"] == param and word in error["message"], error
    assert (
        ApiKey.objects.filter(organization=owner.org, revoked_at__isnull=True).count() == 1
    )  # nothing made or revoked


def test_a_keys_allowlist_is_checked_against_the_socket_not_a_header(live_stack, owner):
    key = make_key(live_stack, owner.key, allowed_ips=["203.0.113.7", "2001:db8::/32"])
    assert key["allowed_ips"] == ["203.0.113.7/32", "2001:db8::/32"]
    headers = {"Authorization": f"Bearer {key['key']}"}
    url = f"{live_stack.base_url}/v1/voices"
    # From 127.0.0.1, which is no trusted proxy: refused, with or without a forwarded address.
    direct = httpx.get(url, headers=headers)
    spoofed = httpx.get(url, headers={**headers, "X-Forwarded-For": "203.0.113.7"})
    for response in (direct, spoofed):
        assert response.status_code == 403
        error = response.json()["error"]
        assert error["code"] == "ip_not_allowed" and "127.0.0.1" in error["message"], error
    # Through the trusted proxy, the address it forwards is the client's.
    with httpx.Client(transport=httpx.HTTPTransport(local_address=stack.TRUSTED_PROXY)) as proxy:
        allowed = proxy.get(url, headers={**headers, "X-Forwarded-For": "203.0.113.7"})
        other = proxy.get(url, headers={**headers, "X-Forwarded-For": "198.51.100.1"})
        v6 = proxy.get(url, headers={**headers, "X-Forwarded-For": "2001:db8::42"})
    assert allowed.status_code == 200 and v6.status_code == 200, (allowed.text, v6.text)
    assert other.status_code == 403 and "198.51.100.1" in other.json()["error"]["message"]
    with live_stack.client(owner.key) as client:
        bad = client.post("/keys", json={"name": "bad", "allowed_ips": ["10.0.0.300"]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "allowed_ips"
    assert "10.0.0.300" in bad.json()["error"]["message"]


def test_the_organizations_allowlist_refuses_every_key_and_never_its_own_setter(live_stack, owner, member):
    with live_stack.client(owner.key) as client:
        locked_out = client.put("/organization/ip_allowlist", json={"allowed_ips": ["203.0.113.0/24"]})
        assert locked_out.status_code == 400 and "127.0.0.1" in locked_out.json()["error"]["message"]
        assert client.get("/organization/ip_allowlist").json() == {"allowed_ips": []}
        saved = client.put("/organization/ip_allowlist", json={"allowed_ips": ["127.0.0.0/8", "203.0.113.0/24"]})
        assert saved.status_code == 200 and saved.json()["allowed_ips"] == ["127.0.0.0/8", "203.0.113.0/24"]
    with live_stack.client(member.key) as client:
        assert client.get("/voices").status_code == 200
        refused_for(client.get("/organization/ip_allowlist"), "organization:read")
    headers = {"Authorization": f"Bearer {member.key}"}
    with httpx.Client(transport=httpx.HTTPTransport(local_address=stack.TRUSTED_PROXY)) as proxy:
        outside = proxy.get(f"{live_stack.base_url}/v1/voices", headers={**headers, "X-Forwarded-For": "198.51.100.9"})
        inside = proxy.get(f"{live_stack.base_url}/v1/voices", headers={**headers, "X-Forwarded-For": "203.0.113.9"})
    assert outside.status_code == 403 and "organization's IP allowlist" in outside.json()["error"]["message"]
    assert inside.status_code == 200


def test_a_websocket_needs_speech_and_is_closed_when_its_scopes_or_allowlist_change(live_stack, owner):
    reader = make_key(live_stack, owner.key, scopes=["read_only"])
    speaker = make_key(live_stack, owner.key, scopes=["speech:write"])

    async def refused_at_handshake(raw: str) -> int:
        with pytest.raises(websockets.InvalidStatus) as refused:
            async with websockets.connect(ws_url(live_stack), additional_headers={"Authorization": f"Bearer {raw}"}):
                pass
        return refused.value.response.status_code

    async def closed_after_change(raw: str, change) -> tuple[dict, int]:
        headers = {"Authorization": f"Bearer {raw}"}
        async with websockets.connect(ws_url(live_stack), additional_headers=headers) as ws:
            await ws.recv()  # ready
            await ws.send(json.dumps({"type": "synthesize", "id": "before", "text": "Still allowed."}))
            _, audio, end = await collect(ws)
            assert end["type"] == "end" and audio
            await asyncio.to_thread(change)
            await ws.send(json.dumps({"type": "synthesize", "id": "after", "text": "Not any more."}))
            error = json.loads(await asyncio.wait_for(ws.recv(), 30))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
            return error, closed.value.rcvd.code

    assert asyncio.run(refused_at_handshake(reader["key"])) == 403
    error, code = asyncio.run(
        closed_after_change(
            speaker["key"], lambda: ApiKey.objects.filter(prefix=speaker["id"]).update(scopes=["usage:read"])
        )
    )
    assert error["code"] == "insufficient_permissions" and "speech:write" in error["message"] and code == 4403
    other = make_key(live_stack, owner.key, scopes=["speech:write"])
    error, code = asyncio.run(
        closed_after_change(
            other["key"], lambda: ApiKey.objects.filter(prefix=other["id"]).update(allowed_ips=["203.0.113.0/24"])
        )
    )
    assert error["code"] == "ip_not_allowed" and code == 4403
