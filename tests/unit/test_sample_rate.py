"""The speech request's `sample_rate` (issue 31): it picks the rate of the format named, and the
request leaves validation with the extended name in `response_format` (pcm + 48000: pcm_48000), so
the cache, streams, captions and headers read the name alone. A rate the codec does not offer, a
fixed-rate codec, or a rate an extended name contradicts is a 400 naming `sample_rate`. Without it,
nothing changes: plain `pcm` stays 24 kHz (OpenAI's contract)."""

from __future__ import annotations

import json

import pytest

from synthesis.api.protocol import ProtocolError, parse
from synthesis.api.serializers import JobRequestSerializer, SpeechRequestSerializer
from synthesis.audio.formats import RAW_RATES, output_format
from tts_saas.errors import validation_error


def validated(serializer_class=SpeechRequestSerializer, **body) -> dict:
    serializer = serializer_class(data={"input": "Hello.", **body})
    assert serializer.is_valid(), serializer.errors
    return dict(serializer.validated_data)


def refused(**body) -> dict:
    """The 400's body, as the API sends it."""
    serializer = SpeechRequestSerializer(data={"input": "Hello.", **body})
    assert not serializer.is_valid()
    response = validation_error(serializer.errors).response()
    assert response.status_code == 400
    error = json.loads(response.content)["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert (error["param"], error["code"]) == ("sample_rate", "invalid_value"), error
    assert error["message"].startswith("sample_rate: ")
    return error


@pytest.mark.parametrize(
    ("body", "name"),
    [
        ({"response_format": "pcm", "sample_rate": 48000}, "pcm_48000"),
        ({"response_format": "wav", "sample_rate": 16000}, "wav_16000"),
        ({"response_format": "mp3", "sample_rate": 44100}, "mp3_44100_64"),  # plain mp3's 64 kbps
        ({"sample_rate": 22050}, "mp3_22050_64"),  # the default response_format, mp3
        ({"response_format": "pcm", "sample_rate": 24000}, "pcm_24000"),
        ({"response_format": "ulaw_8000", "sample_rate": 8000}, "ulaw_8000"),
        ({"output_format": "alaw_8000", "sample_rate": 8000}, "alaw_8000"),
        ({"response_format": "pcm_16000", "sample_rate": 16000}, "pcm_16000"),  # agrees with the name
        ({"response_format": "mp3_44100_128", "sample_rate": 44100}, "mp3_44100_128"),  # its kbps kept
        ({"response_format": "wav", "output_format": "wav_48000", "sample_rate": 48000}, "wav_48000"),
    ],
)
def test_sample_rate_becomes_the_extended_name(body, name):
    data = validated(**body)
    assert data["response_format"] == name
    assert output_format(name).sample_rate == body["sample_rate"]
    assert "sample_rate" not in data and "output_format" not in data  # the name alone goes on


@pytest.mark.parametrize("rate", RAW_RATES)
def test_every_raw_rate_is_offered_for_pcm_and_wav(rate):
    assert validated(response_format="pcm", sample_rate=rate)["response_format"] == f"pcm_{rate}"
    assert validated(response_format="wav", sample_rate=rate)["response_format"] == f"wav_{rate}"


def test_a_job_takes_it_too():
    data = validated(JobRequestSerializer, response_format="wav", sample_rate=16000)
    assert data["response_format"] == "wav_16000"


@pytest.mark.parametrize("body", [{"response_format": "pcm"}, {"response_format": "pcm", "sample_rate": None}, {}])
def test_without_it_nothing_changes_and_pcm_stays_24_khz(body):
    data = validated(**body)
    assert data["response_format"] == body.get("response_format", "mp3")
    assert output_format(data["response_format"]).sample_rate == 24000
    assert "sample_rate" not in data


def test_g711_is_8000_only():
    error = refused(response_format="ulaw_8000", sample_rate=16000)
    assert "ulaw" in error["message"] and "valid rates: 8000." in error["message"]
    refused(output_format="alaw_8000", sample_rate=24000)


@pytest.mark.parametrize("codec", ["opus", "aac", "flac"])
def test_fixed_rate_codecs_refuse_it_and_say_their_rate(codec):
    error = refused(response_format=codec, sample_rate=48000)
    assert f"{codec} is always 24000 Hz" in error["message"]
    assert "pcm, wav, mp3, ulaw or alaw" in error["message"]
    assert validated(response_format=codec, sample_rate=24000)["response_format"] == codec  # its own rate


def test_a_rate_not_offered_lists_the_valid_rates():
    error = refused(response_format="pcm", sample_rate=12345)
    assert "12345" in error["message"]
    assert "8000, 16000, 22050, 24000, 32000, 44100 or 48000" in error["message"]
    error = refused(response_format="mp3", sample_rate=48000)  # MP3 is offered at 22050, 24000, 44100
    assert "22050, 24000 or 44100" in error["message"]


@pytest.mark.parametrize(
    "body",
    [
        {"response_format": "pcm_16000", "sample_rate": 48000},
        {"output_format": "wav_22050", "sample_rate": 44100},
        {"response_format": "mp3_44100_128", "sample_rate": 22050},
    ],
)
def test_a_rate_that_contradicts_the_extended_name_is_refused(body):
    error = refused(**body)
    name = body.get("response_format") or body["output_format"]
    assert "contradicts" in error["message"] and name in error["message"]


@pytest.mark.parametrize("value", ["fast", True, 16000.5, [16000]])
def test_it_is_an_integer(value):
    serializer = SpeechRequestSerializer(data={"input": "Hello.", "response_format": "pcm", "sample_rate": value})
    assert not serializer.is_valid()
    assert validation_error(serializer.errors).param == "sample_rate"


def test_the_websocket_utterance_takes_it_with_its_own_format_name():
    message = parse(json.dumps({"type": "synthesize", "text": "Hi.", "sample_rate": 16000}))  # format: pcm
    assert message.speech["response_format"] == "pcm_16000"
    message = parse(json.dumps({"type": "synthesize", "text": "Hi.", "format": "wav", "sample_rate": 48000}))
    assert message.speech["response_format"] == "wav_48000"
    with pytest.raises(ProtocolError) as info:
        parse(json.dumps({"type": "synthesize", "id": "s", "text": "Hi.", "format": "opus", "sample_rate": 48000}))
    assert (info.value.code, info.value.utterance) == ("invalid_value", "s")
    assert info.value.message.startswith("sample_rate:")
