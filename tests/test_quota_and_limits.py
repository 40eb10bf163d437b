"""Quota, rate limit and concurrency cap under concurrent bursts from several processes, and the
ledger that bills them. Quotas are money: exactly N succeed, never N+1, and every character
billed is a ledger row."""

from __future__ import annotations

import json
import math
import time
from datetime import timedelta

import httpx
import pytest
from django.db.models import Sum
from django.utils import timezone

from billing import concurrency
from billing import quota as quota_module
from billing.models import QuotaPeriod, UsageEvent
from synthesis.models import Job
from synthesis.service.maintenance import reap_stale_jobs
from tests import stack
from tests.bursts import burst, tally
from tests.conftest import make_persona
from tests.factories import make_job
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Quota burst, ten words of text to bill exactly here."


def ledger_total(org) -> int:
    return UsageEvent.objects.filter(organization=org).aggregate(s=Sum("characters"))["s"] or 0


def test_a_burst_never_exceeds_the_quota_and_refuses_nothing_that_fits(live_stack):
    org = make_persona("Quota Co", monthly_characters=5 * len(TEXT), requests_per_minute=1000, concurrent_jobs=50)
    bodies = [{"input": TEXT, "voice": "alloy", "seed": i % 3, "response_format": "pcm"} for i in range(12)]
    results = burst("POST", f"{live_stack.base_url}/v1/audio/speech", org.key, bodies)
    assert tally(results) == {(200, ""): 5, (429, "insufficient_quota"): 7}
    quota = QuotaPeriod.objects.get(organization=org.org)
    assert quota.used == 5 * len(TEXT) and quota.reserved == 0
    assert ledger_total(org.org) == quota.used
    assert UsageEvent.objects.filter(organization=org.org, status="succeeded").count() == 5
    with live_stack.client(org.key) as client:
        usage = client.get("/usage").json()
        sub = client.get("/subscription").json()
        refused = client.post("/audio/speech", json={"input": "x"})
    assert usage["total"]["characters"] == quota.used and usage["total"]["requests"] == 5
    assert sub["character_count"] == quota.used and sub["character_limit"] == 5 * len(TEXT)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "insufficient_quota" and sub["next_character_count_reset"][:10] in error["message"]


def test_a_burst_is_held_to_the_rate_limit_with_headers(live_stack):
    org = make_persona("Rate Co", requests_per_minute=5)
    url = f"{live_stack.base_url}/v1/voices"
    probe = httpx.get(url, headers={"Authorization": f"Bearer {org.key}"})
    answered = time.time()  # the server counted the probe before this
    assert probe.status_code == 200
    assert probe.headers["x-ratelimit-limit-requests"] == "5"
    assert probe.headers["x-ratelimit-remaining-requests"] == "4"
    reset = int(probe.headers["x-ratelimit-reset-requests"].rstrip("s"))
    if reset < 8:  # too close to the end of the window for the burst to stay inside it
        # The window ends on a whole second at most `reset` s after the probe was counted and the
        # next opens one second later. No request can observe that without spending one of the
        # five, so wait for the clock, then check that the window is fresh.
        closes = answered + reset + 1
        wait_until(lambda: time.time() >= closes, reset + 5, "the rate-limit window did not close")
        fresh = httpx.get(url, headers={"Authorization": f"Bearer {org.key}"})
        assert fresh.status_code == 200
        assert fresh.headers["x-ratelimit-remaining-requests"] == "4"  # a new window, one request in
        assert int(fresh.headers["x-ratelimit-reset-requests"].rstrip("s")) >= 8
    results = burst("GET", url, org.key, [None] * 12)
    assert tally(results) == {(200, ""): 4, (429, "rate_limit_exceeded"): 8}
    assert all(int(r["retry_after"]) >= 1 for r in results if r["status"] == 429)
    assert sorted(int(r["remaining"]) for r in results) == [0] * 8 + [0, 1, 2, 3]


def test_a_burst_is_held_to_the_concurrency_cap(live_stack):
    org = make_persona("Busy Co", concurrent_jobs=2, requests_per_minute=1000, max_input_chars=4096)
    text = " ".join(f"Sentence number {i} keeps the worker busy for a while." for i in range(12))
    bodies = [{"input": text + f" Run {i}.", "voice": "alloy", "response_format": "pcm"} for i in range(6)]
    results = burst("POST", f"{live_stack.base_url}/v1/audio/speech", org.key, bodies)
    assert tally(results) == {(200, ""): 2, (429, "too_many_concurrent_requests"): 4}
    refused = [r for r in results if r["status"] == 429]
    assert max(r["seconds"] for r in refused) < min(r["seconds"] for r in results if r["status"] == 200)
    assert concurrency.in_flight(org.org.pk) == 0  # both slots were given back
    assert QuotaPeriod.objects.get(organization=org.org).reserved == 0  # refused requests reserved nothing


def test_a_failing_synthesis_refunds_its_reservation(owner, tmp_path):
    # A real failure: a worker whose soft time limit (1 s) is shorter than the job.
    url, client = stack.redis_db(11)
    env = stack.stack_env(url, TTS_TASK_SOFT_TIME_LIMIT="1", TTS_TASK_TIME_LIMIT="20", TTS_BENCH_FIXED_LENGTH="1")
    worker = stack.start_worker(env, tmp_path, "slow")
    web, base = stack.start_web(env, tmp_path)
    text = " ".join(f"This sentence number {i} is long enough to take a while." for i in range(8))
    try:
        stack.wait_for_workers(client, "ready", proc=worker)
        response = httpx.post(
            f"{base}/v1/audio/speech",
            headers={"Authorization": f"Bearer {owner.key}"},
            json={"input": text, "voice": "alloy", "response_format": "pcm", "stream_format": "sse"},
            timeout=60,
        )
    finally:
        web.stop()
        worker.stop()
    # Audio had started to stream (status 200) when the limit struck: the stream says why it ends.
    assert response.status_code == 200
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[0]["type"] == "speech.audio.delta"
    assert events[-1]["type"] == "error" and events[-1]["error"]["code"] == "synthesis_timeout"
    quota = QuotaPeriod.objects.get(organization=owner.org)
    assert (quota.used, quota.reserved) == (0, 0)
    event = UsageEvent.objects.get(organization=owner.org)
    assert event.status == "failed" and event.characters == 0
    assert Job.objects.get().status == Job.Status.FAILED
    assert concurrency.in_flight(owner.org.pk) == 0


def test_usage_groups_by_day_by_key_and_by_model_and_matches_the_ledger(live_stack, owner):
    _, second_key = owner.org.create_api_key("second")
    for key, text in ((owner.key, "First key speaks."), (second_key, "Second key speaks, longer.")):
        with live_stack.client(key) as client:
            body = {"input": text, "seed": 1, "response_format": "pcm"}
            assert client.post("/audio/speech", json=body).status_code == 200
    with live_stack.client(owner.key) as client:
        kokoro = {"model": "kokoro", "input": "Kokoro speaks.", "voice": "af_heart", "response_format": "pcm"}
        assert client.post("/audio/speech", json=kokoro).status_code == 200
        by_day = client.get("/usage", params={"group_by": "day"}).json()
        by_key = client.get("/usage", params={"group_by": "key"}).json()
        by_model = client.get("/usage", params={"group_by": "model"}).json()
        bad = client.get("/usage", params={"start": "2026-13-01"})
        reversed_range = client.get("/usage", params={"start": "2026-05-02", "end": "2026-05-01"})
    total = ledger_total(owner.org)
    kokoro_billed = math.ceil(len("Kokoro speaks.") * 0.5)  # the seeded plans' weight for Kokoro
    assert total == len("First key speaks.") + len("Second key speaks, longer.") + kokoro_billed
    assert by_day["total"]["characters"] == total == sum(d["characters"] for d in by_day["data"])
    assert {r["key_name"]: r["characters"] for r in by_key["data"]} == {
        "Acme key": len("First key speaks.") + kokoro_billed,
        "second": len("Second key speaks, longer."),
    }
    assert {r["model"]: (r["characters"], r["requests"]) for r in by_model["data"]} == {
        "chattts": (len("First key speaks.") + len("Second key speaks, longer."), 2),
        "kokoro": (kokoro_billed, 1),
    }
    assert bad.status_code == reversed_range.status_code == 400


def test_jobs_of_a_dead_worker_are_settled_and_refunded_by_the_reaper(owner):
    period = quota_module.reserve(owner.org, 30, 10_000)
    quota_module.reserve(owner.org, 20, 10_000)
    long_ago = timezone.now() - timedelta(hours=2)
    lost = make_job(
        owner.org,
        input="x" * 30,
        status=Job.Status.RUNNING,
        started_at=long_ago,
        created_at=long_ago,
        quota_period=period,
    )
    never_taken = make_job(owner.org, input="y" * 20, created_at=long_ago, quota_period=period)
    assert reap_stale_jobs() == {"lost": 1, "expired": 1}
    assert reap_stale_jobs() == {"lost": 0, "expired": 0}  # settled once, never twice
    lost.refresh_from_db()
    never_taken.refresh_from_db()
    assert (lost.status, lost.error_code) == (Job.Status.FAILED, "worker_lost")
    assert never_taken.status == Job.Status.EXPIRED
    row = QuotaPeriod.objects.get(organization=owner.org)
    assert (row.used, row.reserved) == (0, 0)


def test_a_client_sent_request_id_cannot_share_a_concurrency_slot(tmp_path):
    """Slots are leased under the server's own ids: sending the same X-Request-ID twice does not
    let an organization capped at one job run two. A web process with no worker keeps the first
    job queued, so its slot is certainly held when the second arrives: the second waits for it
    (accepted, holding no slot, on no engine's queue) rather than sharing it."""
    org = make_persona("One At A Time", concurrent_jobs=1, requests_per_minute=1000)
    url, _ = stack.redis_db(15)
    web, base = stack.start_web(stack.stack_env(url), tmp_path)
    headers = {"Authorization": f"Bearer {org.key}", "X-Request-ID": "same-id-twice"}
    try:
        with httpx.Client(base_url=f"{base}/v1", headers=headers, timeout=60) as client:
            first = client.post("/jobs", json={"input": "The first job.", "response_format": "pcm"})
            second = client.post("/jobs", json={"input": "The second job.", "response_format": "pcm"})
    finally:
        web.stop()
    assert first.status_code == second.status_code == 202, (first.text, second.text)
    holding, waiting = Job.objects.get(pk=first.json()["id"]), Job.objects.get(pk=second.json()["id"])
    assert holding.status == waiting.status == Job.Status.QUEUED
    assert holding.lease and not waiting.lease  # one slot, held by the first: the second waits its turn
