"""The web side of a speech request (REST and WebSocket alike): plan limits → text preparation →
audio cache (a hit is charged and answered at once) → admission: a concurrency slot, a live
worker, the quota reservation and the job, whose audio is then read through a `JobAudioFeed`."""

from __future__ import annotations

import time

from django.conf import settings

from accounts.auth import Principal
from billing import concurrency, ledger, quota
from billing.limits import Limits
from inference.text import SAMPLE_RATE
from tts_saas.errors import ApiError
from tts_saas.threads import in_thread

from . import cache, workers
from .feed import JobAudioFeed
from .jobs import Submission, find_idempotent_job, request_digest, submit_job
from .models import Job
from .prepared import CachedSpeech, PreparedSpeech, enforce_plan_limits, prepare_speech


def record_cache_hit(
    principal: Principal, limits: Limits, speech: PreparedSpeech, request_id: str, started: float, audio_seconds: float
) -> None:
    try:
        ledger.charge_cached(
            org=principal.organization,
            limit=limits.monthly_characters,
            characters=speech.characters,
            api_key_id=principal.api_key.pk if principal.api_key else None,
            request_id=request_id,
            audio_seconds=audio_seconds,
            model=speech.data["model"],
            voice=speech.data["voice"],
            latency_ms=int((time.monotonic() - started) * 1000),
        )
    except quota.QuotaExceeded as exc:
        raise exc.error() from exc


async def lookup_cache(org_id: int, speech: PreparedSpeech) -> bytes | None:
    if not speech.cacheable:
        return None
    versions = await workers.recent_model_versions()
    return await cache.aget_first([cache.cache_key(org_id, v, speech.cache_text, speech.params) for v in versions])


def no_worker_error(states: list[workers.WorkerState]) -> ApiError:
    reasons = sorted({w.error for w in states if w.status == "unavailable" and w.error})
    message = (
        f"The speech model is unavailable: {reasons[0]}"
        if reasons
        else "No synthesis worker is running. Try again shortly."
    )
    return ApiError(
        503, message, "model_unavailable" if reasons else "worker_unavailable", headers={"Retry-After": "10"}
    )


async def admit_job(
    principal: Principal, limits: Limits, speech: PreparedSpeech, request_id: str, how: Submission = Submission()
) -> Job:
    """Take a concurrency slot and submit the job. REST, WebSocket and async jobs all come here."""
    org = principal.organization
    if how.idempotency_key:  # a retry of a request already accepted takes no new slot
        earlier = await in_thread(find_idempotent_job)(org, how.idempotency_key, how.request_hash)
        if earlier is not None:
            return earlier
    lease = request_id
    ttl = how.queue_timeout + settings.CELERY_TASK_TIME_LIMIT + 30  # its wait, its run, a margin
    if not await concurrency.acquire(org.pk, lease, limits.concurrent_jobs, ttl):
        raise ApiError(
            429,
            f"Too many concurrent requests: your plan runs {limits.concurrent_jobs} at a time.",
            "too_many_concurrent_requests",
            headers={"Retry-After": "1"},
        )
    job = None
    try:
        if how.interactive:  # someone is waiting: refuse now rather than queue for nobody
            states = await workers.live_workers_async()
            if not any(w.status == "ready" for w in states):
                raise no_worker_error(states)
        job = await in_thread(submit_job)(principal, speech, limits, request_id, lease, how)
    finally:
        if job is None or job.lease != lease:  # the slot was never handed to a (new) job
            await concurrency.arelease(org.pk, lease)
    return job


async def speak(
    principal: Principal, limits: Limits, data: dict, request_id: str, idempotency_key: str = ""
) -> CachedSpeech | JobAudioFeed:
    """A speech request: the whole audio at once from the cache, or a live feed of the job.
    With an Idempotency-Key the request always runs as a job (so that a retry replays that job's
    audio, billed once), never from the cache."""
    started = time.monotonic()
    enforce_plan_limits(limits, data)
    speech = await in_thread(prepare_speech)(data)
    if not idempotency_key:
        pcm = await lookup_cache(principal.organization.pk, speech)
        if pcm is not None:  # no synthesis: no concurrency slot, charged and logged in one transaction
            seconds = len(pcm) / 2 / SAMPLE_RATE
            await in_thread(record_cache_hit)(principal, limits, speech, request_id, started, seconds)
            return CachedSpeech(pcm, speech.params.seed)
    how = Submission(idempotency_key=idempotency_key, request_hash=request_digest(data) if idempotency_key else "")
    job = await admit_job(principal, limits, speech, request_id, how)
    return JobAudioFeed(job.id, seed=job.params["seed"], characters=speech.characters)
