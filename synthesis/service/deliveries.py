"""The webhook delivery log (`WebhookDelivery`: a job's callback, an event to an endpoint or a test
event, each with its attempts) and what a tenant does with it: send a test event to a URL, at once,
signed with the organization's secret; send a finished job's callback again (the same `webhook-id`:
receivers that de-duplicate take it once). Entries of jobs go with their jobs; the others are
deleted after TTS_WEBHOOK_LOG_DAYS. An endpoint's deliveries: synthesis.service.events."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from accounts.models import Organization
from synthesis.models import Job, WebhookDelivery
from tts_saas.errors import ApiError
from tts_saas.redis import get_redis

from .callbacks import send, url_problem
from .queue import enqueue_callback


def test_event(org: Organization, now: datetime | None = None) -> dict:
    """What a test event carries (the shape of every event: `type`, `timestamp`, `data`)."""
    now = now or timezone.now()
    return {
        "type": "test",
        "timestamp": now.isoformat().replace("+00:00", "Z"),
        "data": {
            "organization": org.name,
            "message": f"A test event from {settings.TTS_PRODUCT_NAME}: your endpoint received it. "
            "Check that its webhook-signature verifies with your signing secret.",
        },
    }


def test_message_id() -> str:
    return f"msg_test_{secrets.token_hex(12)}"


def send_test(org: Organization, url: str) -> WebhookDelivery:
    """A test event to `url`, delivered now (one attempt, no retries) and logged; 400 when the URL
    may not be a target (as a job's callback_url would be refused; the same guard, tts_saas.outbound,
    checks it again when it is sent)."""
    url = url.strip()
    if not url:
        raise ApiError(400, "Give a URL to send a test event to.", "invalid_value", "url")
    problem = url_problem(url, field="The URL")  # the dashboard's form field, as its label says
    if problem is not None:
        raise ApiError(400, problem, "invalid_value", "url")
    return send(org, url, test_event(org), test_message_id(), WebhookDelivery.Event.TEST)


REDELIVERY_SECONDS = 600  # a redelivery's retries run this long at most: one at a time per job
MAX_ATTEMPTS_PER_JOB = 50  # attempts a job's callback gets in all, redeliveries included


def redeliver(job: Job, request_id: str = "") -> None:
    """Send an ended job's callback again, with the usual retries; 409 when it has none, has not
    ended (its callback goes out when it does), is being redelivered already, or has had
    MAX_ATTEMPTS_PER_JOB attempts (a callback chain is not a way to send a URL requests)."""
    if not job.callback_url:
        raise ApiError(409, "This job was submitted without a callback_url.", "no_callback")
    if job.status not in Job.FINAL:
        raise ApiError(409, "The job has not ended: its callback is sent when it does.", "job_not_finished")
    callbacks = WebhookDelivery.objects.filter(job=job, endpoint__isnull=True, event=WebhookDelivery.Event.JOB)
    if sum(len(row.attempts) for row in callbacks.only("attempts")) >= MAX_ATTEMPTS_PER_JOB:
        raise ApiError(
            409, f"This job's callback was tried {MAX_ATTEMPTS_PER_JOB} times: no more.", "too_many_attempts"
        )
    if not get_redis().set(f"tts:redelivery:{job.id}", 1, nx=True, ex=REDELIVERY_SECONDS):
        raise ApiError(
            409,
            "This job's callback is being sent again already: its attempts appear in the log.",
            "redelivery_running",
        )
    enqueue_callback(job.id, request_id)


def delete_old(now: datetime | None = None) -> int:
    """Delete test events' and usage alerts' entries older than TTS_WEBHOOK_LOG_DAYS."""
    now = now or timezone.now()
    cutoff = now - timedelta(days=settings.TTS_WEBHOOK_LOG_DAYS)
    deleted, _ = WebhookDelivery.objects.filter(job__isnull=True, at__lt=cutoff).delete()
    return deleted
