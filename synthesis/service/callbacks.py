"""Job callbacks: when an async job ends, its `callback_url` receives a POST with the job as JSON,
signed as Standard Webhooks (standardwebhooks.com) specifies, so any of its libraries verifies it:

    webhook-id: msg_<job id>  (the same on every retry: receivers de-duplicate by it)
    webhook-timestamp: <unix time of the attempt>
    webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>

The key is the base64 after "whsec_" in the organization's webhook secret (an endpoint's events:
the endpoint's own). For a day after a rotation the header lists a second signature, made with the
previous secret, so receivers still holding it verify too. Deliveries are retried with exponential
backoff (synthesis.tasks); every attempt is recorded in the delivery's log entry (and on the job).

A tenant chooses the URL, so the worker must not become a way into the operator's network: the
server's one guard for what it fetches (tts_saas.outbound) allows public addresses only (unless
TTS_CALLBACK_ALLOW_PRIVATE), checked when the job is submitted and again at each delivery, and the
delivery connects to the very address that was checked (a second DNS lookup could answer
differently: DNS rebinding). What a tenant sees of an attempt is its status or a generic reason,
never our error text. Events to endpoints (synthesis.service.events) and test events go out the
same way.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time
from datetime import UTC, datetime

import httpcore
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from accounts.models import Organization
from synthesis.models import Job, WebhookDelivery, WebhookEndpoint
from synthesis.webhook_models import BODY_CHARS
from tts_saas import outbound
from tts_saas.outbound import RefusedTarget, Target, without_credentials

logger = logging.getLogger(__name__)

ATTEMPT_SECONDS = 10.0  # one attempt in all: connect, TLS, request, the receiver's answer
RESPONSE_BYTES = 4096  # of the answer's body we read at most: the status is what counts

# The reasons an attempt records when there is no status: generic on purpose (tenants see them).
TIMEOUT = "timeout"
CONNECTION_FAILED = "connection failed"
INVALID_RESPONSE = "invalid response"


def message_id_for(job: Job) -> str:
    """One callback per job (its final state): the id is the job's, stable across retries."""
    return f"msg_{job.id.hex}"


def signature_headers(
    signer: Organization | WebhookEndpoint, message_id: str, body: bytes, now: datetime | None = None
) -> dict[str, str]:
    """The Standard Webhooks headers for one attempt: a signature per secret in use (the previous
    one too during a rotation's grace period), space-separated as the specification lists them.
    An endpoint signs with its own secret, a job's callback with its organization's."""
    now = now or timezone.now()
    timestamp = datetime.fromtimestamp(int(now.timestamp()), tz=UTC)
    text = body.decode()
    if isinstance(signer, WebhookEndpoint):
        secrets = signer.signing_secrets(now)
    else:
        secrets = signer.webhook_signing_secrets(now)
    signatures = [Webhook(secret).sign(message_id, timestamp, text) for secret in secrets]
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(timestamp.timestamp())),
        "webhook-signature": " ".join(signatures),
    }


def url_problem(url: str, field: str = "callback_url") -> str | None:
    """Why a callback URL is refused, or None; the message names `field` as the caller sent it.
    Non-public targets are refused unless TTS_CALLBACK_ALLOW_PRIVATE is set (they would let tenants
    probe the operator's network). With it set the name is not looked up here: in a container setup
    the worker may resolve names the web process cannot."""
    try:
        if settings.TTS_CALLBACK_ALLOW_PRIVATE:
            outbound.parse(url, field)
        else:
            outbound.resolve(url, allow_private=False, field=field)
    except RefusedTarget as exc:
        return exc.message
    return None


def audio_url(job: Job) -> str:
    """Where the job's audio is fetched: absolute, at TTS_PUBLIC_URL or the address its submitter used."""
    base = settings.TTS_PUBLIC_URL or job.base_url.rstrip("/")
    return f"{base}/v1/jobs/{job.id}/audio"


def payload(job: Job) -> dict:
    return {
        "type": f"job.{job.status}",
        "job": {
            "id": str(job.id),
            "status": job.status,
            "characters": job.characters,
            "audio_seconds": round(job.audio_seconds, 3),
            # The message bounded: the whole body must fit the delivery log (BODY_CHARS).
            "error": {"code": job.error_code, "message": job.error_message[:500]} if job.error_code else None,
            "audio_url": audio_url(job) if job.status == Job.Status.SUCCEEDED else None,
        },
    }


# What the log masks in a receiver's answer: our secrets, keys and bearer credentials echoed back.
SECRETS = re.compile(r"(whsec_|tts_[A-Za-z0-9]+_|Bearer\s+|secret[\"']?\s*[:=]\s*[\"']?)[A-Za-z0-9+/=_.-]{4,}", re.I)


def masked(text: str) -> str:
    """A body as the log keeps it: at most BODY_CHARS, secrets replaced by bullets."""
    return SECRETS.sub(lambda m: m.group(1) + "••••••", text)[:BODY_CHARS]


def post(target: Target, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """POST `body` to the target's checked address within ATTEMPT_SECONDS; the response's status
    and at most RESPONSE_BYTES of its body. No redirects (a redirect could lead anywhere)."""
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
    backend = outbound.PinnedBackend(target.addresses, deadline)
    with httpcore.ConnectionPool(network_backend=backend, max_connections=1, retries=0) as pool:
        with pool.stream("POST", request_url, headers=fields, content=body, extensions={"timeout": timeouts}) as answer:
            received = b""
            for chunk in answer.iter_stream():
                received += chunk
                if len(received) >= RESPONSE_BYTES:
                    break
            return answer.status, received[:RESPONSE_BYTES]


def attempt(url: str, body: bytes, headers: dict[str, str]) -> tuple[int | None, str, bytes]:
    """One delivery: (status, "", its body) when the receiver answered, else (None, a generic
    reason, b""). The error itself goes to the operators' log only."""
    try:
        target = outbound.resolve(url, allow_private=settings.TTS_CALLBACK_ALLOW_PRIVATE)
        status, answer = post(target, body, headers)
        return status, "", answer
    except RefusedTarget as exc:
        reason, detail = exc.reason, exc.message
    except httpcore.TimeoutException as exc:
        reason, detail = TIMEOUT, f"{type(exc).__name__}: {exc}"
    except httpcore.ProtocolError as exc:
        reason, detail = INVALID_RESPONSE, f"{type(exc).__name__}: {exc}"
    except (httpcore.NetworkError, httpcore.UnsupportedProtocol, OSError) as exc:
        reason, detail = CONNECTION_FAILED, f"{type(exc).__name__}: {exc}"
    logger.info("callback attempt failed: %s", reason, extra={"detail": detail[:300]})
    return None, reason, b""


def open_delivery(
    org: Organization,
    url: str,
    event: dict,
    message_id: str,
    kind: str,
    job: Job | None = None,
    endpoint: WebhookEndpoint | None = None,
) -> WebhookDelivery:
    """The log's entry for one message to one receiver (`kind` one of `WebhookDelivery.Event`):
    found again for a retry or a redelivery, else made with the body to send."""
    found = WebhookDelivery.objects.filter(organization=org, message_id=message_id, job=job, endpoint=endpoint)
    if (delivery := found.order_by("id").first()) is not None:
        if not delivery.request_body:  # logged before bodies were kept: this message's body from now on
            delivery.request_body = json.dumps(event, separators=(",", ":"))[:BODY_CHARS]
            delivery.save(update_fields=["request_body"])
        return delivery
    return WebhookDelivery.objects.create(
        organization=org,
        job=job,
        endpoint=endpoint,
        to_endpoint=endpoint is not None,
        event=kind,
        event_type=event["type"],
        message_id=message_id,
        url=without_credentials(url)[:2000],
        request_body=json.dumps(event, separators=(",", ":"))[:BODY_CHARS],
    )


def try_delivery(delivery: WebhookDelivery, url: str, signer: Organization | WebhookEndpoint) -> WebhookDelivery:
    """One attempt at `delivery` to `url`, signed by `signer`, appended to its attempts."""
    body = delivery.request_body.encode()
    headers = {"Content-Type": "application/json", **signature_headers(signer, delivery.message_id, body)}
    started, clock = timezone.now(), time.monotonic()
    status, error, answer = attempt(url, body, headers)
    took = round(1000 * (time.monotonic() - clock))
    entry = {"at": started.isoformat(), "status": status, "error": error, "duration_ms": took}
    with transaction.atomic():
        locked = WebhookDelivery.objects.select_for_update().get(pk=delivery.pk)
        locked.attempts = [*locked.attempts, entry]
        locked.at, locked.status, locked.error, locked.duration_ms = started, status, error, took
        locked.response_body = masked(answer.decode("utf-8", "replace"))
        locked.url, locked.next_attempt_at = without_credentials(url)[:2000], None
        locked.save()
    return locked


def send(
    org: Organization, url: str, event: dict, message_id: str, kind: str, job: Job | None = None
) -> WebhookDelivery:
    """One attempt at delivering `event` to `url`, signed with the organization's secret, in its
    delivery log."""
    return try_delivery(open_delivery(org, url, event, message_id, kind, job), url, org)


def deliver(job_id: str) -> WebhookDelivery:
    """One attempt at a job's callback, recorded on the job (the API's `callback_attempts`) and in
    the delivery log."""
    job = Job.objects.select_related("organization").get(pk=job_id)
    sent = send(job.organization, job.callback_url, payload(job), message_id_for(job), WebhookDelivery.Event.JOB, job)
    record = {"at": sent.at.isoformat(), "status": sent.status, "error": sent.error}
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job_id)
        locked.callback_attempts = [*locked.callback_attempts, record]
        locked.save(update_fields=["callback_attempts"])
    return sent
