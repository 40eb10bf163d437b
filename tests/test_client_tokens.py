"""Short-lived client tokens (POST /v1/tokens) through the real server: a token speaks and does
nothing else, within its voice and character budget, once if single-use, billed to the key that
minted it and dead with it; on the WebSocket it connects with `?token=`."""

from __future__ import annotations

import asyncio
import json

import pytest
import websockets

from billing.models import UsageEvent
from tests.test_websocket import collect, ws_url

pytestmark = pytest.mark.django_db(transaction=True)

SPEAK = {"model": "kokoro", "input": "Hello there.", "voice": "af_heart", "response_format": "wav"}  # 12 characters


def mint(live_stack, key: str, **terms) -> dict:
    with live_stack.client(key) as client:
        minted = client.post("/tokens", json=terms)
    assert minted.status_code == 201, minted.text
    assert minted.headers["cache-control"] == "no-store"
    return minted.json()


def test_a_token_speaks_in_its_voice_within_its_budget_and_does_nothing_else(live_stack, owner):
    token = mint(live_stack, owner.key, expires_in=120, voice="af_heart", max_characters=20)
    assert token["token"].startswith("tts_tok_") and token["voice"] == "af_heart" and token["max_characters"] == 20
    with live_stack.client(token["token"]) as client:
        spoken = client.post("/audio/speech", json=SPEAK)
        assert spoken.status_code == 200 and spoken.content[:4] == b"RIFF", spoken.text
        other_voice = client.post("/audio/speech", json={**SPEAK, "voice": "am_adam", "input": "Hi."})
        over = client.post("/audio/speech", json=SPEAK)
        usage = client.get("/usage")
        keys = client.post("/keys", json={"name": "mine now"})
        ticket = client.post("/audio/stream/tickets")
        more_tokens = client.post("/tokens", json={})
    assert other_voice.status_code == 403 and other_voice.json()["error"]["code"] == "voice_not_allowed"
    assert over.status_code == 403 and over.json()["error"]["code"] == "token_budget_exceeded"
    assert over.json()["error"]["message"] == (
        "This request needs 12 characters; this client token has 8 left of its budget of 20."
    )
    assert usage.status_code == 403 and "'usage:read'" in usage.json()["error"]["message"]
    assert keys.status_code == 403 and "'keys:write'" in keys.json()["error"]["message"]
    assert keys.json()["error"]["message"].startswith("This client token may only speak")  # not "This API key"
    assert ticket.status_code == 403 and ticket.json()["error"]["code"] == "invalid_token"
    assert more_tokens.status_code == 403 and "'tokens:write'" in more_tokens.json()["error"]["message"]
    minting_key = owner.org.api_keys.get(name="Acme key")
    (event,) = UsageEvent.objects.filter(organization=owner.org)
    assert event.api_key_id == minting_key.pk and event.characters > 0  # billed to the key that minted it


def test_a_single_use_token_speaks_once_and_a_revoked_keys_tokens_die_with_it(live_stack, owner):
    once = mint(live_stack, owner.key, single_use=True)
    with live_stack.client(once["token"]) as client:
        assert client.post("/audio/speech", json=SPEAK).status_code == 200
        again = client.post("/audio/speech", json=SPEAK)
    assert again.status_code == 401 and again.json()["error"]["code"] == "invalid_token"
    with live_stack.client(owner.key) as client:
        made = client.post("/keys", json={"name": "browser tokens", "scopes": ["speech:write", "tokens:write"]}).json()
    token = mint(live_stack, made["key"])
    with live_stack.client(owner.key) as client:
        client.delete(f"/keys/{made['id']}")
    with live_stack.client(token["token"]) as client:
        dead = client.post("/audio/speech", json=SPEAK)
    assert dead.status_code == 401


def test_minting_needs_both_scopes_and_valid_terms(live_stack, owner, member):
    with live_stack.client(member.key) as client:  # a standard key: no tokens:write
        refused = client.post("/tokens", json={})
    assert refused.status_code == 403 and "'tokens:write'" in refused.json()["error"]["message"]
    with live_stack.client(owner.key) as client:
        minter = client.post("/keys", json={"name": "minter", "scopes": ["tokens:write"]}).json()
        for terms, param in [
            ({"expires_in": 7200}, "expires_in"),
            ({"expires_in": 0}, "expires_in"),
            ({"max_characters": 0}, "max_characters"),
            ({"voices": ["alloy"]}, "voices"),
            ({"single_use": "often"}, "single_use"),
        ]:
            bad = client.post("/tokens", json=terms)
            assert bad.status_code == 400 and bad.json()["error"]["param"] == param, (terms, bad.text)
    with live_stack.client(minter["key"]) as client:  # a token speaks: its key must be able to
        no_speech = client.post("/tokens", json={})
    assert no_speech.status_code == 403 and "'speech:write'" in no_speech.json()["error"]["message"]


def test_a_token_connects_to_the_websocket_in_the_url(live_stack, owner):
    token = mint(live_stack, owner.key, single_use=True, max_characters=100)

    async def scenario():
        async with websockets.connect(ws_url(live_stack, f"?token={token['token']}")) as ws:
            await ws.recv()  # ready
            await ws.send(json.dumps({"type": "synthesize", "id": "u1", "text": "Spoken with a token."}))
            _, audio, end = await collect(ws)
            assert end["type"] == "end" and audio
        with pytest.raises(websockets.InvalidStatus):  # single use: spent by the first connection
            async with websockets.connect(ws_url(live_stack, f"?token={token['token']}")):
                pass

    asyncio.run(scenario())


def preflight(live_stack, origin: str):
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization,content-type",
    }
    with live_stack.client() as client:
        return client.options("/audio/speech", headers=headers)


def test_browser_origins_an_organization_lists_may_speak_with_its_tokens_and_no_other(live_stack, owner, outsider):
    app, elsewhere = "https://app.example.com", "https://evil.example.net"
    with live_stack.client(owner.key) as client:
        bad = client.put("/organization/browser_origins", json={"browser_origins": ["https://app.example.com/page"]})
        saved = client.put("/organization/browser_origins", json={"browser_origins": ["HTTPS://App.Example.com/"]})
        read = client.get("/organization/browser_origins")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "browser_origins", bad.text
    assert "no path" in bad.json()["error"]["message"]
    assert saved.json() == read.json() == {"browser_origins": [app]}

    allowed, refused = preflight(live_stack, app), preflight(live_stack, elsewhere)
    assert allowed.status_code == 204 and allowed.headers["access-control-allow-origin"] == app
    assert allowed.headers["access-control-allow-headers"] == "Authorization, Content-Type, Idempotency-Key"
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert "access-control-allow-origin" not in refused.headers  # an origin no organization lists

    token = mint(live_stack, owner.key)["token"]
    with live_stack.client(token) as client:
        spoken = client.post("/audio/speech", json=SPEAK, headers={"Origin": app})
    with live_stack.client(mint(live_stack, owner.key)["token"]) as client:
        from_elsewhere = client.post("/audio/speech", json=SPEAK, headers={"Origin": elsewhere})
    with live_stack.client(owner.key) as client:
        by_key = client.post("/audio/speech", json=SPEAK, headers={"Origin": app})
    with live_stack.client(mint(live_stack, outsider.key)["token"]) as client:
        outsiders = client.post("/audio/speech", json=SPEAK, headers={"Origin": app})
    assert spoken.status_code == 200 and spoken.headers["access-control-allow-origin"] == app
    assert "x-job-id" in spoken.headers["access-control-expose-headers"]
    for response in (from_elsewhere, by_key, outsiders):  # spoken, but not answered to a browser
        assert response.status_code == 200 and "access-control-allow-origin" not in response.headers

    with live_stack.client(mint(live_stack, owner.key, max_characters=5)["token"]) as client:
        over = client.post("/audio/speech", json=SPEAK, headers={"Origin": app})
    assert over.status_code == 403 and over.headers["access-control-allow-origin"] == app  # the page reads why
    with live_stack.client("tts_tok_" + "x" * 43) as client:  # spent, expired or never issued: a 401 the page reads
        gone = client.post("/audio/speech", json=SPEAK, headers={"Origin": app})
        gone_elsewhere = client.post("/audio/speech", json=SPEAK, headers={"Origin": elsewhere})
    assert gone.status_code == 401 and gone.headers["access-control-allow-origin"] == app
    assert gone_elsewhere.status_code == 401 and "access-control-allow-origin" not in gone_elsewhere.headers
    with live_stack.client("sk-not-a-token") as client:  # a key's 401 is never answered to a page
        by_bad_key = client.post("/audio/speech", json=SPEAK, headers={"Origin": app})
    assert by_bad_key.status_code == 401 and "access-control-allow-origin" not in by_bad_key.headers
    events = owner.org.audit_events.filter(action="settings.browser_origins")
    assert [e.after for e in events] == [{"browser_origins": [app]}]
