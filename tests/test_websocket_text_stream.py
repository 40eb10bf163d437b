"""Text streamed in over the WebSocket (`tts.v2`), as a voice agent sends an LLM's reply: audio
starts once the first sentence is complete, while the rest has not been sent; every sentence is
spoken once, in order, in one continuous audio stream with one seed, billed for the characters
spoken. Also: a whole paragraph in one delta on a small plan, one continuous WAV file, cancel after
the text was closed, an utterance id used again, and the bound on text waiting to be spoken."""

from __future__ import annotations

import asyncio
import io
import json
import wave

import pytest
import websockets

from billing.models import UsageEvent
from synthesis.models import Job
from tests.waiting import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SENTENCES = [
    "Sure, I can help you with that today.",
    "Your order left our warehouse this morning.",
    "It should arrive within two days.",
]
WORD_DELAY = 0.05
LONG = " ".join(f"Sentence number {i} of a long reply goes on for a while." for i in range(12)) + " "


def connect(live_stack, key: str, subprotocols=("tts.v2",)):
    url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
    return websockets.connect(
        url, additional_headers={"Authorization": f"Bearer {key}"}, subprotocols=list(subprotocols) or None
    )


async def receive(ws) -> dict | bytes:
    frame = await asyncio.wait_for(ws.recv(), 120)
    return frame if isinstance(frame, bytes) else json.loads(frame)


async def until_end(ws, utterance: str) -> tuple[bytes, list[dict]]:
    """Audio and messages of one utterance up to its end (or error, then end)."""
    audio, messages = b"", []
    while True:
        frame = await receive(ws)
        if isinstance(frame, bytes):
            audio += frame
            continue
        messages.append(frame)
        if frame["type"] == "end" and frame["id"] == utterance:
            return audio, messages


async def send_words(ws, utterance: str, text: str) -> None:
    for word in text.split(" "):
        await ws.send(json.dumps({"type": "text", "id": utterance, "text": word + " "}))
        await asyncio.sleep(WORD_DELAY)


def test_audio_starts_after_the_first_sentence_and_every_sentence_is_spoken_once_in_order(live_stack, owner):
    async def go():
        async with connect(live_stack, owner.key) as ws:
            assert ws.subprotocol == "tts.v2"
            assert (await receive(ws))["protocol"] == "tts.v2"
            await ws.send(json.dumps({"type": "begin", "id": "reply", "voice": "nova", "seed": 12, "format": "pcm"}))
            assert (await receive(ws))["type"] == "start"
            await send_words(ws, "reply", SENTENCES[0])  # word by word, as an LLM's tokens come
            first = await receive(ws)  # audio comes with only the first sentence sent
            assert isinstance(first, bytes), first
            for sentence in SENTENCES[1:]:
                await send_words(ws, "reply", sentence)
            await ws.send(json.dumps({"type": "close", "id": "reply"}))
            audio, messages = await until_end(ws, "reply")
            return first + audio, messages

    pcm, messages = asyncio.run(go())
    end = messages[-1]
    assert [m["type"] for m in messages] == ["end"], messages
    assert [s["text"] for s in end["segments"]] == SENTENCES  # each once, in order
    assert end["audio_seconds"] == pytest.approx(len(pcm) / 2 / 24000, abs=1e-3)
    assert end["segments"][-1]["end"] == pytest.approx(end["audio_seconds"], abs=1e-3)
    starts = [s["start"] for s in end["segments"]]
    assert starts == sorted(starts) and end["seed"] == 12
    text = " ".join(SENTENCES) + " "
    assert end["characters"] == len(text)  # what was spoken is what is billed
    jobs = Job.objects.filter(organization=owner.org).order_by("created_at")
    assert " ".join(j.input.strip() for j in jobs) == " ".join(SENTENCES)
    assert {j.params["seed"] for j in jobs} == {12} and {j.voice for j in jobs} == {"nova"}
    assert sum(e.characters for e in UsageEvent.objects.filter(organization=owner.org)) == len(text)


def test_a_paragraph_in_one_delta_on_a_small_plan_is_spoken_whole_as_one_wav_file(live_stack, owner):
    sentence = "This sentence is one of many in a paragraph that is longer than the plan allows a request. "
    paragraph = sentence * 14  # ~1,300 characters: over the free plan's 1,000 a request
    assert len(paragraph) > 1000

    async def go():
        async with connect(live_stack, owner.key) as ws:
            await receive(ws)
            await ws.send(json.dumps({"type": "begin", "id": "p", "seed": 4, "format": "wav_16000", "text": paragraph}))
            await ws.send(json.dumps({"type": "close", "id": "p"}))
            return await until_end(ws, "p")

    audio, messages = asyncio.run(go())
    start, end = messages[0], messages[-1]
    assert start["type"] == "start" and start["sample_rate"] == 16000
    assert end["type"] == "end" and "incomplete" not in end, messages
    assert len(end["segments"]) == 14 and end["characters"] == len(paragraph)
    with wave.open(io.BytesIO(audio)) as wav:  # one header, one continuous file
        assert wav.getframerate() == 16000
    assert audio.count(b"RIFF") == 1
    assert all(j.characters <= 1000 for j in Job.objects.filter(organization=owner.org))


def test_cancel_after_close_stops_the_utterance_and_its_id_can_be_used_again(live_stack, owner):
    async def go():
        async with connect(live_stack, owner.key) as ws:
            await receive(ws)
            await ws.send(json.dumps({"type": "begin", "id": "r", "seed": 3, "text": LONG}))
            await ws.send(json.dumps({"type": "close", "id": "r"}))
            again = None
            await ws.send(json.dumps({"type": "begin", "id": "r"}))  # still being spoken
            while again is None or not isinstance(again, bytes):
                again = await receive(ws)
                if isinstance(again, dict) and again["type"] == "error":
                    refused = again
            await ws.send(json.dumps({"type": "cancel", "id": "r"}))
            _, messages = await until_end(ws, "r")
            await ws.send(json.dumps({"type": "begin", "id": "r", "seed": 3, "text": "Once more. "}))
            await ws.send(json.dumps({"type": "close", "id": "r"}))
            return refused, messages, await until_end(ws, "r")

    refused, cancelled, (_, reused) = asyncio.run(go())
    assert refused["code"] == "duplicate_id"
    assert cancelled[-1]["cancelled"] is True and cancelled[-1]["characters"] < len(LONG)
    first = Job.objects.filter(organization=owner.org).order_by("created_at").first()
    wait_until(lambda: Job.objects.get(pk=first.pk).status in ("cancelled", "succeeded"), 60, "the job never ended")
    assert Job.objects.get(pk=first.pk).status == "cancelled"  # the generation stopped
    assert reused[-1]["type"] == "end", reused
    assert [s["text"] for s in reused[-1]["segments"]] == ["Once more."], reused


def test_text_waiting_to_be_spoken_is_bounded(live_stack, owner):
    async def go():
        async with connect(live_stack, owner.key) as ws:
            await receive(ws)
            await ws.send(json.dumps({"type": "begin", "id": "a", "seed": 1}))  # open: it holds the line
            await ws.send(json.dumps({"type": "begin", "id": "b", "seed": 1}))
            refusal = None
            for _ in range(10):
                await ws.send(json.dumps({"type": "text", "id": "b", "text": "x. " * 1000}))
            while refusal is None:
                message = await receive(ws)
                if isinstance(message, dict) and message["type"] == "error":
                    refusal = message
            return refusal

    refusal = asyncio.run(go())
    assert refusal["code"] == "text_buffer_full" and refusal["id"] == "b"


def test_without_the_subprotocol_the_connection_speaks_tts_v1(live_stack, owner):
    async def go():
        async with connect(live_stack, owner.key, subprotocols=()) as ws:
            ready = await receive(ws)
            await ws.send(json.dumps({"type": "begin", "id": "s"}))
            return ws.subprotocol, ready, await receive(ws)

    subprotocol, ready, refused = asyncio.run(go())
    assert subprotocol is None and ready["protocol"] == "tts.v1"
    assert refused["code"] == "unknown_type"
