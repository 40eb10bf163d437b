"""Text streamed in over the WebSocket (`tts.v2`), as a voice agent sends an LLM's reply: a client
sends a paragraph word by word with delays; audio starts once the first sentence is complete, while
the rest is still being typed; every sentence is spoken once, in order, in one continuous audio
stream with one seed; the characters received are what is billed. Cancel ends it at once."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
import websockets

from billing.models import UsageEvent
from synthesis.models import Job

pytestmark = pytest.mark.django_db(transaction=True)

SENTENCES = [
    "Sure, I can help you with that today.",
    "Your order left our warehouse this morning.",
    "It should arrive within two days.",
]
PARAGRAPH = " ".join(SENTENCES)
WORD_DELAY = 0.15


def connect(live_stack, key: str, subprotocols=("tts.v2",)):
    url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
    return websockets.connect(
        url, additional_headers={"Authorization": f"Bearer {key}"}, subprotocols=list(subprotocols) or None
    )


def test_a_paragraph_sent_word_by_word_is_spoken_as_its_sentences_complete(live_stack, owner):
    async def go():
        async with connect(live_stack, owner.key) as ws:
            assert ws.subprotocol == "tts.v2"
            assert json.loads(await ws.recv())["protocol"] == "tts.v2"
            await ws.send(json.dumps({"type": "begin", "id": "reply", "voice": "nova", "seed": 12, "format": "pcm"}))
            received: list[tuple[float, object]] = []

            async def read():
                while True:
                    frame = await asyncio.wait_for(ws.recv(), 120)
                    received.append((time.monotonic(), frame if isinstance(frame, bytes) else json.loads(frame)))
                    if isinstance(frame, str) and json.loads(frame)["type"] in ("end", "error"):
                        return

            reader = asyncio.create_task(read())
            words = PARAGRAPH.split(" ")
            first_sentence_sent = last_word_sent = 0.0
            for i, word in enumerate(words):
                await ws.send(json.dumps({"type": "text", "id": "reply", "text": word + " "}))
                if word.endswith(".") and not first_sentence_sent:
                    first_sentence_sent = time.monotonic()
                last_word_sent = time.monotonic()
                if i < len(words) - 1:
                    await asyncio.sleep(WORD_DELAY)
            await ws.send(json.dumps({"type": "close", "id": "reply"}))
            await reader
            return received, first_sentence_sent, last_word_sent

    received, first_sentence_sent, last_word_sent = asyncio.run(go())
    messages = [m for _, m in received if isinstance(m, dict)]
    audio = [(t, m) for t, m in received if isinstance(m, bytes)]
    start, end = messages[0], messages[-1]
    assert start["type"] == "start" and start["id"] == "reply" and end["type"] == "end", messages
    first_audio = audio[0][0]
    # Audio began after the first sentence was complete and before the paragraph was.
    assert first_sentence_sent < first_audio < last_word_sent
    pcm = b"".join(m for _, m in audio)
    # Every sentence once, in order, timed within one continuous stream.
    assert [s["text"] for s in end["segments"]] == SENTENCES
    assert end["audio_seconds"] == pytest.approx(len(pcm) / 2 / 24000, abs=1e-3)
    assert end["segments"][-1]["end"] == pytest.approx(end["audio_seconds"], abs=1e-3)
    starts = [s["start"] for s in end["segments"]]
    assert starts == sorted(starts) and end["seed"] == 12
    # Billed: the characters received (the spaces between sentences included), one request per piece.
    assert end["characters"] == len(PARAGRAPH) + 1  # the client's trailing space too
    jobs = Job.objects.filter(organization=owner.org).order_by("created_at")
    assert [j.input.strip() for j in jobs] == SENTENCES
    assert {j.params["seed"] for j in jobs} == {12} and {j.voice for j in jobs} == {"nova"}
    events = UsageEvent.objects.filter(organization=owner.org)
    assert sum(e.characters for e in events) == len(PARAGRAPH) + 1


def test_cancel_ends_a_text_stream_and_later_text_for_it_is_refused(live_stack, owner):
    async def go():
        async with connect(live_stack, owner.key) as ws:
            await ws.recv()  # ready
            await ws.send(json.dumps({"type": "begin", "id": "s", "seed": 3, "text": "Half of a"}))
            assert json.loads(await ws.recv())["type"] == "start"
            await ws.send(json.dumps({"type": "cancel", "id": "s"}))
            end = json.loads(await asyncio.wait_for(ws.recv(), 30))
            await ws.send(json.dumps({"type": "text", "id": "s", "text": "sentence. "}))
            late = json.loads(await asyncio.wait_for(ws.recv(), 30))
            return end, late

    end, late = asyncio.run(go())
    assert end == {"type": "end", "id": "s", "cancelled": True, "characters": 0}
    assert late["type"] == "error" and late["code"] == "not_found"
    assert not UsageEvent.objects.filter(organization=owner.org).exists()  # nothing was spoken


def test_without_the_subprotocol_the_connection_speaks_tts_v1(live_stack, owner):
    async def go():
        async with connect(live_stack, owner.key, subprotocols=()) as ws:
            ready = json.loads(await ws.recv())
            await ws.send(json.dumps({"type": "begin", "id": "s"}))
            return ws.subprotocol, ready, json.loads(await ws.recv())

    subprotocol, ready, refused = asyncio.run(go())
    assert subprotocol is None and ready["protocol"] == "tts.v1"
    assert refused["code"] == "unknown_type"
