"""Asynchronous jobs: 202 at once, status, stored audio, late readers, cancel with refund,
idempotency, signed callbacks with retries, tenant isolation."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from datetime import timedelta

import httpx
import pytest
import websockets
from django.utils import timezone
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from billing.models import QuotaPeriod, UsageEvent
from inference.spec import SAMPLE_RATE
from synthesis.models import Job
from synthesis.service import callbacks
from synthesis.service.maintenance import delete_old_jobs
from tests.conftest import make_persona
from tests.factories import make_job
from tests.receiver import Receiver
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

LONG = " ".join(f"Paragraph sentence number {i} goes on for a little while longer." for i in range(40))


def wait_for(client, job_id: str, statuses: set[str], timeout: float = 120) -> dict:
    """Poll the job until its status is one of `statuses`; the job as last seen."""
    last: dict = {}  # nothing yet: the deadline may pass before the first answer

    def reached() -> dict | None:
        last["job"] = client.get(f"/jobs/{job_id}").json()
        return last["job"] if last["job"].get("status") in statuses else None

    return wait_until(reached, timeout, lambda: f"job {job_id} is {last.get('job')}, not in {sorted(statuses)}")


def test_a_job_is_accepted_at_once_and_its_audio_is_stored(live_stack, owner):
    with live_stack.client(owner.key) as client:
        started = time.monotonic()
        created = client.post("/jobs", json={"input": "An article, read later.", "response_format": "pcm", "seed": 4})
        assert created.status_code == 202, created.text
        assert time.monotonic() - started < 2
        job = created.json()
        assert job["status"] in ("queued", "running") and job["urls"]["audio"] == f"/v1/jobs/{job['id']}/audio"
        done = wait_for(client, job["id"], {"succeeded", "failed"})
        assert done["status"] == "succeeded" and done["progress"] == 1.0
        audio = client.get(f"/jobs/{job['id']}/audio")
        assert audio.status_code == 200 and audio.headers["content-type"] == "audio/pcm"
        assert done["audio_seconds"] == pytest.approx(len(audio.content) / 2 / SAMPLE_RATE, abs=1e-3)
        listed = client.get("/jobs", params={"status": "succeeded"}).json()
        assert [j["id"] for j in listed["data"]] == [job["id"]] and listed["has_more"] is False
    assert UsageEvent.objects.get(job_id=job["id"]).characters == len("An article, read later.")


def test_a_reader_attaching_after_the_end_still_gets_every_chunk_in_order(live_stack, owner):
    text = "First sentence here. Second sentence there. Third one to end."
    with live_stack.client(owner.key) as client:
        job = client.post("/jobs", json={"input": text, "response_format": "pcm", "seed": 8}).json()
        wait_for(client, job["id"], {"succeeded"})
        stored = client.get(f"/jobs/{job['id']}/audio").content
        replay = client.get(f"/jobs/{job['id']}/stream", params={"format": "pcm"})
        again = client.get(f"/jobs/{job['id']}/stream", params={"format": "pcm"})
    assert replay.status_code == 200
    assert replay.content == stored == again.content  # every chunk, in order, any number of times


@pytest.mark.parametrize("status", [Job.Status.QUEUED, Job.Status.RUNNING])
def test_audio_of_an_unfinished_job_is_409(client, owner, status):
    job = make_job(owner.org, status=status)  # no task was queued for it: it stays unfinished
    response = client.get(f"/v1/jobs/{job.id}/audio", HTTP_AUTHORIZATION=f"Bearer {owner.key}")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "job_not_ready"
    assert f"The job is {status}" in response.json()["error"]["message"]


def test_cancel_mid_generation_stops_the_worker_and_refunds_the_unused_part(live_stack):
    org = make_persona("Canceller", max_input_chars=4096, monthly_characters=100_000, requests_per_minute=6000)
    text = " ".join([LONG] * 3)  # ~8,000 characters: far more than can be generated before the cancel lands
    with live_stack.client(org.key) as client:
        job = client.post("/jobs", json={"input": text, "response_format": "pcm"}).json()

        def progressing() -> dict | None:
            seen = client.get(f"/jobs/{job['id']}").json()
            return seen if seen["progress"] > 0 or seen["status"] in Job.FINAL else None

        running = wait_until(progressing, 60, "the job made no progress", interval=0.02)
        assert running["status"] == "running" and 0 < running["progress"] < 1
        cancelled = client.post(f"/jobs/{job['id']}/cancel")
        assert cancelled.status_code == 202
        final = wait_for(client, job["id"], {"cancelled", "succeeded", "failed"}, timeout=60)
    assert final["status"] == "cancelled"
    assert 0.0 < final["progress"] < 1.0  # some segments were done when the cancel arrived
    event = UsageEvent.objects.get(job_id=job["id"])
    # Billed: the input's share of the segments done when the worker stopped, nothing more.
    assert event.status == "cancelled"
    assert event.characters == int(len(text) * final["progress"] + 1e-9) and 0 < event.characters < len(text)
    quota = QuotaPeriod.objects.get(organization=org.org)
    assert (quota.used, quota.reserved) == (event.characters, 0)


def ledger_and_quota(org) -> tuple[list[tuple], list[tuple]]:
    """The organization's ledger rows and quota counters, to compare before and after."""
    ledger = UsageEvent.objects.filter(organization=org).order_by("pk")
    quota = QuotaPeriod.objects.filter(organization=org).order_by("period_start")
    return (
        list(ledger.values_list("job_id", "characters", "status", "created_at")),
        list(quota.values_list("period_start", "used", "reserved")),
    )


def test_cancelling_a_finished_job_changes_nothing(live_stack, owner):
    with live_stack.client(owner.key) as client:
        job = client.post("/jobs", json={"input": "Done already.", "seed": 1}).json()
        done = wait_for(client, job["id"], {"succeeded"})
        before = ledger_and_quota(owner.org)
        cancelled = client.post(f"/jobs/{job['id']}/cancel").json()
        after = client.get(f"/jobs/{job['id']}").json()
    assert cancelled["status"] == after["status"] == "succeeded"
    assert (after["progress"], after["characters"], after["finished_at"]) == (
        done["progress"],
        done["characters"],
        done["finished_at"],
    )
    ledger, quota = before
    assert [row[:3] for row in ledger] == [(uuid.UUID(job["id"]), len("Done already."), "succeeded")]
    assert [row[1:] for row in quota] == [(len("Done already."), 0)]
    assert ledger_and_quota(owner.org) == before  # nothing refunded, nothing billed again


def test_an_idempotency_key_returns_the_same_job_and_bills_once(live_stack, owner):
    body = {"input": "Exactly once, please.", "seed": 2}
    headers = {"Idempotency-Key": "order-42"}
    with live_stack.client(owner.key) as client:
        first = client.post("/jobs", json=body, headers=headers)
        second = client.post("/jobs", json=body, headers=headers)
        other = client.post("/jobs", json={**body, "input": "Something else."}, headers=headers)
        wait_for(client, first.json()["id"], {"succeeded"})
    assert first.json()["id"] == second.json()["id"]
    assert second.headers["idempotent-replayed"] == "true"
    assert other.status_code == 409 and other.json()["error"]["code"] == "idempotency_key_reused"
    assert Job.objects.filter(organization=owner.org).count() == 1
    assert QuotaPeriod.objects.get(organization=owner.org).used == len(body["input"])


def test_a_signed_callback_arrives_and_a_failing_receiver_is_retried(live_stack, owner):
    receiver = Receiver(failures=1)
    try:
        with live_stack.client(owner.key) as client:
            job = client.post("/jobs", json={"input": "Call me back.", "seed": 3, "callback_url": receiver.url}).json()
            receiver.wait(2)

            # The worker records an attempt on the job after the receiver has answered it.
            def both_recorded() -> list | None:
                attempts = client.get(f"/jobs/{job['id']}").json()["callback_attempts"]
                return attempts if len(attempts) >= 2 else None

            attempts = wait_until(both_recorded, 30, "the second delivery was not recorded on the job")
    finally:
        receiver.server.shutdown()
    secret = type(owner.org).objects.get(pk=owner.org.pk).webhook_secret
    for headers, body in receiver.deliveries:
        assert Webhook(secret).verify(body, headers)
        with pytest.raises(WebhookVerificationError):
            Webhook(secret).verify(body + b" ", headers)
        assert json.loads(body)["job"] == {**json.loads(body)["job"], "id": job["id"], "status": "succeeded"}
    assert len({headers["webhook-id"] for headers, _ in receiver.deliveries}) == 1  # a retry is the same message
    assert [a["status"] for a in attempts] == [500, 200]


def test_a_callback_url_to_a_private_address_is_refused_by_default(settings):
    settings.TTS_CALLBACK_ALLOW_PRIVATE = False
    assert callbacks.url_problem("http://127.0.0.1:9/hook")
    assert callbacks.url_problem("ftp://example.com/x")


def test_an_outsider_gets_404_for_every_job_endpoint(live_stack, owner, outsider):
    with live_stack.client(owner.key) as client:
        job = client.post("/jobs", json={"input": "Mine.", "seed": 5}).json()
        wait_for(client, job["id"], {"succeeded"})
    with live_stack.client(outsider.key) as client:
        for response in (
            client.get(f"/jobs/{job['id']}"),
            client.get(f"/jobs/{job['id']}/audio"),
            client.get(f"/jobs/{job['id']}/stream"),
            client.post(f"/jobs/{job['id']}/cancel"),
        ):
            assert response.status_code == 404
            assert response.json()["error"]["type"] == "not_found_error"
        assert client.get("/jobs").json()["data"] == []


def test_finished_jobs_and_their_audio_expire_after_the_retention_period(live_stack, owner, settings):
    with live_stack.client(owner.key) as client:
        job = client.post("/jobs", json={"input": "Short lived.", "seed": 6}).json()
        wait_for(client, job["id"], {"succeeded"})
    stored = Job.objects.get(pk=job["id"])
    path = stored.result.path
    assert delete_old_jobs() == 0  # still within retention
    Job.objects.filter(pk=job["id"]).update(
        finished_at=timezone.now() - timedelta(hours=settings.TTS_JOB_RETENTION_HOURS + 1)
    )
    assert delete_old_jobs() == 1
    assert not Job.objects.filter(pk=job["id"]).exists()
    assert not os.path.exists(path)
    assert UsageEvent.objects.filter(job_id=job["id"]).exists()  # the ledger is kept


def test_a_websocket_can_follow_an_async_job(live_stack, owner):
    with live_stack.client(owner.key) as client:
        job = client.post("/jobs", json={"input": "Follow me.", "response_format": "pcm", "seed": 12}).json()
        wait_for(client, job["id"], {"succeeded"})
        stored = client.get(f"/jobs/{job['id']}/audio").content

    async def go():
        url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {owner.key}"}) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "follow", "id": "f", "job_id": job["id"]}))
            audio = b""
            while True:
                frame = await asyncio.wait_for(ws.recv(), 30)
                if isinstance(frame, bytes):
                    audio += frame
                elif json.loads(frame)["type"] in ("end", "error"):
                    return audio, json.loads(frame)

    audio, end = asyncio.run(go())
    assert end["type"] == "end" and audio == stored


def test_a_follower_leaving_early_does_not_cancel_the_job(live_stack, owner):
    text = " ".join(f"Sentence {i} for a follower who leaves." for i in range(10))
    with live_stack.client(owner.key) as client:
        job = client.post("/jobs", json={"input": text, "response_format": "pcm", "seed": 2}).json()
        headers = {"Authorization": f"Bearer {owner.key}"}
        with httpx.stream("GET", f"{live_stack.base_url}/v1/jobs/{job['id']}/stream", headers=headers, timeout=60) as r:
            assert r.status_code == 200
            next(r.iter_raw())  # some audio, then the follower hangs up
        final = wait_for(client, job["id"], {"succeeded", "failed", "cancelled"})
    assert final["status"] == "succeeded"


def test_a_job_beyond_the_plans_concurrency_waits_its_turn_and_runs_when_the_first_ends(live_stack):
    org = make_persona(
        "One At A Time", concurrent_jobs=1, max_input_chars=4096, monthly_characters=100_000, requests_per_minute=6000
    )
    speak = {"model": "kokoro", "voice": "af_heart", "response_format": "pcm"}
    with live_stack.client(org.key) as client:
        first = client.post("/jobs", json={**speak, "input": LONG[:300]})  # holds the one slot while it runs
        second = client.post("/jobs", json={**speak, "input": "Second in line."})
        live = client.post("/audio/speech", json={**speak, "input": "Now, please."})
        assert first.status_code == second.status_code == 202, (first.text, second.text)
        assert client.get(f"/jobs/{second.json()['id']}").json()["status"] == "queued"  # waiting, not refused
        ends = [
            wait_for(client, made.json()["id"], {"succeeded", "failed", "cancelled"}, 300) for made in (first, second)
        ]
        audio = client.get(f"/jobs/{second.json()['id']}/audio")
    assert live.status_code == 429 and live.json()["error"]["code"] == "too_many_concurrent_requests"
    assert [end["status"] for end in ends] == ["succeeded", "succeeded"]
    assert audio.status_code == 200 and len(audio.content) > 0
    first_job, second_job = Job.objects.get(pk=first.json()["id"]), Job.objects.get(pk=second.json()["id"])
    assert second_job.started_at >= first_job.finished_at  # its turn came when the first one's slot freed
    events = UsageEvent.objects.filter(organization=org.org).order_by("pk")
    assert sorted(e.characters for e in events) == sorted([first_job.characters, second_job.characters])  # each once
    quota = QuotaPeriod.objects.get(organization=org.org)
    assert (quota.used, quota.reserved) == (first_job.characters + second_job.characters, 0)
