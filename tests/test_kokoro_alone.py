"""A deployment that sells speech serves Kokoro alone (TTS_ENGINES=kokoro): nothing on its web or
worker paths imports ChatTTS, its listings name only Kokoro, OpenAI's names speak with Kokoro, and
the README's example requests work."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import openai
import pytest

from tests import stack

pytestmark = pytest.mark.django_db(transaction=True)

NO_CHATTTS = r"""
import sys
sys.modules["ChatTTS"] = None  # any import of ChatTTS now fails, as where it is not installed
import django
django.setup()
import tts_saas.asgi, tts_saas.urls, synthesis.tasks  # the web's and the worker's code
from inference import registry
from inference.engine import EngineOptions, SynthesisRequest
from inference.kokoro.params import KokoroParams
engine = registry.load("kokoro", EngineOptions(model_dir=sys.argv[1], device="cpu"))
audio = list(engine.synthesize(SynthesisRequest(["Hello there."], KokoroParams(voice=(("af_heart", 1.0),)))))
print("chattts imported:", any(name.startswith("ChatTTS") for name, m in sys.modules.items() if m is not None))
print("samples:", sum(len(a) for a in audio))
"""


def test_kokoros_web_and_worker_code_run_without_chattts():
    env = {**os.environ, "TTS_ENGINES": "kokoro", "DJANGO_SETTINGS_MODULE": "tts_saas.settings"}
    result = subprocess.run(
        [sys.executable, "-c", NO_CHATTTS, os.environ["TTS_TEST_KOKORO_CHECKPOINT"]],
        capture_output=True,
        text=True,
        env=env,
        cwd=stack.ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "chattts imported: False" in result.stdout
    assert int(result.stdout.split("samples:")[1]) > 0


@pytest.fixture
def kokoro_alone(tmp_path):
    alone = stack.web_and_worker(tmp_path, 11, "alone", queue="tts-kokoro", engine="kokoro", TTS_ENGINES="kokoro")
    with alone as (base, _):
        yield base


def test_a_kokoro_only_deployment_lists_only_kokoro_and_runs_the_readmes_examples(kokoro_alone, owner):
    headers = {"Authorization": f"Bearer {owner.key}"}
    with httpx.Client(base_url=f"{kokoro_alone}/v1", headers=headers, timeout=120) as client:
        models = client.get("/models").json()["data"]
        chattts = client.post("/audio/speech", json={"model": "chattts", "input": "Hi."})
        # The README's first example, as written there.
        readme = client.post(
            "/audio/speech",
            json={
                "model": "kokoro",
                "input": "Hello! This is your own speech service. The first month costs $5.",
                "voice": "nova",
                "response_format": "mp3",
            },
        )
    assert {m["engine"] for m in models} == {"kokoro"}
    assert {m["id"] for m in models} == {"kokoro", "tts-1", "tts-1-hd", "gpt-4o-mini-tts"}
    assert all(m["license"]["commercial_use"] for m in models)
    assert chattts.status_code == 404 and chattts.json()["error"]["code"] == "model_not_found"
    assert "not served here" in chattts.json()["error"]["message"]
    assert readme.status_code == 200, readme.text
    assert readme.headers["x-model"] == "kokoro" and readme.headers["content-type"] == "audio/mpeg"
    # The README's SDK example: OpenAI's name, which here means Kokoro.
    sdk = openai.OpenAI(base_url=f"{kokoro_alone}/v1", api_key=owner.key, max_retries=0)
    with sdk.audio.speech.with_streaming_response.create(
        model="tts-1", voice="nova", input="Hello from tts_saas.", response_format="wav"
    ) as response:
        body = response.read()
        assert response.headers["x-model"] == "kokoro"
    assert body[:4] == b"RIFF" and len(body) > 1000
