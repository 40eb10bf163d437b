"""Parsing `tts.v1` WebSocket client messages (synthesis.protocol): each frame becomes a typed
message, or a ProtocolError with the code, message and utterance id the client is sent, naming
fields by the protocol's names (`text`, `format`), not the REST body's (`input`, `response_format`)."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from synthesis.api.protocol import MAX_MESSAGE_BYTES, Cancel, Close, Follow, ProtocolError, Synthesize, parse


def refused(message: dict | str, default_id: str = "u1") -> ProtocolError:
    with pytest.raises(ProtocolError) as info:
        parse(message if isinstance(message, str) else json.dumps(message), default_id)
    return info.value


@pytest.mark.parametrize("frame", ["not json", "{", "", '{"type": "synthesize",}'])
def test_text_that_is_not_json_is_invalid_json(frame):
    error = refused(frame)
    assert error.code == "invalid_json" and error.utterance is None


@pytest.mark.parametrize("frame", ["[1]", '"synthesize"', "42", "null", '[{"type": "close"}]'])
def test_json_that_is_not_an_object_is_invalid_json(frame):
    assert refused(frame).code == "invalid_json"


def test_a_message_over_64_kib_is_too_large_counting_bytes_not_characters():
    envelope = len(json.dumps({"type": "synthesize", "text": ""}))
    fits = json.dumps({"type": "synthesize", "text": "a" * (MAX_MESSAGE_BYTES - envelope)})
    assert len(fits.encode()) == MAX_MESSAGE_BYTES
    assert refused(fits).code != "message_too_large"  # refused for its text's length, not its size
    assert refused(fits + " ").code == "message_too_large"
    wide = json.dumps({"type": "synthesize", "text": "字" * 22_000}, ensure_ascii=False)  # 66,000 bytes
    assert len(wide) < MAX_MESSAGE_BYTES < len(wide.encode())
    error = refused(wide)
    assert error.code == "message_too_large" and str(MAX_MESSAGE_BYTES) in error.message


@pytest.mark.parametrize("kind", ["dance", None, 7, "Synthesize"])
def test_an_unknown_type_is_refused_with_its_id(kind):
    error = refused({"type": kind, "id": "m7"})
    assert error.code == "unknown_type" and error.utterance == "m7"
    assert repr(kind) in error.message


def test_a_message_without_a_type_is_an_unknown_type():
    assert refused({"id": "m8", "text": "hi"}).code == "unknown_type"


def test_a_synthesize_message_becomes_a_speech_body_with_pcm_by_default():
    message = parse(json.dumps({"type": "synthesize", "id": "a", "text": "Hello there.", "seed": 7}))
    assert isinstance(message, Synthesize) and message.id == "a"
    speech = message.speech
    assert speech["input"] == "Hello there." and speech["seed"] == 7
    assert speech["response_format"] == "pcm" and speech["voice"] == "alloy"
    assert "text" not in speech and "format" not in speech


def test_a_synthesize_message_takes_its_format_and_voice():
    message = parse(json.dumps({"type": "synthesize", "text": "Hi.", "format": "mp3", "voice": "nova"}))
    assert message.speech["response_format"] == "mp3" and message.speech["voice"] == "nova"


def test_the_rest_names_do_not_override_the_protocol_names():
    message = parse(json.dumps({"type": "synthesize", "text": "Mine.", "input": "Not mine.", "response_format": "mp3"}))
    assert message.speech["input"] == "Mine." and message.speech["response_format"] == "pcm"


def test_a_synthesize_message_without_an_id_gets_the_default_id():
    assert parse(json.dumps({"type": "synthesize", "text": "Hi."}), default_id="u42").id == "u42"
    assert refused({"type": "synthesize", "text": "Hi.", "voice": "nobody"}, default_id="u43").utterance == "u43"


def test_an_unknown_voice_names_the_voice_field():
    error = refused({"type": "synthesize", "id": "v", "text": "Hi.", "voice": "nobody"})
    assert (error.code, error.utterance) == ("invalid_value", "v")
    assert error.message.startswith("voice:") and "nobody" in error.message


def test_a_voice_that_is_not_a_string_names_the_voice_field():
    error = refused({"type": "synthesize", "text": "Hi.", "voice": 5})
    assert error.code == "invalid_type" and error.message.startswith("voice:")


def test_missing_text_names_the_text_field():
    error = refused({"type": "synthesize", "id": "x"})
    assert (error.code, error.utterance) == ("required", "x")
    assert error.message.startswith("text:") and "input:" not in error.message


def test_text_over_the_limit_names_the_text_field():
    too_long = "a" * (settings.TTS_MAX_INPUT_CHARS + 1)
    error = refused({"type": "synthesize", "id": "y", "text": too_long})
    assert (error.code, error.utterance) == ("string_above_max_length", "y")
    assert error.message.startswith("text:") and "input:" not in error.message
    assert str(settings.TTS_MAX_INPUT_CHARS) in error.message


@pytest.mark.parametrize("blank", ["", "   ", "\n\t"])
def test_blank_text_names_the_text_field(blank):
    error = refused({"type": "synthesize", "id": "b", "text": blank})
    assert error.code == "invalid_value" and error.message.startswith("text:") and "input:" not in error.message


@pytest.mark.parametrize("fmt", ["ogg", "MP3", 3])
def test_a_bad_format_names_the_format_field(fmt):
    error = refused({"type": "synthesize", "id": "f", "text": "Hi.", "format": fmt})
    assert error.utterance == "f"
    assert error.message.startswith("format:") and "response_format:" not in error.message


def test_other_bad_fields_keep_their_own_names():
    error = refused({"type": "synthesize", "text": "Hi.", "speed": 10})
    assert error.code == "invalid_value" and error.message.startswith("speed:")


def test_follow_names_the_job_and_defaults_to_pcm():
    assert parse(json.dumps({"type": "follow", "id": "f1", "job_id": "job-1"})) == Follow("f1", "job-1", "pcm")
    assert parse(json.dumps({"type": "follow", "job_id": "job-2", "format": "wav"})) == Follow("follow", "job-2", "wav")


def test_follow_with_a_bad_format_is_refused_naming_format():
    error = refused({"type": "follow", "id": "f2", "job_id": "job-1", "format": "ogg"})
    assert (error.code, error.utterance) == ("invalid_value", "f2")
    assert error.message.startswith("format:")


def test_cancel_and_close():
    assert parse(json.dumps({"type": "cancel", "id": "a"})) == Cancel("a")
    assert parse(json.dumps({"type": "cancel"})) == Cancel(None)
    assert parse(json.dumps({"type": "close"})) == Close()
