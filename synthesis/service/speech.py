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

from accounts import client_tokens
from accounts.auth import Principal
from billing import concurrency, ledger, quota
from billing.limits import Limits
from billing.models import UsageEvent
from synthesis.audio import cache
from synthesis.audio.captions import Caption
from synthesis.models import Job
from synthesis.service import capacity, inflight, waiting, workers
from synthesis.service.feed import JobAudioFeed
from synthesis.service.jobs import (
    Submission,
    cancel_job,
    find_idempotent_job,
    lease_seconds,
    queue_deadline,
    request_digest,
    submit_job,
)
from synthesis.service.prepared import CachedSpeech, PreparedSpeech, enforce_plan_limits, prepare_speech
from tts_saas.errors import ApiError
from tts_saas.threads import in_thread


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
            key=principal.api_key,
            member_id=principal.member_id,
            request_id=request_id,
            audio_seconds=len(entry.pcm16) / 2 / speech.spec.sample_rate,
            model=speech.spec.name,
            voice=speech.data["voice"],
            latency_ms=int((time.monotonic() - started) * 1000),
            cache_key=entry.key,
        )
    except quota.QuotaExceeded as exc:
        raise exc.error(limits) from exc


async def lookup_cache(org_id: int, speech: PreparedSpeech, count: bool = True) -> cache.Entry | None:
    if not speech.cacheable:
        return None
    versions = await workers.recent_model_versions(speech.spec.name)
    keys = [cache.cache_key(org_id, v, speech.cache_text, speech.params) for v in versions]
    return await cache.aget_first(keys, count=count)


def no_worker_error(states: list[workers.WorkerState], model: str) -> ApiError:
    reasons = sorted({w.error for w in states if w.status == "unavailable" and w.error})
    message = (
        f"The speech model '{model}' is unavailable: {reasons[0]}"
        if reasons
        else f"No synthesis worker for the model '{model}' is running. Try again shortly."
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
        if not how.interactive:  # an asynchronous job waits its turn for a slot
            return await in_thread(wait_for_slot)(principal, speech, limits, request_id, how)
        raise ApiError(
            429,
            f"Too many concurrent requests: your plan runs {limits.concurrent_jobs} at a time.",
            "too_many_concurrent_requests",
            headers={"Retry-After": "1"},
        )
    job = None
    engine = speech.spec.name
    try:
        states = await workers.live_workers_async(engine)
        if how.interactive and not any(w.status == "ready" for w in states):
            raise no_worker_error(states, engine)  # someone is waiting: refuse now rather than queue for nobody
        check_queue_wait(await capacity.queue_state_async(engine, states), how)
        job = await in_thread(submit_job)(principal, speech, limits, request_id, lease, how)
    finally:
        if job is None or job.lease != lease:  # the slot was never handed to a (new) job
            await concurrency.arelease(org.pk, lease)
    return job


def wait_for_slot(
    principal: Principal, speech: PreparedSpeech, limits: Limits, request_id: str, how: Submission
) -> Job:
    """Record the job without a slot; started now should one have freed meanwhile."""
    job = submit_job(principal, speech, limits, request_id, "", how)
    waiting.start_waiting(principal.organization.pk)
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
    speech = await in_thread(prepare_speech)(data, principal.organization, limits, cacheable, free)
    if principal.token is not None:  # a client token's terms: its voice (SSML's too), its character budget
        spoken = speech.text.spoken_chars if speech.text.spoken_chars is not None else len(data["input"])
        for style in speech.styles:
            if style.get("voice"):
                await in_thread(client_tokens.check_terms)(principal.token, style["voice"], 0)
        await in_thread(client_tokens.check_terms)(principal.token, data["voice"], spoken)

    async def from_cache(count: bool = True) -> CachedSpeech | None:
        entry = await lookup_cache(principal.organization.pk, speech, count=count)
        if entry is None:
            return None
        # No synthesis: no concurrency slot, charged and logged in one transaction.
        await in_thread(record_cache_hit)(principal, limits, speech, request_id, started, entry)
        shown = speech.text.sentences(speech.shown_texts)  # the entry may be another text's (lexicons)
        captions = [
            c.shown_as(shown[i]) if len(entry.captions) == len(shown) else c for i, c in enumerate(entry.captions)
        ]
        return CachedSpeech(entry.pcm16, speech.seed, captions, speech.characters, speech.spec.sample_rate)

    if not idempotency_key and (cached := await from_cache()) is not None:
        return cached
    how = Submission(idempotency_key=idempotency_key, request_hash=request_digest(data) if idempotency_key else "")
    if not speech.cacheable or idempotency_key:
        job = await admit_job(principal, limits, speech, request_id, how)
        return feed_of(job, speech, how)
    identity = inflight.identity(
        principal.organization.pk, data["model"], speech.text.segments, asdict(speech.params), speech.styles
    )
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
    return feed_of(job, speech, how)


def feed_of(job: Job, speech: PreparedSpeech, how: Submission) -> JobAudioFeed:
    """The live audio of the request's job (an idempotent replay's job has its own seed)."""
    seed = job.params.get("seed", speech.seed)
    return JobAudioFeed(
        job.id,
        seed=seed,
        characters=speech.characters,
        deadline=how.queue_deadline,
        engine=speech.spec.name,
        forget=speech.zero_retention,
    )


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
            await in_thread(self._bill)(self.samples / self.rate)
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
        period = await in_thread(quota.reserve)(org, characters, limits.quota_characters, key=principal.api_key)
    except quota.QuotaExceeded as exc:
        raise exc.error(limits) from exc

    def bill(audio_seconds: float) -> None:
        ledger.settle(
            org_id=org.pk,
            period=period,
            reserved=characters,
            billed=characters,
            status=UsageEvent.Status.SUCCEEDED,
            api_key_id=principal.key_id,
            member_id=principal.member_id,
            request_id=request_id,
            audio_seconds=audio_seconds,
            model=speech.spec.name,
            voice=speech.data["voice"],
            cached=True,
            latency_ms=int((time.monotonic() - started) * 1000),
        )

    def refund() -> None:
        quota.refund(org.pk, period, characters, principal.key_id)

    return SharedFeed(
        job_id,
        bill=bill,
        refund=refund,
        seed=speech.seed,
        characters=characters,
        deadline=queue_deadline(True),
        engine=speech.spec.name,
        caption_texts=speech.shown_texts,
    )


async def abandon(job_id) -> None:
    """The client that started a job went away before its end. Unless others listen to it, a job
    still queued is cancelled at once (refunded, its concurrency slot freed) and a running one is
    asked to stop (billed for the segments done)."""
    if await inflight.has_followers(job_id):
        return
    job = await Job.objects.filter(pk=job_id).select_related("organization").afirst()
    if job is not None and job.status in (Job.Status.QUEUED, Job.Status.RUNNING):
        await in_thread(cancel_job)(job)
