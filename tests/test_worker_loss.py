"""Fault injection: synthesis workers SIGKILLed in the middle of jobs. Every accepted job ends
succeeded (on another worker) or failed and refunded: none lost, none billed twice, no
concurrency slot left behind; the job runs again within 15 s of the kill; a client whose audio
cannot continue is told at once.

The stack: uvicorn, two synthesis workers, and a light worker with beat (which looks for the jobs
of dead workers every few seconds), on their own Redis database.
"""

from __future__ import annotations

import json
import signal
import time
import uuid

import httpx
import pytest

from billing import concurrency
from billing.models import QuotaPeriod, UsageEvent
from synthesis.models import Job
from tests import stack
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

# Sentences enough for a few seconds of generation on the tiny checkpoint (fixed length, two rows
# per batch), so that a kill lands in the middle of the job; no more, for every kill runs it again.
TEXT = " ".join(f"This is sentence number {n} of a long announcement." for n in range(1, 13))
RECOVERY_SECONDS = 15


class Cluster:
    def __init__(self, tmp, redis_client):
        url, self.redis = stack.redis_db(11)
        self.tmp = tmp
        self.env = stack.stack_env(url, TTS_BENCH_FIXED_LENGTH="1", TTS_MAX_BATCH="2")
        self.workers: dict[int, stack.Proc] = {}
        self.started = 0
        self.light = stack.start_worker(
            self.env, tmp, "light", queue="default", extra=("--beat", "--schedule", str(tmp / "beat-schedule"))
        )
        self.web, self.base_url = stack.start_web(self.env, tmp)

    def ensure_workers(self, count: int) -> None:
        for pid, proc in list(self.workers.items()):
            if proc.popen.poll() is not None:
                del self.workers[pid]
        while len(self.workers) < count:
            self.started += 1
            proc = stack.start_worker(self.env, self.tmp, f"tts{self.started}")
            self.workers[proc.popen.pid] = proc
        stack.wait_for_workers(self.redis, "ready", count=count, timeout=120)

    def kill_worker_of(self, job: Job) -> str:
        """SIGKILL the worker process running `job`; returns its registry name."""
        pid = int(job.worker.split(":")[1])
        self.workers.pop(pid).stop(signal.SIGKILL)
        return job.worker

    def stop(self) -> None:
        for proc in [self.web, self.light, *self.workers.values()]:
            proc.stop()


@pytest.fixture(scope="module")
def cluster(django_db_setup, django_db_blocker, tmp_path_factory, redis_client):
    c = Cluster(tmp_path_factory.mktemp("loss"), redis_client)
    try:
        yield c
    finally:
        c.stop()


def running_on_a_worker(job_id, not_on: str = "") -> Job | None:
    job = Job.objects.get(pk=job_id)
    return job if job.status == Job.Status.RUNNING and job.worker and job.worker != not_on else None


def submit(cluster: Cluster, key: str) -> str:
    response = httpx.post(
        f"{cluster.base_url}/v1/jobs",
        json={"input": TEXT, "voice": "nova", "response_format": "pcm", "seed": 7},
        headers={"Authorization": f"Bearer {key}"},
        timeout=30,
    )
    assert response.status_code == 202, response.text
    return response.json()["id"]


def billed_once(org, job: Job) -> None:
    quota = QuotaPeriod.objects.get(organization=org)
    assert (quota.used, quota.reserved) == (job.characters, 0)
    assert UsageEvent.objects.filter(job_id=job.id).count() == 1


def refunded(org, job: Job) -> None:
    quota = QuotaPeriod.objects.get(organization=org)
    assert (quota.used, quota.reserved) == (0, 0)
    (event,) = UsageEvent.objects.filter(job_id=job.id)
    assert event.characters == 0


def test_a_job_whose_worker_is_killed_runs_again_on_another_within_15_s_and_is_billed_once(cluster, owner):
    cluster.ensure_workers(2)
    job_id = submit(cluster, owner.key)
    job = wait_until(lambda: running_on_a_worker(job_id), 30, "the job never started")
    wait_until(lambda: Job.objects.get(pk=job_id).progress > 0, 30, "the job made no progress")
    dead = cluster.kill_worker_of(job)
    killed_at = time.monotonic()
    wait_until(lambda: running_on_a_worker(job_id, not_on=dead), RECOVERY_SECONDS, "the job was not run again")
    recovered = time.monotonic() - killed_at
    job = wait_until(lambda: Job.objects.filter(pk=job_id, status__in=Job.FINAL).first(), 120, "the job never finished")
    assert job.status == Job.Status.SUCCEEDED, job.error_message
    assert job.attempts == 2 and job.worker != dead
    print(f"kill -> running on a live worker: {recovered:.1f} s")
    billed_once(owner.org, job)
    assert concurrency.in_flight(owner.org.pk) == 0
    audio = httpx.get(
        f"{cluster.base_url}/v1/jobs/{job_id}/audio", headers={"Authorization": f"Bearer {owner.key}"}, timeout=30
    )
    assert audio.status_code == 200 and len(audio.content) == round(job.audio_seconds * 24000) * 2


def test_a_live_stream_cut_by_a_killed_worker_breaks_at_once_and_a_retry_with_its_key_gets_all_the_audio(
    cluster, owner
):
    cluster.ensure_workers(2)
    headers = {"Authorization": f"Bearer {owner.key}", "Idempotency-Key": str(uuid.uuid4())}
    body = {"input": TEXT, "voice": "echo", "response_format": "pcm", "seed": 11}
    received = 0
    with pytest.raises(httpx.RemoteProtocolError):  # the body ends without its final chunk
        with httpx.stream(
            "POST", f"{cluster.base_url}/v1/audio/speech", json=body, headers=headers, timeout=60
        ) as response:
            assert response.status_code == 200
            for chunk in response.iter_raw():
                if not received:
                    job = Job.objects.get(organization=owner.org)
                    cluster.kill_worker_of(job)
                    killed_at = time.monotonic()
                received += len(chunk)
    told_after = time.monotonic() - killed_at
    assert received > 0
    assert told_after <= RECOVERY_SECONDS
    retry = httpx.post(f"{cluster.base_url}/v1/audio/speech", json=body, headers=headers, timeout=120)
    assert retry.status_code == 200
    job = Job.objects.get(organization=owner.org)  # the same job, not a second one
    assert job.status == Job.Status.SUCCEEDED and job.attempts == 2
    assert len(retry.content) == round(job.audio_seconds * 24000) * 2 > received
    billed_once(owner.org, job)
    assert concurrency.in_flight(owner.org.pk) == 0


def test_a_job_that_takes_down_two_workers_fails_refunded_and_its_follower_is_told(cluster, owner):
    cluster.ensure_workers(2)
    job_id = submit(cluster, owner.key)
    job = wait_until(lambda: running_on_a_worker(job_id), 30, "the job never started")
    first = cluster.kill_worker_of(job)
    job = wait_until(lambda: running_on_a_worker(job_id, not_on=first), RECOVERY_SECONDS, "not run again")
    with httpx.stream(
        "GET",
        f"{cluster.base_url}/v1/jobs/{job_id}/stream?stream_format=sse",
        headers={"Authorization": f"Bearer {owner.key}"},
        timeout=60,
    ) as follow:
        assert follow.status_code == 200
        cluster.kill_worker_of(job)
        events = [json.loads(line[6:]) for line in follow.iter_lines() if line.startswith("data: ")]
    assert events[-1]["type"] == "error" and events[-1]["error"]["code"] == "worker_lost"
    job.refresh_from_db()
    assert job.status == Job.Status.FAILED and job.error_code == "worker_lost" and job.attempts == 2
    refunded(owner.org, job)
    assert concurrency.in_flight(owner.org.pk) == 0
