"""WebSocket streaming (protocol tts.v1) against a real uvicorn server with a `websockets` client."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct

import httpx
import pytest
import redis
import websockets
from django.utils import timezone

from accounts.models import ApiKey, Organization
from inference.spec import SAMPLE_RATE
from synthesis.models import Job
from tests import stack
from tests.conftest import make_persona
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def ws_url(live_stack, query: str = "") -> str:
    return live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream" + query


async def collect(ws) -> tuple[dict, bytes, dict]:
    """One utterance: its start message, the audio bytes, its end (or error) message."""
    start, audio = None, b""
    while True:
        frame = await asyncio.wait_for(ws.recv(), 60)
        if isinstance(frame, bytes):
            assert start is not None, "audio before start"
            audio += frame
            continue
        message = json.loads(frame)
        if message["type"] == "start":
            start = message
        elif message["type"] in ("end", "error"):
            return start, audio, message


def run(coro):
    return asyncio.run(coro)


def test_two_utterances_on_one_connection(live_stack, owner):
    async def go():
        headers = {"Authorization": f"Bearer {owner.key}"}
        async with websockets.connect(ws_url(live_stack), additional_headers=headers) as ws:
            ready = json.loads(await ws.recv())
            assert ready == {"type": "ready", "protocol": "tts.v1", "sample_rate": SAMPLE_RATE}
            await ws.send(json.dumps({"type": "synthesize", "id": "a", "text": "First utterance here.", "seed": 7}))
            await ws.send(json.dumps({"type": "synthesize", "id": "b", "text": "And a second one.", "seed": 3}))
            return [await collect(ws), await collect(ws)]

    for (start, audio, end), (uid, text) in zip(
        run(go()), [("a", "First utterance here."), ("b", "And a second one.")], strict=True
    ):
        assert start["id"] == end["id"] == uid and start["format"] == "pcm"
        assert end["type"] == "end" and end["characters"] == len(text)
        assert len(audio) % 2 == 0 and len(audio) > 0
        assert end["audio_seconds"] == pytest.approx(len(audio) / 2 / SAMPLE_RATE, abs=1e-3)


def test_a_browser_ticket_works_once(live_stack, owner):
    ticket = httpx.post(
        f"{live_stack.base_url}/v1/audio/stream/tickets", headers={"Authorization": f"Bearer {owner.key}"}
    ).json()["ticket"]

    async def go():
        async with websockets.connect(ws_url(live_stack, f"?ticket={ticket}")) as ws:
            assert json.loads(await ws.recv())["type"] == "ready"
            await ws.send(json.dumps({"type": "synthesize", "id": "t", "text": "Via ticket.", "format": "mp3"}))
            start, audio, end = await collect(ws)
            assert end["type"] == "end" and start["format"] == "mp3" and audio[:3] in (b"ID3", b"\xff\xf3", b"\xff\xfb")
        with pytest.raises(websockets.InvalidStatus):  # spent
            async with websockets.connect(ws_url(live_stack, f"?ticket={ticket}")):
                pass

    run(go())


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer tts_nope_nope"}])
def test_an_unauthenticated_connection_is_refused(live_stack, headers):
    async def go():
        with pytest.raises(websockets.InvalidStatus) as info:
            async with websockets.connect(ws_url(live_stack, "?ticket=wst_forged"), additional_headers=headers):
                pass
        assert info.value.response.status_code == 403

    run(go())


def test_bad_messages_get_errors_and_the_connection_survives(live_stack, owner):
    async def go():
        headers = {"Authorization": f"Bearer {owner.key}"}
        async with websockets.connect(ws_url(live_stack), additional_headers=headers) as ws:
            await ws.recv()
            codes = []
            for bad in [
                "not json",
                json.dumps([1]),
                json.dumps({"type": "dance"}),
                json.dumps({"type": "synthesize", "id": "x"}),
                json.dumps({"type": "synthesize", "id": "y", "text": "a" * 5000}),
                json.dumps({"type": "synthesize", "id": "z", "text": "hi", "voice": "nobody"}),
                json.dumps({"type": "synthesize", "text": "b" * 70000}),
            ]:
                await ws.send(bad)
                message = json.loads(await asyncio.wait_for(ws.recv(), 10))
                assert message["type"] == "error"
                codes.append(message["code"])
            await ws.send(b"\x00\x01")
            codes.append(json.loads(await ws.recv())["code"])
            await ws.send(json.dumps({"type": "synthesize", "id": "ok", "text": "Still here."}))
            _, audio, end = await collect(ws)
            return codes, audio, end

    codes, audio, end = run(go())
    assert codes == [
        "invalid_json",
        "invalid_json",
        "unknown_type",
        "required",
        "string_above_max_length",
        "invalid_value",
        "message_too_large",
        "unexpected_binary",
    ]
    assert end["type"] == "end" and len(audio) > 0


def test_quota_applies_per_utterance(live_stack):
    org = make_persona("Tiny Quota", monthly_characters=12, requests_per_minute=1000)

    async def go():
        headers = {"Authorization": f"Bearer {org.key}"}
        async with websockets.connect(ws_url(live_stack), additional_headers=headers) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "synthesize", "id": "1", "text": "Ten chars."}))
            await ws.send(json.dumps({"type": "synthesize", "id": "2", "text": "Ten chars."}))
            return await collect(ws), await collect(ws)

    (_, _, first), (_, _, second) = run(go())
    assert first["type"] == "end"
    assert second == {**second, "type": "error", "id": "2", "code": "insufficient_quota"}


def test_cancel_stops_the_utterance(live_stack):
    org = make_persona("WS Cancel", max_input_chars=4096, monthly_characters=100_000, requests_per_minute=1000)
    text = " ".join(f"Sentence {i} of a long reading that takes a while." for i in range(30))

    async def go():
        headers = {"Authorization": f"Bearer {org.key}"}
        async with websockets.connect(ws_url(live_stack), additional_headers=headers) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "synthesize", "id": "long", "text": text}))
            while not isinstance(await ws.recv(), bytes):  # wait for audio to flow
                pass
            await ws.send(json.dumps({"type": "cancel", "id": "long"}))
            while True:
                frame = await asyncio.wait_for(ws.recv(), 60)
                if isinstance(frame, str):
                    return json.loads(frame)

    assert run(go()) == {"type": "end", "id": "long", "cancelled": True}
    job = wait_until(  # the worker settles the segments it finished (and nothing more is written after)
        lambda: Job.objects.filter(organization=org.org, status__in=Job.FINAL).first(), 30, "never settled"
    )
    assert job.status == Job.Status.CANCELLED


def test_a_client_that_stops_reading_is_closed_with_4008_and_its_job_stopped(live_stack, tmp_path):
    """A raw socket that never reads: the server's bounded outbox fills, and the server closes the
    connection (4008) and stops the job instead of buffering audio without limit."""
    org = make_persona("Never Reads", max_input_chars=4096, monthly_characters=100_000, requests_per_minute=1000)
    url, client = stack.redis_db(12)
    env = stack.stack_env(url, TTS_WS_BUFFER_BYTES="65536", TTS_BENCH_FIXED_LENGTH="1")
    worker = stack.start_worker(env, tmp_path, "slowclient")
    web, base = stack.start_web(env, tmp_path)
    sock = None
    try:
        stack.wait_for_workers(client, "ready", proc=worker)
        host, port = base.removeprefix("http://").split(":")
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a tiny window, set before connecting
        sock.connect((host, int(port)))
        handshake = (
            f"GET /v1/audio/stream HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\nSec-WebSocket-Version: 13\r\n"
            f"Authorization: Bearer {org.key}\r\n\r\n"
        )
        sock.sendall(handshake.encode())
        response = b""
        while b"\r\n\r\n" not in response:
            response += sock.recv(1)
        assert b" 101 " in response.split(b"\r\n")[0]
        text = " ".join(f"Sentence number {i} of a reading nobody listens to." for i in range(60))
        payload = json.dumps({"type": "synthesize", "id": "x", "text": text}).encode()
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        sock.sendall(bytes([0x81, 0xFE]) + struct.pack(">H", len(payload)) + mask + masked)
        job = wait_until(  # the client reads nothing meanwhile
            lambda: Job.objects.filter(organization=org.org, status__in=Job.FINAL).first(),
            120,
            "the job of a client that reads nothing never ended",
            interval=0.2,
        )
        assert job.status == Job.Status.CANCELLED  # the server stopped the work
        sock.settimeout(10)
        received = b""
        while True:  # now drain: the stream ends with the server's close frame, code 4008
            chunk = sock.recv(65536)
            if not chunk:
                break
            received += chunk
        assert b"\x88\x02" + struct.pack(">H", 4008) in received[-64:]
    finally:
        if sock is not None:
            sock.close()
        web.stop()
        worker.stop()


def test_a_key_revoked_while_connected_ends_the_connection_before_its_next_utterance(live_stack, owner):
    async def scenario():
        headers = {"Authorization": f"Bearer {owner.key}"}
        async with websockets.connect(ws_url(live_stack), additional_headers=headers) as ws:
            await ws.recv()  # ready
            await ws.send(json.dumps({"type": "synthesize", "id": "before", "text": "Still allowed."}))
            _, audio, end = await collect(ws)
            assert end["type"] == "end" and audio
            await asyncio.to_thread(revoke_key_of, owner)
            await ws.send(json.dumps({"type": "synthesize", "id": "after", "text": "Not any more."}))
            error = json.loads(await asyncio.wait_for(ws.recv(), 30))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
            return error, closed.value.rcvd.code

    error, code = run(scenario())
    assert (error["type"], error["id"], error["code"]) == ("error", "after", "invalid_api_key")
    assert code == 4401


def test_an_organization_suspended_while_connected_is_closed_with_4403(live_stack, owner):
    async def scenario():
        headers = {"Authorization": f"Bearer {owner.key}"}
        async with websockets.connect(ws_url(live_stack), additional_headers=headers) as ws:
            await ws.recv()  # ready
            await asyncio.to_thread(suspend, owner)
            await ws.send(json.dumps({"type": "synthesize", "id": "u1", "text": "Hello?"}))
            error = json.loads(await asyncio.wait_for(ws.recv(), 30))
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await asyncio.wait_for(ws.recv(), 30)
            return error, closed.value.rcvd.code

    error, code = run(scenario())
    assert error["code"] == "organization_suspended"
    assert code == 4403
    assert not Job.objects.filter(organization=owner.org).exists()  # nothing was generated for it


def revoke_key_of(persona) -> None:
    ApiKey.objects.get(prefix=persona.key.split("_")[1]).revoke()


def suspend(persona) -> None:
    Organization.objects.filter(pk=persona.org.pk).update(suspended_at=timezone.now(), suspension_reason="abuse")


def test_following_a_finished_job_whose_stream_expired_says_so_instead_of_hanging(live_stack, owner):
    with live_stack.client(owner.key) as client:
        job = client.post("/jobs", json={"input": "Kept a while.", "response_format": "pcm", "seed": 3}).json()
        wait_until(lambda: client.get(f"/jobs/{job['id']}").json()["status"] == "succeeded", 60, "job not done")
        events = redis.Redis.from_url(os.environ["REDIS_URL"])
        key = f"tts:job:{job['id']}:events"
        # the worker settles the job, then writes its stream's `end`: expire the stream once it is whole
        wait_until(lambda: any(f[b"type"] == b"end" for _, f in events.xrevrange(key, count=1)), 10, "no end event")
        events.delete(key)  # TTS_STREAM_TTL passed
        response = client.get(f"/jobs/{job['id']}/stream", timeout=20)
    assert response.status_code == 410, response.text
    assert response.json()["error"]["code"] == "stream_expired"

    async def follow():
        headers = {"Authorization": f"Bearer {owner.key}"}
        async with websockets.connect(ws_url(live_stack), additional_headers=headers) as ws:
            await ws.recv()  # ready
            await ws.send(json.dumps({"type": "follow", "id": "f1", "job_id": job["id"]}))
            return await collect(ws)

    _, audio, end = run(asyncio.wait_for(follow(), 30))
    assert (end["type"], end["code"]) == ("error", "stream_expired") and audio == b""
    assert f"/v1/jobs/{job['id']}/audio" in end["message"]  # where its stored audio still is
