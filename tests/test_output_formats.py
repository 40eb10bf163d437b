"""Output formats through the live server, checked with a decoder (PyAV), not by byte counts:
telephony G.711 (`ulaw_8000`, `alaw_8000`) through the `openai` SDK, pcm/wav at every sample rate,
mp3 at 22.05/44.1 kHz with a bit rate, all served from one cached generation; `output_format`
beside `response_format`; `sample_rate` with a plain name; jobs, job streams and the WebSocket in
the same names; plans by codec."""

from __future__ import annotations

import asyncio
import io
import json
import struct

import av
import numpy as np
import openai
import pytest
import websockets

from synthesis.audio.formats import RAW_RATES
from tests.factories import own_plan
from tests.test_jobs import wait_for
from tests.test_websocket import collect

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Telephony wants eight kilohertz."
SEED = 41


def sdk(live_stack, key: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=key, base_url=f"{live_stack.base_url}/v1", max_retries=0)


def decode(data: bytes, fmt: str | None = None, rate: int | None = None) -> tuple[np.ndarray, int]:
    """Mono samples (float, -1..1) and their sample rate; raw formats need the rate said."""
    options = {"sample_rate": str(rate), "ch_layout": "mono"} if rate else {}
    with av.open(io.BytesIO(data), format=fmt, options=options) as container:
        frames = [f.to_ndarray().astype(np.float64).reshape(-1) for f in container.decode(audio=0)]
        decoded_rate = container.streams.audio[0].codec_context.sample_rate
    samples = np.concatenate(frames) if frames else np.zeros(0)
    if np.abs(samples).max(initial=0) > 1.5:  # integer sample formats
        samples = samples / 32768.0
    return samples, decoded_rate


def speech(live_stack, key: str, **body) -> bytes:
    client = sdk(live_stack, key)
    fmt = body.pop("response_format", openai.NOT_GIVEN)
    response = client.audio.speech.create(
        model="tts-1", voice="alloy", input=TEXT, response_format=fmt, extra_body={"seed": SEED, **body}
    )
    return response.content


def test_ulaw_and_alaw_decode_to_the_8_khz_pcm_signal_within_g711s_error(live_stack, owner):
    pcm_24k = speech(live_stack, owner.key, response_format="pcm")  # generated once; the rest are hits
    seconds = len(pcm_24k) / 2 / 24000
    reference, rate = decode(speech(live_stack, owner.key, output_format="pcm_8000"), "s16le", 8000)
    assert rate == 8000 and abs(len(reference) - seconds * 8000) <= 1
    for name, demuxer in (("ulaw_8000", "mulaw"), ("alaw_8000", "alaw")):
        body = speech(live_stack, owner.key, output_format=name)
        assert len(body) == len(reference)  # one byte a sample
        decoded, rate = decode(body, demuxer, 8000)
        assert rate == 8000 and len(decoded) == len(reference)
        # G.711 keeps 4 mantissa bits per segment: the error is at most 1/32 of the magnitude, with
        # a floor of 16 LSB (of 16-bit) in the smallest segments.
        assert np.all(np.abs(decoded - reference) <= np.abs(reference) / 32 + 16 / 32768), name
        assert np.abs(reference).max() > 0.01  # the test compares a signal, not silence


def test_pcm_and_wav_at_every_rate_and_mp3_with_a_rate_and_bit_rate(live_stack, owner):
    seconds = len(speech(live_stack, owner.key, response_format="pcm")) / 2 / 24000
    with live_stack.client(owner.key) as client:
        for rate in RAW_RATES:
            body = {"input": TEXT, "seed": SEED, "response_format": f"pcm_{rate}"}
            response = client.post("/audio/speech", json=body)
            assert response.headers["x-cache"] == "hit" and response.headers["content-type"] == "audio/pcm"
            samples, _ = decode(response.content, "s16le", rate)
            assert abs(len(samples) - seconds * rate) <= 1, rate  # the resampler's output, to a sample
            wav = client.post("/audio/speech", json={**body, "response_format": f"wav_{rate}"})
            assert wav.headers["content-type"] == "audio/wav"
            samples, decoded_rate = decode(wav.content)
            assert decoded_rate == rate and abs(len(samples) - seconds * rate) <= 1
            assert struct.unpack("<I", wav.content[24:28])[0] == rate
        for name, rate, kbps in (("mp3_22050_32", 22050, 32), ("mp3_44100_128", 44100, 128)):
            response = client.post("/audio/speech", json={"input": TEXT, "seed": SEED, "output_format": name})
            assert response.headers["content-type"] == "audio/mpeg"
            samples, decoded_rate = decode(response.content)
            assert decoded_rate == rate
            assert seconds * rate <= len(samples) <= (seconds + 0.1) * rate  # + the encoder's padding
            with av.open(io.BytesIO(response.content)) as container:
                assert container.streams.audio[0].bit_rate == kbps * 1000


def test_output_format_names_are_checked_and_must_agree_with_response_format(live_stack, owner):
    with live_stack.client(owner.key) as client:
        for body, param in (
            ({"output_format": "pcm_12345"}, "output_format"),
            ({"output_format": "mp3_22050_192"}, "output_format"),  # MPEG-2 stops at 160 kbps
            ({"response_format": "ulaw_16000"}, "response_format"),
            ({"response_format": "wav", "output_format": "pcm_16000"}, "output_format"),
        ):
            refused = client.post("/audio/speech", json={"input": "x", **body})
            assert refused.status_code == 400, body
            error = refused.json()["error"]
            assert error["param"] == param and error["code"] == "invalid_value", error
        assert "ulaw_8000" in client.post("/audio/speech", json={"input": "x", "output_format": "?"}).text
        agreed = client.post(
            "/audio/speech", json={"input": TEXT, "seed": SEED, "response_format": "pcm", "output_format": "pcm_16000"}
        )
    assert agreed.status_code == 200 and len(agreed.content) % 2 == 0
    assert len(agreed.content) // 2 == len(speech(live_stack, owner.key, output_format="pcm_16000")) // 2


def test_sample_rate_picks_the_rate_of_a_plain_name(live_stack, owner):
    seconds = len(speech(live_stack, owner.key, response_format="pcm")) / 2 / 24000
    with live_stack.client(owner.key) as client:
        body = {"input": TEXT, "seed": SEED, "response_format": "wav", "sample_rate": 16000}
        wav = client.post("/audio/speech", json=body)
        refused = client.post("/audio/speech", json={**body, "response_format": "opus"})
    assert wav.status_code == 200 and wav.headers["content-type"] == "audio/wav"
    assert wav.headers["x-cache"] == "hit"  # the same generation as every other rate
    assert struct.unpack("<I", wav.content[24:28])[0] == 16000
    samples, rate = decode(wav.content)
    assert rate == 16000 and abs(len(samples) - seconds * 16000) <= 1
    assert wav.content == speech(live_stack, owner.key, output_format="wav_16000")
    error = refused.json()["error"]
    assert refused.status_code == 400 and (error["param"], error["code"]) == ("sample_rate", "invalid_value")
    assert "24000" in error["message"]


def test_a_job_stores_its_file_in_the_format_asked_and_its_stream_takes_any_format(live_stack, owner):
    with live_stack.client(owner.key) as client:
        job = client.post("/jobs", json={"input": TEXT, "seed": SEED + 1, "response_format": "mp3_22050_32"}).json()
        done = wait_for(client, job["id"], {"succeeded"})
        stored = client.get(f"/jobs/{job['id']}/audio")
        streamed = client.get(f"/jobs/{job['id']}/stream", params={"format": "ulaw_8000"})
        refused = client.get(f"/jobs/{job['id']}/stream", params={"format": "ulaw"})
    assert stored.headers["content-type"] == "audio/mpeg"
    assert stored.headers["content-disposition"].endswith(f'{job["id"]}.mp3"')
    assert decode(stored.content)[1] == 22050
    assert streamed.headers["content-type"] == "audio/basic"
    samples, _ = decode(streamed.content, "mulaw", 8000)
    assert abs(len(samples) - done["audio_seconds"] * 8000) <= 1
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "format"


def test_the_websocket_streams_ulaw_and_says_its_sample_rate(live_stack, owner):
    async def go():
        url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {owner.key}"}) as ws:
            await ws.recv()  # ready
            await ws.send(json.dumps({"type": "synthesize", "text": TEXT, "seed": SEED + 2, "format": "ulaw_8000"}))
            return await collect(ws)

    start, body, end = asyncio.run(go())
    assert start["format"] == "ulaw_8000" and start["sample_rate"] == 8000
    assert end["type"] == "end" and abs(len(body) - end["audio_seconds"] * 8000) <= 1


def test_a_plan_lists_codecs_and_admits_every_rate_of_them(live_stack, owner):
    own_plan(owner.org, "mp3-and-pcm", allowed_formats=["mp3", "pcm"])
    with live_stack.client(owner.key) as client:
        ok = client.post("/audio/speech", json={"input": TEXT, "seed": SEED, "output_format": "pcm_16000"})
        refused = client.post("/audio/speech", json={"input": TEXT, "seed": SEED, "output_format": "ulaw_8000"})
    assert ok.status_code == 200
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_in_plan"
