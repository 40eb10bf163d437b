"""Celery tasks and the synthesis worker's lifecycle.

A worker serving the `tts` queue runs a pool of TTS_MAX_BATCH threads (whatever its command line
says) around one engine, loaded once in the process (no fork, so CUDA is safe) and driven by one
batcher thread: each task claims its job, hands it to the batcher and returns when the job has
settled, so Celery prefetches up to a batch of jobs and acknowledges each late (a killed worker's
jobs are delivered again). A wrong TTS_MODEL_DIR stops the worker at start with a clear message; a
model that fails to load is announced "unavailable" with the reason, so the web answers 503 with it
rather than queueing. Each task runs with the request id of the API call that sent it (a message
header), so its log lines carry that id.
"""

from __future__ import annotations

import logging
import sys
from contextvars import Token

import numpy as np
from celery import shared_task
from celery.signals import task_postrun, task_prerun, worker_init, worker_shutdown
from django.conf import settings

from billing.limits import limits_for
from inference.chattts_engine import ChatTTSEngine, check_model_dir
from inference.engine import ModelUnavailable
from inference.text import TOKENS_PER_SECOND, TextError, normalize_segment
from inference.text import preload as preload_normalizers
from tts_saas.request_id import request_id_var

from . import callbacks, maintenance, worker_metrics, workers
from .batcher import Batcher
from .jobs import claim_job, fail_job
from .worker import JobRun

logger = logging.getLogger(__name__)

_serves_tts = False
_engine: ChatTTSEngine | None = None
_batcher: Batcher | None = None
_load_error: str | None = None
_request_tokens: dict[str, Token] = {}


@worker_init.connect
def start_synthesis_worker(sender=None, **kwargs) -> None:
    global _serves_tts
    queues = sender.app.amqp.queues.consume_from if sender is not None else {}
    _serves_tts = "tts" in (queues or {})
    if not _serves_tts:
        return
    if settings.TTS_MODEL_DIR:
        problem = check_model_dir(settings.TTS_MODEL_DIR)
        if problem:
            logger.critical("cannot start a synthesis worker: %s", problem)
            print(f"error: cannot start a synthesis worker: {problem}", file=sys.stderr, flush=True)
            sys.exit(2)
    # One engine per process, shared by a thread per job of a batch.
    sender.pool_cls, sender.concurrency = "threads", settings.TTS_MAX_BATCH
    load_engine()


def load_engine() -> None:
    global _engine, _batcher, _load_error
    try:
        engine = ChatTTSEngine.load(
            settings.TTS_MODEL_DIR,
            settings.TTS_DEVICE,
            settings.TTS_HF_CACHE_DIR,
            settings.TTS_BENCH_FIXED_LENGTH,
            precision=settings.TTS_PRECISION,
            threads=settings.TTS_TORCH_THREADS,
        )
        preload_normalizers()  # ~2 s: at start, not on the first job
        if settings.TTS_WARMUP:
            engine.warm_up()
    except ModelUnavailable as exc:
        _load_error = str(exc)
        logger.critical("speech model unavailable: %s", exc)
        workers.start_heartbeat("unavailable", error=_load_error)
        return
    _engine = engine
    chunk_tokens = max(1, round(settings.TTS_STREAM_CHUNK_SECONDS * TOKENS_PER_SECOND))
    _batcher = Batcher(
        engine,
        settings.TTS_MAX_BATCH,
        settings.TTS_BATCH_GATHER_SECONDS,
        chunk_tokens,
        continuous=settings.TTS_CONTINUOUS_BATCHING,
    )
    if engine.random_weights:
        logger.warning("serving a RANDOMLY INITIALISED checkpoint: output is noise, not speech")
    workers.start_heartbeat("ready", model_version=engine.model_version, capacity=settings.TTS_MAX_BATCH)
    worker_metrics.serve(settings.TTS_WORKER_METRICS_PORT)
    logger.info(
        "synthesis worker ready", extra={"model_version": engine.model_version, "batch": settings.TTS_MAX_BATCH}
    )


@worker_shutdown.connect
def leave(**kwargs) -> None:
    if _serves_tts:
        try:
            workers.unregister()
        except Exception:  # shutting down; the registration times out by itself
            pass


@task_prerun.connect
def adopt_request_id(task_id=None, task=None, **kwargs) -> None:
    request_id = getattr(task.request, "request_id", None) if task is not None else None
    if request_id and task_id:
        _request_tokens[task_id] = request_id_var.set(request_id)


@task_postrun.connect
def drop_request_id(task_id=None, **kwargs) -> None:
    token = _request_tokens.pop(task_id, None)
    if token is not None:
        request_id_var.reset(token)


@shared_task(name="synthesis.tasks.synthesize_job", acks_late=True)
def synthesize_job(job_id: str) -> None:
    job = claim_job(job_id, workers.worker_name())
    if job is None:
        logger.info("job not queued any more; skipped", extra={"job_id": job_id})
        return
    if _engine is None or _batcher is None:
        reason = _load_error or "this worker has no model loaded (is it serving -Q tts?)"
        fail_job(job, 503, "model_unavailable", f"The speech model is unavailable: {reason}")
        return
    priority = limits_for(job.organization).queue_priority
    speaker = job.params.get("speaker", "")
    problem = _engine.speaker_problem(speaker) if speaker else None
    if problem:  # an organization's voice made from another model's embedding
        fail_job(job, 400, "invalid_voice", problem)
        return
    try:
        run = JobRun(job, _engine.model_version, priority)
    except TextError as exc:  # what spelling out made of the text cannot be read (never seen so far)
        fail_job(job, 400, "invalid_input", str(exc))
        return
    except Exception:
        logger.exception("could not prepare a job's text", extra={"job_id": job_id})
        fail_job(job, 500, "synthesis_failed", "Synthesis failed on the worker.")
        return
    _batcher.run(run)


@shared_task(name="synthesis.tasks.encode_voice_recording", acks_late=True)
def encode_voice_recording(voice_id: str) -> None:
    """A voice's reference recording through this worker's model: ChatTTS's zero-shot speaker
    codes and the transcript spelled out; the voice is then ready (or failed, saying why)."""
    from tts_saas.redis import get_redis  # noqa: PLC0415  (only this task needs the raw client)

    from .custom_voices import RECORDING_KEY  # noqa: PLC0415  (the web side's module: imported late)
    from .models import Voice  # noqa: PLC0415

    voice = Voice.objects.filter(pk=voice_id, status=Voice.Status.PROCESSING).first()
    if voice is None:
        return  # deleted meanwhile, or encoded already (a redelivered message)
    pcm = get_redis().get(RECORDING_KEY.format(voice_id))

    def failed(reason: str) -> None:
        Voice.objects.filter(pk=voice_id).update(status=Voice.Status.FAILED, error=reason[:300])

    if _engine is None:
        return failed(_load_error or "no synthesis worker had the model loaded")
    if pcm is None:
        return failed("the recording was not encoded within an hour; upload it again")
    try:
        sample_text = normalize_segment(voice.transcript)
        sample = _engine.sample_speaker(np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0)
    except TextError as exc:
        return failed(f"the transcript: {exc}")
    except Exception:
        logger.exception("could not encode a voice's recording", extra={"voice_id": voice_id})
        return failed("the recording could not be encoded")
    Voice.objects.filter(pk=voice_id).update(
        status=Voice.Status.READY, sample=sample, sample_text=sample_text, error=""
    )
    get_redis().delete(RECORDING_KEY.format(voice_id))


@shared_task(name="synthesis.tasks.rescue_lost_jobs")
def rescue_lost_jobs() -> dict[str, int]:
    return maintenance.rescue_lost_jobs()


@shared_task(name="synthesis.tasks.reap_stale_jobs")
def reap_stale_jobs() -> dict[str, int]:
    rescued = maintenance.rescue_lost_jobs()  # before their workers are forgotten (rescue finds them there)
    return {**maintenance.reap_stale_jobs(), **rescued, "workers_forgotten": workers.forget_dead_workers()}


class CallbackNotDelivered(Exception):
    """The receiver did not answer 2xx (the attempt is recorded on the job): Celery retries."""


# Celery's own retry policy: attempt n+1 waits a random time up to BACKOFF * 2**n seconds (full
# jitter, so receivers coming back up are not hit by every job at once; Celery rounds the factor
# to whole seconds, at least 1), at most TTS_CALLBACK_MAX_ATTEMPTS attempts in all.
@shared_task(
    bind=True,
    name="synthesis.tasks.deliver_callback",
    acks_late=True,
    autoretry_for=(CallbackNotDelivered,),
    max_retries=max(0, settings.TTS_CALLBACK_MAX_ATTEMPTS - 1),
    retry_backoff=settings.TTS_CALLBACK_BACKOFF_SECONDS,
    retry_jitter=True,
)
def deliver_callback(self, job_id: str) -> bool:
    if callbacks.deliver(job_id):
        return True
    attempts = self.request.retries + 1
    if attempts > self.max_retries:
        # Returned rather than raised: a given-up callback is the receiver's failure, not the task's.
        logger.warning("callback given up after %d attempts", attempts, extra={"job_id": job_id})
        return False
    raise CallbackNotDelivered(job_id)


@shared_task(name="synthesis.tasks.delete_old_jobs")
def delete_old_jobs() -> int:
    return maintenance.delete_old_jobs()
