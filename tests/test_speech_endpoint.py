"""POST /v1/audio/speech through the real stack: uvicorn, Redis, a Celery worker process and the
tiny random checkpoint loaded by ChatTTS's own loader. Random weights make noise, so these tests
assert on what can be known of noise: format, sample rate, duration bounds, determinism."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys

import av
import openai
import pytest

from billing.models import UsageEvent
from inference.chattts.params import SAMPLES_PER_TOKEN, token_budget
from inference.chattts.spec import INLINE_TAGS
from inference.chattts.spec import SPEC as CHATTTS
from inference.spec import SAMPLE_RATE
from inference.text.preparation import normalize_segment
from synthesis.models import Job
from tests.stack import ROOT
from tts_saas.redis import get_redis

pytestmark = pytest.mark.django_db(transaction=True)

# Upper bound on the audio the service may return for an input: every segment's token budget,
# plus the pauses between segments and the 10 ms glide to silence that ends a streamed segment.
PAUSE_SECONDS = 0.12
GLIDE_SECONDS = 0.01


def max_seconds(text: str) -> float:
    prepared = CHATTTS.prepare(text)
    n = len(prepared.segments)
    tokens = sum(token_budget(normalize_segment(s, INLINE_TAGS, "chattts")) for s in prepared.segments)
    return tokens * SAMPLES_PER_TOKEN / SAMPLE_RATE + PAUSE_SECONDS * (n - 1) + GLIDE_SECONDS * n


def post(live_stack, key, **body):
    body.setdefault("voice", "alloy")
    with live_stack.client(key) as client:
        return client.post("/audio/speech", json=body)


def decode(data: bytes) -> tuple[int, float, str]:
    """(sample rate, seconds, codec) of an encoded audio file, decoded by FFmpeg."""
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        samples = sum(frame.samples for frame in container.decode(stream))
        return stream.rate, samples / stream.rate, stream.codec_context.name


@pytest.mark.parametrize(
    ("fmt", "content_type", "codec"),
    [
        ("mp3", "audio/mpeg", "mp3"),
        ("opus", "audio/ogg", "opus"),
        ("aac", "audio/aac", "aac"),
        ("flac", "audio/flac", "flac"),
        ("wav", "audio/wav", "pcm_s16le"),
    ],
)
def test_it_returns_decodable_audio_in_each_format(live_stack, owner, fmt, content_type, codec):
    text = f"Format check for {fmt}: 2 words."
    response = post(live_stack, owner.key, input=text, response_format=fmt, seed=11)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == content_type
    assert response.headers["x-request-id"]
    assert response.headers["x-cache"] == "miss"  # streamed as generated: no length known up front
    rate, seconds, decoded_codec = decode(response.content)
    assert decoded_codec.startswith(codec)
    # Opus always decodes at 48 kHz (the format's design); the others keep ChatTTS's 24 kHz.
    assert rate == (48000 if fmt == "opus" else SAMPLE_RATE)
    assert 0.2 < seconds <= max_seconds(text) + 0.1  # codec padding and frame rounding
    exact = post(live_stack, owner.key, input=text, response_format="pcm", seed=11)
    assert seconds == pytest.approx(len(exact.content) / 2 / SAMPLE_RATE, abs=0.1)
    hit = post(live_stack, owner.key, input=text, response_format=fmt, seed=11)
    assert hit.headers["x-cache"] == "hit"
    assert decode(hit.content)[1] == pytest.approx(float(hit.headers["x-audio-duration"]), abs=0.1)


def test_pcm_is_raw_16_bit_mono_whose_length_matches_the_duration(live_stack, owner):
    text = "Raw samples, please."
    pcm = post(live_stack, owner.key, input=text, response_format="pcm", seed=5)
    wav = post(live_stack, owner.key, input=text, response_format="wav", seed=5)
    assert pcm.status_code == 200 and wav.status_code == 200
    assert pcm.headers["content-type"] == "audio/pcm"
    assert not pcm.content.startswith(b"RIFF")
    assert len(pcm.content) % 2 == 0
    seconds = len(pcm.content) / 2 / SAMPLE_RATE
    assert 0.2 < seconds <= max_seconds(text)
    assert wav.headers["x-cache"] == "hit"  # the pcm request cached the audio
    assert float(wav.headers["x-audio-duration"]) == pytest.approx(seconds, abs=1e-3)
    assert wav.content[:4] == b"RIFF" and wav.content[44:] == pcm.content


def test_same_voice_seed_and_text_give_identical_audio_the_second_time_from_cache(live_stack, owner):
    body = {"input": "Cache me if you can, 42 times.", "voice": "nova", "seed": 1234, "response_format": "pcm"}
    first = post(live_stack, owner.key, **body)
    second = post(live_stack, owner.key, **body)
    assert first.status_code == second.status_code == 200
    assert first.headers["x-cache"] == "miss"
    assert second.headers["x-cache"] == "hit"
    assert first.content == second.content
    assert Job.objects.filter(organization=owner.org).count() == 1  # the hit ran nothing


def test_same_request_without_cache_is_reproduced_by_the_engine(live_stack, owner):
    """Determinism does not come from the cache: another voice-seed pair run twice on the worker
    (cache entries removed in between) still matches sample for sample."""
    body = {"input": "Deterministic noise.", "voice": "echo", "seed": 77, "response_format": "pcm"}
    first = post(live_stack, owner.key, **body)
    for key in get_redis().scan_iter(f"tts:audio:{owner.org.pk}:*"):
        get_redis().delete(key)
    second = post(live_stack, owner.key, **body)
    assert first.headers["x-cache"] == second.headers["x-cache"] == "miss"
    assert first.content == second.content


def test_another_seed_or_voice_gives_other_audio(live_stack, owner):
    base = {"input": "Same words.", "response_format": "pcm"}
    a = post(live_stack, owner.key, voice="alloy", seed=1, **base).content
    b = post(live_stack, owner.key, voice="alloy", seed=2, **base).content
    c = post(live_stack, owner.key, voice="onyx", seed=1, **base).content
    assert a != b and a != c


def test_an_unseeded_request_is_not_cached_and_reports_its_seed(live_stack, owner):
    first = post(live_stack, owner.key, input="No seed given.", response_format="pcm")
    second = post(live_stack, owner.key, input="No seed given.", response_format="pcm")
    assert first.headers["x-cache"] == second.headers["x-cache"] == "miss"
    assert first.headers["x-seed"].isdigit()
    again = post(
        live_stack, owner.key, input="No seed given.", response_format="pcm", seed=int(first.headers["x-seed"])
    )
    assert again.content == first.content  # the reported seed reproduces the audio


def test_long_input_is_split_and_joined_within_bounds(live_stack, owner):
    text = " ".join(f"Sentence {i} is here." for i in range(1, 25))
    assert len(CHATTTS.prepare(text).segments) > 1
    response = post(live_stack, owner.key, input=text, response_format="pcm", seed=3)
    assert response.status_code == 200, response.text
    seconds = len(response.content) / 2 / SAMPLE_RATE
    assert 1.0 < seconds <= max_seconds(text)
    job = Job.objects.get(pk=response.headers["x-job-id"])
    assert job.status == Job.Status.SUCCEEDED and len(job.segments) > 1


def test_the_official_openai_sdk_works_unchanged(live_stack, owner, tmp_path):
    client = openai.OpenAI(api_key=owner.key, base_url=f"{live_stack.base_url}/v1", max_retries=0)
    response = client.audio.speech.create(
        model="tts-1", voice="alloy", input="Hello from the SDK.", response_format="wav", extra_body={"seed": 7}
    )
    path = tmp_path / "sdk.wav"
    response.write_to_file(path)
    rate, seconds, codec = decode(path.read_bytes())
    assert (rate, codec) == (SAMPLE_RATE, "pcm_s16le") and seconds > 0.2
    with client.audio.speech.with_streaming_response.create(
        model="tts-1", voice="coral", input="Streamed.", extra_body={"seed": 7}
    ) as r:
        mp3 = r.read()
    assert decode(mp3)[2].startswith("mp3")


def test_the_openai_sdk_raises_its_own_errors(live_stack, owner):
    base_url = f"{live_stack.base_url}/v1"
    bad_key = openai.OpenAI(api_key="tts_nope_nope", base_url=base_url, max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad_key.audio.speech.create(model="tts-1", voice="alloy", input="x")
    client = openai.OpenAI(api_key=owner.key, base_url=base_url, max_retries=0)
    with pytest.raises(openai.BadRequestError) as info:
        client.audio.speech.create(model="tts-1", voice="nobody", input="x")
    assert info.value.body["param"] == "voice"
    assert "alloy" in info.value.body["message"]


def test_sse_sends_audio_deltas_then_done_with_usage(live_stack, owner):
    text = "Events, please."
    response = post(live_stack, owner.key, input=text, response_format="pcm", stream_format="sse", seed=21)
    assert response.status_code == 200 and response.headers["content-type"] == "text/event-stream"
    events = [json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")]
    deltas, (segment,), done = events[:-2], events[-2:-1], events[-1]
    assert deltas and all(e["type"] == "speech.audio.delta" for e in deltas)
    pcm = b"".join(base64.b64decode(e["audio"]) for e in deltas)
    duration = len(pcm) / 2 / SAMPLE_RATE
    assert segment == {"type": "speech.audio.segment", "text": text, "start": 0.0, "end": round(duration, 3)}
    assert done["type"] == "speech.audio.done"
    assert done["usage"]["characters"] == len(text)
    assert done["usage"]["audio_seconds"] == pytest.approx(len(pcm) / 2 / SAMPLE_RATE, abs=1e-3)
    plain = post(live_stack, owner.key, input=text, response_format="pcm", seed=21)
    assert plain.headers["x-cache"] == "hit" and plain.content == pcm


def test_a_retried_request_with_an_idempotency_key_replays_the_audio_and_bills_once(live_stack, owner):
    body = {"input": "Once only.", "voice": "alloy", "response_format": "pcm"}
    with live_stack.client(owner.key) as client:
        first = client.post("/audio/speech", json=body, headers={"Idempotency-Key": "retry-1"})
        second = client.post("/audio/speech", json=body, headers={"Idempotency-Key": "retry-1"})
    assert first.status_code == second.status_code == 200
    assert first.content == second.content and first.headers["x-job-id"] == second.headers["x-job-id"]
    assert UsageEvent.objects.filter(organization=owner.org).count() == 1


def test_the_example_websocket_client_writes_playable_wav_files(live_stack, owner, tmp_path):
    url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "ws_client.py"), "--url", url, "--key", owner.key, "--seed", "7"]
        + ["One.", "Two."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    for name in ("s0.wav", "s1.wav"):
        rate, seconds, codec = decode((tmp_path / name).read_bytes())
        assert (rate, codec) == (SAMPLE_RATE, "pcm_s16le") and seconds > 0.1


def test_instructions_a_model_cannot_follow_are_said_to_be_ignored(live_stack, owner):
    """OpenAI's clients send `instructions` to any model: accepted, and the answer says what became of them."""
    body = {"model": "kokoro", "input": "Hello.", "response_format": "pcm"}
    told = post(live_stack, owner.key, **body, instructions="Speak softly.")
    plain = post(live_stack, owner.key, **body)
    assert told.status_code == 200 and told.headers["x-instructions"] == "ignored"
    assert "x-instructions" not in plain.headers
    assert told.content == plain.content  # ignored: the same audio
