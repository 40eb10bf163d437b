"""Job callbacks: when an async job ends, its `callback_url` receives a POST with the job as JSON,
signed as Standard Webhooks (standardwebhooks.com) specifies, so any of its libraries verifies it:

    webhook-id: msg_<job id>  (the same on every retry: receivers de-duplicate by it)
    webhook-timestamp: <unix time of the attempt>
    webhook-signature: v1,<base64 HMAC-SHA256(key, "<id>.<timestamp>.<body>")>

The key is the base64 after "whsec_" in the organization's webhook secret. For a day after a
rotation the header lists a second signature, made with the previous secret, so receivers still
holding it verify too. Deliveries are retried with exponential backoff (the task's Celery retry
policy); every attempt is recorded on the job.

A tenant chooses the URL, so the worker must not become a way into the operator's network: the
server's one guard for what it fetches (tts_saas.outbound) allows public addresses only (unless
TTS_CALLBACK_ALLOW_PRIVATE), checked when the job is submitted and again at each delivery, and the
delivery connects to the very address that was checked (a second DNS lookup could answer
differently: DNS rebinding). What a tenant sees of an attempt is its status or a generic reason,
never our error text. The organization's event endpoint and test events go out the same way.
"""

from __future__ import annotations

import base64
import json
import logging
import time
from datetime import UTC, datetime

import httpcore
import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from accounts.models import Organization
from synthesis.models import Job, WebhookDelivery
from tts_saas import outbound
from tts_saas.outbound import RefusedTarget, Target

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
    backend = outbound.PinnedBackend(target.addresses, deadline)
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
        target = outbound.resolve(url, allow_private=settings.TTS_CALLBACK_ALLOW_PRIVATE)
        return post(target, body, headers), ""
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
