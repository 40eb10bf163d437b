"""Periodic clean-up, run by beat: settling jobs that nobody will finish, deleting old ones."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from synthesis.audio import streams
from synthesis.models import Job
from synthesis.service import routing, waiting, workers
from synthesis.service.jobs import (
    LOST_MESSAGE,
    expire_job,
    fail_job,
    queue_deadline,
    requeue_lost_job,
    resend_queued_job,
    run_limit,
)

logger = logging.getLogger(__name__)


def reap_stale_jobs(now: datetime | None = None) -> dict[str, int]:
    """Settle jobs whose worker died (running past the hard time limit) or that no worker took in
    their time, so that their reservations are refunded and their slots freed."""
    now = now or timezone.now()
    grace = settings.CELERY_TASK_TIME_LIMIT - settings.CELERY_TASK_SOFT_TIME_LIMIT + 60
    lost_before = now - timedelta(seconds=settings.CELERY_TASK_SOFT_TIME_LIMIT + grace)
    counts = {"lost": 0, "expired": 0}
    for job in Job.objects.filter(status=Job.Status.RUNNING, started_at__lt=lost_before):
        if job.started_at and job.started_at > now - timedelta(seconds=run_limit(job) + grace):
            continue  # a long asynchronous job still within its time
        if fail_job(job, 503, "worker_lost", "The worker stopped mid-job."):
            counts["lost"] += 1
    for job in Job.objects.filter(status=Job.Status.QUEUED):
        queued_at = job.started_at or job.created_at  # a lost worker's job was queued again when it started
        if queued_at < now - timedelta(seconds=queue_deadline(job.interactive) + 60) and expire_job(job):
            counts["expired"] += 1
    return counts


def rescue_lost_jobs() -> dict[str, int]:
    """Jobs running on a worker whose registration lapsed (killed, crashed, its host gone): each is
    queued again for a live worker, once; a job that was lost with TTS_JOB_MAX_ATTEMPTS workers
    fails and is refunded (it may be what takes them down). An interactive job whose client
    already had audio and that no retry can find again (no Idempotency-Key) fails at once:
    nobody could hear its new run. Jobs waiting on the queue of a worker that is gone (routed to
    it as its voice's owner) go to the shared queue, and jobs waiting for their organization's
    slot take the free ones. Run by beat every few seconds."""
    counts = {"requeued": 0, "failed": 0, "rerouted": routing.rescue_routed(resend_queued_job)}
    counts["started"] = waiting.start_all_waiting()  # jobs waiting for a slot another end freed
    lapsed = workers.lapsed_workers()
    if not lapsed:
        return counts
    for job in Job.objects.filter(status=Job.Status.RUNNING, worker__in=lapsed):
        unheard = job.interactive and not job.idempotency_key and streams.has_audio(job.id)
        if job.attempts >= settings.TTS_JOB_MAX_ATTEMPTS or unheard:
            if fail_job(job, 503, "worker_lost", LOST_MESSAGE):
                streams.supersede(job.id, job.attempts)  # should its worker be alive after all, it stops
                counts["failed"] += 1
        elif requeue_lost_job(job):
            counts["requeued"] += 1
        logger.warning("job's worker lost", extra={"job_id": str(job.id), "worker": job.worker, **counts})
    return counts


def delete_old_jobs(now: datetime | None = None) -> int:
    """Delete finished jobs (and their stored audio) older than the retention period."""
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
