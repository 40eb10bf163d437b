"""Celery tasks and the synthesis worker's lifecycle.

A worker serves one engine: it consumes that engine's queue (`tts-<engine>`, e.g. `-Q tts-kokoro`)
and runs a pool of TTS_MAX_BATCH threads (whatever its command line says) around the engine, loaded
once in the process (no fork, so CUDA is safe) and driven by one batcher thread: each task claims its
job, hands it to the batcher and returns when the job has settled, so Celery prefetches up to a batch
of jobs and acknowledges each late (a killed worker's jobs are delivered again). A wrong model
directory stops the worker at start with a clear message; a model that fails to load is announced
"unavailable" with the reason, so the web answers 503 with it rather than queueing. Each task runs
with the request id of the API call that sent it (a message header), so its log lines carry that id.
"""

from __future__ import annotations

import logging
import random
from contextvars import Token
from datetime import timedelta

import numpy as np
from celery import shared_task
from celery.signals import task_postrun, task_prerun, worker_init, worker_shutdown, worker_shutting_down
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils import timezone

from billing import alerts as billing_alerts
from billing.limits import limits_for
from inference.text.preparation import TextError
from synthesis.models import Job, WebhookDelivery
from synthesis.service import alerts, callbacks, deliveries, delivery_share, events, maintenance, waiting, workers
from synthesis.service.jobs import claim_job, fail_job
from synthesis.worker import lifecycle
from synthesis.worker.lifecycle import current
from synthesis.worker.run import JobRun
from tts_saas.request_id import request_id_var

logger = logging.getLogger(__name__)

_request_tokens: dict[str, Token] = {}


@worker_init.connect
def start_synthesis_worker(sender=None, **kwargs) -> None:
    lifecycle.start(sender)


@worker_shutting_down.connect
def drain(**kwargs) -> None:
    lifecycle.draining()


@worker_shutdown.connect
def leave(**kwargs) -> None:
    lifecycle.leave()


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
    engine, batcher = current.engine, current.batcher
    if engine is None or batcher is None or engine.spec.name != job.model:
        reason = (
            current.load_error or f"this worker has no model '{job.model}' loaded (is it serving -Q tts-{job.model}?)"
        )
        fail_job(job, 503, "model_unavailable", f"The speech model is unavailable: {reason}")
        return
    priority = limits_for(job.organization).queue_priority
    try:  # the request's voice, and each SSML span's (<voice name>) that has parameters of its own
        every = [job.params] + [d["params"] for d in job.styles or () if "params" in d]
        problem = next(filter(None, (engine.voice_problem(engine.spec.params(**p)) for p in every)), None)
    except (TypeError, ValueError):  # a job queued by an older version with other parameters
        problem = "The job's parameters are not this model's."
    if problem:  # e.g. an organization's voice made from another model's embedding
        fail_job(job, 400, "invalid_voice", problem)
        return
    try:
        run = JobRun(job, engine, priority)
    except TextError as exc:  # what spelling out made of the text cannot be read (never seen so far)
        fail_job(job, 400, "invalid_input", str(exc))
        return
    except Exception:
        logger.exception("could not prepare a job's text", extra={"job_id": job_id})
        fail_job(job, 500, "synthesis_failed", "Synthesis failed on the worker.")
        return
    batcher.run(run)
    waiting.start_waiting(job.organization_id)  # its slot is free: the organization's next waiting job takes it


def _make_voice(voice_id: str, source: str, make, text: str, failure: str) -> None:
    """A `processing` voice of `source` made by this worker's model: `make(engine, voice)` gives
    the row's fields; the voice is then ready, or failed saying why (`text`: what a TextError is
    about; `failure`: what to say of any other error). Nothing happens to a voice deleted meanwhile
    or made already (a redelivered message)."""
    from voices.models import Voice  # noqa: PLC0415

    voice = Voice.objects.filter(pk=voice_id, status=Voice.Status.PROCESSING, source=source).first()
    if voice is None:
        return
    engine = current.engine
    try:
        if engine is None or engine.spec.name != voice.model:
            raise LookupError(current.load_error or f"no synthesis worker had the model '{voice.model}' loaded")
        fields = make(engine, voice)
    except LookupError as exc:
        reason = str(exc)
    except TextError as exc:
        reason = f"{text}: {exc}"
    except Exception:
        logger.exception("could not make a voice", extra={"voice_id": voice_id, "source": source})
        reason = failure
    else:
        Voice.objects.filter(pk=voice_id).update(status=Voice.Status.READY, error="", **fields)
        return
    Voice.objects.filter(pk=voice_id).update(status=Voice.Status.FAILED, error=reason[:300])


@shared_task(name="synthesis.tasks.encode_voice_recording", acks_late=True)
def encode_voice_recording(voice_id: str) -> None:
    """A voice's reference recording through this worker's model (engines with recording voices:
    ChatTTS's zero-shot speaker codes, VoxCPM2's latent patches; the transcript spelled out). The
    decoded recording is deleted from Redis once used, encoded or failed."""
    from tts_saas.redis import get_redis  # noqa: PLC0415  (only this task needs the raw client)
    from voices.recordings import RECORDING_KEY  # noqa: PLC0415  (the web side's module: imported late)

    key = RECORDING_KEY.format(voice_id)

    def encode(engine, voice) -> dict:
        if not engine.spec.features.recording_voices:
            raise LookupError(f"the model '{voice.model}' makes no voices from recordings")
        pcm = get_redis().get(key)
        if pcm is None:
            raise LookupError("the recording was not encoded within an hour; upload it again")
        audio = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0
        return engine.voice_from_recording(audio, voice.transcript)

    try:
        _make_voice(voice_id, "recording", encode, "the transcript", "the recording could not be encoded")
    finally:
        get_redis().delete(key)  # nothing of the recording is kept


@shared_task(name="synthesis.tasks.design_voice", acks_late=True)
def design_voice(voice_id: str) -> None:
    """A voice design made fixed on this worker's model (VoxCPM2): its sample spoken once under the
    voice's seed and encoded as its reference."""

    def design(engine, voice) -> dict:
        if not hasattr(engine, "voice_from_design"):
            raise LookupError(f"the model '{voice.model}' keeps no designed voices")
        return engine.voice_from_design(voice.design, voice.seed or 0, voice.transcript)

    _make_voice(voice_id, "design", design, "the sample text", "the design could not be spoken")


@shared_task(name="synthesis.tasks.rescue_lost_jobs")
def rescue_lost_jobs() -> dict[str, int]:
    return maintenance.rescue_lost_jobs()


@shared_task(name="synthesis.tasks.reap_stale_jobs")
def reap_stale_jobs() -> dict[str, int]:
    rescued = maintenance.rescue_lost_jobs()  # before their workers are forgotten (rescue finds them there)
    return {**maintenance.reap_stale_jobs(), **rescued, "workers_forgotten": workers.forget_dead_workers()}


# Retries: attempt n+1 waits a random time up to BACKOFF * 2**n seconds (full jitter, so receivers
# coming back up are not hit by every job at once; at most RETRY_MAX_SECONDS), at most
# TTS_CALLBACK_MAX_ATTEMPTS attempts in all; the delivery's log entry says when the next is due.
RETRIED_DELIVERY = {"bind": True, "acks_late": True, "max_retries": max(0, settings.TTS_CALLBACK_MAX_ATTEMPTS - 1)}
RETRY_MAX_SECONDS = 600


def delivered_or_retried(task, sent: WebhookDelivery | None, what: str, **extra) -> bool:
    """True when delivered (or nothing was to be sent); else a retry (raised), or False once the
    attempts are spent: returned rather than raised, a given-up delivery is the receiver's failure,
    not the task's."""
    if sent is None or sent.delivered:
        return True
    attempts = task.request.retries + 1
    if attempts > task.max_retries:
        logger.warning("%s given up after %d attempts", what, attempts, extra=extra)
        return False
    wait = random.uniform(0, min(RETRY_MAX_SECONDS, settings.TTS_CALLBACK_BACKOFF_SECONDS * 2**task.request.retries))
    WebhookDelivery.objects.filter(pk=sent.pk).update(next_attempt_at=timezone.now() + timedelta(seconds=wait))
    raise task.retry(countdown=wait)


def _organization_of_job(job_id: str) -> int | None:
    try:
        return Job.objects.filter(pk=job_id).values_list("organization_id", flat=True).first()
    except ValidationError:  # not a job's id: no organization to share with (the delivery says why)
        return None


def later(task) -> bool:
    """The delivery back on the queue in a moment, its attempts unspent: its organization's share
    of the delivery work is in use (`delivery_share`)."""
    request = task.request
    task.apply_async(
        request.args, request.kwargs, countdown=random.uniform(0.5, 2.0), queue="default", retries=request.retries
    )
    return True


@shared_task(name="synthesis.tasks.deliver_callback", **RETRIED_DELIVERY)
def deliver_callback(self, job_id: str) -> bool:
    with delivery_share.slot(_organization_of_job(job_id)) as now:
        if not now:
            return later(self)
        return delivered_or_retried(self, callbacks.deliver(job_id), "callback", job_id=job_id)


@shared_task(name="synthesis.tasks.deliver_event", **RETRIED_DELIVERY)
def deliver_event(self, delivery_id: str) -> bool:
    org_id = WebhookDelivery.objects.filter(pk=delivery_id).values_list("organization_id", flat=True).first()
    with delivery_share.slot(org_id) as now:
        if not now:
            return later(self)
        return delivered_or_retried(self, events.deliver(int(delivery_id)), "event", delivery_id=delivery_id)


@shared_task(name="synthesis.tasks.publish_job_event")
def publish_job_event(job_id: str) -> int:
    """An ended asynchronous job's event to the endpoints that receive it."""
    return events.publish_job(job_id)


@shared_task(name="synthesis.tasks.check_usage_alerts")
def check_usage_alerts() -> int:
    """Beat, every minute: thresholds crossed since the last look, each told once."""
    found = billing_alerts.due()
    for alert in found:
        deliver_usage_alert.apply_async((alert.pk,), queue="default")
        email_usage_alert.apply_async((alert.pk,), queue="default")
    return len(found)


@shared_task(name="synthesis.tasks.deliver_usage_alert")
def deliver_usage_alert(alert_id: int) -> int:
    """The alert to the endpoints that receive it: a delivery each, tried by `deliver_event`."""
    return events.publish_alert(alert_id)


@shared_task(name="synthesis.tasks.email_usage_alert")
def email_usage_alert(alert_id: int) -> int:
    return alerts.email(alert_id)


@shared_task(name="synthesis.tasks.delete_old_jobs")
def delete_old_jobs() -> int:
    """Beat, hourly: jobs past their retention (their deliveries with them), then the other entries
    of the webhook delivery log past theirs."""
    return maintenance.delete_old_jobs() + deliveries.delete_old()
