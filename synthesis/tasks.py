"""Celery tasks and worker lifecycle.

A worker started with `-Q tts` loads the engine in each pool process after the fork (never CUDA
in the forking parent), warms it up, and announces itself with a heartbeat. The parent checks the
model directory before forking, so a wrong TTS_MODEL_DIR stops the worker at start with a clear
message. A process whose model failed to load announces "unavailable" with the reason, so the web
answers 503 with that reason rather than queueing.
"""

from __future__ import annotations

import logging
import sys

from celery import shared_task
from celery.signals import worker_init, worker_process_init, worker_process_shutdown
from django.conf import settings

logger = logging.getLogger(__name__)

_serves_tts = False
_engine = None
_load_error: str | None = None


@worker_init.connect
def check_model_source(sender=None, **kwargs) -> None:
    global _serves_tts
    queues = sender.app.amqp.queues.consume_from if sender is not None else {}
    _serves_tts = "tts" in (queues or {})
    if not _serves_tts or not settings.TTS_MODEL_DIR:
        return
    from inference.chattts_engine import check_model_dir

    problem = check_model_dir(settings.TTS_MODEL_DIR)
    if problem:
        logger.critical("cannot start a synthesis worker: %s", problem)
        print(f"error: cannot start a synthesis worker: {problem}", file=sys.stderr, flush=True)
        sys.exit(2)


@worker_process_init.connect
def load_engine(**kwargs) -> None:
    global _engine, _load_error
    if not _serves_tts:
        return
    from inference.chattts_engine import ChatTTSEngine
    from inference.engine import ModelUnavailable

    from . import workers

    try:
        engine = ChatTTSEngine.load(
            settings.TTS_MODEL_DIR, settings.TTS_DEVICE, settings.TTS_HF_CACHE_DIR, settings.TTS_BENCH_FIXED_LENGTH
        )
        if settings.TTS_WARMUP:
            engine.warm_up()
    except ModelUnavailable as exc:
        _load_error = str(exc)
        logger.critical("speech model unavailable: %s", exc)
        workers.start_heartbeat("unavailable", error=_load_error)
        return
    _engine = engine
    if engine.random_weights:
        logger.warning("serving a RANDOMLY INITIALISED checkpoint: output is noise, not speech")
    workers.start_heartbeat("ready", model_version=engine.model_version)
    logger.info("synthesis worker ready", extra={"model_version": engine.model_version})


@worker_process_shutdown.connect
def leave(**kwargs) -> None:
    if _serves_tts:
        from . import workers

        try:
            workers.unregister()
        except Exception:  # shutting down; the registration times out by itself
            pass


@shared_task(name="synthesis.tasks.synthesize_job", acks_late=True)
def synthesize_job(job_id: str) -> None:
    from .actions import run_job

    run_job(job_id, _engine, _load_error or "this worker has no model loaded (is it serving -Q tts?)")


@shared_task(name="synthesis.tasks.reap_stale_jobs")
def reap_stale_jobs() -> dict[str, int]:
    from .actions import reap_stale_jobs as reap

    return reap()


@shared_task(bind=True, name="synthesis.tasks.deliver_callback", max_retries=None, acks_late=True)
def deliver_callback(self, job_id: str) -> bool:
    from .callbacks import deliver

    if deliver(job_id):
        return True
    attempt = self.request.retries + 1
    if attempt >= settings.TTS_CALLBACK_MAX_ATTEMPTS:
        logger.warning("callback given up after %d attempts", attempt, extra={"job_id": job_id})
        return False
    raise self.retry(countdown=settings.TTS_CALLBACK_BACKOFF_SECONDS * 2 ** (attempt - 1))


@shared_task(name="synthesis.tasks.expire_old_jobs")
def expire_old_jobs() -> int:
    from .actions import expire_old_jobs as expire

    return expire()
