"""The worker side of a job: claim it → generate (streaming when someone listens live) → publish
its audio → store or cache it → settle it."""

from __future__ import annotations

import logging

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.core.files.base import ContentFile
from django.utils import timezone

from inference.engine import SynthesisParams, SynthesisRequest, to_pcm16
from inference.text import TOKENS_PER_SECOND

from . import cache, streams
from .audio import encode
from .jobs import fail_job, settle_job
from .models import Job

logger = logging.getLogger(__name__)


def claim(job_id: str) -> Job | None:
    """The job, now running; None if it is not queued any more (cancelled, expired, taken)."""
    claimed = Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
        status=Job.Status.RUNNING, started_at=timezone.now()
    )
    return Job.objects.get(pk=job_id) if claimed else None


def run_job(job_id: str, engine, load_error: str | None = None) -> None:
    job = claim(job_id)
    if job is None:
        logger.info("job not queued any more; skipped", extra={"job_id": job_id})
        return
    if engine is None:
        fail_job(job, 503, "model_unavailable", f"The speech model is unavailable: {load_error}")
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
    except SoftTimeLimitExceeded:
        fail_job(job, 503, "synthesis_timeout", "Synthesis ran past its time limit.")
        return
    except Exception:
        logger.exception("synthesis failed", extra={"job_id": job_id})
        fail_job(job, 500, "synthesis_failed", "Synthesis failed on the worker.")
        return
    pcm = b"".join(parts)
    audio_seconds = len(pcm) / 2 / engine.sample_rate
    if done < total and should_stop():
        fail_job(
            job,
            409,
            "cancelled",
            "Cancelled by the client.",
            final=Job.Status.CANCELLED,
            audio_seconds=audio_seconds,
            billed=job.characters * done // total,  # the segments done
            model_version=engine.model_version,
        )
        return
    key = ""
    if job.cacheable:
        key = cache.cache_key(job.organization_id, engine.model_version, cache.segments_text(job.segments), params)
        if not cache.put(key, pcm):
            key = ""
    if not job.interactive:
        job.result.save(f"{job.id}.{job.response_format}", ContentFile(encode(pcm, job.response_format)), save=False)
        Job.objects.filter(pk=job.pk).update(result=job.result.name)
    settle_job(
        job, Job.Status.SUCCEEDED, audio_seconds=audio_seconds, model_version=engine.model_version, cache_key=key
    )
    streams.publish(
        job.id, "end", samples=len(pcm) // 2, audio_seconds=f"{audio_seconds:.3f}", characters=job.characters
    )
    logger.info(
        "job succeeded",
        extra={"job_id": str(job.id), "org_id": job.organization_id, "audio_seconds": round(audio_seconds, 3)},
    )
