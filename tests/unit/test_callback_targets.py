"""Where job callbacks may go and how a delivery behaves (synthesis.callbacks): only public
addresses (unless TTS_CALLBACK_ALLOW_PRIVATE), the checked address is the one connected to (no
second DNS lookup to rebind), an attempt is bounded in time and in what it reads, and what the
job records of a failed attempt is a generic reason, not our error text."""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from standardwebhooks.webhooks import Webhook

from accounts.models import Organization
from synthesis.models import Job
from synthesis.service import callbacks
from tests.factories import make_job

GENERIC_REASONS = {"refused target", "host did not resolve", "timeout", "connection failed", "invalid response"}
PUBLIC_IP = "93.184.216.34"  # never actually connected to: the tests refuse that connection


@pytest.mark.parametrize(
    "url",
    [
        "http://100.100.100.200/hook",  # carrier-grade NAT range: a cloud metadata service
        "http://100.64.0.1/hook",  # carrier-grade NAT
        "http://169.254.169.254/latest/meta-data/",
        "http://127.0.0.1:8000/hook",
        "http://10.0.0.1/hook",
        "http://192.168.1.1/hook",
        "http://198.18.0.1/hook",  # benchmarking range
        "http://0.0.0.0/hook",
        "http://224.0.0.1/hook",  # multicast
        "http://[::1]/hook",
        "http://[fd00::1]/hook",
        "http://[fe80::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",  # IPv4-mapped loopback
        "http://[::ffff:100.100.100.200]/hook",  # IPv4-mapped metadata address
        "http://[2002:7f00:1::]/hook",  # 6to4 of 127.0.0.1
        "http://[64:ff9b::a00:1]/hook",  # NAT64 of 10.0.0.1
        "http://[64:ff9b::a9fe:a9fe]/hook",  # NAT64 of 169.254.169.254
        "http://[64:ff9b:1::a9fe:a9fe]/hook",  # NAT64's local-use prefix
        "http://[2002:a9fe:a9fe::]/hook",  # 6to4 of 169.254.169.254
        "http://[::127.0.0.1]/hook",  # IPv4-compatible loopback (deprecated ::/96)
        "http://[::a9fe:a9fe]/hook",  # IPv4-compatible metadata address
        "http://[::ffff:0:a9fe:a9fe]/hook",  # IPv4-translated metadata address
        "http://[2001:0:4136:e378:8000:63bf:5601:5601]/hook",  # Teredo, client 169.254.169.254
        "http://2130706433/hook",  # 127.0.0.1 in decimal
        "http://0x7f000001/hook",  # 127.0.0.1 in hex
        "http://0x7f.1/hook",
        "http://0/hook",
        "http://localhost:8000/hook",
    ],
)
def test_a_callback_url_to_a_non_public_address_is_refused(settings, url):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    assert callbacks.url_problem(url)


@pytest.mark.parametrize(
    "url", [f"http://{PUBLIC_IP}/hook", "https://8.8.8.8:8443/hook", "https://[2606:4700:4700::1111]/hook"]
)
def test_a_callback_url_to_a_public_address_is_accepted(settings, url):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    assert callbacks.url_problem(url) is None


@pytest.mark.parametrize("url", ["ftp://example.com/x", "http:///path", "not a url", "http://[::1/x"])
def test_a_callback_url_that_is_not_http_is_refused_even_when_private_targets_are_allowed(settings, url):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True
    assert callbacks.url_problem(url)


def test_private_targets_are_accepted_when_allowed(settings):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True
    assert callbacks.url_problem("http://100.100.100.200/hook") is None
    assert callbacks.url_problem("http://127.0.0.1:9/hook") is None


@pytest.fixture
def resolver(monkeypatch) -> Callable[..., list[int]]:
    """`resolver(host, *answers)`: `host` resolves to answers[0] on the first lookup, answers[1] on
    the second and so on (the last one after that); a list of the lookups made is returned. Other
    names (the database's) resolve as usual."""
    real = socket.getaddrinfo

    def install(host: str, *answers: str | tuple[str, ...]) -> list[int]:
        lookups: list[int] = []

        def fake(name, port, *args, **kwargs):
            if name != host:
                return real(name, port, *args, **kwargs)
            lookups.append(port)
            answer = answers[min(len(lookups), len(answers)) - 1]
            ips = (answer,) if isinstance(answer, str) else answer
            return [
                (socket.AF_INET6 if ":" in ip else socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, int(port or 0)))
                for ip in ips
            ]

        monkeypatch.setattr(socket, "getaddrinfo", fake)
        return lookups

    return install


def test_a_name_with_any_non_public_address_is_refused(settings, resolver):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    resolver("hook.test", (PUBLIC_IP, "100.100.100.200"))
    assert callbacks.url_problem("https://hook.test/hook")


def test_a_name_with_only_public_addresses_is_accepted(settings, resolver):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    resolver("hook.test", (PUBLIC_IP, "2606:4700:4700::1111"))
    assert callbacks.url_problem("https://hook.test/hook") is None


def test_a_name_that_does_not_resolve_is_refused(settings):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    assert "does not resolve" in callbacks.url_problem("https://nowhere.invalid/hook")


# Delivery ------------------------------------------------------------------------------------


class RawServer:
    """A TCP server on 127.0.0.1 that hands each connection to `handle` (in its own thread)."""

    def __init__(self, handle: Callable[[socket.socket], None]):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        self.requests: list[bytes] = []
        self._handle = handle
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn: socket.socket) -> None:
        with conn:
            try:
                self._handle(conn)
            except OSError:
                pass

    def read_request(self, conn: socket.socket) -> bytes:
        """The request head and its Content-Length body."""
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = conn.recv(65536)
            if not chunk:
                return data
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":", 1)[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            ),
            0,
        )
        while len(body) < length:
            chunk = conn.recv(65536)
            if not chunk:
                break
            body += chunk
        self.requests.append(head + b"\r\n\r\n" + body)
        return head

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def server() -> Iterator[Callable[[Callable[[RawServer, socket.socket], None]], RawServer]]:
    started: list[RawServer] = []

    def start(handle: Callable[[RawServer, socket.socket], None]) -> RawServer:
        holder: list[RawServer] = []
        raw = RawServer(lambda conn: handle(holder[0], conn))
        holder.append(raw)
        started.append(raw)
        return raw

    yield start
    for raw in started:
        raw.close()


def answer_ok(raw: RawServer, conn: socket.socket) -> None:
    raw.read_request(conn)
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")


@pytest.fixture
def job_for(db) -> Callable[[str], Job]:
    org = Organization.objects.create(name="Callback Unit", slug="callback-unit")
    return lambda url: make_job(org, status=Job.Status.SUCCEEDED, callback_url=url)


def last_attempt(job: Job) -> dict:
    job.refresh_from_db()
    return job.callback_attempts[-1]


def test_a_delivery_to_a_public_target_is_signed_and_recorded_with_its_status(settings, resolver, server, job_for):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True
    raw = server(answer_ok)
    resolver("hook.test", "127.0.0.1")
    job = job_for(f"http://hook.test:{raw.port}/hook?x=1")
    assert callbacks.deliver(str(job.id)).delivered
    attempt = last_attempt(job)
    assert attempt["status"] == 200 and attempt["error"] == ""
    head, _, body = raw.requests[0].partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    assert lines[0] == "POST /hook?x=1 HTTP/1.1"
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    assert headers["host"] == f"hook.test:{raw.port}"
    assert Webhook(job.organization.webhook_secret).verify(body, headers)["job"]["id"] == str(job.id)
    # A retry is the same message: the same webhook-id, freshly signed.
    assert callbacks.deliver(str(job.id)).delivered
    head, _, body = raw.requests[1].partition(b"\r\n\r\n")
    retried = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in head.decode().split("\r\n")[1:])}
    assert retried["webhook-id"] == headers["webhook-id"]
    assert Webhook(job.organization.webhook_secret).verify(body, retried)


def test_the_delivery_connects_to_the_address_it_checked_not_a_second_lookup(
    settings, resolver, server, job_for, monkeypatch
):
    """DNS rebinding: the name answers a public address when checked, then the loopback address
    where the receiver (standing in for an internal service) listens. The delivery must go to the
    address it checked (refused below, so nothing leaves the machine) and never reach loopback."""
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    raw = server(answer_ok)
    lookups = resolver("hook.test", PUBLIC_IP, "127.0.0.1")
    connected: list[tuple] = []
    real_connect = socket.create_connection

    def connect(address, *args, **kwargs):
        connected.append(tuple(address))
        if address[0] == PUBLIC_IP:
            raise ConnectionRefusedError(111, "Connection refused")
        return real_connect(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", connect)
    job = job_for(f"http://hook.test:{raw.port}/hook")
    assert not callbacks.deliver(str(job.id)).delivered
    assert raw.connections == 0, "the delivery reached the rebound (loopback) address"
    assert connected == [(PUBLIC_IP, raw.port)]
    assert len(lookups) == 1
    assert last_attempt(job) == {**last_attempt(job), "status": None, "error": "connection failed"}


def test_the_delivery_tries_each_checked_address_in_turn(settings, resolver, server, job_for):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True
    raw = server(answer_ok)  # listens on 127.0.0.1 only: 127.0.0.2 refuses the connection
    lookups = resolver("hook.test", ("127.0.0.2", "127.0.0.1"), "127.0.0.3")
    job = job_for(f"http://hook.test:{raw.port}/hook")
    assert callbacks.deliver(str(job.id)).delivered
    assert raw.connections == 1 and len(lookups) == 1


def test_a_target_that_turned_private_since_submission_is_refused_without_connecting(
    settings, resolver, server, job_for
):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    raw = server(answer_ok)
    resolver("hook.test", PUBLIC_IP, "127.0.0.1")
    url = f"http://hook.test:{raw.port}/hook"
    assert callbacks.url_problem(url) is None  # at submission
    job = job_for(url)
    assert not callbacks.deliver(str(job.id)).delivered
    assert raw.connections == 0
    assert last_attempt(job)["error"] == "refused target"


def test_a_failed_attempt_records_a_generic_reason_not_the_error_text(settings, job_for):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    job = job_for(f"http://127.0.0.1:{port}/hook")  # nothing listens there any more
    assert not callbacks.deliver(str(job.id)).delivered
    attempt = last_attempt(job)
    assert set(attempt) == {"at", "status", "error"}
    assert attempt["status"] is None and attempt["error"] == "connection failed"


def test_a_receiver_that_hangs_up_is_recorded_generically(settings, server, job_for):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True

    def hang_up(raw: RawServer, conn: socket.socket) -> None:
        raw.read_request(conn)
        conn.sendall(b"NOT HTTP AT ALL\r\n\r\n")

    raw = server(hang_up)
    job = job_for(f"http://127.0.0.1:{raw.port}/hook")
    assert not callbacks.deliver(str(job.id)).delivered
    assert last_attempt(job)["error"] in GENERIC_REASONS


def test_a_receiver_that_answers_a_header_at_a_time_is_cut_off_at_the_attempt_deadline(
    settings, server, job_for, monkeypatch
):
    """Each read returns within any per-read timeout, so only an overall deadline stops it."""
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True
    monkeypatch.setattr(callbacks, "ATTEMPT_SECONDS", 1.5, raising=False)
    stop = threading.Event()

    def drip(raw: RawServer, conn: socket.socket) -> None:
        raw.read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\n")
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and not stop.is_set():
            conn.sendall(b"X-Slow: 1\r\n")
            time.sleep(0.2)

    raw = server(drip)
    job = job_for(f"http://127.0.0.1:{raw.port}/hook")
    started = time.monotonic()
    try:
        assert not callbacks.deliver(str(job.id)).delivered
    finally:
        stop.set()
    assert time.monotonic() - started < 4
    assert last_attempt(job)["error"] == "timeout"


def test_an_endless_response_body_is_not_read_to_the_end(settings, server, job_for):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True
    stop = threading.Event()
    sent: list[int] = [0]

    def flood(raw: RawServer, conn: socket.socket) -> None:
        raw.read_request(conn)
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")  # a body until the connection closes
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and not stop.is_set():
            conn.sendall(b"x" * 65536)
            sent[0] += 65536

    raw = server(flood)
    job = job_for(f"http://127.0.0.1:{raw.port}/hook")
    started = time.monotonic()
    try:
        assert callbacks.deliver(str(job.id)).delivered
    finally:
        stop.set()
    assert time.monotonic() - started < 3
    assert last_attempt(job)["status"] == 200


def test_a_redirect_is_not_followed(settings, server, job_for):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True

    def redirect(raw: RawServer, conn: socket.socket) -> None:
        raw.read_request(conn)
        conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:9/\r\nContent-Length: 0\r\n\r\n")

    raw = server(redirect)
    job = job_for(f"http://127.0.0.1:{raw.port}/hook")
    assert not callbacks.deliver(str(job.id)).delivered
    assert last_attempt(job)["status"] == 302 and raw.connections == 1


def server_name(client_hello: bytes) -> str | None:
    """The SNI host name in a TLS ClientHello record, or None."""
    data = client_hello[5 + 4 :]  # record header, handshake header
    at = 2 + 32  # version, random
    at += 1 + data[at]  # session id
    at += 2 + struct.unpack("!H", data[at : at + 2])[0]  # cipher suites
    at += 1 + data[at]  # compression methods
    end = at + 2 + struct.unpack("!H", data[at : at + 2])[0]
    at += 2
    while at + 4 <= end:
        kind, length = struct.unpack("!HH", data[at : at + 4])
        if kind == 0:  # server_name: list length, name type, name length, name
            size = struct.unpack("!H", data[at + 7 : at + 9])[0]
            return data[at + 9 : at + 9 + size].decode()
        at += 4 + length
    return None


def test_an_https_delivery_to_the_pinned_address_still_names_the_host_for_tls(settings, resolver, server, job_for):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = True
    hellos: list[bytes] = []

    def read_hello(raw: RawServer, conn: socket.socket) -> None:
        conn.settimeout(5)
        data = b""
        while len(data) < 5 or len(data) < 5 + struct.unpack("!H", data[3:5])[0]:
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        hellos.append(data)

    raw = server(read_hello)
    resolver("hook.test", "127.0.0.1")
    job = job_for(f"https://hook.test:{raw.port}/hook")
    assert not callbacks.deliver(str(job.id)).delivered
    assert server_name(hellos[0]) == "hook.test"
    assert last_attempt(job)["error"] == "connection failed"
