"""The batcher with real jobs (the tiny checkpoint, in this process): a job whose audio cannot be
stored fails at once (refunded, its readers told) while its batch companion succeeds; a cache
that cannot be written does not fail the job; a job arriving while a batch runs joins it."""

from __future__ import annotations

import os
import threading
import time

import pytest

from billing import quota
from billing.models import QuotaPeriod
from inference.chattts.engine import ChatTTSEngine
from synthesis.audio import cache, streams
from synthesis.models import Job
from synthesis.worker.batcher import Batcher
from synthesis.worker.run import JobRun
from tests.factories import make_job
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def engine():
    return ChatTTSEngine.load(os.environ["TTS_TEST_CHECKPOINT"], device="cpu")


def running_job(org, text: str, **fields) -> Job:
    period = quota.reserve(org, len(text), 10**9)
    return make_job(org, input=text, quota_period=period, status=Job.Status.RUNNING, attempts=1, **fields)


def run_together(engine, jobs: list[Job]) -> None:
    batcher = Batcher(engine, max_batch=len(jobs), gather_seconds=1.0, chunk_tokens=24)
    threads = [threading.Thread(target=batcher.run, args=(JobRun(job, engine),)) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a job never settled"


def test_a_job_whose_audio_cannot_be_stored_fails_refunded_and_its_companion_succeeds(engine, owner, monkeypatch):
    stored = running_job(owner.org, "This one is stored.", interactive=False)
    lost = running_job(owner.org, "This one hits a full disk.", interactive=False)
    storage = Job._meta.get_field("result").storage
    save = storage.save

    def failing_save(name, content, max_length=None):
        if str(lost.id) in name:
            raise OSError("No space left on device")
        return save(name, content, max_length=max_length)

    monkeypatch.setattr(storage, "save", failing_save)
    run_together(engine, [stored, lost])
    stored.refresh_from_db()
    lost.refresh_from_db()
    assert stored.status == Job.Status.SUCCEEDED and stored.result
    assert lost.status == Job.Status.FAILED and lost.error_code == "storage_unavailable"
    assert "No space" not in lost.error_message  # our error text stays ours
    period = QuotaPeriod.objects.get(organization=owner.org)
    assert (period.used, period.reserved) == (stored.characters, 0)


def test_a_cache_that_cannot_be_written_does_not_fail_the_job(engine, owner, monkeypatch):
    def broken_put(key, pcm):
        raise ConnectionError("Redis went away")

    monkeypatch.setattr(cache, "put", broken_put)
    job = running_job(owner.org, "Seeded and cacheable.", cacheable=True)
    run_together(engine, [job])
    job.refresh_from_db()
    assert job.status == Job.Status.SUCCEEDED and job.cache_key == ""
    assert QuotaPeriod.objects.get(organization=owner.org).used == job.characters


@pytest.fixture(scope="module")
def fixed_length_engine():
    return ChatTTSEngine.load(os.environ["TTS_TEST_CHECKPOINT"], device="cpu", fixed_length=True)


def test_a_job_arriving_while_a_batch_runs_joins_it_and_finishes_first(fixed_length_engine, owner):
    """Continuous batching: a short job that comes while a long one generates does not wait for
    the long one's batch to end; it joins at the next step, and its task is free when it settles."""
    engine = fixed_length_engine
    long_text = "This sentence is long enough to keep the model busy for a good while, on purpose, really."
    long_job = running_job(owner.org, long_text)
    short_job = running_job(owner.org, "Short.")
    batcher = Batcher(engine, max_batch=4, gather_seconds=0.05, chunk_tokens=24)
    settled_at: dict[str, float] = {}

    def run(job: Job) -> None:
        batcher.run(JobRun(job, engine))
        settled_at[job.input] = time.monotonic()

    long_thread = threading.Thread(target=run, args=(long_job,))
    long_thread.start()
    wait_until(lambda: streams.has_audio(long_job.id), 60, "the long job made no audio")
    short_thread = threading.Thread(target=run, args=(short_job,))
    short_thread.start()
    short_thread.join(60)
    assert not short_thread.is_alive(), "the short job waited for the long one's batch"
    assert long_thread.is_alive(), "the long job ended before the short one: nothing was shown"
    long_thread.join(120)
    assert settled_at["Short."] < settled_at[long_text]
    for job in (long_job, short_job):
        job.refresh_from_db()
        assert job.status == Job.Status.SUCCEEDED
