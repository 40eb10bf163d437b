"""ElevenLabs' text-streaming sockets (`/elevenlabs/v1/text-to-speech/{voice}/stream-input` and
`multi-stream-input`) against the live stack (tiny Kokoro: noise of the right length): Pipecat's
`ElevenLabsTTSService`, unchanged but for its URL, speaks a reply and gets word timings from the
alignment; the raw protocol's contexts, flush, close and isFinal; and what an attacker sends
(binary frames, unknown fields, 10 MB of text, a flood of contexts, a key in the URL) gets a clear
error while the socket's other contexts go on, with nothing billed for refused work."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
import websockets
from pipecat.frames.frames import EndFrame, ErrorFrame, TTSAudioRawFrame, TTSSpeakFrame, TTSStoppedFrame, TTSTextFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.runner import PipelineRunner
from pipecat.pipeline.task import PipelineParams, PipelineTask
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.services.elevenlabs.tts import ElevenLabsTTSService

from billing.models import UsageEvent

pytestmark = pytest.mark.django_db(transaction=True)

REPLY = "Thanks for calling today. Your order left this morning. It arrives on Friday."


def ws_url(live_stack, path: str) -> str:
    return live_stack.base_url.replace("http://", "ws://") + f"/elevenlabs/v1/text-to-speech/{path}"


class Ear(FrameProcessor):
    def __init__(self) -> None:
        super().__init__()
        self.audio = 0
        self.words: list[str] = []
        self.errors: list[str] = []
        self.stopped = asyncio.Event()

    async def process_frame(self, frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if isinstance(frame, TTSAudioRawFrame):
            self.audio += len(frame.audio)
        elif isinstance(frame, TTSTextFrame):
            self.words.append(frame.text)
        elif isinstance(frame, ErrorFrame):
            self.errors.append(frame.error)
        elif isinstance(frame, TTSStoppedFrame):
            self.stopped.set()
        await self.push_frame(frame, direction)


async def pipecat_speaks(live_stack, key: str) -> Ear:
    tts = ElevenLabsTTSService(
        api_key=key,
        url=live_stack.base_url.replace("http://", "ws://") + "/elevenlabs",
        settings=ElevenLabsTTSService.Settings(voice="af_heart", model="eleven_flash_v2_5"),
        sample_rate=24_000,
    )
    ear = Ear()
    task = PipelineTask(Pipeline([tts, ear]), params=PipelineParams(audio_out_sample_rate=24_000))
    runner = asyncio.create_task(PipelineRunner(handle_sigint=False).run(task))
    await task.queue_frames([TTSSpeakFrame(REPLY)])
    await asyncio.wait_for(ear.stopped.wait(), 120)
    await task.queue_frame(EndFrame())
    await asyncio.wait_for(runner, 60)
    return ear


def test_pipecats_elevenlabs_service_speaks_and_reads_word_timings_from_the_alignment(live_stack, owner):
    ear = asyncio.run(pipecat_speaks(live_stack, owner.key))
    assert not ear.errors and ear.audio > 24_000  # more than half a second of 24 kHz pcm
    heard = " ".join(ear.words).split()
    assert heard == REPLY.split(), heard  # every word, in order, from the alignment's characters
    spoken = UsageEvent.objects.filter(organization=owner.org)
    assert {e.model for e in spoken} == {"kokoro"} and {e.voice for e in spoken} == {"af_heart"}


async def messages_until_final(ws, context: str | None = None) -> list[dict]:
    out = []
    while True:
        message = json.loads(await asyncio.wait_for(ws.recv(), 60))
        out.append(message)
        if message.get("isFinal") and message.get("contextId") == context:
            return out


def test_contexts_flush_close_and_each_sentence_aligned(live_stack, owner):
    async def run():
        headers = {"xi-api-key": owner.key}
        url = ws_url(live_stack, "af_heart/multi-stream-input?output_format=pcm_24000")
        async with websockets.connect(url, additional_headers=headers) as ws:
            await ws.send(json.dumps({"text": " ", "context_id": "a", "voice_settings": {"speed": 1.0}}))
            for word in "Hello there. How are you today?".split():
                await ws.send(json.dumps({"text": word + " ", "context_id": "a"}))
            await ws.send(json.dumps({"context_id": "a", "flush": True}))
            await ws.send(json.dumps({"context_id": "a", "close_context": True}))
            got = await messages_until_final(ws, "a")
            # Closed without a flush: an interruption (Pipecat's barge-in). What was not yet spoken
            # (the unfinished sentence) never is; the context still ends with isFinal.
            await ws.send(json.dumps({"text": "Sure thing. And then a tail without its end", "context_id": "b"}))
            await ws.send(json.dumps({"context_id": "b", "close_context": True}))
            cut = await messages_until_final(ws, "b")
            await ws.send(json.dumps({"close_socket": True}))
            return got, cut

    got, cut = asyncio.run(run())
    said = "".join(c for m in cut if m.get("alignment") for c in m["alignment"]["chars"])
    assert "tail" not in said, said
    audio = b"".join(base64.b64decode(m["audio"]) for m in got if m.get("audio"))
    aligned = [m["alignment"] for m in got if m.get("alignment")]
    assert all(m["contextId"] == "a" for m in got) and len(audio) > 0
    assert "".join(c for a in aligned for c in a["chars"]) == "Hello there. How are you today?"
    # Each chunk's times start from where the one before ended: together they span the audio.
    spans = [a["charStartTimesMs"][-1] + a["charDurationsMs"][-1] for a in aligned]
    assert abs(sum(spans) / 1000 - len(audio) / 2 / 24000) < 0.05
    assert aligned  # a piece (a sentence, or the backlog of them) at a time, each as it ended


def test_bad_input_gets_an_error_and_the_other_contexts_go_on(live_stack, owner):
    billed_before = UsageEvent.objects.filter(organization=owner.org).count()

    async def run():
        url = ws_url(live_stack, "af_heart/multi-stream-input") + "?output_format=pcm_16000"
        async with websockets.connect(url, additional_headers={"xi-api-key": owner.key}, max_size=2**24) as ws:
            await ws.send(b"\x00\x01binary")
            binary = json.loads(await ws.recv())
            await ws.send(json.dumps({"text": "Hi. ", "context_id": "a", "volume": 11}))
            unknown = json.loads(await ws.recv())
            await ws.send(json.dumps({"text": "Still ", "context_id": "big"}))  # opened, spoken first
            await ws.send(json.dumps({"text": "x" * 10_000_000, "context_id": "big"}))
            huge = json.loads(await asyncio.wait_for(ws.recv(), 30))
            for n in range(20):  # a flood of contexts, none closed
                await ws.send(json.dumps({"text": "Waiting ", "context_id": f"c{n}"}))
            errors = [json.loads(await asyncio.wait_for(ws.recv(), 30)) for _ in range(4)]
            # The context that was refused 10 MB still speaks.
            await ws.send(json.dumps({"text": "here. ", "context_id": "big", "close_context": True}))
            spoken = await messages_until_final(ws, "big")
            await ws.send(json.dumps({"close_socket": True}))
            return binary, unknown, huge, errors, spoken

    binary, unknown, huge, errors, spoken = asyncio.run(run())
    assert binary["error"] == "invalid_message" and "JSON" in binary["message"]
    assert unknown["error"] == "invalid_message" and "volume" in unknown["message"]
    assert huge["error"] == "message_too_large"  # refused before it is read (as tts.v1/v2 refuse it)
    assert {e["error"] for e in errors} == {"too_many_contexts"}  # the 17th and later wait no more
    assert any(m.get("audio") for m in spoken)
    assert UsageEvent.objects.filter(organization=owner.org).count() == billed_before + 1  # only what was spoken


def test_stream_input_takes_the_key_in_its_first_message_and_not_in_the_url(live_stack, owner):
    async def run():
        async with websockets.connect(ws_url(live_stack, "af_heart/stream-input?output_format=pcm_24000")) as ws:
            await ws.send(json.dumps({"text": " ", "xi_api_key": owner.key}))
            await ws.send(json.dumps({"text": "One sentence here. "}))
            await ws.send(json.dumps({"text": ""}))  # the end of the text: isFinal, then the socket closes
            got = await messages_until_final(ws)
            await asyncio.wait_for(ws.wait_closed(), 10)
            return got, ws.close_code

    got, code = asyncio.run(run())
    assert code == 1000 and any(m.get("audio") for m in got) and "contextId" not in got[-1]

    async def in_url():
        url = ws_url(live_stack, f"af_heart/stream-input?xi-api-key={owner.key}")
        async with websockets.connect(url) as ws:
            await ws.send(json.dumps({"text": "Hello. "}))
            refused = json.loads(await ws.recv())
            await asyncio.wait_for(ws.wait_closed(), 10)
            return refused, ws.close_code

    refused, code = asyncio.run(in_url())
    assert refused["error"] == "invalid_api_key" and code == 1008


def test_with_sync_alignment_each_pieces_times_count_from_the_contexts_first_audio(live_stack, owner):
    """LiveKit's plugin asks for `sync_alignment=true` and reads each piece's times as they are: they
    count from the context's first audio, so its words keep their places across sentences."""

    async def run():
        url = ws_url(live_stack, "af_heart/multi-stream-input?output_format=pcm_24000&sync_alignment=true")
        async with websockets.connect(url, additional_headers={"xi-api-key": owner.key}) as ws:
            await ws.send(json.dumps({"text": "Hello there. ", "context_id": "a", "flush": True}))
            got = []
            while not any(m.get("alignment") for m in got):  # the first sentence spoken: a piece of its own
                got.append(json.loads(await asyncio.wait_for(ws.recv(), 60)))
            await ws.send(json.dumps({"text": "How are you today? ", "context_id": "a", "flush": True}))
            await ws.send(json.dumps({"context_id": "a", "close_context": True}))
            got += await messages_until_final(ws, "a")
            await ws.send(json.dumps({"close_socket": True}))
            return got

    got = asyncio.run(run())
    audio = b"".join(base64.b64decode(m["audio"]) for m in got if m.get("audio"))
    aligned = [m["alignment"] for m in got if m.get("alignment")]
    assert len(aligned) >= 2 and "".join(c for a in aligned for c in a["chars"]) == "Hello there. How are you today?"
    starts = [t for a in aligned for t in a["charStartTimesMs"]]
    assert starts == sorted(starts)  # one clock for the context, never restarting at a piece
    last = aligned[-1]
    assert abs((last["charStartTimesMs"][-1] + last["charDurationsMs"][-1]) / 1000 - len(audio) / 2 / 24000) < 0.05


def test_a_socket_that_names_no_key_is_closed_after_15_seconds(live_stack):
    async def run():
        async with websockets.connect(ws_url(live_stack, "af_heart/stream-input")) as ws:
            opened = asyncio.get_running_loop().time()
            await asyncio.wait_for(ws.wait_closed(), 30)
            return asyncio.get_running_loop().time() - opened, ws.close_code

    waited, code = asyncio.run(run())
    assert code == 1008 and 14 <= waited <= 20  # its connection slot is not held by a silent client
