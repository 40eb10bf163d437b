"""What the synthesis API does, as plain functions that views, consumers, tasks and tests call.

Web side, `speak`: plan limits → text preparation → cache (a hit is charged and returned) →
`admit`: concurrency slot → quota reservation → job → the worker's events, read by `JobAudio`.
Worker side, `run_job`: claim the job, run the engine (streaming when someone listens live),
publish chunks, store or cache the audio, and settle: job state, quota commit or refund, ledger
row, slot release and callback happen together, exactly once.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import time
from dataclasses import asdict, dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.auth import Principal
from billing import concurrency, ledger, quota
from billing.limits import Limits
from inference.engine import SynthesisParams, SynthesisRequest, to_pcm16
from inference.text import SAMPLE_RATE, TOKENS_PER_SECOND, PreparedText, TextError, prepare
from inference.voices import VOICES
from tts_saas.errors import ApiError

from . import cache, streams, workers
from .models import Job
from .serializers import speed_level

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class SpeechPlan:
    data: dict
    prepared: PreparedText
    params: SynthesisParams
    cacheable: bool

    @property
    def cache_text(self) -> str:
        return cache.segments_text(self.prepared.segments)

    @property
    def characters(self) -> int:
        return len(self.data["input"])


@dataclass(frozen=True)
class SpeechResult:
    """A speech request answered from the cache (a miss is a live `JobAudio` instead)."""

    pcm16: bytes
    seed: int


def check_plan(limits: Limits, data: dict) -> None:
    if len(data["input"]) > limits.max_input_chars:
        raise ApiError(
            400,
            f"Input is {len(data['input'])} characters; your plan allows {limits.max_input_chars} per request.",
            "string_above_max_length",
            "input",
        )
    if limits.allowed_formats and data["response_format"] not in limits.allowed_formats:
        raise ApiError(
            403,
            f"response_format '{data['response_format']}' is not in your plan; "
            f"available: {', '.join(limits.allowed_formats)}.",
            "not_in_plan",
            "response_format",
        )
    if limits.allowed_voices and data["voice"] not in limits.allowed_voices:
        raise ApiError(
            403,
            f"Voice '{data['voice']}' is not in your plan; available: {', '.join(limits.allowed_voices)}.",
            "not_in_plan",
            "voice",
        )


def plan_speech(data: dict) -> SpeechPlan:
    """Normalise and split the text and fix every generation parameter (CPU work: call in a thread)."""
    try:
        prepared = prepare(data["input"])
    except TextError as exc:
        raise ApiError(400, str(exc), "invalid_input", "input") from exc
    seed = data.get("seed")
    if seed is None and settings.TTS_DEFAULT_SEED != "":
        seed = int(settings.TTS_DEFAULT_SEED)
    cacheable = seed is not None
    if seed is None:
        seed = secrets.randbelow(2**31)
    params = SynthesisParams(
        voice_seed=VOICES[data["voice"]].seed,
        seed=seed,
        temperature=data["temperature"],
        top_p=data["top_p"],
        top_k=data["top_k"],
        speed=speed_level(data["speed"]),
        refine_text=data["refine_text"],
        refine_prompt=data["refine_prompt"],
    )
    return SpeechPlan(data=data, prepared=prepared, params=params, cacheable=cacheable)


def quota_error(exc: quota.QuotaExceeded) -> ApiError:
    return ApiError(
        429,
        f"Monthly character quota exceeded: {exc.used} of {exc.limit} used, this request needs "
        f"{exc.requested}. The quota resets at {exc.resets_at:%Y-%m-%dT%H:%M:%SZ}.",
        "quota_exceeded",
        headers={"Retry-After": str(max(1, int((exc.resets_at - timezone.now()).total_seconds())))},
    )


@dataclass(frozen=True)
class Submission:
    """How a job is submitted: live (`interactive`) or asynchronous, and its options."""

    interactive: bool = True
    callback_url: str = ""
    idempotency_key: str = ""
    request_hash: str = ""  # of the body the idempotency key came with


def submit_job(
    principal: Principal, plan: SpeechPlan, limits: Limits, request_id: str, lease: str, how: Submission
) -> Job:
    """Reserve the request's characters, record the job and enqueue it. On any failure the
    reservation is given back; once this returns, the job settles itself (worker, expiry, reaper).
    A concurrent retry with the same idempotency key that inserts first wins: its job is
    returned and this reservation given back (`admit` has already answered plain retries)."""
    from .tasks import synthesize_job

    org = principal.organization
    try:
        period = quota.reserve(org, plan.characters, limits.monthly_characters)
    except quota.QuotaExceeded as exc:
        raise quota_error(exc) from exc
    data = plan.data
    try:
        with transaction.atomic():
            job = Job.objects.create(
                organization=org,
                api_key=principal.api_key,
                request_id=request_id,
                model=data["model"],
                voice=data["voice"],
                response_format=data["response_format"],
                input=data["input"],
                segments=list(plan.prepared.segments),
                params=asdict(plan.params),
                cacheable=plan.cacheable,
                characters=plan.characters,
                quota_period=period,
                lease=lease,
                interactive=how.interactive,
                callback_url=how.callback_url,
                idempotency_key=how.idempotency_key,
                request_hash=how.request_hash,
            )
    except IntegrityError:
        quota.refund(org.pk, period, plan.characters)
        earlier = existing_job(org, how.idempotency_key, how.request_hash) if how.idempotency_key else None
        if earlier is None:
            raise
        return earlier  # a concurrent retry with the same key won the race
    except Exception:
        quota.refund(org.pk, period, plan.characters)
        raise
    timeout = settings.TTS_QUEUE_TIMEOUT if how.interactive else settings.TTS_JOB_QUEUE_TIMEOUT
    try:
        # `expires`: a worker that comes back after the job's time to wait drops the task unrun.
        synthesize_job.apply_async(args=[str(job.id)], queue="tts", priority=limits.queue_priority, expires=timeout)
    except Exception as exc:
        logger.exception("could not enqueue", extra={"job_id": str(job.id)})
        settle_job(job, Job.Status.FAILED, error_code="queue_unavailable", from_status=Job.Status.QUEUED)
        raise ApiError(503, "The job queue is unavailable. Try again shortly.", "queue_unavailable") from exc
    return job


def existing_job(org, idempotency_key: str, request_hash: str) -> Job | None:
    job = Job.objects.filter(organization=org, idempotency_key=idempotency_key).first()
    if job is not None and job.request_hash != request_hash:
        raise ApiError(
            409,
            "This Idempotency-Key was already used with a different request body.",
            "idempotency_key_reused",
        )
    return job


def settle_job(
    job: Job,
    status: str,
    *,
    audio_seconds: float = 0.0,
    error_code: str = "",
    error_message: str = "",
    model_version: str = "",
    cache_key: str = "",
    billed: int | None = None,
    from_status: str = Job.Status.RUNNING,
) -> bool:
    """Move a job to its final state exactly once, with its quota settlement (commit what is
    billed, refund the rest) and ledger row in the same transaction, then free its concurrency
    slot and schedule its callback. False if another party settled it first."""
    now = timezone.now()
    if billed is None:
        billed = job.characters if status == Job.Status.SUCCEEDED else 0
    with transaction.atomic():
        moved = Job.objects.filter(pk=job.pk, status=from_status).update(
            status=status,
            finished_at=now,
            audio_seconds=audio_seconds,
            error_code=error_code,
            error_message=error_message,
            model_version=model_version,
            cache_key=cache_key,
            **({"progress": 1.0} if status == Job.Status.SUCCEEDED else {}),
        )
        if moved and job.quota_period:
            ledger.settle(
                org_id=job.organization_id,
                period=job.quota_period,
                reserved=job.characters,
                billed=billed,
                status={Job.Status.SUCCEEDED: "succeeded", Job.Status.CANCELLED: "cancelled"}.get(status, "failed"),
                api_key_id=job.api_key_id,
                job_id=job.id,
                request_id=job.request_id,
                audio_seconds=audio_seconds,
                model=job.model,
                voice=job.voice,
                latency_ms=int((now - job.created_at).total_seconds() * 1000),
            )
    if moved and job.lease:
        concurrency.release(job.organization_id, job.lease)
    if moved and job.callback_url:
        from .tasks import deliver_callback

        transaction.on_commit(lambda: deliver_callback.apply_async(args=[str(job.id)], queue="default"))
    return bool(moved)


def expire_if_queued(job_id) -> bool:
    """Give up on a job no worker has taken (refunding it); False if a worker took it meanwhile."""
    job = Job.objects.get(pk=job_id)
    if not settle_job(job, Job.Status.EXPIRED, error_code="worker_unavailable", from_status=Job.Status.QUEUED):
        return False
    streams.publish(job.id, "error", status=503, code="worker_unavailable", message="No worker took the job in time.")
    return True


def record_cache_hit(
    principal: Principal, limits: Limits, plan: SpeechPlan, request_id: str, started: float, audio_seconds: float
) -> None:
    try:
        ledger.charge_cached(
            org=principal.organization,
            limit=limits.monthly_characters,
            characters=plan.characters,
            api_key_id=principal.api_key.pk if principal.api_key else None,
            request_id=request_id,
            audio_seconds=audio_seconds,
            model=plan.data["model"],
            voice=plan.data["voice"],
            latency_ms=int((time.monotonic() - started) * 1000),
        )
    except quota.QuotaExceeded as exc:
        raise quota_error(exc) from exc


async def lookup_cache(org_id: int, plan: SpeechPlan) -> bytes | None:
    if not plan.cacheable:
        return None
    versions = await workers.recent_model_versions()
    return await cache.aget_first([cache.cache_key(org_id, v, plan.cache_text, plan.params) for v in versions])


def _no_worker_error(states: list[workers.WorkerState]) -> ApiError:
    reasons = sorted({w.error for w in states if w.status == "unavailable" and w.error})
    message = (
        f"The speech model is unavailable: {reasons[0]}"
        if reasons
        else "No synthesis worker is running. Try again shortly."
    )
    return ApiError(
        503, message, "model_unavailable" if reasons else "worker_unavailable", headers={"Retry-After": "10"}
    )


def in_thread(fn):
    return sync_to_async(fn, thread_sensitive=False)


async def admit(
    principal: Principal, limits: Limits, plan: SpeechPlan, request_id: str, how: Submission = Submission()
) -> Job:
    """Take a concurrency slot and submit the job. REST, WebSocket and async jobs all come here."""
    org = principal.organization
    if how.idempotency_key:  # a retry of a request already accepted takes no new slot
        earlier = await in_thread(existing_job)(org, how.idempotency_key, how.request_hash)
        if earlier is not None:
            return earlier
    lease = request_id
    timeout = settings.TTS_QUEUE_TIMEOUT if how.interactive else settings.TTS_JOB_QUEUE_TIMEOUT
    ttl = timeout + settings.CELERY_TASK_TIME_LIMIT + 30
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
            states = await workers.alive_workers()
            if not any(w.status == "ready" for w in states):
                raise _no_worker_error(states)
        job = await in_thread(submit_job)(principal, plan, limits, request_id, lease, how)
    finally:
        if job is None or job.lease != lease:  # the slot was never handed to a (new) job
            await concurrency.arelease(org.pk, lease)
    return job


async def speak(
    principal: Principal, limits: Limits, data: dict, request_id: str, idempotency_key: str = ""
) -> SpeechResult | JobAudio:
    """A speech request: the whole audio at once from the cache, or a live feed of the job.
    With an Idempotency-Key the request always runs as a job (so that a retry replays that job's
    audio, billed once), never from the cache."""
    started = time.monotonic()
    check_plan(limits, data)
    plan = await in_thread(plan_speech)(data)
    if not idempotency_key:
        pcm = await lookup_cache(principal.organization.pk, plan)
        if pcm is not None:  # no synthesis: no concurrency slot, charged and logged in one transaction
            seconds = len(pcm) / 2 / SAMPLE_RATE
            await in_thread(record_cache_hit)(principal, limits, plan, request_id, started, seconds)
            return SpeechResult(pcm, plan.params.seed)
    how = Submission(idempotency_key=idempotency_key, request_hash=request_digest(data) if idempotency_key else "")
    job = await admit(principal, limits, plan, request_id, how)
    return JobAudio(job.id, seed=job.params["seed"], characters=plan.characters)


def request_digest(data: dict) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


class JobAudio:
    """A job's audio as it arrives: `chunks()` yields PCM16 from the job's event stream (from the
    start, so a late reader misses nothing), enforcing the queue and run deadlines, and raises
    ApiError if the job fails. `end` holds the final event's fields afterwards."""

    def __init__(
        self,
        job_id,
        *,
        seed: int | None = None,
        characters: int = 0,
        queue_timeout: float | None = None,
        after: str = "0-0",
    ):
        self.job_id = str(job_id)
        self.seed = seed
        self.characters = characters
        self.queue_timeout = settings.TTS_QUEUE_TIMEOUT if queue_timeout is None else queue_timeout
        self.after = after
        self.end: dict[str, str] = {}
        self.samples = 0

    async def chunks(self):
        queue_deadline = time.monotonic() + self.queue_timeout
        run_deadline = None
        async for event in streams.read(self.job_id, after=self.after):
            now = time.monotonic()
            if event is None:
                if run_deadline is None and now > queue_deadline:
                    if await in_thread(expire_if_queued)(self.job_id):
                        raise ApiError(
                            503,
                            f"No synthesis worker took the request within {self.queue_timeout:g} s. Try again shortly.",
                            "worker_unavailable",
                            headers={"Retry-After": "10"},
                        )
                    queue_deadline = now + self.queue_timeout  # it started meanwhile
                if run_deadline is not None and now > run_deadline:
                    raise ApiError(503, "Synthesis did not finish in time.", "synthesis_timeout")
                continue
            self.after = event.id
            if event.type == "start":
                run_deadline = now + settings.CELERY_TASK_TIME_LIMIT + 5
            elif event.type == "audio":
                self.samples += len(event.fields["pcm"]) // 2
                yield event.fields["pcm"]
            elif event.type == "end":
                self.end = {k: v.decode() for k, v in event.fields.items()}
                return
            elif event.type == "error":
                raise ApiError(int(event.text("status", "500")), event.text("message"), event.text("code"))

    async def read_all(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])


def cancel(job: Job) -> Job:
    """Cancel a job: one still queued is settled at once (full refund); a running one is asked to
    stop, and its worker settles it (billing only the segments done)."""
    if job.status == Job.Status.QUEUED and settle_job(
        job,
        Job.Status.CANCELLED,
        error_code="cancelled",
        error_message="Cancelled by the client.",
        from_status=Job.Status.QUEUED,
    ):
        streams.publish(job.id, "error", status=409, code="cancelled", message="The job was cancelled.")
    elif job.status in (Job.Status.QUEUED, Job.Status.RUNNING):
        streams.request_cancel(job.id)
    job.refresh_from_db()
    return job


def run_job(job_id: str, engine, load_error: str | None = None) -> None:
    """Worker side: claim the job, synthesise it (streaming when someone listens live), publish
    its audio, store or cache it, settle it."""
    claimed = Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
        status=Job.Status.RUNNING, started_at=timezone.now()
    )
    if not claimed:
        logger.info("job not queued any more; skipped", extra={"job_id": job_id})
        return
    job = Job.objects.get(pk=job_id)
    if engine is None:
        _fail(job, 503, "model_unavailable", f"The speech model is unavailable: {load_error}")
        return
    streams.publish(job.id, "start", model_version=engine.model_version)
    params = SynthesisParams(**job.params)
    request = SynthesisRequest(segments=job.segments, params=params)
    total = len(job.segments)
    done = 0

    def segment_done(n: int) -> None:
        nonlocal done
        done = n
        Job.objects.filter(pk=job.pk).update(progress=n / total)

    def should_stop() -> bool:
        return streams.cancel_requested(job.id)

    if job.interactive:
        chunk_tokens = max(1, round(settings.TTS_STREAM_CHUNK_SECONDS * TOKENS_PER_SECOND))
        pieces = engine.stream(request, should_stop, chunk_tokens=chunk_tokens, on_segment=segment_done)
    else:
        pieces = engine.synthesize(request, should_stop, on_segment=segment_done)
    parts: list[bytes] = []
    try:
        for audio in pieces:
            pcm = to_pcm16(audio)
            streams.publish(job.id, "audio", seq=len(parts), pcm=pcm)
            parts.append(pcm)
    except Exception as exc:
        from celery.exceptions import SoftTimeLimitExceeded

        if isinstance(exc, SoftTimeLimitExceeded):
            _fail(job, 503, "synthesis_timeout", "Synthesis ran past its time limit.")
        else:
            logger.exception("synthesis failed", extra={"job_id": job_id})
            _fail(job, 500, "synthesis_failed", "Synthesis failed on the worker.")
        return
    pcm = b"".join(parts)
    audio_seconds = len(pcm) / 2 / engine.sample_rate
    if done < total and should_stop():
        billed = job.characters * done // total
        settle_job(
            job,
            Job.Status.CANCELLED,
            audio_seconds=audio_seconds,
            error_code="cancelled",
            error_message="Cancelled by the client.",
            billed=billed,
            model_version=engine.model_version,
        )
        streams.publish(job.id, "error", status=409, code="cancelled", message="The job was cancelled.")
        return
    key = ""
    if job.cacheable:
        key = cache.cache_key(job.organization_id, engine.model_version, cache.segments_text(job.segments), params)
        if not cache.put(key, pcm):
            key = ""
    if not job.interactive:
        from django.core.files.base import ContentFile

        from .audio import encode

        job.result.save(f"{job.id}.{job.response_format}", ContentFile(encode(pcm, job.response_format)), save=False)
        Job.objects.filter(pk=job.pk).update(result=job.result.name)
    settle_job(
        job, Job.Status.SUCCEEDED, audio_seconds=audio_seconds, model_version=engine.model_version, cache_key=key
    )
    streams.publish(
        job.id, "end", samples=len(pcm) // 2, audio_seconds=f"{audio_seconds:.3f}", characters=job.characters
    )


def reap_stale_jobs(now=None) -> dict[str, int]:
    """Settle jobs whose worker died (running past the hard time limit) or that no worker took in
    their time, so that their reservations are refunded and their slots freed. Run by beat."""
    from datetime import timedelta

    now = now or timezone.now()
    lost_before = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    counts = {"lost": 0, "expired": 0}
    for job in Job.objects.filter(status=Job.Status.RUNNING, started_at__lt=lost_before):
        if settle_job(job, Job.Status.FAILED, error_code="worker_lost", error_message="The worker stopped mid-job."):
            streams.publish(job.id, "error", status=503, code="worker_lost", message="The worker stopped mid-job.")
            counts["lost"] += 1
    for job in Job.objects.filter(status=Job.Status.QUEUED):
        waited = settings.TTS_QUEUE_TIMEOUT if job.interactive else settings.TTS_JOB_QUEUE_TIMEOUT
        if job.created_at < now - timedelta(seconds=waited + 60) and settle_job(
            job, Job.Status.EXPIRED, error_code="worker_unavailable", from_status=Job.Status.QUEUED
        ):
            streams.publish(job.id, "error", status=503, code="worker_unavailable", message="No worker took the job.")
            counts["expired"] += 1
    return counts


def expire_old_jobs(now=None) -> int:
    """Delete finished jobs (and their stored audio) older than the retention period."""
    from datetime import timedelta

    now = now or timezone.now()
    old = Job.objects.filter(
        status__in=Job.FINAL, finished_at__lt=now - timedelta(hours=settings.TTS_JOB_RETENTION_HOURS)
    )
    count = 0
    for job in old.iterator():
        if job.result:
            job.result.delete(save=False)
        job.delete()
        count += 1
    return count


def _fail(job: Job, status: int, code: str, message: str) -> None:
    settle_job(job, Job.Status.FAILED, error_code=code, error_message=message)
    streams.publish(job.id, "error", status=status, code=code, message=message)
