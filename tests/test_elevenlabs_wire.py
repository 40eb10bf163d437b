"""ElevenLabs' wire, driven by its official Python SDK (`elevenlabs`), unchanged but for `base_url` and
`api_key`, against the live stack (ChatTTS and Kokoro, tiny checkpoints: noise of the right length):
speech whole and streamed in the named `output_format`, with character timestamps (whole and
streamed), voices, models, the subscription, and refusals as the SDK raises them. The same keys and
policy as /v1: the ledger records what was spoken, another tenant's voice is not found."""

from __future__ import annotations

import base64
import io
import json

import av
import httpx
import pytest
from elevenlabs import ElevenLabs
from elevenlabs.core.api_error import ApiError

from billing.models import UsageEvent
from synthesis.models import Job
from tests.conftest import make_persona
from voices.actions import create_voice

pytestmark = pytest.mark.django_db(transaction=True)

TEXT = "Your order left the warehouse today. It arrives on Friday."


def sdk(live_stack, key: str) -> ElevenLabs:
    return ElevenLabs(base_url=f"{live_stack.base_url}/elevenlabs", api_key=key)


def last_spoken(org) -> UsageEvent:
    return UsageEvent.objects.filter(organization=org).order_by("-id").first()


def probe(data: bytes) -> tuple[int, int]:
    """(sample rate, bit rate) of an encoded file, as a decoder reads it."""
    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        return stream.codec_context.sample_rate, stream.codec_context.bit_rate or container.bit_rate


def test_the_sdk_speaks_in_the_format_it_names_with_the_voice_picking_the_model(live_stack, owner):
    client = sdk(live_stack, owner.key)
    # ElevenLabs' own model name: the voice picks the model (af_heart is Kokoro's).
    pcm = b"".join(
        client.text_to_speech.convert("af_heart", text=TEXT, model_id="eleven_turbo_v2_5", output_format="pcm_16000")
    )
    spoken = last_spoken(owner.org)
    assert (spoken.model, spoken.voice, spoken.status) == ("kokoro", "af_heart", "succeeded")
    with live_stack.client(owner.key) as v1:  # the same speech through /v1, at 24 kHz
        same = v1.post(
            "/audio/speech", json={"model": "kokoro", "voice": "af_heart", "input": TEXT, "response_format": "pcm"}
        )
    assert abs(len(pcm) / 2 / 16000 - len(same.content) / 2 / 24000) < 0.01  # the same seconds at 16 kHz

    mp3 = b"".join(client.text_to_speech.convert("af_heart", text=TEXT))  # ElevenLabs' default, mp3_44100_128
    assert probe(mp3) == (44100, 128_000)
    streamed = b"".join(
        client.text_to_speech.stream("alloy", text=TEXT, model_id="chattts", output_format="mp3_22050_32")
    )
    assert probe(streamed) == (22050, 32_000) and last_spoken(owner.org).model == "chattts"
    opus = b"".join(client.text_to_speech.convert("af_heart", text=TEXT, output_format="opus_48000_64"))
    with av.open(io.BytesIO(opus)) as container:  # Ogg Opus at 48 kHz
        assert (container.format.name, container.streams.audio[0].codec_context.sample_rate) == ("ogg", 48000)


@pytest.mark.parametrize(("voice", "model"), [("af_heart", "kokoro"), ("alloy", "chattts")])
def test_timestamps_align_every_character_of_the_text_whole_and_streamed(live_stack, owner, voice, model):
    client = sdk(live_stack, owner.key)
    whole = client.text_to_speech.convert_with_timestamps(voice, text=TEXT, model_id=model, output_format="pcm_24000")
    seconds = len(base64.b64decode(whole.audio_base_64)) / 2 / 24000
    aligned = whole.alignment
    assert "".join(aligned.characters) == TEXT  # Kokoro from its durations, ChatTTS from each sentence's span
    starts, ends = aligned.character_start_times_seconds, aligned.character_end_times_seconds
    assert starts == sorted(starts) and all(s <= e for s, e in zip(starts, ends, strict=True))
    assert 0 <= starts[0] and ends[-1] <= seconds + 0.05
    if model == "kokoro":  # the same request's word timings on /v1 (SSE): each word's first character
        body = {"model": model, "voice": voice, "input": TEXT, "response_format": "pcm", "stream_format": "sse"}
        with live_stack.client(owner.key) as v1:
            lines = v1.post("/audio/speech", json=body).text.splitlines()
        events = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
        words = [w for e in events if e["type"] == "speech.audio.segment" for w in e["words"]]
        at = 0
        for word in words:
            found = TEXT.find(word["text"], at)
            assert found >= 0 and abs(starts[found] - word["start"]) <= 0.02, (word, starts[found])
            at = found + len(word["text"])
        assert len(words) == len(TEXT.split())

    other = TEXT.replace("Friday", "Monday")  # not the text above: its audio is not a cache hit
    chunks = list(
        client.text_to_speech.stream_with_timestamps(voice, text=other, model_id=model, output_format="pcm_24000")
    )
    audio = b"".join(base64.b64decode(c.audio_base_64) for c in chunks if c.audio_base_64)
    streamed = [c.alignment for c in chunks if c.alignment]
    assert "".join(ch for a in streamed for ch in a.characters) == other  # each sentence (and the space before it)
    assert streamed and streamed[-1].character_end_times_seconds[-1] <= len(audio) / 2 / 24000 + 0.05
    assert len(chunks) >= 2 and chunks[0].audio_base_64  # audio as it came, then the sentences as they ended


def test_voices_models_and_the_subscription_in_elevenlabs_shapes(live_stack, owner, outsider):
    client = sdk(live_stack, owner.key)
    mine = create_voice(owner.org, {"name": "Narrator", "model": "chattts", "seed": 42})
    listed = {v.voice_id: v for v in client.voices.get_all().voices}
    assert listed["af_heart"].category == "premade" and listed["af_heart"].labels["model"] == "kokoro"
    assert listed[mine.id].name == "Narrator" and listed[mine.id].category == "generated"
    found = client.voices.search(search="narr")
    assert [v.voice_id for v in found.voices] == [mine.id] and found.total_count == 1 and not found.has_more
    assert client.voices.get(mine.id).name == "Narrator"
    assert {m.model_id for m in client.models.list()} == {"chattts", "kokoro"}

    b"".join(client.text_to_speech.convert(mine.id, text="Counted."))  # an own voice: its model
    assert last_spoken(owner.org).model == "chattts"
    with live_stack.client(owner.key) as v1:
        ours = v1.get("/subscription").json()
    theirs = client.user.subscription.get()
    assert (theirs.character_count, theirs.character_limit) == (ours["character_count"], ours["character_limit"])
    assert theirs.voice_slots_used == 1 and client.user.get().subscription.tier == ours["plan"]["id"]

    other = sdk(live_stack, outsider.key)  # another tenant: the voice is not theirs
    with pytest.raises(ApiError) as refused:
        other.voices.get(mine.id)
    assert refused.value.status_code == 404 and refused.value.body["detail"]["status"] == "voice_not_found"
    with pytest.raises(ApiError) as refused:
        b"".join(other.text_to_speech.convert(mine.id, text="Not mine."))
    assert refused.value.status_code == 404


def test_refusals_come_as_the_sdk_raises_them_in_elevenlabs_shape(live_stack, owner):
    with pytest.raises(ApiError) as wrong_key:
        sdk(live_stack, "tts_nope_nope").models.list()
    assert wrong_key.value.status_code == 401 and wrong_key.value.body["detail"]["status"] == "invalid_api_key"
    client = sdk(live_stack, owner.key)
    with pytest.raises(ApiError) as unknown:
        b"".join(client.text_to_speech.convert("no_such_voice", text="Hi."))
    assert unknown.value.status_code == 404 and unknown.value.body["detail"]["status"] == "voice_not_found"
    with pytest.raises(ApiError) as invalid:
        b"".join(client.text_to_speech.convert("af_heart", text="Hi.", voice_settings={"speed": 9}))
    assert invalid.value.status_code == 422 and "speed" in invalid.value.body["detail"]["message"]
    with pytest.raises(ApiError) as fmt:
        b"".join(client.text_to_speech.convert("af_heart", text="Hi.", output_format="opus_16000_64"))
    assert fmt.value.status_code == 400 and "opus_48000_<kbps>" in fmt.value.body["detail"]["message"]  # what is
    # served; a method the route does not answer is refused in the same shape
    wrong = httpx.get(f"{live_stack.base_url}/elevenlabs/v1/text-to-speech/af_heart", headers={"xi-api-key": owner.key})
    assert wrong.status_code == 405 and wrong.json()["detail"]["status"] == "method_not_allowed"
    assert int(wrong.headers["content-length"]) == len(wrong.content)

    small = make_persona("Small Co", monthly_characters=10)
    with pytest.raises(ApiError) as quota:
        b"".join(sdk(live_stack, small.key).text_to_speech.convert("af_heart", text=TEXT))
    assert quota.value.status_code == 429 and quota.value.body["detail"]["status"] == "quota_exceeded"

    # What no model here can do is taken and said, not silently dropped.
    said = httpx.post(
        f"{live_stack.base_url}/elevenlabs/v1/text-to-speech/af_heart?output_format=pcm_24000",
        headers={"xi-api-key": owner.key},
        json={"text": "Hi.", "voice_settings": {"stability": 0.5, "speed": 1.1}, "previous_text": "Before."},
        timeout=60,
    )
    assert said.status_code == 200 and said.headers["x-ignored-settings"] == "voice_settings.stability, previous_text"
    assert said.headers["x-model"] == "kokoro"

    # apply_text_normalization off: the text as written reaches the model (its digits left to the G2P).
    def spoken(normalization: str) -> httpx.Response:
        return httpx.post(
            f"{live_stack.base_url}/elevenlabs/v1/text-to-speech/af_heart?output_format=pcm_24000",
            headers={"xi-api-key": owner.key},
            json={"text": "Room 12 at 3:30.", "apply_text_normalization": normalization},
            timeout=60,
        )

    off, auto = spoken("off"), spoken("auto")
    assert off.status_code == auto.status_code == 200 and "x-ignored-settings" not in off.headers
    assert Job.objects.get(pk=off.headers["x-job-id"]).params["spell_out"] is False
    assert Job.objects.get(pk=auto.headers["x-job-id"]).params["spell_out"] is True
    assert off.content != auto.content  # another reading, other audio (Kokoro is deterministic)
    nul = httpx.post(  # an id no row can have (PostgreSQL refuses a NUL byte in a query): not found, not a 500
        f"{live_stack.base_url}/elevenlabs/v1/text-to-speech/%00",
        headers={"xi-api-key": owner.key},
        json={"text": "Hi."},
    )
    assert nul.status_code == 404 and nul.json()["detail"]["status"] == "voice_not_found"
    missing = httpx.get(f"{live_stack.base_url}/elevenlabs/v1/nothing-here", headers={"xi-api-key": owner.key})
    assert missing.status_code == 404 and missing.json()["detail"]["status"] == "not_found"
