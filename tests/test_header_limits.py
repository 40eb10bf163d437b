"""Request header limits, as a client sees them from the real server. A request head over 16 KiB
still incomplete is refused by uvicorn itself (h11 with a bounded buffer: 400 and the connection
closed, before Django); one that arrived whole, or more than 100 header fields, by
tts_saas.limits (431 in the documented error shape). Every place that starts the web server
starts it the same way."""

from __future__ import annotations

import asyncio
import json
import select
import shlex
import socket
import time
from urllib.parse import urlsplit

import httpx
import pytest
import websockets
import yaml

from tests.stack import ROOT
from tts_saas.limits import MAX_HEADER_BYTES, MAX_HEADERS

pytestmark = pytest.mark.django_db(transaction=True)

# The web server's command line as the Dockerfile runs it; the options that bound the request head.
HEAD_LIMIT_OPTIONS = ["--http", "h11", "--h11-max-incomplete-event-size", "16384"]


def raw_request(base_url: str, head: bytes, piece: int = 0, timeout: float = 10) -> bytes:
    """Send `head` on a fresh connection (all at once, or `piece` bytes at a time with a pause
    between, as a slow network delivers it) and read whatever comes back until the server closes
    it (or resets it: what a client sees then is what had arrived)."""
    parts = urlsplit(base_url)
    received = b""
    with socket.create_connection((parts.hostname, parts.port), timeout=timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            for at in range(0, len(head), piece or len(head)):
                sock.sendall(head[at : at + (piece or len(head))])
                if piece:
                    time.sleep(0.02)
                    if select.select([sock], [], [], 0)[0]:
                        break  # the server answered already: stop sending, as a client would
            while chunk := sock.recv(65536):
                received += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass
    return received


def get_with(base_url: str, extra: str, piece: int = 0) -> bytes:
    host = urlsplit(base_url).netloc
    head = f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n".encode()
    return raw_request(base_url, head, piece)


def status_of(answer: bytes) -> int:
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def test_a_64_kib_header_sent_at_once_is_refused(live_stack):
    answer = get_with(live_stack.base_url, f"X-Big: {'a' * 65536}\r\n")
    assert status_of(answer) in (400, 431), answer[:300]  # 431 from the app when it arrived whole


def test_a_64_kib_header_arriving_slowly_is_refused_by_the_server_before_the_app(live_stack):
    answer = get_with(live_stack.base_url, f"X-Big: {'a' * 65536}\r\n", piece=4096)
    assert status_of(answer) == 400, answer[:300]
    assert b"x-request-id" not in answer.lower()  # Django never saw it


def test_a_request_head_over_16_kib_in_many_headers_is_refused(live_stack):
    headers = "".join(f"X-Part-{i}: {'b' * 500}\r\n" for i in range(40))  # 40 fields, ~21 KiB
    answer = get_with(live_stack.base_url, headers)
    assert status_of(answer) == 431, answer[:300]
    body = answer.split(b"\r\n\r\n", 1)[1]  # JSON, possibly in one chunk of chunked encoding
    assert b'"code": "request_header_fields_too_large"' in body
    assert f"at most {MAX_HEADER_BYTES} bytes".encode() in body


def test_a_head_under_the_limit_with_a_big_cookie_is_served(live_stack):
    answer = get_with(live_stack.base_url, f"Cookie: session={'c' * 12000}\r\n")
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


def assert_431(response: httpx.Response) -> None:
    assert response.status_code == 431, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "request_header_fields_too_large"
    assert f"at most {MAX_HEADERS} " in error["message"]
    assert response.headers["x-request-id"]


def test_150_headers_are_refused_with_431(live_stack):
    headers = [(f"X-Field-{i}", "1") for i in range(150)]
    assert_431(httpx.get(f"{live_stack.base_url}/healthz", headers=headers))


def test_one_header_repeated_150_times_is_refused_with_431(live_stack):
    headers = [("X-Same", str(i)) for i in range(150)]
    assert_431(httpx.get(f"{live_stack.base_url}/v1/voices", headers=headers))


def test_up_to_the_limit_of_headers_is_served(live_stack):
    with httpx.Client() as client:
        request = client.build_request("GET", f"{live_stack.base_url}/healthz")
        room = MAX_HEADERS - len(request.headers)
        for i in range(room):
            request.headers[f"X-Field-{i}"] = "1"
        assert len(request.headers.raw) == MAX_HEADERS
        assert client.send(request).status_code == 200


def test_websockets_still_upgrade_on_the_h11_server(live_stack, owner):
    ticket = httpx.post(
        f"{live_stack.base_url}/v1/audio/stream/tickets", headers={"Authorization": f"Bearer {owner.key}"}
    ).json()["ticket"]
    url = live_stack.base_url.replace("http://", "ws://") + f"/v1/audio/stream?ticket={ticket}"

    async def ready() -> dict:
        async with websockets.connect(url) as ws:
            return json.loads(await asyncio.wait_for(ws.recv(), 30))

    assert asyncio.run(ready())["type"] == "ready"


def test_a_websocket_handshake_with_110_headers_is_refused_before_any_consumer_runs(live_stack, owner):
    url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
    # Over MAX_HEADERS (100); past 128 the server's own WebSocket parser already refuses a handshake.
    headers = [("Authorization", f"Bearer {owner.key}")] + [(f"X-Field-{i}", "1") for i in range(110)]

    async def handshake():
        async with websockets.connect(url, additional_headers=headers):
            pass

    with pytest.raises(websockets.InvalidStatus) as refused:
        asyncio.run(handshake())
    assert refused.value.response.status_code == 403

    async def within_the_limit() -> dict:
        async with websockets.connect(url, additional_headers=headers[:50]) as ws:
            return json.loads(await asyncio.wait_for(ws.recv(), 30))

    assert asyncio.run(within_the_limit())["type"] == "ready"


def dockerfile_command() -> list[str]:
    (line,) = [line for line in (ROOT / "deploy" / "Dockerfile").read_text().splitlines() if line.startswith("CMD")]
    return json.loads(line.removeprefix("CMD"))


def contains(command: list[str], options: list[str]) -> bool:
    return any(command[i : i + len(options)] == options for i in range(len(command)))


def test_every_place_that_starts_the_web_server_bounds_the_request_head():
    assert contains(dockerfile_command(), HEAD_LIMIT_OPTIONS)
    compose = yaml.safe_load((ROOT / "deploy" / "docker-compose.yml").read_text())
    assert "command" not in compose["services"]["web"]  # the image's CMD
    # docker-compose's web service runs the image's CMD; Kubernetes' is checked equal to it in
    # test_deploy_files. scripts/run and the tests' server start it the same way.
    script = (ROOT / "scripts" / "run").read_text().replace("\\\n", " ")
    run_line = next(line for line in script.splitlines() if "bin/uvicorn " in line)
    assert contains(shlex.split(run_line.removesuffix("&")), HEAD_LIMIT_OPTIONS)
    stack_source = (ROOT / "tests" / "stack.py").read_text()
    assert all(f'"{option}"' in stack_source for option in HEAD_LIMIT_OPTIONS)
