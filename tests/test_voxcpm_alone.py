"""A deployment of VoxCPM2 alone (TTS_ENGINES=voxcpm): nothing on its web or worker paths imports
ChatTTS or Kokoro, its listings name only VoxCPM2, OpenAI's names speak with it, and its 48 kHz
audio reaches every format at the format's rate: plain `pcm` and `wav` at 24 kHz (OpenAI's
contract), `pcm_48000`/`wav_48000` at the model's own rate, from a live generation and from the
cache alike, a job's stored file too. Random weights: noise, not speech."""

from __future__ import annotations

import asyncio
import json
import os
import struct
import subprocess
import sys
import time

import httpx
import openai
import pytest
import websockets
from playwright.sync_api import expect

from tests import stack
from tests.browser import browser_page, sign_up
from tests.test_custom_voices import recording
from tests.waiting import wait_until
from voices.models import Voice

pytestmark = pytest.mark.django_db(transaction=True)

NO_OTHER_ENGINES = r"""
import sys
sys.modules["ChatTTS"] = None  # any import of ChatTTS or kokoro now fails, as where they are not installed
sys.modules["kokoro"] = None
sys.modules["misaki"] = None
import django
django.setup()
import tts_saas.asgi, tts_saas.urls, synthesis.tasks  # the web's and the worker's code
from inference import registry
from inference.engine import EngineOptions, SynthesisRequest
from inference.voxcpm.params import VoxCPMParams
engine = registry.load("voxcpm", EngineOptions(model_dir=sys.argv[1], device="cpu"))
audio = list(engine.synthesize(SynthesisRequest(["Hello there."], VoxCPMParams(design="", seed=1))))
print("others imported:", any(n.split(".")[0] in ("ChatTTS", "kokoro", "misaki") for n, m in sys.modules.items() if m))
print("samples:", sum(len(a) for a in audio))
"""


def test_voxcpms_web_and_worker_code_run_without_the_other_engines():
    env = {**os.environ, "TTS_ENGINES": "voxcpm", "DJANGO_SETTINGS_MODULE": "tts_saas.settings"}
    result = subprocess.run(
        [sys.executable, "-c", NO_OTHER_ENGINES, os.environ["TTS_TEST_VOXCPM_CHECKPOINT"]],
        capture_output=True,
        text=True,
        env=env,
        cwd=stack.ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "others imported: False" in result.stdout
    assert int(result.stdout.split("samples:")[1]) > 0


@pytest.fixture(scope="module")
def voxcpm_alone(django_db_setup, tmp_path_factory):
    url, client = stack.redis_db(6)
    env = stack.stack_env(url, TTS_ENGINES="voxcpm", TTS_VOXCPM_MODEL_DIR=os.environ["TTS_TEST_VOXCPM_CHECKPOINT"])
    log_dir = tmp_path_factory.mktemp("voxcpm")
    worker = stack.start_worker(env, log_dir, "voxcpm", queue="tts-voxcpm")
    web, base = stack.start_web(env, log_dir)
    try:
        stack.wait_for_workers(client, "ready", proc=worker, engine="voxcpm")
        yield base
    finally:
        web.stop()
        worker.stop()


def speak(client: httpx.Client, **body) -> httpx.Response:
    response = client.post("/audio/speech", json={"input": "Hello there, my friend.", "seed": 5, **body})
    assert response.status_code == 200, response.text
    return response


def rate_of(wav: bytes) -> int:
    assert wav[:4] == b"RIFF"
    return struct.unpack("<I", wav[24:28])[0]


def test_a_voxcpm_deployment_lists_only_voxcpm_and_speaks_for_openais_names(voxcpm_alone, owner):
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:
        models = client.get("/models").json()["data"]
        kokoro = client.post("/audio/speech", json={"model": "kokoro", "input": "Hi."})
        temperature = client.post("/audio/speech", json={"model": "voxcpm", "input": "Hi.", "temperature": 0.5})
        tuned = speak(client, model="voxcpm", cfg_value=3.0, inference_timesteps=4, response_format="pcm")
    assert {m["engine"] for m in models} == {"voxcpm"}
    assert all(m["license"]["commercial_use"] for m in models)
    assert kokoro.status_code == 404 and "not served here" in kokoro.json()["error"]["message"]
    assert temperature.status_code == 400 and temperature.json()["error"]["code"] == "unsupported_parameter"
    assert tuned.headers["x-model"] == "voxcpm" and len(tuned.content) > 0
    sdk = openai.OpenAI(base_url=f"{voxcpm_alone}/v1", api_key=owner.key, max_retries=0)
    with sdk.audio.speech.with_streaming_response.create(
        model="tts-1", voice="nova", input="Hello from tts_saas.", response_format="wav"
    ) as response:
        body = response.read()
        assert response.headers["x-model"] == "voxcpm"
    assert rate_of(body) == 24000 and len(body) > 1000


def test_48k_audio_reaches_each_format_at_its_rate_live_and_from_the_cache(voxcpm_alone, owner):
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:
        live = speak(client, model="voxcpm", voice="alloy", response_format="pcm")
        native = speak(client, model="voxcpm", voice="alloy", response_format="pcm_48000")
        again = speak(client, model="voxcpm", voice="alloy", response_format="pcm")
        wav = speak(client, model="voxcpm", voice="alloy", response_format="wav_48000")
        sse = speak(client, model="voxcpm", voice="alloy", response_format="pcm", stream_format="sse")
    assert live.headers["x-cache"] == "miss" and native.headers["x-cache"] == "hit"
    seconds = len(live.content) / 2 / 24000  # OpenAI's pcm: 24 kHz whatever the model makes
    assert seconds > 0.1 and seconds * 6.25 == pytest.approx(round(seconds * 6.25), abs=0.05)  # 160 ms patches
    assert len(native.content) == pytest.approx(2 * len(live.content), abs=4)
    assert float(native.headers["x-audio-duration"]) == pytest.approx(seconds, abs=0.002)
    assert again.content == live.content  # the cache keeps 48 kHz; its 24 kHz is the live one's
    assert rate_of(wav.content) == 48000 and wav.content[44:] == native.content
    done = [line for line in sse.text.splitlines() if "speech.audio.done" in line][0]
    assert f'"audio_seconds":{round(seconds, 3)}' in done


def test_instructions_design_the_voice(voxcpm_alone, owner):
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:
        plain = speak(client, model="voxcpm", voice="alloy", response_format="pcm", input="Good morning.")
        whisper = speak(
            client, model="voxcpm", voice="alloy", response_format="pcm", input="Good morning.", instructions="Whisper."
        )
    assert whisper.headers["x-cache"] == "miss" and whisper.content != plain.content
    assert whisper.headers["x-instructions"] == "applied" and "x-instructions" not in plain.headers


def test_a_voice_cloned_from_a_recording_is_encoded_once_and_speaks_with_and_without_instructions(voxcpm_alone, owner):
    """A recording of 20 s (over ChatTTS's 15, within VoxCPM2's 30), no transcript: a worker encodes
    it into the model's reference, kept with the voice; it then speaks, cached by seed, styled by
    `instructions`; one with a transcript speaks differently (the recording continued)."""
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:

        def clone(name: str, seconds: float, **fields) -> httpx.Response:
            files = {"audio": ("me.wav", recording(seconds), "audio/wav")}
            return client.post("/audio/voices", data={"name": name, "model": "voxcpm", **fields}, files=files)

        unsaid = clone("Unsaid", 20, consent="true")
        assert unsaid.status_code == 201, unsaid.text
        said = clone("Said", 3, consent="true", transcript="It costs 12 dollars.")
        too_long = clone("Long", 31, consent="true")
        unconsented = clone("Nope", 3)

        def ready(voice_id: str):
            seen = client.get(f"/audio/voices/{voice_id}").json()
            return seen if seen["status"] != "processing" else None

        for created in (unsaid, said):
            voice_id = created.json()["id"]
            assert wait_until(lambda v=voice_id: ready(v), 120, "never encoded")["status"] == "ready"
        stored = Voice.objects.get(pk=unsaid.json()["id"])
        assert stored.sample and stored.sample_text == "" and stored.consent["by"]["type"] == "key"
        assert Voice.objects.get(pk=said.json()["id"]).sample_text == "It costs twelve dollars."
        first = speak(client, model="voxcpm", voice=stored.id, response_format="pcm")
        again = speak(client, model="voxcpm", voice=stored.id, response_format="pcm")
        styled = speak(client, model="voxcpm", voice=stored.id, response_format="pcm", instructions="Whisper.")
        continued = speak(client, model="voxcpm", voice=said.json()["id"], response_format="pcm")
        builtin = speak(client, model="voxcpm", voice="alloy", response_format="pcm")
    assert (first.headers["x-cache"], again.headers["x-cache"]) == ("miss", "hit") and again.content == first.content
    assert styled.headers["x-instructions"] == "applied"
    assert len({first.content, styled.content, continued.content, builtin.content}) == 4
    assert too_long.status_code == 400 and "use 1 to 30 s" in too_long.json()["error"]["message"]
    assert unconsented.status_code == 400 and unconsented.json()["error"]["code"] == "consent_required"


def test_a_saved_design_is_spoken_once_by_a_worker_and_then_speaks_as_a_voice(voxcpm_alone, owner):
    headers = {"Authorization": f"Bearer {owner.key}"}
    design = {"name": "Narrator", "model": "voxcpm", "design": "A warm, slow older man", "seed": 9}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:
        created = client.post("/audio/voices", json=design)
        assert created.status_code == 201 and created.json()["status"] == "processing", created.text
        voice_id = created.json()["id"]

        def ready():
            seen = client.get(f"/audio/voices/{voice_id}").json()
            return seen if seen["status"] != "processing" else None

        seen = wait_until(ready, 120, "the design was never spoken")
        first = speak(client, model="voxcpm", voice=voice_id, response_format="pcm")
        designed = speak(client, model="voxcpm", response_format="pcm", instructions=design["design"], seed=9)
        lone_text = client.post("/audio/voices", json={"name": "X", "model": "voxcpm", "seed": 1, "sample_text": "Hi."})
        seeded = client.post("/audio/voices", json={"name": "Y", "model": "voxcpm", "seed": 1})
    assert (seen["status"], seen["source"], seen["design"]) == ("ready", "design", "A warm, slow older man")
    stored = Voice.objects.get(pk=voice_id)
    assert stored.sample and stored.transcript and stored.sample_text  # the sample, kept as its reference
    assert first.content != designed.content  # the kept sample speaks, not the description again
    assert lone_text.status_code == 400 and lone_text.json()["error"]["param"] == "sample_text"
    assert seeded.status_code == 400 and "cannot make a voice from a seed" in seeded.text


def test_a_jobs_stored_wav_is_24k_and_its_duration_is_the_models(voxcpm_alone, owner):
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:
        job = client.post(
            "/jobs", json={"model": "voxcpm", "input": "One. Two. Three.", "response_format": "wav", "seed": 2}
        )
        assert job.status_code in (200, 201, 202), job.text
        job_id = job.json()["id"]
        for _ in range(300):
            status = client.get(f"/jobs/{job_id}").json()
            if status["status"] in ("succeeded", "failed"):
                break
            time.sleep(0.2)
        assert status["status"] == "succeeded", status
        audio = client.get(f"/jobs/{job_id}/audio")
    assert rate_of(audio.content) == 24000
    samples = (len(audio.content) - 44) / 2
    assert samples / 24000 == pytest.approx(status["audio_seconds"], abs=0.01)


async def _utterances(base: str, key: str) -> list[tuple[dict, bytes]]:
    """A tts.v1 utterance (pcm) and a tts.v2 text stream (pcm_48000) of VoxCPM2: each its audio
    and its end message."""
    url = base.replace("http://", "ws://") + "/v1/audio/stream"
    headers = {"Authorization": f"Bearer {key}"}
    out = []
    for protocol, messages in (
        ("tts.v1", [{"type": "synthesize", "id": "a", "text": "Hello there.", "seed": 3, "format": "pcm"}]),
        (
            "tts.v2",
            [
                {"type": "begin", "id": "b", "seed": 3, "format": "pcm_48000", "text": "Hello there. "},
                {"type": "text", "id": "b", "text": "And again."},
                {"type": "close", "id": "b"},
            ],
        ),
    ):
        async with websockets.connect(url, additional_headers=headers, subprotocols=[protocol]) as ws:
            assert json.loads(await ws.recv())["type"] == "ready"
            for message in messages:
                await ws.send(json.dumps(message))
            audio = b""
            while True:
                frame = await asyncio.wait_for(ws.recv(), 60)
                if isinstance(frame, bytes):
                    audio += frame
                    continue
                message = json.loads(frame)
                assert message["type"] != "error", message
                if message["type"] == "end":
                    out.append((message, audio))
                    break
    return out


def test_websocket_utterances_carry_the_formats_rate(voxcpm_alone, owner):
    (v1_end, v1_audio), (v2_end, v2_audio) = asyncio.run(_utterances(voxcpm_alone, owner.key))
    assert v1_end["audio_seconds"] == pytest.approx(len(v1_audio) / 2 / 24000, abs=1e-3) and v1_audio
    assert v2_end["audio_seconds"] == pytest.approx(len(v2_audio) / 2 / 48000, abs=1e-3) and v2_audio
    assert v2_end["segments"][-1]["end"] == pytest.approx(v2_end["audio_seconds"], abs=0.01)  # captions at 48 kHz too


def test_the_voices_page_clones_and_designs_voxcpm_voices(voxcpm_alone, tmp_path):
    """On a VoxCPM2 deployment the Voices page offers a recording (no seed: the model makes none)
    and a description, each made by the worker and followed in place."""
    clip = tmp_path / "me.wav"
    clip.write_bytes(recording(3))
    with browser_page() as page:
        sign_up(page, voxcpm_alone, "cloner@example.com", "Cloner Co")
        page.goto(f"{voxcpm_alone}/dashboard/voices")
        expect(page.locator("input[name=source][value=seed]")).to_be_hidden()
        expect(page.locator("input[name=source][value=recording]")).to_be_checked()
        page.fill("#id_name", "Me")
        page.set_input_files("#id_audio", str(clip))
        page.check("#id_consent")
        page.click("button:has-text('Create voice')")
        expect(page.locator(".messages")).to_contain_text("Voice Me is being made from the recording")
        page.check("input[name=source][value=design]")
        expect(page.locator("#id_audio")).to_be_hidden()
        page.fill("#id_name", "Storyteller")
        page.fill("#id_design", "A warm, slow older man")
        page.click("button:has-text('Create voice')")
        expect(page.locator(".messages")).to_contain_text("Voice Storyteller is being made from its description")
        for name, made in (("Me", "recording"), ("Storyteller", "design")):
            row = page.locator("#own-voices tr", has_text=name)
            expect(row).to_have_attribute("data-status", "ready", timeout=60_000)
            expect(row.locator("td.made-from")).to_have_text(made)
        assert page.errors == []
