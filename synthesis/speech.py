"""The web side of a speech request (REST and WebSocket alike): plan limits → text preparation →
audio cache (a hit is charged and answered at once) → an identical request being generated (its
audio is shared, billed as a cache hit) → admission: a concurrency slot, a live worker, room in
the queue, the quota reservation and the job, whose audio is then read through a `JobAudioFeed`."""

from __future__ import annotations

import math
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import asdict

from django.conf import settings

from accounts.auth import Principal
from accounts.tenancy import scoped
from billing import concurrency, ledger, quota
from billing.limits import Limits
from billing.models import UsageEvent
from inference.text import SAMPLE_RATE
from inference.voices import VOICES
from tts_saas.errors import ApiError, validation_error
from tts_saas.threads import in_thread

from . import cache, capacity, inflight, workers
from .captions import Caption
from .feed import JobAudioFeed
from .jobs import (
    Submission,
    cancel_job,
    find_idempotent_job,
    lease_seconds,
    queue_deadline,
    request_digest,
    submit_job,
)
from .models import Job, Voice
from .prepared import CachedSpeech, PreparedSpeech, enforce_plan_limits, prepare_speech


def record_cache_hit(
    principal: Principal,
    limits: Limits,
    speech: PreparedSpeech,
    request_id: str,
    started: float,
    entry: cache.Entry,
) -> None:
    try:
        ledger.charge_cached(
            org=principal.organization,
            limit=limits.quota_characters,
            characters=speech.characters,
            api_key_id=principal.api_key.pk if principal.api_key else None,
            request_id=request_id,
            audio_seconds=len(entry.pcm16) / 2 / SAMPLE_RATE,
            model=speech.data["model"],
            voice=speech.data["voice"],
            latency_ms=int((time.monotonic() - started) * 1000),
            cache_key=entry.key,
        )
    except quota.QuotaExceeded as exc:
        raise exc.error(limits) from exc


async def lookup_cache(org_id: int, speech: PreparedSpeech, count: bool = True) -> cache.Entry | None:
    if not speech.cacheable:
        return None
    versions = await workers.recent_model_versions()
    keys = [cache.cache_key(org_id, v, speech.cache_text, speech.params) for v in versions]
    return await cache.aget_first(keys, count=count)


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


def check_queue_wait(queue: capacity.QueueState, how: Submission) -> None:
    """Refuse at once, with the time to come back, a job that would wait longer than it may."""
    wait = queue.estimated_wait()
    most = settings.TTS_MAX_QUEUE_WAIT if how.interactive else settings.TTS_JOB_QUEUE_TIMEOUT
    if wait is not None and wait > most:
        retry = max(1, math.ceil(wait - most))
        raise ApiError(
            503,
            f"The service is at capacity: a new request would wait about {wait:.0f} s to start (at most "
            f"{most:g} s are allowed). Retry in {retry} s.",
            "server_overloaded",
            headers={"Retry-After": str(retry)},
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
    lease = f"lease_{secrets.token_hex(12)}"  # the server's own id: a client-sent request id is no lease
    if not await concurrency.acquire(org.pk, lease, limits.concurrent_jobs, lease_seconds(how.interactive)):
        raise ApiError(
            429,
            f"Too many concurrent requests: your plan runs {limits.concurrent_jobs} at a time.",
            "too_many_concurrent_requests",
            headers={"Retry-After": "1"},
        )
    job = None
    try:
        states = await workers.live_workers_async()
        if how.interactive and not any(w.status == "ready" for w in states):
            raise no_worker_error(states)  # someone is waiting: refuse now rather than queue for nobody
        check_queue_wait(await capacity.queue_state_async(states), how)
        job = await in_thread(submit_job)(principal, speech, limits, request_id, lease, how)
    finally:
        if job is None or job.lease != lease:  # the slot was never handed to a (new) job
            await concurrency.arelease(org.pk, lease)
    return job


async def speak(
    principal: Principal,
    limits: Limits,
    data: dict,
    request_id: str,
    idempotency_key: str = "",
    cacheable: bool = True,
    free: bool = False,
) -> CachedSpeech | JobAudioFeed:
    """A speech request: the whole audio at once from the cache, or a live feed of the job.
    With an Idempotency-Key the request always runs as a job (so that a retry replays that job's
    audio, billed once), never from the cache. `cacheable=False`: a seed the server drew, not the
    client's, so the audio is neither looked up nor kept. `free`: a voice's preview, billed nothing."""
    started = time.monotonic()
    enforce_plan_limits(limits, data)
    speech = await in_thread(prepare_speech)(data, principal.organization, cacheable, free)

    async def from_cache(count: bool = True) -> CachedSpeech | None:
        entry = await lookup_cache(principal.organization.pk, speech, count=count)
        if entry is None:
            return None
        # No synthesis: no concurrency slot, charged and logged in one transaction.
        await in_thread(record_cache_hit)(principal, limits, speech, request_id, started, entry)
        shown = speech.shown_texts  # the entry may have been made for another text (lexicons)
        captions = [
            Caption(shown[i], c.start, c.end) if len(entry.captions) == len(shown) else c
            for i, c in enumerate(entry.captions)
        ]
        return CachedSpeech(entry.pcm16, speech.params.seed, captions)

    if not idempotency_key and (cached := await from_cache()) is not None:
        return cached
    how = Submission(idempotency_key=idempotency_key, request_hash=request_digest(data) if idempotency_key else "")
    if not speech.cacheable or idempotency_key:
        job = await admit_job(principal, limits, speech, request_id, how)
        return JobAudioFeed(job.id, seed=job.params["seed"], characters=speech.characters, deadline=how.queue_deadline)
    identity = inflight.identity(principal.organization.pk, data["model"], speech.text.segments, asdict(speech.params))
    ttl = how.queue_deadline + settings.CELERY_TASK_TIME_LIMIT
    leader = await inflight.lead_or_follow(identity)
    if leader is not None:
        return await share(principal, limits, speech, request_id, leader, started)
    try:
        # An identical job may have finished between the first look and the lead: it cached its
        # audio before it stopped leading, so a second look finds it.
        if (cached := await from_cache(count=False)) is not None:
            await inflight.give_up(identity)
            return cached
        job = await admit_job(principal, limits, speech, request_id, how)
    except BaseException:
        await inflight.give_up(identity)
        raise
    await inflight.started(identity, job.id, ttl)
    return JobAudioFeed(job.id, seed=job.params["seed"], characters=speech.characters, deadline=how.queue_deadline)


class SharedFeed(JobAudioFeed):
    """An identical request's view of a job another request started: billed as a cache hit once
    all its audio has come (the characters are reserved meanwhile), refunded if the job fails or
    the client leaves first. Its client leaving does not stop the job."""

    shared = True

    def __init__(self, job_id, *, bill, refund, **kwargs):
        super().__init__(job_id, **kwargs)
        self._bill, self._refund = bill, refund

    async def events(self) -> AsyncIterator[bytes | Caption]:
        billed = False
        await inflight.follow(self.job_id)
        try:
            async for item in super().events():
                yield item
            await in_thread(self._bill)(self.samples / SAMPLE_RATE)
            billed = True
        finally:
            await inflight.unfollow(self.job_id)
            if not billed:
                await in_thread(self._refund)()


async def share(
    principal: Principal, limits: Limits, speech: PreparedSpeech, request_id: str, job_id: str, started: float
) -> SharedFeed:
    org, characters = principal.organization, speech.characters
    try:
        period = await in_thread(quota.reserve)(org, characters, limits.quota_characters)
    except quota.QuotaExceeded as exc:
        raise exc.error(limits) from exc

    def bill(audio_seconds: float) -> None:
        ledger.settle(
            org_id=org.pk,
            period=period,
            reserved=characters,
            billed=characters,
            status=UsageEvent.Status.SUCCEEDED,
            api_key_id=principal.api_key.pk if principal.api_key else None,
            request_id=request_id,
            audio_seconds=audio_seconds,
            model=speech.data["model"],
            voice=speech.data["voice"],
            cached=True,
            latency_ms=int((time.monotonic() - started) * 1000),
        )

    def refund() -> None:
        quota.refund(org.pk, period, characters)

    return SharedFeed(
        job_id,
        bill=bill,
        refund=refund,
        seed=speech.params.seed,
        characters=characters,
        deadline=queue_deadline(True),
        caption_texts=speech.shown_texts,
    )


PREVIEW_TEXT = "Hello! This is how I sound. 你好，这是我的声音。"
PREVIEW_SEED = 20251130  # one preview per voice and model version: cached after the first


async def preview(
    principal: Principal, limits: Limits, voice_id: str, fmt: str, request_id: str
) -> CachedSpeech | JobAudioFeed:
    """A voice heard (a built-in one or the organization's own): a fixed sentence and seed, generated
    and cached like any request, billed nothing. 404 for a voice not of this organization."""
    from .serializers import SpeechRequestSerializer  # noqa: PLC0415  (serializers import this module's callers)

    own = voice_id not in VOICES and await scoped(Voice, principal.organization).filter(pk=voice_id).aexists()
    if voice_id not in VOICES and not own:
        raise ApiError(404, f"No voice '{voice_id[:70]}' in this organization.", "not_found")
    body = {"input": PREVIEW_TEXT, "voice": voice_id, "seed": PREVIEW_SEED, "response_format": fmt}
    serializer = SpeechRequestSerializer(data=body)
    if not serializer.is_valid():
        raise validation_error(serializer.errors)
    return await speak(principal, limits, serializer.validated_data, request_id, free=True)


async def abandon(job_id) -> None:
    """The client that started a job went away before its end. Unless others listen to it, a job
    still queued is cancelled at once (refunded, its concurrency slot freed) and a running one is
    asked to stop (billed for the segments done)."""
    if await inflight.has_followers(job_id):
        return
    job = await Job.objects.filter(pk=job_id).select_related("organization").afirst()
    if job is not None and job.status in (Job.Status.QUEUED, Job.Status.RUNNING):
        await in_thread(cancel_job)(job)
