"""Validation of the speech request body (OpenAI's fields, plus ChatTTS's options)."""

from __future__ import annotations

import math
import re
from datetime import date
from typing import Literal

from django.conf import settings
from django.core.validators import MaxLengthValidator, RegexValidator
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers
from rest_framework.fields import empty

from inference.text import REFINE_TAG
from inference.voices import VOICES

from .audio import ALL_FORMATS, output_format
from .callbacks import url_problem
from .custom_voices import VOICE_ID
from .models import Job


def speed_level(speed: float) -> int:
    """OpenAI's speed (0.25–4.0, 1.0 normal) onto ChatTTS's [speed_0..9] (5 normal), log-scaled."""
    return max(0, min(9, round(5 + 2 * math.log2(speed))))


def model_names() -> list[str]:
    return [settings.TTS_MODEL_NAME, *settings.TTS_MODEL_ALIASES]


DATED = re.compile(r"(?P<name>.+)-\d{4}-\d{2}-\d{2}")  # OpenAI's snapshots: gpt-4o-mini-tts-2025-12-15


def known_model(name: str) -> bool:
    """One of the model names, or a dated snapshot of one (every name is this service's model)."""
    names = model_names()
    dated = DATED.fullmatch(name)
    if name in names or dated is None or dated["name"] not in names:
        return name in names
    try:
        date.fromisoformat(name[-10:])
    except ValueError:
        return False
    return True


MAX_INSTRUCTIONS = 4096  # characters, as OpenAI


class StrictCharField(serializers.CharField):
    """A string, and only a string: DRF's CharField would turn 42 into "42"."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.", code="invalid_type")
        return super().to_internal_value(data)


class StrictChoiceField(serializers.ChoiceField):
    """One of `choices`, as a string (ChoiceField would take 42 for "42"). Refused with the
    `invalid_choice` message, which may name {input} and the {choices}; the choices are the
    schema's enum."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.", code="invalid_type")
        if data == "" and self.allow_blank:
            return data
        if data not in self.choices:
            choices = ", ".join(str(c) for c in self.choices if c)
            raise serializers.ValidationError(self.error_messages["invalid_choice"].format(input=data, choices=choices))
        return data


class FormatField(StrictChoiceField):
    """An audio format: one of OpenAI's six names or an extended name that carries the codec, the
    sample rate and the bit rate (`audio.OUTPUT_FORMATS`: ulaw_8000, pcm_16000, mp3_44100_128, …)."""

    def __init__(self, **kwargs):
        super().__init__(choices=ALL_FORMATS, **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.", code="invalid_type")
        try:
            return output_format(data).name
        except ValueError as exc:
            message = str(exc).replace("Unsupported output_format", f"Unsupported {self.field_name}", 1)
            raise serializers.ValidationError(message, code="invalid_value") from None


class ModelField(StrictChoiceField):
    """A model name: this model's own, an alias (OpenAI's names), or a dated snapshot of one."""

    def to_internal_value(self, data):
        if isinstance(data, str) and known_model(data):
            return data
        return super().to_internal_value(data)


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "enum": list(VOICES)},
            {
                "type": "object",
                "properties": {"id": {"type": "string", "enum": list(VOICES)}},
                "required": ["id"],
                "additionalProperties": False,
            },
        ],
        "default": "alloy",
    }
)
class VoiceField(StrictChoiceField):
    """A built-in voice by name or an organization's voice by id (`voice_…`; whether it is the
    organization's is checked with the organization, `custom_voices.resolve_voice`), as a string or
    OpenAI's object form `{"id": "..."}`; the name or id either way."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            if set(data) != {"id"}:
                raise serializers.ValidationError('A voice object has exactly one field, "id".')
            data = data["id"]
        if isinstance(data, str) and VOICE_ID.fullmatch(data):
            return data
        return super().to_internal_value(data)


class InputLengthValidator(MaxLengthValidator):
    """At most TTS_MAX_INPUT_CHARS characters, read when validating (and when the schema's
    maxLength is generated)."""

    code = "string_above_max_length"
    message = "Input is %(show_value)d characters; the maximum is %(limit_value)d."

    def __init__(self):
        super().__init__(lambda: settings.TTS_MAX_INPUT_CHARS)


class InstructionsLengthValidator(MaxLengthValidator):
    code = "string_above_max_length"
    message = "Instructions are %(show_value)d characters; the maximum is %(limit_value)d."

    def __init__(self):
        super().__init__(MAX_INSTRUCTIONS)


class JobInputLengthValidator(InputLengthValidator):
    """At most TTS_MAX_JOB_CHARS characters: an asynchronous job's input (plans set less)."""

    def __init__(self):
        MaxLengthValidator.__init__(self, lambda: settings.TTS_MAX_JOB_CHARS)


class InputField(StrictCharField):
    """The text to speak: something not whitespace, at most TTS_MAX_INPUT_CHARS characters. Blank
    is refused like any other invalid value (DRF's own refusal has a code of its own, "blank")."""

    not_blank = RegexValidator(r"\S", "Input must not be empty.")

    length = InputLengthValidator

    def __init__(self, **kwargs):
        super().__init__(trim_whitespace=False, validators=[self.not_blank, self.length()], **kwargs)

    def run_validation(self, data=empty):
        if data == "":
            raise serializers.ValidationError(self.not_blank.message)
        return super().run_validation(data)


class SpeedField(serializers.FloatField):
    """OpenAI's speed, 0.25–4.0: out of range is one message naming both ends (DRF's min/max
    validators would give two). The bounds are set after DRF's init, so that they are documented
    without adding those validators."""

    LOW, HIGH = 0.25, 4.0

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.min_value, self.max_value = self.LOW, self.HIGH

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if not self.LOW <= value <= self.HIGH:
            raise serializers.ValidationError(f"Speed must be between {self.LOW} and {self.HIGH}.")
        return value


@extend_schema_serializer(component_name="Speech")  # a request body: documented as SpeechRequest
class SpeechRequestSerializer(serializers.Serializer):
    model = ModelField(
        choices=model_names(),
        required=False,
        allow_blank=True,  # "" is the default model too
        default=settings.TTS_MODEL_NAME,
        error_messages={"invalid_choice": "Unknown model '{input}'. Valid models: {choices}."},
    )
    input = InputField(help_text="Text; inline tags like [laugh].")
    voice = VoiceField(
        choices=[(v.name, v.description) for v in VOICES.values()],
        required=False,
        default="alloy",
        error_messages={"invalid_choice": "Unknown voice '{input}'. Valid voices: {choices}."},
    )
    response_format = FormatField(
        required=False,
        default="mp3",
        help_text="OpenAI's mp3, opus, aac, flac, wav or pcm (24 kHz), or an extended name: ulaw_8000, alaw_8000, "
        "pcm_<rate> or wav_<rate> (8000, 16000, 22050, 24000, 44100, 48000), mp3_<rate>_<kbps>.",
    )
    output_format = FormatField(
        required=False,
        help_text="The same names as response_format (ElevenLabs' spelling: ulaw_8000, pcm_16000, "
        "mp3_44100_128). When both are sent they must name the same codec; output_format then decides.",
    )
    speed = SpeedField(required=False, default=1.0)
    instructions = StrictCharField(
        required=False,
        allow_blank=True,
        validators=[InstructionsLengthValidator()],
        help_text="Accepted for OpenAI compatibility (at most 4,096 characters) and ignored: ChatTTS does not "
        "follow instructions. Use refine_text/refine_prompt and inline tags ([laugh], [uv_break]) for style.",
    )
    # ChatTTS options.
    seed = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=2**31 - 1,
        help_text="Reproducible output, which the audio cache may answer.",
    )
    temperature = serializers.FloatField(required=False, default=0.3, min_value=0.01, max_value=2.0)
    top_p = serializers.FloatField(required=False, default=0.7, min_value=0.01, max_value=1.0)
    top_k = serializers.IntegerField(required=False, default=20, min_value=1, max_value=100)
    refine_text = serializers.BooleanField(required=False, default=False)
    refine_prompt = StrictCharField(
        required=False,
        default="",
        allow_blank=True,
        validators=[
            RegexValidator(
                REFINE_TAG, "refine_prompt takes ChatTTS refinement tags only, e.g. '[oral_2][laugh_0][break_4]'."
            )
        ],
    )
    lexicons = serializers.ListField(
        child=serializers.CharField(max_length=40),
        required=False,
        default=list,
        max_length=8,
        help_text="Pronunciation lexicons (ids, up to 8) applied in this order, before the organization's "
        "default lexicons.",
    )
    stream_format = serializers.ChoiceField(
        choices=["audio", "sse"],
        required=False,
        default="audio",
        help_text="audio: the audio bytes, streamed as generated; sse: speech.audio.delta events, then "
        "speech.audio.done.",
    )

    def validate_model(self, value: str) -> str:
        return settings.TTS_MODEL_NAME  # every accepted name is this model

    def validate(self, attrs):
        chosen = attrs.pop("output_format", None)
        if chosen is not None:
            named = self.initial_data.get("response_format") if isinstance(self.initial_data, dict) else None
            if named is not None and output_format(attrs["response_format"]).codec != output_format(chosen).codec:
                raise serializers.ValidationError(
                    {"output_format": [f"'{chosen}' and response_format '{named}' name different codecs; send one."]},
                    code="invalid_value",
                )
            attrs["response_format"] = chosen
        return attrs

    def to_internal_value(self, data):
        # Unknown fields are refused, as OpenAI refuses them (a typo such as `format` would
        # otherwise pass unnoticed). The WebSocket protocol maps its own names first.
        if isinstance(data, dict) and self.context.get("reject_unknown", True):
            unknown = [name for name in data if name not in self.fields]
            if unknown:
                raise serializers.ValidationError(
                    {unknown[0]: [f"Unknown parameter: '{unknown[0]}'."]}, code="unknown_parameter"
                )
        return super().to_internal_value(data)


class JobInputField(InputField):
    length = JobInputLengthValidator


@extend_schema_serializer(component_name="Job")  # a request body: documented as JobRequest
class JobRequestSerializer(SpeechRequestSerializer):
    input = JobInputField(help_text="Text; inline tags like [laugh]. Up to the plan's characters per job.")
    callback_url = serializers.URLField(required=False, default="", allow_blank=True, max_length=2000)

    def validate_callback_url(self, value: str) -> str:
        problem = url_problem(value) if value else None
        if problem:
            raise serializers.ValidationError(problem)
        return value


class JobErrorSerializer(serializers.Serializer):
    code = serializers.CharField(allow_null=True)
    message = serializers.CharField()


class CallbackAttemptSerializer(serializers.Serializer):
    at = serializers.DateTimeField()
    status = serializers.IntegerField(allow_null=True, help_text="The receiver's HTTP status; null when none came.")
    error = serializers.CharField(allow_null=True)


class JobUrlsSerializer(serializers.Serializer):
    self = serializers.CharField()
    audio = serializers.CharField()
    stream = serializers.CharField()
    cancel = serializers.CharField()


class JobSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    object = serializers.SerializerMethodField()
    status = serializers.ChoiceField(choices=Job.Status.choices)
    progress = serializers.FloatField()
    model = serializers.CharField()
    voice = serializers.CharField()
    response_format = serializers.CharField()
    characters = serializers.IntegerField()
    audio_seconds = serializers.FloatField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.SerializerMethodField()
    callback_url = serializers.CharField()
    callback_attempts = serializers.SerializerMethodField()
    urls = serializers.SerializerMethodField()

    def get_object(self, job) -> Literal["job"]:
        return "job"

    @extend_schema_field(JobErrorSerializer(allow_null=True))
    def get_error(self, job) -> dict | None:
        return {"code": job.error_code, "message": job.error_message} if job.error_code else None

    @extend_schema_field(CallbackAttemptSerializer(many=True))
    def get_callback_attempts(self, job) -> list:
        return job.callback_attempts

    @extend_schema_field(JobUrlsSerializer)
    def get_urls(self, job) -> dict:
        base = f"/v1/jobs/{job.id}"
        return {
            "self": base,
            "audio": f"{base}/audio",
            "stream": f"{base}/stream",
            "captions": f"{base}/captions",
            "cancel": f"{base}/cancel",
        }


# The serializers below describe responses built elsewhere; the OpenAPI schema is generated from
# them, and the schema fuzzing tests hold the responses to it.


@extend_schema_serializer(many=False)  # the whole body, though the action is a list
class JobListSerializer(serializers.Serializer):
    object = serializers.ChoiceField(choices=["list"])
    data = JobSerializer(many=True)
    has_more = serializers.BooleanField()


class JobStreamQuerySerializer(serializers.Serializer):
    format = FormatField(required=False, default="pcm")
    stream_format = serializers.ChoiceField(choices=["audio", "sse"], default="audio")


class SpeechUsageSerializer(serializers.Serializer):
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()
    total_tokens = serializers.IntegerField()
    characters = serializers.IntegerField()
    audio_seconds = serializers.FloatField()


class SpeechAudioDeltaSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["speech.audio.delta"])
    audio = serializers.CharField(help_text="The next bytes of the audio file (response_format), base64-encoded.")


class SpeechAudioSegmentSerializer(serializers.Serializer):
    """A sentence segment's audio is all out (sent before the next segment's audio): its text and
    when it is spoken, exact from the audio (ChatTTS gives no word timings)."""

    type = serializers.ChoiceField(choices=["speech.audio.segment"])
    text = serializers.CharField(help_text="The segment's text as sent.")
    start = serializers.FloatField(help_text="Seconds from the start of the audio to the segment's first sample.")
    end = serializers.FloatField(help_text="Seconds to its last sample.")


class SpeechAudioDoneSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["speech.audio.done"])
    usage = SpeechUsageSerializer()


class SpeechStreamErrorSerializer(serializers.Serializer):
    """The audio cannot continue (the status line has gone out: this is how the stream says so)."""

    type = serializers.ChoiceField(choices=["error"])
    error = JobErrorSerializer()


class VoiceSerializer(serializers.Serializer):
    voice_id = serializers.CharField()
    name = serializers.CharField()
    description = serializers.CharField()


class VoiceListSerializer(serializers.Serializer):
    object = serializers.ChoiceField(choices=["list"])
    data = VoiceSerializer(many=True)


class StreamTicketSerializer(serializers.Serializer):
    ticket = serializers.CharField()
    expires_in = serializers.IntegerField(help_text="Seconds the ticket is valid for.")
    url = serializers.CharField(help_text="The WebSocket URL to open with it.")
