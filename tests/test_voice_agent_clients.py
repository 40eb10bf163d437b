"""A voice agent's reply through the clients voice agents are built with: the `openai` SDK's streamed
speech, and Pipecat's `OpenAITTSService` (over the same SDK, only its base URL and key changed) in a
Pipecat pipeline, on Kokoro-82M's real weights. A whole reply streams out sentence by sentence, each
sentence's audio at the client before the worker has made the next one; an interruption (Pipecat's
`InterruptionFrame`, what a listener's voice raises) closes the stream, and the worker's row stops at its
next decoder window.

What the worker did is read from its own events, not from thresholds on the wall clock: the job's Redis
stream, whose entry ids are the milliseconds Redis stamped as the worker appended each event (the
client's times are the same machine's clock)."""

from __future__ import annotations

import asyncio
import json
import time

import openai
import pytest
import redis
from pipecat.frames.frames import EndFrame, ErrorFrame, InterruptionFrame, TTSAudioRawFrame, TTSSpeakFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.openai.tts import OpenAITTSService

from inference.kokoro.engine import EDGE_FRAMES
from inference.kokoro.forward import FIRST_WINDOW_FRAMES
from inference.kokoro.text import SAMPLES_PER_FRAME
from synthesis.audio import streams
from synthesis.models import Job
from tests import stack
from tests.waiting import wait_until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.long]

RATE = 24_000
REPLY = (
    "Thanks for calling the support line today. Your order left our warehouse early this morning. "
    "It should reach you on Friday afternoon. Is there anything else I can help you with?"
)


@pytest.fixture(scope="module")
def real_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> str:
    with stack.real_kokoro(tmp_path_factory.mktemp("agents")) as base:
        yield base


class Ear(FrameProcessor):
    """The pipeline's end, where a transport would play the audio: when each piece arrived (seconds,
    the machine's clock) and how many bytes it held."""

    def __init__(self) -> None:
        super().__init__()
        self.heard: list[tuple[float, int]] = []
        self.errors: list[str] = []
        self.first_audio = asyncio.Event()

    async def process_frame(self, frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self.heard.append((time.time(), len(frame.audio)))
            self.first_audio.set()
        elif isinstance(frame, ErrorFrame):
            self.errors.append(frame.error)
        await self.push_frame(frame, direction)


def when_received(heard: list[tuple[float, int]], size: int) -> float:
    """When the client held `size` bytes of the reply (`heard`: arrival time, bytes)."""
    total = 0
    for at, n in heard:
        total += n
        if total >= size:
            return at
    raise AssertionError(f"the client got {total} bytes, not {size}")


async def speak(base_url: str, key: str, interrupt: bool) -> tuple[Ear, float]:
    """The reply spoken through a pipeline; with `interrupt`, interrupted as its first audio arrives.
    Returns the ear and when the interruption was raised."""
    tts = OpenAITTSService(
        api_key=key,
        base_url=f"{base_url}/v1",
        settings=OpenAITTSService.Settings(model="kokoro", voice="nova"),
        sample_rate=RATE,
    )
    ear = Ear()
    task = PipelineTask(Pipeline([tts, ear]), params=PipelineParams(audio_out_sample_rate=RATE))
    runner = asyncio.create_task(PipelineRunner(handle_sigint=False).run(task))
    await task.queue_frames([TTSSpeakFrame(REPLY)])
    interrupted = 0.0
    if interrupt:
        await asyncio.wait_for(ear.first_audio.wait(), 120)
        interrupted = time.time()
        await task.queue_frame(InterruptionFrame())
    await task.queue_frame(EndFrame())
    await asyncio.wait_for(runner, 180)
    return ear, interrupted


def worker_events(job: Job) -> list[tuple[float, dict[str, str]]]:
    """The job's stream as the worker wrote it: (when Redis stamped it, seconds; its fields)."""
    client = redis.Redis.from_url(stack.redis_url(stack.REAL_KOKORO_DB))
    out = []
    for entry_id, fields in client.xrange(streams.stream_key(job.id)):
        stamp = int(entry_id.decode().split("-")[0]) / 1000
        out.append((stamp, {k.decode(): v if k == b"pcm" else v.decode() for k, v in fields.items()}))
    return out


def assert_each_sentence_ahead_of_the_next(heard: list[tuple[float, int]], org, read_size: int) -> None:
    """The reply's four sentences were made by the worker one after another, each one's audio at the
    client (less the client's own read size: a sentence's last bytes may wait for it) before the
    worker's event that the next one is made."""
    job = Job.objects.filter(organization=org).latest("created_at")
    assert job.status == Job.Status.SUCCEEDED and len(job.segments) == 4
    events = worker_events(job)
    # A sentence's caption event is written as its row ends: its audio all made.
    made = {int(f["last"]): at for at, f in events if f["type"] == "segment"}
    ends = {int(f["last"]): json.loads(f["caption"])["end"] for _, f in events if f["type"] == "segment"}
    assert sorted(made) == [0, 1, 2, 3]
    assert sum(n for _, n in heard) == 2 * int(events[-1][1]["samples"])  # every sample, once
    for k in range(3):
        got = when_received(heard, max(2, round(ends[k] * RATE) * 2 - read_size))
        assert got < made[k + 1], (
            f"sentence {k + 1}'s audio reached the client {got - made[k + 1]:+.2f} s after the worker "
            f"made sentence {k + 2}: the reply came out in one piece, not ahead of its listener"
        )


def test_the_openai_sdks_stream_gets_each_sentence_before_the_worker_has_made_the_next(real_stack, owner):
    client = openai.OpenAI(api_key=owner.key, base_url=f"{real_stack}/v1")
    heard: list[tuple[float, int]] = []
    with client.audio.speech.with_streaming_response.create(
        model="kokoro", voice="nova", input=REPLY, response_format="pcm"
    ) as response:
        for chunk in response.iter_bytes():
            heard.append((time.time(), len(chunk)))
    assert_each_sentence_ahead_of_the_next(heard, owner.org, read_size=0)  # the SDK yields bytes as they come


def test_pipecats_whole_reply_gets_each_sentence_before_the_worker_has_made_the_next(real_stack, owner):
    ear, _ = asyncio.run(speak(real_stack, owner.key, interrupt=False))
    assert not ear.errors
    assert_each_sentence_ahead_of_the_next(ear.heard, owner.org, read_size=int(RATE * 0.5) * 2)  # Pipecat: 0.5 s


def test_an_interruption_stops_the_workers_row_at_its_next_window(real_stack, owner):
    ear, interrupted = asyncio.run(speak(real_stack, owner.key, interrupt=True))
    job = Job.objects.filter(organization=owner.org).latest("created_at")
    wait_until(lambda: Job.objects.get(pk=job.pk).status == Job.Status.CANCELLED, 60, "the job was not cancelled")
    events = worker_events(job)
    # The first sentence was decoded in windows; the one being decoded as the stream closed may still
    # go out, nothing after it; no later sentence began.
    after = [len(f["pcm"]) for at, f in events if f["type"] == "audio" and at > interrupted]
    assert len(after) <= 1, after
    captions = [json.loads(f["caption"]) for _, f in events if f["type"] == "segment"]
    assert [int(f["last"]) for _, f in events if f["type"] == "segment"] in ([], [0]), "a later sentence began"
    first_sentence_out = sum(len(f["pcm"]) for _, f in events if f["type"] == "audio") / 2 / RATE
    assert not captions or captions[0]["end"] <= first_sentence_out + 0.01  # its caption: only what went out
    # Out: the first window, then at most the one being made as it closed (the middle window, or the
    # whole rest where the worker makes it within the first's audio: forward.AHEAD).
    pieces = [len(f["pcm"]) for _, f in events if f["type"] == "audio"]
    assert len(pieces) <= 2 and pieces[0] <= (FIRST_WINDOW_FRAMES + EDGE_FRAMES) * SAMPLES_PER_FRAME * 2, pieces
    (ended,) = [at for at, f in events if f["type"] == "error"]
    first_window = next(at for at, f in events if f["type"] == "audio") - events[0][0]
    # From the close to the worker's end: at most one window's making (the first one's, as the worker
    # took it) and the worker's look for a cancel request.
    assert ended - interrupted <= first_window + 0.5, (ended - interrupted, first_window)
