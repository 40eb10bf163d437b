"""Periodic clean-up, run by beat: settling jobs that nobody will finish, deleting old ones."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from .jobs import expire_job, fail_job, queue_deadline
from .models import Job


def reap_stale_jobs(now: datetime | None = None) -> dict[str, int]:
    """Settle jobs whose worker died (running past the hard time limit) or that no worker took in
    their time, so that their reservations are refunded and their slots freed."""
    now = now or timezone.now()
    lost_before = now - timedelta(seconds=settings.CELERY_TASK_TIME_LIMIT + 60)
    counts = {"lost": 0, "expired": 0}
    for job in Job.objects.filter(status=Job.Status.RUNNING, started_at__lt=lost_before):
        if fail_job(job, 503, "worker_lost", "The worker stopped mid-job."):
            counts["lost"] += 1
    for job in Job.objects.filter(status=Job.Status.QUEUED):
        if job.created_at < now - timedelta(seconds=queue_deadline(job.interactive) + 60) and expire_job(job):
            counts["expired"] += 1
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
