"""Validation of the speech request body (OpenAI's fields, plus ChatTTS's options)."""

from __future__ import annotations

import math

from django.conf import settings
from rest_framework import serializers

from inference.text import REFINE_TAG
from inference.voices import VOICES

from .audio import FORMATS
from .callbacks import url_problem


def speed_level(speed: float) -> int:
    """OpenAI's speed (0.25–4.0, 1.0 normal) onto ChatTTS's [speed_0..9] (5 normal), log-scaled."""
    return max(0, min(9, round(5 + 2 * math.log2(speed))))


def model_names() -> list[str]:
    return [settings.TTS_MODEL_NAME, *settings.TTS_MODEL_ALIASES]


class StrictCharField(serializers.CharField):
    """A string, and only a string: DRF's CharField would turn 42 into "42"."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.", code="invalid_type")
        return super().to_internal_value(data)


class SpeechRequestSerializer(serializers.Serializer):
    model = StrictCharField(required=False, default="")
    input = StrictCharField(trim_whitespace=False, allow_blank=True)
    voice = StrictCharField(required=False, default="alloy")
    response_format = StrictCharField(required=False, default="mp3")
    speed = serializers.FloatField(required=False, default=1.0)
    instructions = StrictCharField(required=False, allow_blank=True)  # accepted, not used by ChatTTS
    # ChatTTS options.
    seed = serializers.IntegerField(required=False, allow_null=True, default=None, min_value=0, max_value=2**31 - 1)
    temperature = serializers.FloatField(required=False, default=0.3, min_value=0.01, max_value=2.0)
    top_p = serializers.FloatField(required=False, default=0.7, min_value=0.01, max_value=1.0)
    top_k = serializers.IntegerField(required=False, default=20, min_value=1, max_value=100)
    refine_text = serializers.BooleanField(required=False, default=False)
    refine_prompt = StrictCharField(required=False, default="", allow_blank=True)
    # "audio": the audio bytes, streamed as generated; "sse": OpenAI's speech.audio.delta events.
    stream_format = serializers.ChoiceField(choices=["audio", "sse"], required=False, default="audio")

    def validate_model(self, value: str) -> str:
        if value and value not in model_names():
            raise serializers.ValidationError(f"Unknown model '{value}'. Valid models: {', '.join(model_names())}.")
        return settings.TTS_MODEL_NAME

    def validate_input(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("Input must not be empty.")
        limit = settings.TTS_MAX_INPUT_CHARS
        if len(value) > limit:
            raise serializers.ValidationError(
                f"Input is {len(value)} characters; the maximum is {limit}.", code="string_above_max_length"
            )
        return value

    def validate_voice(self, value: str) -> str:
        if value not in VOICES:
            raise serializers.ValidationError(f"Unknown voice '{value}'. Valid voices: {', '.join(VOICES)}.")
        return value

    def validate_response_format(self, value: str) -> str:
        if value not in FORMATS:
            raise serializers.ValidationError(
                f"Unsupported response_format '{value}'. Valid formats: {', '.join(FORMATS)}."
            )
        return value

    def validate_speed(self, value: float) -> float:
        if not (0.25 <= value <= 4.0) or math.isnan(value):
            raise serializers.ValidationError("Speed must be between 0.25 and 4.0.")
        return value

    def validate_refine_prompt(self, value: str) -> str:
        if value and not REFINE_TAG.match(value):
            raise serializers.ValidationError(
                "refine_prompt takes ChatTTS refinement tags only, e.g. '[oral_2][laugh_0][break_4]'."
            )
        return value


class JobRequestSerializer(SpeechRequestSerializer):
    callback_url = serializers.URLField(required=False, default="", allow_blank=True, max_length=2000)

    def validate_callback_url(self, value: str) -> str:
        problem = url_problem(value) if value else None
        if problem:
            raise serializers.ValidationError(problem)
        return value


class JobSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    object = serializers.SerializerMethodField()
    status = serializers.CharField()
    progress = serializers.FloatField()
    model = serializers.CharField()
    voice = serializers.CharField()
    response_format = serializers.CharField()
    characters = serializers.IntegerField()
    audio_seconds = serializers.FloatField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField()
    error = serializers.SerializerMethodField()
    callback_url = serializers.CharField()
    callback_attempts = serializers.JSONField()
    urls = serializers.SerializerMethodField()

    def get_object(self, job) -> str:
        return "job"

    def get_error(self, job) -> dict | None:
        return {"code": job.error_code, "message": job.error_message} if job.error_code else None

    def get_urls(self, job) -> dict:
        base = f"/v1/jobs/{job.id}"
        return {"self": base, "audio": f"{base}/audio", "stream": f"{base}/stream", "cancel": f"{base}/cancel"}
