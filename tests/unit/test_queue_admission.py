"""Admission arithmetic: the estimated wait from the measured service time and the workers'
capacity, the immediate refusal with Retry-After, and the fair priority of a tenant's burst."""

from __future__ import annotations

import pytest
from django.test import override_settings

from synthesis.service import capacity
from synthesis.service.jobs import Submission
from synthesis.service.speech import check_queue_wait
from tts_saas.errors import ApiError


def state(waiting: int, cap: int, job_seconds: float | None) -> capacity.QueueState:
    return capacity.QueueState(waiting=waiting, capacity=cap, job_seconds=job_seconds, last_progress=None)


def test_the_wait_is_the_work_ahead_over_the_service_rate():
    queue = state(waiting=6, cap=4, job_seconds=10.0)
    assert queue.service_rate == pytest.approx(0.4)  # four jobs per ten seconds
    assert queue.estimated_wait() == pytest.approx(15.0)
    assert queue.estimated_wait(ahead=0) == 0


def test_nothing_is_estimated_before_a_job_was_measured_or_without_ready_workers():
    assert state(waiting=50, cap=4, job_seconds=None).estimated_wait() is None
    assert state(waiting=50, cap=0, job_seconds=3.0).estimated_wait() is None


@override_settings(TTS_MAX_QUEUE_WAIT=20)
def test_a_request_that_would_wait_too_long_is_refused_at_once_with_retry_after():
    with pytest.raises(ApiError) as refused:
        check_queue_wait(state(waiting=12, cap=2, job_seconds=5.0), Submission())  # 30 s of work ahead
    error = refused.value
    assert (error.status, error.code) == (503, "server_overloaded")
    assert error.headers["Retry-After"] == "10"  # when the queue will be short enough
    assert "30 s" in error.message


@override_settings(TTS_MAX_QUEUE_WAIT=20, TTS_JOB_QUEUE_TIMEOUT=3600)
def test_a_wait_within_the_limit_is_admitted_and_async_jobs_may_wait_longer():
    check_queue_wait(state(waiting=8, cap=2, job_seconds=5.0), Submission())  # 20 s: just fits
    check_queue_wait(state(waiting=12, cap=2, job_seconds=5.0), Submission(interactive=False))
    check_queue_wait(state(waiting=10_000, cap=2, job_seconds=None), Submission())  # not measured yet


def test_a_tenants_burst_queues_behind_another_tenants_first_job():
    plan = 6
    assert capacity.fair_priority(plan, unfinished_before=0, batch=4) == 6
    assert capacity.fair_priority(plan, unfinished_before=3, batch=4) == 6  # within its first batch
    assert capacity.fair_priority(plan, unfinished_before=4, batch=4) == 7  # behind others' first jobs
    assert capacity.fair_priority(plan, unfinished_before=400, batch=4) == 9  # the lowest Celery priority
    assert capacity.fair_priority(0, unfinished_before=0, batch=4) < capacity.fair_priority(3, 0, 4)  # paid first
    # TTS_MAX_BATCH=0 (each worker sizes its batch): the web counts in batches of FAIR_BATCH.
    assert capacity.fair_priority(plan, unfinished_before=capacity.FAIR_BATCH, batch=0) == 7
    assert capacity.fair_priority(plan, unfinished_before=capacity.FAIR_BATCH - 1, batch=0) == 6


def test_waiting_jobs_are_counted_once_each_per_engine(redis_client):
    for engine in ("chattts", "kokoro"):
        redis_client.delete(capacity.WAITING.format(engine))
    for job in ("a0", "a1", "b0"):
        capacity.note_waiting("chattts", job)
    capacity.note_waiting("kokoro", "k0")
    capacity.note_not_waiting("chattts", "a0")
    capacity.note_not_waiting("chattts", "a0")  # twice: counted once
    assert capacity.queue_state("chattts", []).waiting == 2
    assert capacity.queue_state("kokoro", []).waiting == 1  # each engine's queue is its own


def test_the_service_time_is_a_weighted_mean_of_finished_jobs(redis_client):
    redis_client.delete(capacity.SERVICE.format("chattts"), capacity.PROGRESS.format("kokoro"))
    capacity.record_job_seconds("chattts", 10.0)
    capacity.record_job_seconds("chattts", 20.0)
    queue = capacity.queue_state("chattts", [])
    assert queue.job_seconds == pytest.approx(10.0 + capacity.SMOOTHING * 10.0)
    assert queue.last_progress is not None
    assert capacity.queue_state("kokoro", []).last_progress is None  # another engine's progress is not its
