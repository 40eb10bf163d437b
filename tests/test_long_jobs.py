"""Long-form jobs on the tiny checkpoint: a text of several thousand characters (beyond what one
speech request may carry) is one job: split into segments with one voice, generated in order with
progress, its quota reserved whole up front, streamed while generating, stored as one file, captioned
per segment, billed once. The plan's job limit; a stream whose start was trimmed says so."""

from __future__ import annotations

import threading
import time

import pytest
from asgiref.sync import async_to_sync

from billing.models import QuotaPeriod, UsageEvent
from inference.chattts.spec import SPEC as CHATTTS
from inference.spec import SAMPLE_RATE
from synthesis.audio import streams
from synthesis.service.feed import JobAudioFeed
from tests.factories import make_job, own_plan
from tts_saas.errors import ApiError

pytestmark = pytest.mark.django_db(transaction=True)

ARTICLE = " ".join(
    f"Paragraph {i} of the article explains one more idea at some length, so that the text runs on." for i in range(40)
)


def test_a_long_text_is_one_job_streamed_stored_and_captioned_in_order(live_stack, owner):
    assert len(ARTICLE) > 3000 and len(CHATTTS.prepare(ARTICLE).segments) >= 16
    with live_stack.client(owner.key) as client:
        refused = client.post("/audio/speech", json={"input": ARTICLE})  # too long for one request
        assert refused.status_code == 400 and refused.json()["error"]["code"] == "string_above_max_length"
        job = client.post("/jobs", json={"input": ARTICLE, "response_format": "pcm", "seed": 9, "voice": "echo"})
        assert job.status_code == 202, job.text
        job = job.json()
        streamed: list[bytes] = []
        reader = threading.Thread(
            target=lambda: streamed.append(
                client.get(f"/jobs/{job['id']}/stream", params={"format": "pcm"}, timeout=300).content
            )
        )
        reader.start()  # follows the job from its start while it is generated
        progress, reserved = [], []
        done, deadline = None, time.monotonic() + 300
        while done is None:
            assert time.monotonic() < deadline, f"the job did not end: {progress[-1:]}"
            time.sleep(0.05)
            held = QuotaPeriod.objects.get(organization=owner.org).reserved  # read before the status:
            seen = client.get(f"/jobs/{job['id']}").json()
            progress.append(seen["progress"])
            if seen["status"] == "running":  # still running then, so not yet settled when `held` was read
                reserved.append(held)
            if seen["status"] in ("succeeded", "failed"):
                done = seen
        reader.join(300)
        stored = client.get(f"/jobs/{job['id']}/audio").content
        captions = client.get(f"/jobs/{job['id']}/captions").json()["segments"]
    assert done["status"] == "succeeded"
    assert progress == sorted(progress) and any(0 < p < 1 for p in progress)  # segment by segment
    assert reserved and set(reserved) == {len(ARTICLE)}  # the whole text reserved up front
    assert streamed == [stored] and done["audio_seconds"] == pytest.approx(len(stored) / 2 / SAMPLE_RATE, abs=1e-3)
    assert [c["text"] for c in captions] == list(CHATTTS.prepare(ARTICLE).segments)  # in order, one per segment
    assert captions[-1]["end"] == pytest.approx(done["audio_seconds"], abs=1e-3)
    (event,) = UsageEvent.objects.filter(organization=owner.org)
    assert event.characters == len(ARTICLE)
    quota = QuotaPeriod.objects.get(organization=owner.org)
    assert (quota.used, quota.reserved) == (len(ARTICLE), 0)


def test_a_job_may_be_as_long_as_the_plan_says(live_stack, owner):
    own_plan(owner.org, "short-jobs", max_job_chars=2_000)
    with live_stack.client(owner.key) as client:
        over = client.post("/jobs", json={"input": "x" * 2_001})
        ceiling = client.post("/jobs", json={"input": "x" * 200_001})
    assert over.status_code == 400 and over.json()["error"]["code"] == "string_above_max_length"
    assert "2000 per job" in over.json()["error"]["message"]
    assert ceiling.status_code == 400 and ceiling.json()["error"]["param"] == "input"


def test_a_reader_whose_start_was_trimmed_from_the_stream_is_told_to_fetch_the_file(live_stack, owner, redis_client):
    job = make_job(owner.org, status="running", interactive=False)
    streams.publish(job.id, "start", model_version="v")
    for seq in range(40):  # a long job's stream keeps its last events only
        streams.publish(job.id, "audio", keep=10, seq=seq, pcm=b"\x00\x00" * 100)
    assert redis_client.xlen(streams.stream_key(job.id)) < 41  # trimmed (Redis trims whole nodes: about)
    with pytest.raises(ApiError) as info:
        async_to_sync(JobAudioFeed(job.id).read_all)()
    assert info.value.status == 410 and info.value.code == "stream_truncated"
    assert f"/v1/jobs/{job.id}/audio" in info.value.message
    with live_stack.client(owner.key) as client:  # said with the status line, before any audio
        late = client.get(f"/jobs/{job.id}/stream", params={"format": "pcm"})
    assert late.status_code == 410 and late.json()["error"]["code"] == "stream_truncated"
