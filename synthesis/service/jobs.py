"""A job's life: submit (reserve quota, record, enqueue), settle (its one final state with the
quota settlement and ledger row), expire, cancel. The only module that changes `Job.status`."""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import asdict, dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from accounts.auth import Principal
from accounts.models import Organization
from billing import concurrency, ledger, quota
from billing.limits import Limits
from billing.models import UsageEvent
from synthesis.audio import streams
from synthesis.models import Job
from synthesis.service import capacity, inflight, queue, routing
from synthesis.service.prepared import PreparedSpeech
from tts_saas.errors import ApiError

logger = logging.getLogger(__name__)

LEDGER_STATUS = {Job.Status.SUCCEEDED: UsageEvent.Status.SUCCEEDED, Job.Status.CANCELLED: UsageEvent.Status.CANCELLED}


@dataclass(frozen=True)
class Submission:
    """How a job is submitted: live (`interactive`) or asynchronous, and its options."""

    interactive: bool = True
    callback_url: str = ""
    base_url: str = ""  # the service's address as the submitter reached it (absolute URLs in callbacks)
    idempotency_key: str = ""
    request_hash: str = ""  # of the body the idempotency key came with

    @property
    def queue_deadline(self) -> float:
        """Seconds the job may wait to start; its task expires unrun after them."""
        return queue_deadline(self.interactive)


def queue_deadline(interactive: bool) -> float:
    if interactive:
        return settings.TTS_MAX_QUEUE_WAIT + settings.TTS_QUEUE_TIMEOUT
    return settings.TTS_JOB_QUEUE_TIMEOUT


def lease_seconds(interactive: bool) -> float:
    """How long a job's concurrency slot is held: its wait, its run (the task's hard limit), a
    margin. A job whose process died without releasing it frees the slot when this runs out."""
    return queue_deadline(interactive) + settings.CELERY_TASK_TIME_LIMIT + 30


def run_limit(job: Job) -> float:
    """Seconds a job may run before it is stopped: the task's soft limit, or for an asynchronous
    job TTS_JOB_SECONDS_PER_CHAR a character of its input when that is more (a long text)."""
    soft = settings.CELERY_TASK_SOFT_TIME_LIMIT
    return soft if job.interactive else max(soft, job.characters * settings.TTS_JOB_SECONDS_PER_CHAR)


def request_digest(data: dict) -> str:
    """What an Idempotency-Key is bound to: a hash of the request body."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def find_idempotent_job(org: Organization, idempotency_key: str, request_hash: str) -> Job | None:
    """The job an earlier request with this key made; 409 if that request had another body."""
    job = Job.objects.filter(organization=org, idempotency_key=idempotency_key).first()
    if job is not None and job.request_hash != request_hash:
        raise ApiError(
            409,
            "This Idempotency-Key was already used with a different request body.",
            "idempotency_key_reused",
        )
    return job


def submit_job(
    principal: Principal, speech: PreparedSpeech, limits: Limits, request_id: str, lease: str, how: Submission
) -> Job:
    """Reserve the request's characters, record the job and enqueue it. On any failure the
    reservation is given back; once this returns, the job settles itself (worker, expiry, reaper).
    A concurrent retry with the same idempotency key that inserts first wins: its job is
    returned and this reservation given back (admission has already answered plain retries)."""
    org = principal.organization
    try:
        period = quota.reserve(org, speech.characters, limits.quota_characters, key=principal.api_key)
    except quota.QuotaExceeded as exc:
        raise exc.error(limits) from exc
    data = speech.data
    key_id = principal.key_id
    try:
        with transaction.atomic():
            job = Job.objects.create(
                organization=org,
                api_key=principal.api_key,
                member_id=principal.member_id,
                request_id=request_id,
                model=speech.spec.name,
                voice=data["voice"],
                response_format=data["response_format"],
                input=data["input"],
                segments=list(speech.text.segments),
                caption_texts=list(speech.caption_texts),
                continued=sorted(speech.text.continued),
                styles=list(speech.styles),
                params=asdict(speech.params),
                cacheable=speech.cacheable,
                zero_retention=speech.zero_retention,
                characters=speech.characters,
                quota_period=period,
                lease=lease,
                interactive=how.interactive,
                callback_url=how.callback_url,
                base_url=how.base_url[:500],
                idempotency_key=how.idempotency_key,
                request_hash=how.request_hash,
            )
    except IntegrityError:
        quota.refund(org.pk, period, speech.characters, key_id)
        earlier = find_idempotent_job(org, how.idempotency_key, how.request_hash) if how.idempotency_key else None
        if earlier is None:
            raise
        return earlier  # a concurrent retry with the same key won the race
    except Exception:
        quota.refund(org.pk, period, speech.characters, key_id)
        raise
    if not lease:  # it waits for the organization's slot first (synthesis.service.waiting)
        return job
    capacity.note_waiting(job.model, job.id)
    earlier = concurrency.in_flight(org.pk) - 1  # the organization's jobs not finished, this one aside
    priority = capacity.fair_priority(limits.queue_priority, earlier, settings.TTS_MAX_BATCH)
    try:
        queue.enqueue_synthesis(
            job.id,
            engine=job.model,
            priority=priority,
            expires=how.queue_deadline,
            request_id=request_id,
            params=job.params,
            styles=job.styles,
        )
    except Exception as exc:
        logger.exception("could not enqueue", extra={"job_id": str(job.id)})
        settle_job(job, Job.Status.FAILED, error_code="queue_unavailable", from_status=Job.Status.QUEUED)
        raise ApiError(503, "The job queue is unavailable. Try again shortly.", "queue_unavailable") from exc
    return job


# What a zero-retention job keeps of its texts once it ends: nothing (the worker has them until then).
FORGOTTEN = {"input": "", "segments": [], "caption_texts": [], "captions": [], "styles": []}


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
    captions: list[dict] | None = None,
) -> bool:
    """Move a job to its final state exactly once, with its quota settlement (commit what is
    billed, refund the rest) and ledger row in the same transaction, then free its concurrency
    slot and schedule its callback. False if another party settled it first."""
    now = timezone.now()
    if billed is None:
        billed = job.characters if status == Job.Status.SUCCEEDED else 0
    with transaction.atomic():
        rows = Job.objects.filter(pk=job.pk, status=from_status)
        if from_status == Job.Status.RUNNING:
            rows = rows.filter(attempts=job.attempts)  # a run the job was taken from settles nothing
        changes: dict = {"progress": 1.0} if status == Job.Status.SUCCEEDED else {}
        if captions is not None:
            changes["captions"] = captions
        if job.zero_retention:
            changes.update(FORGOTTEN)
        moved = rows.update(
            status=status,
            finished_at=now,
            audio_seconds=audio_seconds,
            error_code=error_code,
            error_message=error_message,
            model_version=model_version,
            cache_key=cache_key,
            **changes,
        )
        if moved and job.quota_period:
            ledger.settle(
                org_id=job.organization_id,
                period=job.quota_period,
                reserved=job.characters,
                billed=billed,
                status=LEDGER_STATUS.get(status, UsageEvent.Status.FAILED),
                api_key_id=job.api_key_id,
                member_id=job.member_id,
                job_id=job.id,
                request_id=job.request_id,
                audio_seconds=audio_seconds,
                model=job.model,
                voice=job.voice,
                latency_ms=int((now - job.created_at).total_seconds() * 1000),
            )
        if moved and job.callback_url:
            transaction.on_commit(lambda: queue.enqueue_callback(job.id, job.request_id))
        if moved and not job.interactive:  # asynchronous jobs' ends are events for the endpoints
            transaction.on_commit(lambda: queue.enqueue_job_event(job.id, job.request_id))
    if moved and not job.lease:  # a job that waited for a slot may have taken one since it was read
        job.lease = Job.objects.filter(pk=job.pk).values_list("lease", flat=True).first() or ""
    if moved and job.lease:
        concurrency.release(job.organization_id, job.lease)
    if moved and from_status == Job.Status.QUEUED:
        capacity.note_not_waiting(job.model, job.id)
    if moved and job.cacheable:
        inflight.finished(
            inflight.identity(job.organization_id, job.model, job.segments, job.params, job.styles), job.id
        )
    return bool(moved)


def claim_job(job_id: str, worker: str = "") -> Job | None:
    """A worker takes the job: now running on `worker`; None if it is not queued any more
    (cancelled, expired, or taken by another worker)."""
    claimed = Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).update(
        status=Job.Status.RUNNING, started_at=timezone.now(), worker=worker, attempts=F("attempts") + 1
    )
    if not claimed:
        return None
    job = Job.objects.select_related("organization").get(pk=job_id)
    capacity.note_not_waiting(job.model, job.id)
    capacity.note_progress(job.model)
    routing.note_claimed(job.id)
    return job


def resend_queued_job(job_id: str, engine: str) -> bool:
    """A job routed to a worker that is gone, sent again on its engine's shared queue, first in
    line (it has waited already); False when it is not queued any more."""
    job = Job.objects.filter(pk=job_id, status=Job.Status.QUEUED).first()
    if job is None:
        return False
    queue.enqueue_synthesis(
        job.id, engine=engine, priority=0, expires=queue_deadline(job.interactive), request_id=job.request_id
    )
    return True


def requeue_lost_job(job: Job) -> bool:
    """The job's worker died while running it: queue it again, at the front, for a live worker.
    Its event stream starts over with a `restart` event (a reader that already passed audio on
    cannot continue; one that had none goes on waiting). False if the job moved meanwhile."""
    moved = Job.objects.filter(pk=job.pk, status=Job.Status.RUNNING, attempts=job.attempts).update(
        status=Job.Status.QUEUED,
        worker="",
        progress=0.0,
        started_at=timezone.now(),  # queued again now
    )
    if not moved:
        return False
    streams.restart(job.id, job.attempts)
    concurrency.extend(job.organization_id, job.lease, lease_seconds(job.interactive))  # a whole new run
    capacity.note_waiting(job.model, job.id)
    try:
        queue.enqueue_synthesis(
            job.id,
            engine=job.model,
            priority=0,
            expires=queue_deadline(job.interactive),
            request_id=job.request_id,
            params=job.params,
            styles=job.styles,
        )
    except Exception:
        logger.exception("could not enqueue a lost job again", extra={"job_id": str(job.id)})
        settle_job(job, Job.Status.FAILED, error_code="queue_unavailable", from_status=Job.Status.QUEUED)
        streams.publish_error(job.id, 503, "worker_lost", LOST_MESSAGE)
    return True


LOST_MESSAGE = "The synthesis worker stopped while generating this request. It was not billed; try again."


def fail_job(job: Job, status: int, code: str, message: str, *, final: str = Job.Status.FAILED, **settle) -> bool:
    """Settle a job that ends without audio and tell its readers why (HTTP `status`, `code`)."""
    if not settle_job(job, final, error_code=code, error_message=message, **settle):
        return False
    streams.publish_error(job.id, status, code, message)
    if job.zero_retention:  # its readers delete it once they have read the error
        streams.forget(job.id, within=streams.ZERO_RETENTION_GRACE)
    return True


def expire_if_queued(job_id) -> bool:
    """Give up on a job no worker has taken (refunding it); False if a worker took it meanwhile."""
    return expire_job(Job.objects.get(pk=job_id))


def expire_job(job: Job) -> bool:
    return fail_job(
        job,
        503,
        "worker_unavailable",
        "No worker took the job in time.",
        final=Job.Status.EXPIRED,
        from_status=Job.Status.QUEUED,
    )


def cancel_job(job: Job) -> Job:
    """Cancel a job: one still queued is settled at once (full refund); a running one is asked to
    stop, and its worker settles it (billing only the segments done)."""
    settled = job.status == Job.Status.QUEUED and fail_job(
        job, 409, "cancelled", "Cancelled by the client.", final=Job.Status.CANCELLED, from_status=Job.Status.QUEUED
    )
    if not settled and job.status in (Job.Status.QUEUED, Job.Status.RUNNING):
        streams.request_cancel(job.id)
    job.refresh_from_db()
    return job
