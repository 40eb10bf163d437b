"""Job callbacks: when an async job ends, its `callback_url` receives a POST with the job as JSON,
signed with the organization's webhook secret:

    X-TTS-Signature: t=<unix time>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>

Receivers recompute the HMAC over the raw body and compare in constant time (`verify` below),
and reject old timestamps. Deliveries are retried with exponential backoff; every attempt is
recorded on the job.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import socket
import time
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from .models import Job

HEADER = "X-TTS-Signature"


def sign(secret: str, body: bytes, timestamp: int | None = None) -> str:
    timestamp = int(time.time()) if timestamp is None else timestamp
    mac = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(secret: str, header: str, body: bytes, tolerance: int = 300) -> bool:
    try:
        parts = dict(item.split("=", 1) for item in header.split(","))
        timestamp = int(parts["t"])
    except (ValueError, KeyError):
        return False
    if abs(time.time() - timestamp) > tolerance:
        return False
    return hmac.compare_digest(sign(secret, body, timestamp).encode(), header.encode())


def url_problem(url: str) -> str | None:
    """Why a callback URL is refused, or None. Private and loopback targets are refused unless
    TTS_CALLBACK_ALLOW_PRIVATE is set (they would let tenants probe the operator's network)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "callback_url must be an http(s) URL."
    if settings.TTS_CALLBACK_ALLOW_PRIVATE:
        return None
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(parts.hostname, parts.port or 443)}
    except OSError:
        return f"callback_url host {parts.hostname} does not resolve."
    for address in addresses:
        ip = ipaddress.ip_address(address)
        if ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved:
            return "callback_url must not point at a private or loopback address."
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


def deliver(job_id: str) -> bool:
    """One delivery attempt; True when the receiver answered 2xx. The attempt is recorded."""
    job = Job.objects.select_related("organization").get(pk=job_id)
    body = json.dumps(payload(job), separators=(",", ":")).encode()
    attempt = {"at": timezone.now().isoformat(), "status": None, "error": ""}
    problem = url_problem(job.callback_url)
    if problem:
        attempt["error"] = problem
    else:
        try:
            response = httpx.post(
                job.callback_url,
                content=body,
                headers={"Content-Type": "application/json", HEADER: sign(job.organization.webhook_secret, body)},
                timeout=10,
                follow_redirects=False,
            )
            attempt["status"] = response.status_code
        except httpx.HTTPError as exc:
            attempt["error"] = f"{type(exc).__name__}: {exc}"[:300]
    with transaction.atomic():
        locked = Job.objects.select_for_update().get(pk=job_id)
        locked.callback_attempts = [*locked.callback_attempts, attempt]
        locked.save(update_fields=["callback_attempts"])
    return attempt["status"] is not None and 200 <= attempt["status"] < 300
