"""A deployment of VoxCPM2 alone (TTS_ENGINES=voxcpm): nothing on its web or worker paths imports
ChatTTS or Kokoro, its listings name only VoxCPM2, OpenAI's names speak with it, and its 48 kHz
audio reaches every format at the format's rate: plain `pcm` and `wav` at 24 kHz (OpenAI's
contract), `pcm_48000`/`wav_48000` at the model's own rate, from a live generation and from the
cache alike, a job's stored file too; and everything else the service does works on it: every
codec and rate, lexicons (text substitution; it reads no phonemes), identical requests sharing one
generation, `speed`, long jobs in one voice captioned per segment, billing at its plan's weight and
per-model usage, previews, the playground. Random weights: noise, not speech."""

from __future__ import annotations

import asyncio
import base64
import json
import math
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

from billing.models import QuotaPeriod, UsageEvent
from inference.voxcpm.spec import SPEC
from synthesis.audio.formats import RAW_RATES
from synthesis.models import Job
from tests import stack
from tests.browser import browser_page, sign_up
from tests.conftest import make_persona
from tests.factories import own_plan
from tests.test_concurrent_load import speak_all
from tests.test_custom_voices import recording
from tests.test_jobs import wait_for
from tests.test_output_formats import decode
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
        readme = client.post(  # the README's VoxCPM2 example, as written there
            "/audio/speech",
            json={
                "model": "voxcpm",
                "input": "Bonjour, ça coûte 5 €. Hello again!",
                "voice": "nova",
                "instructions": "Warm and unhurried",
                "response_format": "wav",
                "sample_rate": 48000,
                "seed": 7,
            },
        )
    assert readme.status_code == 200, readme.text
    assert rate_of(readme.content) == 48000 and readme.headers["x-instructions"] == "applied"
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


def sse_audio(response: httpx.Response) -> tuple[bytes, list[dict]]:
    """A `stream_format: sse` answer's audio and its segments' captions."""
    pcm, segments = b"", []
    for line in response.text.splitlines():
        if line.startswith("data: "):
            event = json.loads(line[6:])
            if event["type"] == "speech.audio.delta":
                pcm += base64.b64decode(event["audio"])
            elif event["type"] == "speech.audio.segment":
                segments.append({k: v for k, v in event.items() if k != "type"})
    return pcm, segments


def test_every_format_and_rate_is_served_from_one_voxcpm_generation(voxcpm_alone, owner):
    """One generation at the model's 48 kHz, cached; every codec and rate encoded from it, each
    decoding at its rate to the generation's length."""
    body = {"model": "voxcpm", "voice": "echo", "input": "Every format from one generation.", "seed": 12}
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:
        native = speak(client, **body, response_format="pcm_48000")
        seconds = len(native.content) / 2 / 48000
        served = {}
        for rate in RAW_RATES:
            served[f"pcm_{rate}"] = (speak(client, **body, response_format=f"pcm_{rate}"), "s16le", rate)
            served[f"wav_{rate}"] = (speak(client, **body, response_format=f"wav_{rate}"), "wav", rate)
        for name, demuxer, rate in (
            ("ulaw_8000", "mulaw", 8000),
            ("alaw_8000", "alaw", 8000),
            ("mp3", "mp3", 24000),
            ("mp3_22050_32", "mp3", 22050),
            ("mp3_44100_128", "mp3", 44100),
            ("opus", "ogg", 48000),  # Opus decoders always give 48 kHz
            ("aac", "aac", 24000),
            ("flac", "flac", 24000),
        ):
            served[name] = (speak(client, **body, response_format=name), demuxer, rate)
    assert native.headers["x-cache"] == "miss" and seconds > 0.1
    for name, (response, demuxer, rate) in served.items():
        assert response.headers["x-cache"] == "hit", name
        raw = demuxer in ("s16le", "mulaw", "alaw")
        samples, decoded_rate = decode(response.content, demuxer, rate if raw else None)
        assert decoded_rate == rate, name
        if raw or demuxer in ("wav", "flac"):  # lossless: to a sample
            assert abs(len(samples) - seconds * rate) <= 1, name
        else:  # lossy encoders' priming and padding stay (no edit lists in a stream)
            assert seconds - 1e-3 <= len(samples) / rate <= seconds + 0.1, name


def test_a_lexicon_substitutes_text_on_voxcpm_and_the_cache_key_follows_what_is_spoken(voxcpm_alone, owner):
    """VoxCPM2 reads no phonemes: an entry's alias replaces the text, an entry with phonemes only
    leaves it as written. The key hashes the text as spoken; captions show the text as sent."""
    text = "VoxCPM runs nginx today."
    entries = [{"text": "VoxCPM", "alias": "Vox C P M"}, {"text": "nginx", "phonemes": "ˈɛnʤɪnˈɛks"}]
    body = {"model": "voxcpm", "voice": "alloy", "seed": 13, "response_format": "pcm"}
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:
        lexicon = client.post("/lexicons", json={"name": "names", "entries": entries})
        assert lexicon.status_code == 201, lexicon.text
        applied = speak(client, **body, input=text, lexicons=[lexicon.json()["id"]], stream_format="sse")
        plain = speak(client, **body, input=text)
        typed = speak(client, **body, input="Vox C P M runs nginx today.")
    applied_pcm, captions = sse_audio(applied)
    assert applied.headers["x-cache"] == "miss" and applied_pcm
    assert plain.headers["x-cache"] == "miss" and plain.content != applied_pcm  # another key, other audio
    assert typed.headers["x-cache"] == "hit" and typed.content == applied_pcm  # the alias was read, nginx as written
    assert [c["text"] for c in captions] == [text]


def test_identical_seeded_voxcpm_requests_sent_at_once_share_one_generation(voxcpm_alone):
    org = make_persona("Echo Vox", concurrent_jobs=8, requests_per_minute=1000)
    body = {"model": "voxcpm", "input": "Welcome aboard, everybody, at the same time.", "seed": 77}
    responses = speak_all(voxcpm_alone, org.key, [body] * 3)
    assert [r.status_code for r in responses] == [200] * 3
    assert len({r.content for r in responses}) == 1 and responses[0].content
    assert Job.objects.filter(organization=org.org).count() == 1  # one generation for three requests
    assert [r.headers["x-cache"] for r in responses].count("miss") == 1
    events = UsageEvent.objects.filter(organization=org.org)
    assert events.count() == 3 and events.filter(cached=True).count() == 2
    assert {e.characters for e in events} == {2 * len(body["input"])}  # each billed at VoxCPM2's weight


def test_speed_stretches_voxcpm_audio_from_the_same_generation(voxcpm_alone, owner):
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:
        normal = speak(client, model="voxcpm", voice="alloy", response_format="pcm", seed=14)
        fast = speak(client, model="voxcpm", voice="alloy", response_format="pcm", seed=14, speed=2.0)
        slow = speak(client, model="voxcpm", voice="alloy", response_format="pcm", seed=14, speed=0.5)
    assert fast.headers["x-cache"] == slow.headers["x-cache"] == "miss"  # speed is part of the key
    assert len(fast.content) == pytest.approx(len(normal.content) / 2, rel=0.05)
    assert len(slow.content) == pytest.approx(len(normal.content) * 2, rel=0.05)


def test_voxcpm_is_billed_at_its_plans_weight_and_usage_shows_it_per_model(voxcpm_alone, owner):
    text = "Billing at a weight, please."
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:
        first = speak(client, model="voxcpm", voice="alloy", input=text, seed=15, response_format="pcm")
        again = speak(client, model="voxcpm", voice="alloy", input=text, seed=15, response_format="pcm")
        by_model = client.get("/usage", params={"group_by": "model"}).json()
        subscription = client.get("/subscription").json()
    billed = math.ceil(len(text) * 2.0)  # the seeded plans' weight for VoxCPM2
    assert (first.headers["x-cache"], again.headers["x-cache"]) == ("miss", "hit")
    rows = UsageEvent.objects.filter(organization=owner.org)
    assert sorted((r.model, r.characters, r.cached) for r in rows) == [
        ("voxcpm", billed, False),
        ("voxcpm", billed, True),
    ]
    (voxcpm,) = by_model["data"]
    assert (voxcpm["model"], voxcpm["characters"], voxcpm["requests"]) == ("voxcpm", 2 * billed, 2)
    assert subscription["character_count"] == 2 * billed


def test_a_long_job_on_a_cloned_voice_speaks_every_segment_in_it_captioned_one_by_one(voxcpm_alone, owner):
    """Beyond one request's limit, one job: its segments all spoken with the clone's reference (one
    voice across chunks), its captions one per segment in order, ending with its audio."""
    own_plan(owner.org, "short-requests", max_input_chars=200, max_job_chars=2000)
    article = " ".join(f"Part {n} of the story goes on, a sentence at a time, to its end." for n in range(8))
    segments = SPEC.prepare(article).segments
    assert len(article) > 200 and len(segments) >= 3
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:
        files = {"audio": ("me.wav", recording(3), "audio/wav")}
        voice = client.post("/audio/voices", data={"name": "Reader", "model": "voxcpm", "consent": "true"}, files=files)
        assert voice.status_code == 201, voice.text
        voice_id = voice.json()["id"]
        wait_until(lambda: client.get(f"/audio/voices/{voice_id}").json()["status"] == "ready", 120, "never encoded")
        refused = client.post("/audio/speech", json={"model": "voxcpm", "voice": voice_id, "input": article})
        job = client.post(
            "/jobs", json={"model": "voxcpm", "voice": voice_id, "input": article, "seed": 16, "response_format": "wav"}
        )
        assert job.status_code == 202, job.text
        done = wait_for(client, job.json()["id"], {"succeeded", "failed"}, timeout=240)
        captions = client.get(f"/jobs/{done['id']}/captions").json()["segments"]
        srt = client.get(f"/jobs/{done['id']}/captions", params={"format": "srt"}).text
        audio = client.get(f"/jobs/{done['id']}/audio").content
    assert refused.status_code == 400 and "/v1/jobs" in refused.json()["error"]["message"]
    assert done["status"] == "succeeded" and done["model"] == "voxcpm", done
    stored = Job.objects.get(pk=done["id"])
    assert stored.segments == list(segments) and stored.params["reference"] == Voice.objects.get(pk=voice_id).sample
    assert [c["text"] for c in captions] == list(segments)  # one per segment, in order
    assert captions[0]["start"] == 0.0 and all(
        a["end"] <= b["start"] for a, b in zip(captions, captions[1:], strict=False)
    )
    assert captions[-1]["end"] == pytest.approx(done["audio_seconds"], abs=1e-3)
    assert len(srt.strip().split("\n\n")) == len(segments)
    assert rate_of(audio) == 24000 and (len(audio) - 44) / 2 / 24000 == pytest.approx(done["audio_seconds"], abs=0.01)
    assert UsageEvent.objects.get(job_id=done["id"]).characters == 2 * len(article)


def test_a_voxcpm_voice_is_previewed_unbilled_and_cached(voxcpm_alone, owner):
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:
        first = client.get("/audio/voices/nova/preview", params={"model": "voxcpm", "format": "wav"})
        again = client.get("/audio/voices/nova/preview", params={"model": "voxcpm", "format": "wav"})
        native = client.get("/audio/voices/nova/preview", params={"model": "voxcpm", "format": "wav_48000"})
        default = client.get("/audio/voices/nova/preview")  # the deployment's model, mp3
        kokoro = client.get("/audio/voices/af_heart/preview", params={"model": "voxcpm"})
    assert first.status_code == 200 and (first.headers["x-cache"], again.headers["x-cache"]) == ("miss", "hit")
    # The live file's header says unknown sizes (streamed); the cached one's, its own: the same audio.
    assert again.content[44:] == first.content[44:] and rate_of(first.content) == rate_of(again.content) == 24000
    assert rate_of(native.content) == 48000 and len(native.content) - 44 == pytest.approx(
        2 * (len(first.content) - 44), abs=4
    )
    assert default.status_code == 200 and default.headers["content-type"] == "audio/mpeg"
    assert default.headers["x-cache"] == "hit"  # the same preview, another format
    assert kokoro.status_code == 404
    quota = QuotaPeriod.objects.filter(organization=owner.org).first()
    assert quota is None or (quota.used, quota.reserved) == (0, 0)  # previews are not billed
    assert set(UsageEvent.objects.filter(organization=owner.org).values_list("characters", flat=True)) <= {0}


def test_voxcpm_speaks_in_the_playground_billed_at_its_weight_and_its_voices_are_previewed(voxcpm_alone):
    text = "VoxCPM2 speaks in the playground."
    with browser_page() as page:
        sign_up(page, voxcpm_alone, "playground@example.com", "Playground Co")
        page.goto(f"{voxcpm_alone}/dashboard/playground?model=voxcpm&voice=alloy")
        assert page.locator("#pg-model").input_value() == "voxcpm"
        assert "each character billed as 2" in page.locator("#pg-model-hint").inner_text()
        remaining = int(page.locator("#pg-text").get_attribute("data-remaining"))
        page.fill("#pg-text", text)
        assert f"{len(text)} / " in page.locator("#pg-count").inner_text()
        assert f" · {2 * len(text)} billed · " in page.locator("#pg-count").inner_text()
        page.click("#pg-play")
        page.wait_for_function("window.ttsPlayground.ended || window.ttsPlayground.error", timeout=120_000)
        state = page.evaluate("window.ttsPlayground")
        assert state["error"] is None and state["bytes"] > 0 and state["bytes"] % 2 == 0
        assert f"{len(text)} characters typed, {2 * len(text)} billed" in page.locator("#pg-status").inner_text()
        left = f"{remaining - 2 * len(text):,} left this month"
        assert left in page.locator("#pg-count").inner_text()  # what the server billed, once

        def billed_by_the_server() -> bool:
            page.reload()
            return left in page.locator("#pg-count").inner_text()

        wait_until(billed_by_the_server, 30, "the page's count is not the server's", interval=0.5)
        page.goto(f"{voxcpm_alone}/dashboard/voices")
        page.locator("#voices-voxcpm tbody tr[data-voice='alloy'] button.preview").click()
        page.wait_for_function("window.ttsPreview.ended || window.ttsPreview.error", timeout=120_000)
        preview = page.evaluate("window.ttsPreview")
        assert preview["error"] is None and preview["bytes"] > 0 and preview["model"] == "voxcpm"
        assert page.errors == []


def test_ssml_on_voxcpm_pauses_mutes_switches_language_and_marks_its_segments(voxcpm_alone, owner):
    ssml = (
        '<speak>Hello there.<break time="600ms"/><mark name="after"/>'
        '<prosody rate="fast" volume="silent">Quiet now.</prosody> '
        '<lang xml:lang="fr-FR">Bonjour à tous.</lang> Say <phoneme ph="kˈOkəɹO">Kokoro</phoneme>.</speak>'
    )
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{voxcpm_alone}/v1", headers=headers, timeout=120) as client:
        job = client.post("/jobs", json={"model": "voxcpm", "input": ssml, "response_format": "pcm", "seed": 3})
        assert job.status_code == 202, job.text
        done = wait_for(client, job.json()["id"], {"succeeded", "failed"}, timeout=240)
        pcm = client.get(f"/jobs/{done['id']}/audio").content
        captions = client.get(f"/jobs/{done['id']}/captions").json()["segments"]
        described = client.get("/models/voxcpm").json()["ssml"]
    assert done["status"] == "succeeded", done
    audio = [int.from_bytes(pcm[i : i + 2], "little", signed=True) for i in range(0, len(pcm), 2)]
    assert [c["text"] for c in captions] == ["Hello there.", "Quiet now.", "Bonjour à tous.", "Say Kokoro."]
    assert captions[1]["start"] - captions[0]["end"] == pytest.approx(0.6, abs=1e-3)  # the break, exactly
    assert captions[1]["marks"] == [{"name": "after", "time": captions[1]["start"]}]
    quiet = audio[round(captions[1]["start"] * 24000) + 120 : round(captions[1]["end"] * 24000) - 120]
    assert quiet and not any(quiet)  # volume="silent"
    assert "reads text, not phonemes" in described["phoneme"] and "approximate" in described["mark"]
