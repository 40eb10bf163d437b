"""The speech request's fields: strict types (a number is not a string), OpenAI's names and
ranges, this service's formats, the model and the voice (checked against the model by the
request's serializer, `serializers.SpeechRequestSerializer`)."""

from __future__ import annotations

from django.conf import settings
from django.core.validators import MaxLengthValidator, RegexValidator
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from inference.registry import SPECS
from synthesis.audio.formats import (
    ALL_FORMATS,
    G711_RATE,
    MP3_RATES,
    RAW_RATES,
    SAMPLE_RATE,
    at_sample_rate,
    output_format,
)
from voices.catalog import VOICE_ID

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


def _rates(rates: tuple[int, ...]) -> str:
    return ", ".join(str(rate) for rate in rates)


class SampleRateField(serializers.IntegerField):
    """A request's `sample_rate`: the rate of its format in Hz, which `apply` makes the extended name
    (pcm with 16000: pcm_16000), so that everything after the request reads the name alone."""

    def __init__(self, **kwargs):
        kbps = (output_format("mp3").bit_rate or 0) // 1000
        help_text = (
            f"The output's rate in Hz, for the format named: pcm or wav {_rates(RAW_RATES)} (pcm_<rate>, "
            f"wav_<rate>); mp3 {_rates(MP3_RATES)} (mp3_<rate>_{kbps}); ulaw_8000 and alaw_8000 {G711_RATE} only; "
            f"opus, aac and flac are always {SAMPLE_RATE} Hz and refuse it. With an extended name it must be the "
            f"name's rate. Without it the plain names are {SAMPLE_RATE} Hz on every model (VoxCPM2 makes 48000 Hz: "
            "pcm or wav with 48000 keeps it)."
        )
        super().__init__(required=False, allow_null=True, help_text=help_text, **kwargs)

    @staticmethod
    def apply(fmt: str, rate: int | None) -> str:
        """`fmt` at `rate` (itself without one); a rate its codec does not offer, or that the name
        contradicts, is a 400 naming `sample_rate` (with the valid rates)."""
        if rate is None:
            return fmt
        try:
            return at_sample_rate(fmt, rate)
        except ValueError as exc:
            raise serializers.ValidationError({"sample_rate": [str(exc)]}, code="invalid_value") from None


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


def _all_voices() -> list[str]:
    """Every built-in voice name of every engine (the schema's enum; the model decides which apply)."""
    return list(dict.fromkeys(name for spec in SPECS.values() for name in spec.voice_ids()))


@extend_schema_field(
    {
        "oneOf": [
            {"type": "string", "enum": _all_voices()},
            {"type": "string", "pattern": VOICE_ID.pattern, "description": "An organization's voice."},
            {
                "type": "object",
                "properties": {"id": {"type": "string"}},
                "required": ["id"],
                "additionalProperties": False,
            },
        ],
        "default": "alloy",
        "description": "A built-in voice of the model (OpenAI's 13 names work on every model; GET /v1/audio/voices"
        "?model= lists each model's own) or an organization's voice_… id, as a string or {\"id\": ...}.",
    }
)
class VoiceField(serializers.Field):
    """A built-in voice by name or an organization's voice by id (`voice_…`), as a string or OpenAI's
    object form `{"id": "..."}`; the name or id either way. Whether the model has the voice, and
    whether an id is the organization's, is checked with the model (`voices.catalog.resolve_voice`)."""

    def to_internal_value(self, data):
        if isinstance(data, dict):
            if set(data) != {"id"}:
                raise serializers.ValidationError('A voice object has exactly one field, "id".')
            data = data["id"]
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.", code="invalid_type")
        if not 1 <= len(data) <= 64:
            raise serializers.ValidationError("A voice is 1 to 64 characters.")
        return data

    def to_representation(self, value):
        return value


@extend_schema_field(
    {
        "type": "string",
        "default": "",
        "description": "chattts, kokoro or voxcpm (the models served: GET /v1/models), with its version (kokoro-v1.0), "
        "or "
        "OpenAI's tts-1, tts-1-hd, gpt-4o-mini-tts (and dated snapshots), which mean the deployment's default.",
        "examples": ["kokoro"],
    }
)
class ModelField(serializers.CharField):
    """A model id; which engine it names (or 404 `model_not_found`) is decided with the deployment's
    served models (`billing.offer.spec_for`)."""

    def __init__(self, **kwargs):
        super().__init__(required=False, allow_blank=True, max_length=128, default="", **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.", code="invalid_type")
        return super().to_internal_value(data)
