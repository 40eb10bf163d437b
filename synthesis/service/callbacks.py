"""Job callbacks: when an async job ends, its `callback_url` receives a POST with the job as JSON,
signed as Standard Webhooks (standardwebhooks.com) specifies, so any of its libraries verifies it:

    webhook-id: msg_<job id>  (the same on every retry: receivers de-duplicate by it)
    webhook-timestamp: <unix time of the attempt>
    webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>

The key is the base64 after "whsec_" in the organization's webhook secret. For a day after a
rotation the header lists a second signature, made with the previous secret, so receivers still
holding it verify too. Deliveries are retried with exponential backoff (the task's Celery retry
policy); every attempt is recorded on the job.

A tenant chooses the URL, so the worker must not become a way into the operator's network: only
globally routable addresses are targets (unless TTS_CALLBACK_ALLOW_PRIVATE), checked when the job
is submitted and again at each delivery, and the delivery connects to the very address that was
checked (a second DNS lookup could answer differently: DNS rebinding). What a tenant sees of an
attempt is its status or a generic reason, never our error text.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import socket
import time
import typing
from dataclasses import dataclass
from datetime import UTC, datetime

import httpcore
import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from accounts.models import Organization
from synthesis.models import Job, WebhookDelivery

logger = logging.getLogger(__name__)

ATTEMPT_SECONDS = 10.0  # one attempt in all: connect, TLS, request, the receiver's answer
RESPONSE_BYTES = 4096  # of the answer's body we read at most: the status is what counts

# The reasons an attempt records when there is no status: generic on purpose (tenants see them).
REFUSED_TARGET = "refused target"
UNRESOLVED = "host did not resolve"
TIMEOUT = "timeout"
CONNECTION_FAILED = "connection failed"
INVALID_RESPONSE = "invalid response"

_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # embeds an IPv4 address a NAT64 gateway reaches


def message_id_for(job: Job) -> str:
    """One callback per job (its final state): the id is the job's, stable across retries."""
    return f"msg_{job.id.hex}"


def signature_headers(org: Organization, message_id: str, body: bytes, now: datetime | None = None) -> dict[str, str]:
    """The Standard Webhooks headers for one attempt: a signature per secret in use (the previous
    one too during a rotation's grace period), space-separated as the specification lists them."""
    now = now or timezone.now()
    timestamp = datetime.fromtimestamp(int(now.timestamp()), tz=UTC)
    text = body.decode()
    signatures = [Webhook(secret).sign(message_id, timestamp, text) for secret in org.webhook_signing_secrets(now)]
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": " ".join(signatures),
    }


def is_public(address: str) -> bool:
    """Whether a callback may connect to `address`: a global unicast address. An IPv6 address that
    carries an IPv4 one (IPv4-mapped, 6to4, NAT64) is judged by the IPv4 address it reaches."""
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address):
        inner = ip.ipv4_mapped or ip.sixtofour
        if inner is None and ip in _NAT64:
            inner = ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
        if inner is not None:
            return is_public(str(inner))
    return ip.is_global and not ip.is_multicast


class RefusedTarget(Exception):
    """The callback URL may not be delivered to: `message` for the submitter, `reason` for the
    job's attempt record."""

    def __init__(self, message: str, reason: str = REFUSED_TARGET):
        super().__init__(message)
        self.message = message
        self.reason = reason


@dataclass(frozen=True)
class Target:
    url: httpx.URL
    addresses: tuple[str, ...]  # the checked IP addresses, the only ones the delivery connects to


def _parse(url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError, TypeError):
        parsed = None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.raw_host:
        raise RefusedTarget("callback_url must be an http(s) URL.")
    return parsed


def resolve(url: str) -> Target:
    """The URL with the address to deliver it to; RefusedTarget when there is none we may use.
    Every address the name resolves to must be public: a name that answers with one public and
    one private address would otherwise pass on one and be used on the other."""
    parsed = _parse(url)
    # The ASCII (IDNA) form: what DNS is asked. Numeric forms (2130706433, 0x7f.1) resolve here too.
    host = parsed.raw_host.decode("ascii")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        infos = []
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))  # in order, once each
    if not addresses:
        raise RefusedTarget(f"callback_url host {host} does not resolve.", UNRESOLVED)
    if not settings.TTS_CALLBACK_ALLOW_PRIVATE and not all(is_public(a) for a in addresses):
        raise RefusedTarget("callback_url must point at a public address (not private, loopback or shared).")
    return Target(parsed, tuple(addresses))


def url_problem(url: str) -> str | None:
    """Why a callback URL is refused, or None. Non-public targets are refused unless
    TTS_CALLBACK_ALLOW_PRIVATE is set (they would let tenants probe the operator's network). With
    it set the name is not looked up here: in a container setup the worker may resolve names the
    web process cannot."""
    try:
        if settings.TTS_CALLBACK_ALLOW_PRIVATE:
            _parse(url)
        else:
            resolve(url)
    except RefusedTarget as exc:
        return exc.message
    return None


def payload(job: Job) -> dict:
    return {
        "type": f"job.{job.status}",
        "job": {
            "id": str(job.id),
            "status": job.status,
            "characters": job.characters,
            "audio_seconds": round(job.audio_seconds, 3),
            "error": {"code": job.error_code, "message": job.error_message} if job.error_code else None,
            "audio_url": f"/v1/jobs/{job.id}/audio" if job.status == Job.Status.SUCCEEDED else None,
        },
    }


def _time_left(deadline: float, timeout: float | None, error: type[Exception]) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the callback attempt ran out of time")
    return left if timeout is None else min(left, timeout)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every operation ends by the attempt's deadline, so a receiver that
    answers a byte at a time cannot hold a worker thread for longer than ATTEMPT_SECONDS."""

    def __init__(self, stream: httpcore.NetworkStream, deadline: float):
        self._stream = stream
        self._deadline = deadline

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _time_left(self._deadline, timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _time_left(self._deadline, timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(
        self, ssl_context: typing.Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        # The TLS handshake's timeout is one overall deadline in CPython's ssl module.
        left = _time_left(self._deadline, timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._stream.start_tls(ssl_context, server_hostname, left), self._deadline)

    def get_extra_info(self, info: str) -> typing.Any:
        return self._stream.get_extra_info(info)


class _PinnedBackend(httpcore.NetworkBackend):
    """Connects to the checked addresses (the first that answers, in the resolver's order) whatever
    host the URL names: no second DNS lookup. The URL keeps its host, so the Host header, SNI and
    the certificate check are the receiver's name."""

    def __init__(self, addresses: tuple[str, ...], deadline: float):
        self._addresses = addresses
        self._deadline = deadline
        self._backend = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: typing.Iterable[typing.Any] | None = None,
    ) -> httpcore.NetworkStream:
        failure: Exception = httpcore.ConnectError("no address to connect to")
        for address in self._addresses:
            left = _time_left(self._deadline, timeout, httpcore.ConnectTimeout)
            try:
                stream = self._backend.connect_tcp(address, port, left, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc  # e.g. an IPv6 address on a host without IPv6: try the next
                continue
            return _DeadlineStream(stream, self._deadline)
        raise failure

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: typing.Iterable[typing.Any] | None = None
    ) -> httpcore.NetworkStream:
        raise httpcore.ConnectError("callbacks go over TCP only")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def post(target: Target, body: bytes, headers: dict[str, str]) -> int:
    """POST `body` to the target's checked address within ATTEMPT_SECONDS; the response status.
    No redirects (a redirect could lead anywhere) and at most RESPONSE_BYTES of the body read."""
    url = target.url
    deadline = time.monotonic() + ATTEMPT_SECONDS
    # The Host header as the URL spells it (httpx brackets IPv6 literals; httpcore would not).
    fields = [(b"Host", url.netloc), (b"User-Agent", b"tts-saas-callbacks")]
    fields += [(name.encode(), value.encode()) for name, value in headers.items()]
    if url.userinfo:  # credentials in the URL: HTTP Basic, as httpx would send them
        credentials = f"{url.username}:{url.password}".encode()
        fields.append((b"Authorization", b"Basic " + base64.b64encode(credentials)))
    request_url = httpcore.URL(scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path)
    timeouts = dict.fromkeys(("connect", "read", "write", "pool"), ATTEMPT_SECONDS)
    backend = _PinnedBackend(target.addresses, deadline)
    with httpcore.ConnectionPool(network_backend=backend, max_connections=1, retries=0) as pool:
        with pool.stream("POST", request_url, headers=fields, content=body, extensions={"timeout": timeouts}) as answer:
            received = 0
            for chunk in answer.iter_stream():
                received += len(chunk)
                if received >= RESPONSE_BYTES:
                    break
            return answer.status


def attempt(url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str]:
    """One delivery: (status, "") when the receiver answered, else (None, a generic reason). The
    error itself goes to the operators' log only."""
    try:
        return post(resolve(url), body, headers), ""
    except RefusedTarget as exc:
        reason, detail = exc.reason, exc.message
    except httpcore.TimeoutException as exc:
        reason, detail = TIMEOUT, f"{type(exc).__name__}: {exc}"
    except httpcore.ProtocolError as exc:
        reason, detail = INVALID_RESPONSE, f"{type(exc).__name__}: {exc}"
    except (httpcore.NetworkError, httpcore.UnsupportedProtocol, OSError) as exc:
        reason, detail = CONNECTION_FAILED, f"{type(exc).__name__}: {exc}"
    logger.info("callback attempt failed: %s", reason, extra={"detail": detail[:300]})
    return None, reason


def shown(url: str) -> str:
    """A target URL as the delivery log shows it: without credentials."""
    try:
        return str(httpx.URL(url).copy_with(username=None, password=None))
    except (httpx.InvalidURL, ValueError, TypeError):
        return url[:200]


def send(
    org: Organization, url: str, event: dict, message_id: str, kind: str, job: Job | None = None
) -> WebhookDelivery:
    """One attempt at delivering `event`, signed with the organization's secret, recorded in its
    delivery log (`WebhookDelivery`, `kind` one of its `Event`s)."""
    body = json.dumps(event, separators=(",", ":")).encode()
    headers = {"Content-Type": "application/json", **signature_headers(org, message_id, body)}
    started, clock = timezone.now(), time.monotonic()
    status, error = attempt(url, body, headers)
    return WebhookDelivery.objects.create(
        organization=org,
        job=job,
        event=kind,
        event_type=event["type"],
        message_id=message_id,
        url=shown(url)[:2000],
        at=started,
        status=status,
        error=error,
        duration_ms=round(1000 * (time.monotonic() - clock)),
    )


def deliver(job_id: str) -> bool:
    """One delivery attempt; True when the receiver answered 2xx. The attempt is recorded on the
    job (the API's `callback_attempts`) and in the delivery log."""
    job = Job.objects.select_related("organization").get(pk=job_id)
    sent = send(job.organization, job.callback_url, payload(job), message_id_for(job), WebhookDelivery.Event.JOB, job)
    record = {"at": sent.at.isoformat(), "status": sent.status, "error": sent.error}
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job_id)
        locked.callback_attempts = [*locked.callback_attempts, record]
        locked.save(update_fields=["callback_attempts"])
    return sent.delivered
