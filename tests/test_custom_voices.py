"""An organization's own voices through the live stack: made from a seed or from a ChatTTS speaker
embedding string, listed with the built-in ones (Open WebUI's shape), used by id — a string or
`{"id"}` — on REST, jobs and the WebSocket; the speaker the engine receives is the voice's, for every
segment and every request (a voice made from a built-in voice's embedding sounds exactly like it);
validation, plan limit, read-only built-ins, tenant isolation."""

from __future__ import annotations

import asyncio
import io
import json
import lzma
import os
from pathlib import Path

import av
import httpx
import numpy as np
import pybase16384 as b14
import pytest
import websockets

from accounts.models import AuditEvent, Organization
from billing.models import QuotaPeriod, UsageEvent
from inference.chattts.engine import ChatTTSEngine
from inference.chattts.speakers import canonical
from inference.chattts.voices import VOICES
from synthesis.audio.formats import wav_header
from synthesis.models import Job
from tests.factories import own_plan
from tests.test_jobs import wait_for
from tests.test_websocket import collect
from tests.waiting import wait_until
from tts_saas.errors import ApiError
from voices.actions import create_voice_from_recording
from voices.models import Voice
from voices.recordings import CONSENT_STATEMENT

pytestmark = pytest.mark.django_db(transaction=True)

# Three sentences of ~95 characters each: three segments, so the speaker is checked across segments.
TEXT = " ".join(
    f"Sentence {n} of this voice test runs on long enough to be a segment of its own, with words in it." for n in "ABC"
)


@pytest.fixture(scope="module")
def alloy_embedding() -> str:
    """The embedding the worker derives from alloy's seed (same checkpoint, same device)."""
    engine = ChatTTSEngine.load(os.environ["TTS_TEST_CHECKPOINT"], device="cpu")
    return engine.speaker(VOICES["alloy"].seed)


def speak(client, **body) -> httpx.Response:
    response = client.post("/audio/speech", json={"input": TEXT, "response_format": "pcm", "seed": 21, **body})
    assert response.status_code == 200, response.text
    return response


def test_a_voice_from_an_embedding_is_that_speaker_for_every_segment_request_and_endpoint(
    live_stack, owner, alloy_embedding
):
    with live_stack.client(owner.key) as client:
        created = client.post("/audio/voices", json={"name": "Alloy twin", "speaker": alloy_embedding})
        assert created.status_code == 201, created.text
        voice = created.json()
        assert voice["id"].startswith("voice_") and voice["source"] == "embedding" and voice["object"] == "voice"
        assert voice["speaker"] == canonical(alloy_embedding)
        mine = speak(client, voice=voice["id"])
        again = speak(client, voice={"id": voice["id"]})  # OpenAI's object form
        builtin = speak(client, voice="alloy")
        assert mine.headers["x-cache"] == "miss" and again.headers["x-cache"] == "hit"
        assert mine.content == again.content
        # The engine received alloy's own embedding for each of the three segments: the same audio.
        assert builtin.content == mine.content
        job = client.post("/jobs", json={"input": TEXT, "voice": voice["id"], "seed": 22, "response_format": "pcm"})
        done = wait_for(client, job.json()["id"], {"succeeded", "failed"})
        assert done["status"] == "succeeded"
        assert Job.objects.get(pk=done["id"]).params["speaker"] == voice["speaker"]
        listed = client.get("/audio/voices?model=chattts").json()["voices"]
        mine_listed = {"id": voice["id"], "name": "Alloy twin", "description": "", "model": "chattts"}
        assert {**mine_listed, "language": "", "custom": True} in listed
        assert {v["id"] for v in listed if not v["custom"]} == set(VOICES)
        # A ChatTTS voice is not Kokoro's: not listed there, refused there.
        assert voice["id"] not in {v["id"] for v in client.get("/audio/voices?model=kokoro").json()["voices"]}
        other_model = client.post("/audio/speech", json={"model": "kokoro", "input": "Hi.", "voice": voice["id"]})
        assert other_model.status_code == 400 and "model 'chattts'" in other_model.json()["error"]["message"]

    async def over_websocket():
        url = live_stack.base_url.replace("http://", "ws://") + "/v1/audio/stream"
        async with websockets.connect(url, additional_headers={"Authorization": f"Bearer {owner.key}"}) as ws:
            await ws.recv()
            await ws.send(json.dumps({"type": "synthesize", "text": TEXT, "voice": voice["id"], "seed": 21}))
            return await collect(ws)

    start, audio, _ = asyncio.run(over_websocket())
    assert start["cached"] is True and audio == mine.content  # the same voice, seed and text: the same entry


def embedding(values: int) -> str:
    """A ChatTTS speaker embedding string of `values` float16 values (as ChatTTS encodes one)."""
    filters = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
    raw = np.full(values, 0.1, dtype=np.float16).tobytes()
    return b14.encode_to_string(lzma.compress(raw, format=lzma.FORMAT_RAW, filters=filters))


def test_a_voice_from_a_seed_and_one_whose_embedding_does_not_fit_the_model(live_stack, owner):
    with live_stack.client(owner.key) as client:
        by_seed = client.post("/audio/voices", json={"name": "Seed voice", "seed": VOICES["alloy"].seed}).json()
        assert by_seed["source"] == "seed" and by_seed["speaker"] == ""
        assert speak(client, voice=by_seed["id"]).content == speak(client, voice="alloy").content
        misfit = client.post("/audio/voices", json={"name": "Too wide", "speaker": embedding(768)}).json()
        refused = client.post("/audio/speech", json={"input": "Hello.", "voice": misfit["id"]})
    # The tiny checkpoint's speakers have 64 values: the worker refuses the request, naming both.
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_voice"
    assert "768 values" in refused.json()["error"]["message"]


def test_voices_are_validated_limited_by_the_plan_and_scoped_to_their_organization(live_stack, owner, outsider):
    own_plan(owner.org, "two-voices", max_custom_voices=2)
    with live_stack.client(owner.key) as client, live_stack.client(outsider.key) as other:
        for body, param in (
            ({"name": "x"}, "seed"),
            ({"name": "x", "seed": 1, "speaker": embedding(64)}, "seed"),
            ({"name": "x", "speaker": "not an embedding"}, "speaker"),
            ({"name": "Alloy", "seed": 1}, "name"),
            ({"name": "<img src=x onerror=alert(1)>", "seed": 1}, "name"),
            ({"name": "two\nlines", "seed": 1}, "name"),
            ({"name": "x", "seed": 1, "sample": "…"}, "sample"),
        ):
            refused = client.post("/audio/voices", json=body)
            assert refused.status_code == 400 and refused.json()["error"]["param"] == param, (body, refused.text)
        first = client.post("/audio/voices", json={"name": "One", "seed": 1}).json()
        assert client.post("/audio/voices", json={"name": "One", "seed": 2}).status_code == 409
        client.post("/audio/voices", json={"name": "Two", "seed": 2})
        full = client.post("/audio/voices", json={"name": "Three", "seed": 3})
        assert full.status_code == 403 and full.json()["error"]["code"] == "plan_limit_reached"
        assert client.delete("/audio/voices/alloy").json()["error"]["code"] == "voice_read_only"
        assert client.get("/audio/voices/alloy").json()["source"] == "builtin"
        # Another organization: the voice does not exist for it, by any route.
        url = f"/audio/voices/{first['id']}"
        assert other.get(url).status_code == 404 and other.delete(url).status_code == 404
        assert first["id"] not in {v["id"] for v in other.get("/audio/voices").json()["voices"]}
        used = other.post("/audio/speech", json={"input": "x", "voice": first["id"]})
        assert used.status_code == 400 and used.json()["error"]["param"] == "voice"
        anonymous = httpx.get(f"{live_stack.base_url}/v1/audio/voices?model=chattts").json()["voices"]
        assert {v["id"] for v in anonymous} == set(VOICES)
        assert client.delete(url).json()["deleted"] is True
        gone = client.post("/audio/speech", json={"input": "x", "voice": first["id"]})
        assert gone.status_code == 400 and client.get(url).status_code == 404


def recording(seconds: float, rate: int = 16_000) -> bytes:
    """A WAV file of one 'speaker' (a tone and some noise) at 16 kHz: the server resamples it."""
    n = int(seconds * rate)
    t = np.arange(n) / rate
    x = 0.3 * np.sin(2 * np.pi * 220 * t) + 0.02 * np.random.default_rng(1).standard_normal(n)
    return wav_header(n, rate) + (x * 32767).astype("<i2").tobytes()


def lying_wav() -> bytes:
    """A WAV whose header says 0 bits per sample: PyAV opens it with no codec to decode it."""
    data = bytearray(recording(1.5))
    data[34:36] = (0).to_bytes(2, "little")
    return bytes(data)


def test_a_voice_from_a_recording_is_encoded_by_a_worker_and_then_speaks(live_stack, owner):
    body = {"name": "Recorded", "transcript": "A short reference sentence.", "consent": "true"}
    with live_stack.client(owner.key) as client:
        created = client.post("/audio/voices", data=body, files={"audio": ("me.wav", recording(1.5), "audio/wav")})
        assert created.status_code == 201, created.text
        voice = created.json()
        assert voice["source"] == "recording" and voice["status"] in ("processing", "ready")

        def ready():
            seen = client.get(f"/audio/voices/{voice['id']}").json()
            return seen if seen["status"] != "processing" else None

        assert wait_until(ready, 60, "the recording was never encoded")["status"] == "ready"
        stored = Voice.objects.get(pk=voice["id"])
        assert stored.sample and stored.sample_text and not stored.upload  # the upload is not kept
        assert stored.consent["statement"] == CONSENT_STATEMENT and stored.consent["by"]["type"] == "key"
        assert client.get(f"/audio/voices/{voice['id']}").json()["consent"]["at"] == stored.consent["at"]
        consented = AuditEvent.objects.get(organization=owner.org, action="voice.consent")
        assert consented.target == f"voice:{voice['id']}" and consented.after["statement"] == CONSENT_STATEMENT
        first = speak(client, voice=voice["id"])
        again = speak(client, voice=voice["id"])
        assert (first.headers["x-cache"], again.headers["x-cache"]) == ("miss", "hit")
        assert first.content == again.content and first.content != speak(client, voice="alloy").content
        kept = client.post(
            "/audio/voices",
            data={**body, "name": "Kept", "keep_upload": "true"},
            files={"audio": ("me.wav", recording(1.2), "audio/wav")},
        ).json()
        upload = Voice.objects.get(pk=kept["id"]).upload
        assert upload and Path(upload.path).is_file()  # kept, as asked
        assert client.delete(f"/audio/voices/{kept['id']}").json()["deleted"] is True
        assert not Path(upload.path).exists()  # and deleted with the voice
        for files, data, param in (
            ({"audio": ("a.wav", recording(0.5), "audio/wav")}, body, "audio"),  # too short
            ({"audio": ("a.wav", recording(20), "audio/wav")}, body, "audio"),  # too long
            ({"audio": ("a.txt", b"not audio at all" * 100, "text/plain")}, body, "audio"),
            ({"audio": ("a.wav", lying_wav(), "audio/wav")}, body, "audio"),  # no decoder for it: was a 500
            ({"audio": ("a.wav", recording(1.5), "audio/wav")}, {"name": "x"}, "transcript"),
            (
                {"audio": ("a.wav", recording(1.5), "audio/wav")},
                {"name": "x", "transcript": "[spk_emb] hi"},
                "transcript",
            ),
        ):
            refused = client.post("/audio/voices", data={**data, "name": "refused"}, files=files)
            assert refused.status_code == 400 and refused.json()["error"]["param"] == param, refused.text
        pending = Voice.objects.create(organization=owner.org, name="Pending", source="recording", status="processing")
        early = client.post("/audio/speech", json={"input": "Hello.", "voice": pending.id})
    assert early.status_code == 409 and early.json()["error"]["code"] == "voice_not_ready"


def test_a_voice_can_be_heard_without_being_billed(live_stack, owner, outsider):
    with live_stack.client(owner.key) as client, live_stack.client(outsider.key) as other:
        mine = client.post("/audio/voices", json={"name": "Previewed", "seed": 77}).json()
        first = client.get(f"/audio/voices/{mine['id']}/preview")
        again = client.get(f"/audio/voices/{mine['id']}/preview")
        builtin = client.get("/audio/voices/nova/preview", params={"format": "wav"})
        stolen = other.get(f"/audio/voices/{mine['id']}/preview")
        unknown = client.get("/audio/voices/nobody/preview")
    assert first.status_code == 200 and first.headers["content-type"] == "audio/mpeg"
    assert (first.headers["x-cache"], again.headers["x-cache"]) == ("miss", "hit") and again.content == first.content
    with av.open(io.BytesIO(first.content)) as container:
        assert container.streams.audio[0].codec_context.sample_rate == 24000
    assert builtin.status_code == 200 and builtin.content[:4] == b"RIFF"
    assert stolen.status_code == 404 and unknown.status_code == 404
    quota = QuotaPeriod.objects.filter(organization=owner.org).first()
    assert quota is None or (quota.used, quota.reserved) == (0, 0)  # previews are not billed
    assert set(UsageEvent.objects.filter(organization=owner.org).values_list("characters", flat=True)) <= {0}


def test_cloning_needs_consent_a_plan_that_includes_it_and_keeps_nothing_under_zero_retention(live_stack, owner):
    """A voice from a recording is refused without the creator's statement, on a plan without
    cloning or past its count, and keeping the upload under zero retention; nothing is made then."""
    files = {"audio": ("me.wav", recording(1.5), "audio/wav")}
    body = {"name": "Clone", "transcript": "A short reference sentence."}
    with live_stack.client(owner.key) as client:
        for consent in ({}, {"consent": "false"}):
            refused = client.post("/audio/voices", data={**body, **consent}, files=files)
            error = refused.json()["error"]
            assert (refused.status_code, error["code"], error["param"]) == (400, "consent_required", "consent")
            assert CONSENT_STATEMENT in error["message"]
        own_plan(owner.org, "no-cloning", max_cloned_voices=0)
        closed = client.post("/audio/voices", data={**body, "consent": "true"}, files=files)
        assert closed.status_code == 403 and "does not include voices made from recordings" in closed.text
        assert client.post("/audio/voices", json={"name": "Seeded", "seed": 5}).status_code == 201  # others still
        own_plan(owner.org, "one-clone", max_cloned_voices=1)
        first = client.post("/audio/voices", data={**body, "consent": "true"}, files=files)
        assert first.status_code == 201, first.text
        second = client.post("/audio/voices", data={**body, "name": "Clone 2", "consent": "true"}, files=files)
        assert second.status_code == 403 and "allows 1 voices made from recordings" in second.text
        assert client.delete(f"/audio/voices/{first.json()['id']}").json()["deleted"] is True
        Organization.objects.filter(pk=owner.org.pk).update(data_retention=Organization.Retention.ZERO)
        kept = client.post("/audio/voices", data={**body, "consent": "true", "keep_upload": "true"}, files=files)
        assert kept.status_code == 400 and kept.json()["error"]["param"] == "keep_upload"
    assert not Voice.objects.filter(organization=owner.org, source="recording").exists()


def test_the_operator_can_turn_cloning_off_and_its_rate_is_limited(live_stack, owner, settings):
    """TTS_VOICE_CLONING=false refuses every voice from a recording; TTS_CLONE_RATE counts an
    organization's clones started (429 with Retry-After past it)."""
    from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: PLC0415

    def body(name: str) -> dict:
        audio = SimpleUploadedFile("me.wav", recording(1.5), content_type="audio/wav")
        return {"name": name, "transcript": "A short reference sentence.", "consent": True, "audio": audio}

    settings.TTS_VOICE_CLONING = False
    with pytest.raises(ApiError) as off:
        create_voice_from_recording(owner.org, body("Off"))
    assert (off.value.status, off.value.code) == (403, "voice_cloning_disabled")
    settings.TTS_VOICE_CLONING, settings.TTS_CLONE_RATE = True, "2/h"
    made = [create_voice_from_recording(owner.org, body(f"Rated {n}")) for n in range(2)]
    with pytest.raises(ApiError) as limited:
        create_voice_from_recording(owner.org, body("Rated 3"))
    assert limited.value.status == 429 and int(limited.value.headers["Retry-After"]) >= 1
    assert [v.consent["statement"] for v in made] == [CONSENT_STATEMENT] * 2
