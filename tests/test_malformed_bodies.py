"""Bodies a careless or hostile client sends: JSON nested far too deeply is a 400 in the error
shape on every JSON endpoint and an error message on the WebSocket (which stays open), never a
500 or a dropped connection."""

from __future__ import annotations

import asyncio
import json
import socket
from urllib.parse import urlsplit

import httpx
import pytest
import websockets

from tts_saas.limits import HttpBodyLimits

pytestmark = pytest.mark.django_db(transaction=True)

DEEP = b"[" * 100_000 + b"]" * 100_000


@pytest.mark.parametrize("path", ["/audio/speech", "/jobs", "/keys"])
def test_deeply_nested_json_is_a_400_naming_the_problem(live_stack, owner, path):
    with live_stack.client(owner.key) as client:
        response = client.post(path, content=DEEP, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text[:300]
    error = response.json()["error"]
    assert error["code"] == "invalid_json" and "nested too deeply" in error["message"]


def test_deeply_nested_json_on_the_websocket_is_an_error_message_and_the_connection_lives(live_stack, owner):
    url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"

    async def scenario():
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {owner.key}"}) as ws:
            await ws.recv()  # ready
            await ws.send("[" * 20_000 + "]" * 20_000)  # under the 64 KiB message limit
            error = json.loads(await asyncio.wait_for(ws.recv(), 30))
            await ws.send(json.dumps({"type": "unknown"}))
            after = json.loads(await asyncio.wait_for(ws.recv(), 30))
            return error, after

    error, after = asyncio.run(scenario())
    assert (error["type"], error["code"]) == ("error", "invalid_json")
    assert after["code"] == "unknown_type"  # still connected and answering


def test_a_body_that_is_not_utf8_json_is_a_400(live_stack, owner):
    response = httpx.post(
        f"{live_stack.base_url}/v1/jobs",
        content=b"\xff\xfe{}",
        headers={"Authorization": f"Bearer {owner.key}", "Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_json"


@pytest.mark.parametrize("path", ["/audio/speech", "/jobs", "/keys"])
def test_an_oversized_body_is_refused_with_413_before_it_is_parsed(live_stack, owner, path):
    body = b'{"input": "' + b"a" * (2 * 1024 * 1024) + b'"}'
    with live_stack.client(owner.key) as client:
        response = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 413, response.text[:300]
    assert response.json()["error"]["code"] == "request_too_large"


def test_an_oversized_body_sent_without_a_length_is_refused_too(live_stack, owner):
    def chunks():
        for _ in range(40):
            yield b"[" * 65536

    with live_stack.client(owner.key) as client:
        response = client.post("/jobs", content=chunks(), headers={"Content-Type": "application/json"})
    assert response.status_code == 413, response.text[:300]


def raw(base_url: str, head: str, body: bytes = b"") -> bytes:
    """Send `head` and `body` on a fresh connection; what comes back until the JSON ends or the
    server closes."""
    parts = urlsplit(base_url)
    head = head.replace("{host}", parts.netloc)
    answer = b""
    with socket.create_connection((parts.hostname, parts.port), timeout=20) as sock:
        try:
            sock.sendall(head.encode() + body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused before all of it was sent
        while b"}}" not in answer and (chunk := sock.recv(65536)):
            answer += chunk
    return answer


def test_an_oversized_body_is_refused_before_it_is_sent(live_stack, owner):
    """A Content-Length over the limit is answered at once and the connection closed: the server
    does not wait for (or store) a body it would refuse anyway."""
    answer = raw(
        live_stack.base_url,
        f"POST /v1/audio/speech HTTP/1.1\r\nHost: {{host}}\r\nAuthorization: Bearer {owner.key}\r\n"
        f"Content-Type: application/json\r\nX-Request-ID: req_big_body\r\nContent-Length: {50 << 20}\r\n\r\n",
        b'{"input": "',  # then nothing more: 50 MiB announced, a few bytes sent
    )
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    head = answer.split(b"\r\n\r\n")[0].lower()
    assert b"x-request-id: req_big_body" in head and b"connection: close" in head
    assert b'"code": "request_too_large"' in answer


def chunked(size: int) -> bytes:
    piece = b"[" * 65536
    return b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for _ in range(size // len(piece))) + b"0\r\n\r\n"


@pytest.mark.parametrize(
    "head",
    [
        # Content-Length is not the framing when Transfer-Encoding is there; a body on any method counts.
        "POST /v1/jobs HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 10\r\n",
        "GET /v1/jobs HTTP/1.1\r\nTransfer-Encoding: chunked\r\n",
    ],
)
def test_a_chunked_body_over_the_limit_is_refused_whatever_else_the_head_says(live_stack, owner, head):
    answer = raw(
        live_stack.base_url,
        f"{head}Host: {{host}}\r\nAuthorization: Bearer {owner.key}\r\nContent-Type: application/json\r\n\r\n",
        chunked(3 << 20),
    )
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b'"code": "request_too_large"' in answer


def test_the_larger_limit_of_the_playgrounds_download_holds_under_a_path_prefix():
    """Behind a proxy that mounts the service at a prefix (ASGI root_path), the view that takes
    more is still found; every other path keeps the ordinary limit."""
    reached = []

    async def app(scope, receive, send):
        reached.append(scope["path"])

    async def run(path: str, content_type: bytes) -> list[dict]:
        sent: list[dict] = []
        scope = {
            "type": "http",
            "method": "POST",
            "root_path": "/tts",
            "path": f"/tts{path}",
            "headers": [(b"content-length", str(3 << 20).encode()), (b"content-type", content_type)],
        }

        async def send(message):
            sent.append(message)

        await HttpBodyLimits(app)(scope, None, send)
        return sent

    assert asyncio.run(run("/dashboard/playground/encode", b"application/octet-stream")) == []
    assert reached == ["/tts/dashboard/playground/encode"]
    for path, content_type in (
        ("/dashboard/playground/encode", b"application/json"),
        ("/v1/jobs", b"application/json"),
    ):
        refused = asyncio.run(run(path, content_type))
        assert refused[0]["status"] == 413 and b"request_too_large" in refused[1]["body"]
    assert len(reached) == 1
