"""Captions: each sentence segment's text with its start and end, taken from the generated audio
(exact at segment level; ChatTTS gives no word timings). Through the live stack: a job's captions as
JSON, SRT and WebVTT; `speech.audio.segment` SSE events as segments finish, the same on a cache hit;
the WebSocket `end` message's segments; errors and tenant isolation."""

from __future__ import annotations

import asyncio
import base64
import json
import re

import numpy as np
import pytest
import websockets

from inference.chattts.spec import SPEC as CHATTTS
from inference.engine import PAUSE_SECONDS
from inference.spec import SAMPLE_RATE
from tests.factories import make_job
from tests.test_jobs import wait_for
from tests.test_websocket import collect

pytestmark = pytest.mark.django_db(transaction=True)

# Each sentence is long enough (~100 characters) to be a segment of its own: four cues.
SENTENCES = [
    "The first sentence of this caption test is here, long enough to stand alone as one segment.",
    "A second sentence follows it with other words, so that the captions have more than one cue.",
    "Then a third sentence & its <ampersand>, which WebVTT must escape in the cue text it returns.",
    "And the fourth and last sentence closes the text, after which the captions end with the audio.",
]
TEXT = " ".join(SENTENCES)


def samples(seconds: float) -> int:
    return round(seconds * SAMPLE_RATE)


def check_against_audio(segments: list[dict], pcm: bytes) -> None:
    """The cues are the segments in order; each starts where its audio starts (after the pause
    between two) and ends where it ends; the pauses are silent and the speech is not."""
    audio = np.frombuffer(pcm, dtype="<i2")
    assert [s["text"] for s in segments] == SENTENCES == list(CHATTTS.prepare(TEXT).segments)
    assert segments[0]["start"] == 0.0
    assert segments[-1]["end"] == pytest.approx(len(audio) / SAMPLE_RATE, abs=1e-3)
    for before, after in zip(segments, segments[1:], strict=False):
        assert after["start"] - before["end"] == pytest.approx(PAUSE_SECONDS, abs=1e-3)
        ms = SAMPLE_RATE // 1000  # times are in whole milliseconds
        assert not audio[samples(before["end"]) + ms : samples(after["start"]) - ms].any()  # the pause
    for s in segments:
        assert s["end"] > s["start"]
        assert np.abs(audio[samples(s["start"]) : samples(s["end"])]).max() > 100  # noise, not silence


def test_a_jobs_captions_in_json_srt_and_vtt_match_its_audio(live_stack, owner):
    with live_stack.client(owner.key) as client:
        job = client.post("/jobs", json={"input": TEXT, "response_format": "pcm", "seed": 31}).json()
        wait_for(client, job["id"], {"succeeded"}, timeout=240)
        pcm = client.get(f"/jobs/{job['id']}/audio").content
        as_json = client.get(f"/jobs/{job['id']}/captions")
        srt = client.get(f"/jobs/{job['id']}/captions", params={"format": "srt"})
        vtt = client.get(f"/jobs/{job['id']}/captions", params={"format": "vtt"})
    assert as_json.status_code == 200 and as_json.json()["object"] == "captions"
    segments = as_json.json()["segments"]
    check_against_audio(segments, pcm)

    def stamp(seconds: float, sep: str) -> str:
        ms = round(seconds * 1000)
        return f"00:{ms // 60000:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"

    assert srt.status_code == 200 and srt.headers["content-type"] == "application/x-subrip; charset=utf-8"
    blocks = srt.text.strip().split("\n\n")
    assert len(blocks) == 4
    for i, (block, s) in enumerate(zip(blocks, segments, strict=True), 1):
        assert block.split("\n") == [str(i), f"{stamp(s['start'], ',')} --> {stamp(s['end'], ',')}", s["text"]]
    assert vtt.status_code == 200 and vtt.headers["content-type"] == "text/vtt; charset=utf-8"
    assert vtt.text.startswith("WEBVTT\n\n")
    cues = vtt.text[len("WEBVTT\n\n") :].strip().split("\n\n")
    assert [c.split("\n")[0] for c in cues] == [
        f"{stamp(s['start'], '.')} --> {stamp(s['end'], '.')}" for s in segments
    ]
    assert cues[2].split("\n")[1] == SENTENCES[2].replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def test_sse_reports_each_segment_as_it_finishes_and_a_cache_hit_reports_the_same(live_stack, owner):
    body = {"input": TEXT, "response_format": "pcm", "stream_format": "sse", "seed": 32}
    with live_stack.client(owner.key) as client:
        runs = [client.post("/audio/speech", json=body, timeout=240) for _ in range(2)]
    assert [r.headers["x-cache"] for r in runs] == ["miss", "hit"]
    seen = []
    for response in runs:
        events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
        assert events[-1]["type"] == "speech.audio.done"
        pcm, segments = b"", []
        for event in events[:-1]:
            if event["type"] == "speech.audio.delta":
                pcm += base64.b64decode(event["audio"])
            else:
                assert event["type"] == "speech.audio.segment"
                # Sent once the segment's audio is out: what came before covers it.
                assert len(pcm) / 2 / SAMPLE_RATE >= event["end"] - 1e-3
                segments.append({k: v for k, v in event.items() if k != "type"})
        check_against_audio(segments, pcm)
        seen.append(segments)
    miss = [json.loads(line[6:]) for line in runs[0].text.splitlines() if line.startswith("data: ")]
    kinds = [e["type"] for e in miss]
    assert kinds.index("speech.audio.segment") < len(kinds) - 2  # live: not all at the end
    assert seen[0] == seen[1]


def test_the_websocket_end_message_has_the_segments_also_on_a_cache_hit(live_stack, owner):
    async def utterance(ws, uid: str) -> tuple[dict, bytes, dict]:
        await ws.send(json.dumps({"type": "synthesize", "id": uid, "text": TEXT, "seed": 33, "format": "pcm"}))
        return await collect(ws)

    async def go():
        url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {owner.key}"}) as ws:
            await ws.recv()  # ready
            return [await utterance(ws, "a"), await utterance(ws, "b")]

    (start_a, pcm_a, end_a), (start_b, pcm_b, end_b) = asyncio.run(go())
    assert end_a["type"] == end_b["type"] == "end", (end_a, end_b)
    assert start_a["cached"] is False and start_b["cached"] is True
    check_against_audio(end_a["segments"], pcm_a)
    assert end_b["segments"] == end_a["segments"] and pcm_b == pcm_a


@pytest.mark.parametrize("status", ["queued", "running", "failed"])
def test_captions_of_a_job_that_has_not_succeeded_are_409(client, owner, status):
    job = make_job(owner.org, status=status)
    response = client.get(f"/v1/jobs/{job.id}/captions", HTTP_AUTHORIZATION=f"Bearer {owner.key}")
    assert response.status_code == 409 and response.json()["error"]["code"] == "job_not_ready"
    assert response.headers["x-should-retry"] == "false"


def test_captions_refuse_an_unknown_format_and_another_tenants_job(client, owner, outsider):
    job = make_job(owner.org, status="succeeded", captions=[{"text": "Hi.", "start": 0.0, "end": 0.5}])
    url = f"/v1/jobs/{job.id}/captions"
    bad = client.get(url, {"format": "ass"}, HTTP_AUTHORIZATION=f"Bearer {owner.key}")
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "format"
    assert re.search(r"json, srt, vtt", bad.json()["error"]["message"])
    other = client.get(url, HTTP_AUTHORIZATION=f"Bearer {outsider.key}")
    assert other.status_code == 404
    mine = client.get(url, {"format": "srt"}, HTTP_AUTHORIZATION=f"Bearer {owner.key}")
    assert mine.content.decode() == "1\n00:00:00,000 --> 00:00:00,500\nHi.\n"
