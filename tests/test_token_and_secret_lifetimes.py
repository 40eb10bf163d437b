"""Client tokens and rotated secrets, through the real server: a token's character budget is of
input in all (every utterance of a single-use token's one connection takes from it); a token only
speaks (`follow` needs `jobs:read`, for every caller); a rotated key's old secret ends everywhere when
its grace ends — REST, open WebSockets (at their next utterance), tickets and client tokens bought
with it; every response that carries a secret is `Cache-Control: no-store`; lists in bodies are
bounded with a 400 naming the limit."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime

import pytest
import websockets

from tests.test_key_rights import make
from tests.test_websocket import collect, run, ws_url
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

HI = {"type": "synthesize", "id": "u1", "text": "Hi.", "model": "kokoro", "voice": "af_heart"}  # 3 characters


def mint(live_stack, key: str, **terms) -> str:
    with live_stack.client(key) as client:
        minted = client.post("/tokens", json=terms)
    assert minted.status_code == 201, minted.text
    return minted.json()["token"]


async def speak(ws, utterance: str) -> tuple[bytes, dict]:
    await ws.send(json.dumps({**HI, "id": utterance}))
    _, audio, end = await collect(ws)
    return audio, end


def test_a_single_use_tokens_budget_counts_every_utterance_of_its_connection(live_stack, owner):
    token = mint(live_stack, owner.key, single_use=True, max_characters=5)

    async def scenario():
        async with websockets.connect(ws_url(live_stack, f"?token={token}")) as ws:
            await ws.recv()  # ready
            return [await speak(ws, f"u{i}") for i in range(3)]

    (audio, first), (_, second), (_, third) = run(scenario())
    assert first["type"] == "end" and audio, first
    for refused in (second, third):
        assert (refused["type"], refused["code"]) == ("error", "token_budget_exceeded"), refused
        assert "this client token has 2 left of its budget of 5" in refused["message"]


def follow_as(live_stack, query: str = "", headers: dict | None = None, job_id: str = "") -> dict:
    async def scenario():
        async with websockets.connect(ws_url(live_stack, query), additional_headers=headers or {}) as ws:
            await ws.recv()  # ready
            await ws.send(json.dumps({"type": "follow", "id": "f1", "job_id": job_id}))
            return (await collect(ws))[2]

    return run(asyncio.wait_for(scenario(), 60))


def test_following_a_job_needs_jobs_read_so_a_token_cannot(live_stack, owner):
    with live_stack.client(owner.key) as client:
        job = client.post("/jobs", json={"model": "kokoro", "input": "Kept.", "voice": "af_heart"}).json()
        wait_until(lambda: client.get(f"/jobs/{job['id']}").json()["status"] == "succeeded", 60, "job not done")
    token = mint(live_stack, owner.key)
    with live_stack.client(token) as client:
        rest = client.get(f"/jobs/{job['id']}/stream")
    assert rest.status_code == 403 and "'jobs:read'" in rest.json()["error"]["message"]
    assert rest.json()["error"]["message"].startswith("This client token may only speak")  # not "This API key"
    speaker = make(live_stack, owner.key, scopes=["speech:write"])
    by_token = follow_as(live_stack, f"?token={token}", job_id=job["id"])
    by_speaker = follow_as(live_stack, headers={"Authorization": f"Bearer {speaker['key']}"}, job_id=job["id"])
    by_owner = follow_as(live_stack, headers={"Authorization": f"Bearer {owner.key}"}, job_id=job["id"])
    for end in (by_token, by_speaker):
        assert (end["type"], end["code"]) == ("error", "insufficient_permissions") and "'jobs:read'" in end["message"]
    assert by_owner["type"] == "end", by_owner


def rotate(live_stack, owner, key_id: str, grace: int) -> dict:
    with live_stack.client(owner.key) as client:
        rotated = client.post(f"/keys/{key_id}/rotate", json={"grace_seconds": grace})
    assert rotated.status_code == 200, rotated.text
    return rotated.json()


def test_a_rotated_secrets_websocket_ends_at_its_next_utterance_after_the_grace(live_stack, owner):
    app = make(live_stack, owner.key, scopes=["speech:write", "tokens:write"])

    async def scenario():
        headers = {"Authorization": f"Bearer {app['key']}"}
        async with websockets.connect(ws_url(live_stack), additional_headers=headers) as ws:
            await ws.recv()  # ready
            before, _ = await speak(ws, "before")
            rotated = await asyncio.to_thread(rotate, live_stack, owner, app["id"], 4)
            in_grace = await speak(ws, "in-grace")
            grace_ends = datetime.fromisoformat(rotated["previous_valid_until"].replace("Z", "+00:00")).timestamp()
            await asyncio.sleep(max(0.0, grace_ends - time.time() + 0.5))
            await ws.send(json.dumps({**HI, "id": "after"}))
            error = json.loads(await asyncio.wait_for(ws.recv(), 30))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
        headers = {"Authorization": f"Bearer {rotated['key']}"}
        async with websockets.connect(ws_url(live_stack), additional_headers=headers) as ws:
            await ws.recv()
            with_new = await speak(ws, "new")
        return before, in_grace, error, closed.value.rcvd.code, with_new

    before, (grace_audio, grace_end), error, code, (new_audio, new_end) = run(scenario())
    assert before and grace_end["type"] == "end" and grace_audio  # the old secret works during the grace
    assert (error["id"], error["code"]) == ("after", "invalid_api_key") and "rotated" in error["message"]
    assert code == 4401
    assert new_end["type"] == "end" and new_audio


def test_tickets_and_client_tokens_end_with_the_secret_that_bought_them(live_stack, owner):
    app = make(live_stack, owner.key, scopes=["speech:write", "tokens:write"])
    token = mint(live_stack, app["key"])
    with live_stack.client(app["key"]) as client:
        ticket = client.post("/audio/stream/tickets").json()["ticket"]
    new = rotate(live_stack, owner, app["id"], 0)["key"]  # no grace: the old secret ends now
    with live_stack.client(token) as client:
        spoken = client.post("/audio/speech", json={"model": "kokoro", "input": "Hi.", "voice": "af_heart"})
    assert spoken.status_code == 401 and spoken.json()["error"]["code"] == "invalid_token", spoken.text

    async def connect_with_ticket():
        async with websockets.connect(ws_url(live_stack, f"?ticket={ticket}")):
            pass

    with pytest.raises(websockets.InvalidStatus) as refused:
        run(connect_with_ticket())
    assert refused.value.response.status_code == 403  # a WebSocket refused before it opens
    with live_stack.client(new) as client:
        ticket = client.post("/audio/stream/tickets").json()["ticket"]

    async def speak_with_ticket():
        async with websockets.connect(ws_url(live_stack, f"?ticket={ticket}")) as ws:
            await ws.recv()  # ready
            return await speak(ws, "u1")

    audio, end = run(speak_with_ticket())
    assert end["type"] == "end" and audio  # a ticket of the new secret works
    fresh = mint(live_stack, new)  # a token of the new secret speaks
    with live_stack.client(fresh) as client:
        assert (
            client.post("/audio/speech", json={"model": "kokoro", "input": "Hi.", "voice": "af_heart"}).status_code
            == 200
        )


def test_every_response_with_a_secret_is_not_stored(live_stack, owner):
    with live_stack.client(owner.key) as client:
        created = client.post("/keys", json={"name": "stored nowhere"})
        answers = [
            created,
            client.post(f"/keys/{created.json()['id']}/rotate", json={}),
            client.post("/tokens", json={}),
            client.post("/audio/stream/tickets"),
            client.get("/webhooks/secret"),
            client.post("/webhooks/secret/rotate"),
        ]
    for answer in answers:
        assert answer.status_code in (200, 201), answer.text
        assert answer.headers.get("cache-control") == "no-store", (answer.url, answer.headers.get("cache-control"))


def test_lists_in_bodies_are_bounded_naming_the_limit(live_stack, owner):
    with live_stack.client(owner.key) as client:
        scopes = client.post("/keys", json={"name": "many", "scopes": ["speech:write"] * 51})
        networks = client.put(
            "/organization/ip_allowlist", json={"allowed_ips": [f"10.0.{i}.0/24" for i in range(101)]}
        )
        entries = [{"text": f"w{i}", "alias": "x"} for i in range(20_001)]
        lexicon = client.post("/lexicons", json={"name": "huge", "entries": entries})
        groups = {f"group {i}": "member" for i in range(101)}
        sso = client.put(
            "/organization/sso",
            json={"issuer": "https://id.example.com", "client_id": "x", "domain": "example.com", "group_roles": groups},
        )
    for answer, param, limit in (
        (scopes, "scopes", "50"),
        (networks, "allowed_ips", "100"),
        (lexicon, "entries", "20000"),
        (sso, "group_roles", "100"),
    ):
        assert answer.status_code == 400, answer.text
        error = answer.json()["error"]
        assert error["param"] == param and limit in error["message"], error
