"""Concurrent load through the real stack: requests wait for busy workers instead of failing,
concurrent requests are generated together in one batch, one tenant's burst does not starve
another's request, and identical requests share one generation. Each test runs its own web
process and synthesis worker (on a Redis database of its own) with the settings it needs."""

from __future__ import annotations

import json
import threading
import time

import httpx
import pytest

from billing.models import UsageEvent
from synthesis.models import Job
from tests import stack
from tests.conftest import make_persona
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]


def sentences(count: int) -> str:
    """Many sentences: with fixed-length generation each runs to its token budget, so a job takes
    a while even on the tiny model."""
    return " ".join(f"Sentence number {i} keeps the worker busy for a little while." for i in range(count))


LONG_TEXT = sentences(10)
BURST_TEXT = sentences(5)  # a burst's jobs only need to hold the worker while the other tenant's job arrives


def own_stack(tmp_path, db: int, **env: str):
    return stack.web_and_worker(tmp_path, db, f"load{db}", **env)


def speak_all(base: str, key: str, bodies: list[dict]) -> list[httpx.Response]:
    """The requests sent at the same moment, each from its own thread."""
    results: list[httpx.Response | None] = [None] * len(bodies)
    start = threading.Barrier(len(bodies))

    def one(i: int) -> None:
        start.wait()
        results[i] = httpx.post(
            f"{base}/v1/audio/speech",
            json={"voice": "alloy", "response_format": "pcm", **bodies[i]},
            headers={"Authorization": f"Bearer {key}"},
            timeout=180,
        )

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


def batches(worker) -> list[dict]:
    lines = [json.loads(raw) for raw in worker.output().splitlines() if raw.startswith("{")]
    return [line for line in lines if line.get("msg") == "batch"]


def test_requests_wait_for_a_busy_worker_instead_of_failing(tmp_path):
    """The queue timeout is for dead workers: one that works through a queue longer than it is
    not dead, and every request is answered."""
    org = make_persona("Patient Co", concurrent_jobs=4, requests_per_minute=1000, max_input_chars=4096)
    with own_stack(tmp_path, 11, TTS_QUEUE_TIMEOUT="2", TTS_MAX_BATCH="1", TTS_BENCH_FIXED_LENGTH="1") as (base, _):
        began = time.monotonic()
        responses = speak_all(base, org.key, [{"input": LONG_TEXT + f" Run {i}."} for i in range(3)])
        elapsed = time.monotonic() - began
    assert [r.status_code for r in responses] == [200, 200, 200], [r.text[:200] for r in responses]
    assert all(len(r.content) > 0 for r in responses)
    jobs = list(Job.objects.filter(organization=org.org).order_by("started_at"))
    assert [j.status for j in jobs] == [Job.Status.SUCCEEDED] * 3
    waited = (jobs[-1].started_at - jobs[-1].created_at).total_seconds()
    assert waited > 2, f"the last job waited {waited:.1f} s: the test did not make the worker busy"
    assert elapsed > waited


def test_concurrent_requests_are_generated_in_one_batch_each_with_its_own_voice_and_seed(tmp_path):
    org = make_persona("Batch Co", concurrent_jobs=4, requests_per_minute=1000)
    bodies = [
        {"input": "First of four.", "voice": "alloy", "seed": 1},
        {"input": "Second of four, a little longer.", "voice": "nova", "seed": 2},
        {"input": "Third.", "voice": "echo", "seed": 3, "temperature": 0.7},
        {"input": "Fourth of four.", "voice": "onyx", "seed": 4, "top_k": 5},
    ]
    with own_stack(tmp_path, 12, TTS_MAX_BATCH="4", TTS_BATCH_GATHER_SECONDS="0.5") as (base, worker):
        responses = speak_all(base, org.key, bodies)
        ran = wait_until(lambda: batches(worker), 10, "the worker logged no batch")
    assert [r.status_code for r in responses] == [200] * 4
    assert [r.headers["x-seed"] for r in responses] == ["1", "2", "3", "4"]
    assert len({r.content for r in responses}) == 4  # four different generations
    assert max(b["rows"] for b in ran) >= 2, ran  # generated together, not one after another
    assert UsageEvent.objects.filter(organization=org.org, status="succeeded").count() == 4


def test_one_tenants_burst_does_not_starve_another_tenants_request(tmp_path):
    busy = make_persona("Burst Co", concurrent_jobs=20, requests_per_minute=1000)
    quiet = make_persona("Quiet Co", concurrent_jobs=2, requests_per_minute=1000)
    env = {"TTS_MAX_BATCH": "2", "TTS_BENCH_FIXED_LENGTH": "1", "TTS_BATCH_GATHER_SECONDS": "0.05"}
    with own_stack(tmp_path, 13, **env) as (base, _):
        with httpx.Client(base_url=f"{base}/v1", timeout=60) as client:
            for i in range(8):
                r = client.post(
                    "/jobs",
                    json={"input": BURST_TEXT + f" Burst {i}.", "response_format": "pcm"},
                    headers={"Authorization": f"Bearer {busy.key}"},
                )
                assert r.status_code == 202, r.text
            r = client.post(
                "/jobs",
                json={"input": "Just one, please.", "response_format": "pcm"},
                headers={"Authorization": f"Bearer {quiet.key}"},
            )
            assert r.status_code == 202, r.text
            single = r.json()["id"]
            wait_until(
                lambda: Job.objects.get(pk=single).status == Job.Status.SUCCEEDED, 120, "the single job did not finish"
            )
    theirs = Job.objects.get(pk=single)
    before = Job.objects.filter(organization=busy.org, started_at__lt=theirs.started_at).count()
    # The first batch was already the burst's; the single job comes in the next one.
    assert before <= 2 * 2, f"{before} of the burst's jobs started before the other tenant's one"


def test_identical_requests_share_one_generation_billed_as_cache_hits(live_stack):
    org = make_persona("Echo Co", concurrent_jobs=8, requests_per_minute=1000)
    body = {"input": "Welcome aboard, everybody, at the same time.", "seed": 77}
    responses = speak_all(live_stack.base_url, org.key, [body] * 4)
    assert [r.status_code for r in responses] == [200] * 4
    assert len({r.content for r in responses}) == 1 and responses[0].content
    assert Job.objects.filter(organization=org.org).count() == 1  # one generation for four requests
    assert sorted(r.headers["x-cache"] for r in responses).count("miss") == 1
    events = UsageEvent.objects.filter(organization=org.org)
    assert events.count() == 4
    assert events.filter(cached=True).count() == 3
    assert all(e.characters == len(body["input"]) for e in events)
