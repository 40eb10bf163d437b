"""What the synthesis API does, as plain functions that views, consumers, tasks and tests call.

Web side: `plan_speech` (validate text, pick parameters), `speak` (cache lookup, job, wait for
the worker's events). Worker side: `run_job` (claim the job, run the engine, publish chunks,
cache and finish).
"""

from __future__ import annotations

import logging
import secrets
import time
from dataclasses import asdict, dataclass

from asgiref.sync import sync_to_async
from django.conf import settings
from django.utils import timezone

from accounts.auth import Principal
from inference.engine import SynthesisParams, SynthesisRequest, to_pcm16
from inference.text import PreparedText, TextError, prepare
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
        return "\n".join(self.prepared.segments)


@dataclass(frozen=True)
class SpeechResult:
    pcm16: bytes
    cache_hit: bool
    seed: int
    job_id: str | None


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


def create_job(principal: Principal, plan: SpeechPlan, request_id: str) -> Job:
    from .tasks import synthesize_job

    data = plan.data
    job = Job.objects.create(
        organization=principal.organization,
        api_key=principal.api_key,
        request_id=request_id,
        model=data["model"],
        voice=data["voice"],
        response_format=data["response_format"],
        input=data["input"],
        segments=plan.prepared.segments,
        params=asdict(plan.params),
        cacheable=plan.cacheable,
        characters=len(data["input"]),
    )
    # `expires`: a worker that comes back after the web gave up drops the task unrun.
    synthesize_job.apply_async(args=[str(job.id)], queue="tts", expires=settings.TTS_QUEUE_TIMEOUT)
    return job


def expire_if_queued(job_id) -> bool:
    """Give up on a job no worker has taken; False if a worker took it meanwhile."""
    return bool(
        Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
            status=Job.Status.EXPIRED, finished_at=timezone.now(), error_code="worker_unavailable"
        )
    )


async def lookup_cache(plan: SpeechPlan) -> bytes | None:
    if not plan.cacheable:
        return None
    for version in await workers.recent_model_versions():
        pcm = await cache.aget(cache.cache_key(version, plan.cache_text, plan.params))
        if pcm is not None:
            return pcm
    return None


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


async def speak(principal: Principal, data: dict, request_id: str) -> SpeechResult:
    plan = await sync_to_async(plan_speech, thread_sensitive=False)(data)
    pcm = await lookup_cache(plan)
    if pcm is not None:
        return SpeechResult(pcm, True, plan.params.seed, None)
    states = await workers.alive_workers()
    if not any(w.status == "ready" for w in states):
        raise _no_worker_error(states)
    job = await sync_to_async(create_job, thread_sensitive=False)(principal, plan, request_id)
    pcm = await collect_audio(job.id)
    return SpeechResult(pcm, False, plan.params.seed, str(job.id))


async def collect_audio(job_id) -> bytes:
    """Read the job's events to the end, enforcing the queue and run deadlines."""
    parts: list[bytes] = []
    queue_deadline = time.monotonic() + settings.TTS_QUEUE_TIMEOUT
    run_deadline = None
    async for event in streams.read(job_id):
        now = time.monotonic()
        if event is None:
            if run_deadline is None and now > queue_deadline:
                if await sync_to_async(expire_if_queued, thread_sensitive=False)(job_id):
                    raise ApiError(
                        503,
                        f"No synthesis worker took the request within {settings.TTS_QUEUE_TIMEOUT:g} s. "
                        "Try again shortly.",
                        "worker_unavailable",
                        headers={"Retry-After": "10"},
                    )
                queue_deadline = now + settings.TTS_QUEUE_TIMEOUT  # it started meanwhile
            if run_deadline is not None and now > run_deadline:
                raise ApiError(503, "Synthesis did not finish in time.", "synthesis_timeout")
            continue
        if event.type == "start":
            run_deadline = now + settings.CELERY_TASK_TIME_LIMIT + 5
        elif event.type == "audio":
            parts.append(event.fields["pcm"])
        elif event.type == "end":
            return b"".join(parts)
        elif event.type == "error":
            raise ApiError(int(event.text("status", "500")), event.text("message"), event.text("code"))
    raise AssertionError("unreachable")


def run_job(job_id: str, engine, load_error: str | None = None) -> None:
    """Worker side: claim the job, synthesise it, publish its audio, cache it, finish it."""
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
    parts: list[bytes] = []
    try:
        for audio in engine.synthesize(SynthesisRequest(segments=job.segments, params=params)):
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
    key = ""
    if job.cacheable:
        key = cache.cache_key(engine.model_version, "\n".join(job.segments), params)
        if not cache.put(key, pcm):
            key = ""
    audio_seconds = len(pcm) / 2 / engine.sample_rate
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.SUCCEEDED,
        finished_at=timezone.now(),
        audio_seconds=audio_seconds,
        model_version=engine.model_version,
        cache_key=key,
    )
    streams.publish(job.id, "end", samples=len(pcm) // 2, audio_seconds=f"{audio_seconds:.3f}")


def _fail(job: Job, status: int, code: str, message: str) -> None:
    Job.objects.filter(pk=job.pk).update(
        status=Job.Status.FAILED, finished_at=timezone.now(), error_code=code, error_message=message
    )
    streams.publish(job.id, "error", status=status, code=code, message=message)
