"""Asynchronous jobs that wait for their organization's concurrency slot. A job is there to wait,
so `POST /v1/jobs` beyond the plan's `concurrent_jobs` is accepted (202) rather than refused: the
job is recorded (its characters reserved, as any job's) with no lease and nothing on the engine's
queue. When a slot frees (a job of the organization ends on a worker; beat every few seconds as
well) the oldest waiting job takes it and goes on its engine's queue. It waits for a slot at
most TTS_JOB_QUEUE_TIMEOUT, like a queued job for a worker, then expires refunded. Live requests
(REST speech, the WebSocket) never wait here: someone is listening, so they get 429 at once."""

from __future__ import annotations

import logging
import secrets

from django.conf import settings
from django.utils import timezone

from billing import concurrency
from billing.limits import limits_for
from synthesis.models import Job
from synthesis.service import capacity, queue
from synthesis.service.jobs import lease_seconds, queue_deadline, settle_job

logger = logging.getLogger(__name__)


def waiting_jobs(org_id: int | None = None):
    """Jobs waiting for a slot, oldest first: queued asynchronous jobs that hold no lease."""
    found = Job.objects.filter(status=Job.Status.QUEUED, interactive=False, lease="")
    return (found if org_id is None else found.filter(organization_id=org_id)).order_by("created_at")


def start_waiting(org_id: int) -> int:
    """Start the organization's waiting jobs while it has free slots; how many started."""
    started = 0
    limit = None
    for job in waiting_jobs(org_id).select_related("organization").iterator():
        limit = limit if limit is not None else limits_for(job.organization)
        lease = f"lease_{secrets.token_hex(12)}"
        if not concurrency.take(org_id, lease, limit.concurrent_jobs, lease_seconds(False)):
            break  # every slot taken: the next job's end starts it
        # Its queue wait counts from now (the reaper's clock); another process may have started it.
        if not Job.objects.filter(pk=job.pk, status=Job.Status.QUEUED, lease="").update(
            lease=lease, started_at=timezone.now()
        ):
            concurrency.release(org_id, lease)
            continue
        job.lease = lease
        _enqueue(job, limit.queue_priority)
        started += 1
    return started


def start_all_waiting() -> int:
    """Beat's sweep: every organization with a waiting job gets its free slots used."""
    started = 0
    for org_id in set(waiting_jobs().values_list("organization_id", flat=True)):
        try:  # one organization's failure never stops the others' (nor beat's rescue after it)
            started += start_waiting(org_id)
        except Exception:
            logger.exception("could not start an organization's waiting jobs", extra={"organization_id": org_id})
    return started


def _enqueue(job: Job, queue_priority: int) -> None:
    capacity.note_waiting(job.model, job.id)
    earlier = concurrency.in_flight(job.organization_id) - 1
    try:
        queue.enqueue_synthesis(
            job.id,
            engine=job.model,
            priority=capacity.fair_priority(queue_priority, earlier, settings.TTS_MAX_BATCH),
            expires=queue_deadline(False),
            request_id=job.request_id,
            params=job.params,
            styles=job.styles,
        )
    except Exception:
        logger.exception("could not enqueue a job that waited for a slot", extra={"job_id": str(job.id)})
        settle_job(job, Job.Status.FAILED, error_code="queue_unavailable", from_status=Job.Status.QUEUED)
