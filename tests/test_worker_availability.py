"""When no worker can synthesise, requests fail fast with 503 and a clear message, never hang;
a worker whose model is missing says so at start."""

from __future__ import annotations

import os
import shutil
import signal
import time

import httpx
import pytest
import redis

from billing import concurrency
from billing.models import QuotaPeriod
from synthesis.models import Job
from tests import stack
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)


def queued_tasks(client: redis.Redis) -> int:
    """Task messages waiting in the broker's `tts` queue (one Redis list per priority)."""
    lists = [k for k in client.scan_iter(match="tts*") if not k.startswith(b"tts:") and client.type(k) == b"list"]
    return sum(client.llen(k) for k in lists)


def speak(base_url: str, key: str, text: str):
    started = time.monotonic()
    response = httpx.post(
        f"{base_url}/v1/audio/speech",
        json={"input": text, "voice": "alloy", "response_format": "pcm"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=60,
    )
    return response, time.monotonic() - started


def test_no_worker_running_is_503_at_once(owner, tmp_path):
    url, _ = stack.redis_db(7)
    web, base = stack.start_web(stack.stack_env(url), tmp_path)
    try:
        response, elapsed = speak(base, owner.key, "Is anybody there?")
    finally:
        web.stop()
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "worker_unavailable"
    assert response.headers["retry-after"]
    assert elapsed < 5
    assert Job.objects.count() == 0  # nothing was queued for nobody


def test_a_dead_worker_gives_503_within_the_queue_timeout_and_the_job_never_runs(owner, tmp_path):
    url, client = stack.redis_db(8)
    env = stack.stack_env(url, TTS_QUEUE_TIMEOUT="3")
    worker = stack.start_worker(env, tmp_path, "doomed")
    web, base = stack.start_web(env, tmp_path)
    try:
        stack.wait_for_workers(client, "ready", proc=worker)
        worker.stop(signal.SIGKILL)  # its registration outlives it until the heartbeat TTL
        response, elapsed = speak(base, owner.key, "Hello?")
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "worker_unavailable"
        assert "3 s" in response.json()["error"]["message"]
        assert 3 <= elapsed < 10
        job = Job.objects.get()
        assert job.status == Job.Status.EXPIRED
        quota = QuotaPeriod.objects.get(organization=owner.org)
        assert (quota.used, quota.reserved) == (0, 0)  # the expired job was refunded
        assert concurrency.in_flight(owner.org.pk) == 0
        # A worker that comes back later must not run what the client already gave up on: its
        # task still waits in the broker, and the revived worker takes it and drops it.
        assert queued_tasks(client) == 1
        revived = stack.start_worker(env, tmp_path, "revived")
        stack.wait_for_workers(client, "ready", count=1, proc=revived)
        wait_until(
            lambda: (
                "synthesis.tasks.synthesize_job[" in revived.output()
                and queued_tasks(client) == 0
                and client.hlen("unacked") == 0
            ),
            30,
            lambda: f"the revived worker did not take the task\n{revived.output()[-3000:]}",
        )
        job.refresh_from_db()
        assert job.status == Job.Status.EXPIRED and job.started_at is None
        revived.stop()
    finally:
        web.stop()
        worker.stop()


def test_a_worker_without_its_model_directory_stops_at_start_with_a_clear_error(tmp_path):
    url, _ = stack.redis_db(9)
    worker = stack.start_worker(stack.stack_env(url, TTS_MODEL_DIR=str(tmp_path / "missing")), tmp_path, "nomodel")
    try:
        worker.popen.wait(60)
    finally:
        worker.stop()
    assert worker.popen.returncode != 0
    assert "does not exist" in worker.output()
    assert "Traceback" not in worker.output()


def test_a_corrupt_checkpoint_gives_503_naming_the_problem(owner, tmp_path):
    model = tmp_path / "model"
    shutil.copytree(os.environ["TTS_TEST_CHECKPOINT"], model)
    decoder = model / "asset" / "Decoder.safetensors"
    data = bytearray(decoder.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit: the SHA-256 check must catch it
    decoder.write_bytes(bytes(data))
    url, client = stack.redis_db(10)
    env = stack.stack_env(url, TTS_MODEL_DIR=str(model))
    worker = stack.start_worker(env, tmp_path, "corrupt")
    web, base = stack.start_web(env, tmp_path)
    try:
        stack.wait_for_workers(client, "unavailable", proc=worker)
        response, elapsed = speak(base, owner.key, "Are you well?")
    finally:
        web.stop()
        worker.stop()
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "model_unavailable"
    assert "SHA-256" in error["message"]
    assert elapsed < 5
