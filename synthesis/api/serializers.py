"""The speech request body (OpenAI's fields, the model's own options) and the responses' shapes.

A request names its model; what the model cannot take is refused here with the model's name: an
option it has no use for (`temperature` on Kokoro: 400 `unsupported_parameter`, as OpenAI answers
for a model without it), a voice it does not have. Nothing is silently dropped.
"""

from __future__ import annotations

from typing import Literal

from django.core.validators import RegexValidator
from drf_spectacular.utils import extend_schema_field, extend_schema_serializer
from rest_framework import serializers

from billing import offer
from inference.chattts.spec import REFINE_TAG
from inference.registry import SPECS
from synthesis.api.fields import (
    FormatField,
    InputField,
    InstructionsLengthValidator,
    JobInputLengthValidator,
    ModelField,
    SampleRateField,
    SpeedField,
    StrictCharField,
    VoiceField,
)
from synthesis.audio.formats import output_format
from synthesis.models import Job
from synthesis.service.callbacks import url_problem
from tts_saas.serializers import unknown_parameter
from voices.catalog import VOICE_ID

from .defaults import with_defaults

# The options some models take and others do not (each model's spec names its own).
MODEL_OPTIONS = sorted({option for spec in SPECS.values() for option in spec.options})


@extend_schema_serializer(component_name="Speech")  # a request body: documented as SpeechRequest
class SpeechRequestSerializer(serializers.Serializer):
    model = ModelField()
    input = InputField(
        help_text="Text in the model's languages (ChatTTS and Kokoro: English, Chinese or both; VoxCPM2: 30); "
        "inline tags like [laugh] on ChatTTS."
    )
    input_format = serializers.ChoiceField(
        choices=["text", "ssml"],
        required=False,
        help_text="text or ssml. Unsent: SSML when the input starts with <speak or an XML declaration, else text. "
        "SSML takes speak, p, s, break, say-as, sub, phoneme, prosody, emphasis, lang, voice and mark "
        "(GET /v1/models/{model} says what each "
        "does on that model); an error in it is a 400 invalid_ssml naming its line and column. Billed: the characters "
        "spoken, not the markup.",
    )
    voice = VoiceField(required=False, default="alloy")
    response_format = FormatField(
        required=False,
        default="mp3",
        help_text="OpenAI's mp3, opus, aac, flac, wav or pcm (24 kHz), or an extended name: ulaw_8000, alaw_8000, "
        "pcm_<rate> or wav_<rate> (8000, 16000, 22050, 24000, 32000, 44100, 48000), mp3_<rate>_<kbps>.",
    )
    output_format = FormatField(
        required=False,
        help_text="The same names as response_format (ElevenLabs' spelling: ulaw_8000, pcm_16000, "
        "mp3_44100_128). When both are sent they must name the same codec; output_format then decides.",
    )
    sample_rate = SampleRateField()
    speed = SpeedField(required=False, default=1.0)
    zero_retention = serializers.BooleanField(
        required=False,
        default=False,
        help_text="Keep no input text and no audio once the request is answered (no cache, no history text, an "
        "asynchronous job's audio handed out once). Where the organization allows it; always on where it requires it.",
    )
    text_normalization = serializers.ChoiceField(
        choices=["auto", "on", "off"],
        required=False,
        default="auto",
        help_text="auto and on: numbers, dates, money, units and symbols are read out as words (this service's rules, "
        "every model); off: the text as written, its digits and symbols left to the model (Kokoro's G2P reads plain "
        "numbers; ChatTTS drops what it cannot say). ElevenLabs' apply_text_normalization.",
    )
    instructions = StrictCharField(
        required=False,
        allow_blank=True,
        validators=[InstructionsLengthValidator()],
        help_text="The voice and style in words (at most 4,096 characters), as OpenAI's gpt-4o-mini-tts takes them: "
        "VoxCPM2 designs its voice from them (in place of the voice's own description). ChatTTS and Kokoro accept "
        "and ignore them, and the response says so (x-instructions: ignored); on ChatTTS use "
        "refine_text/refine_prompt and inline tags ([laugh], [uv_break]) for style.",
    )
    seed = serializers.IntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=0,
        max_value=2**31 - 1,
        help_text="ChatTTS and VoxCPM2: reproducible output, which the audio cache may answer. Kokoro is "
        "deterministic: the seed is accepted and changes nothing (every Kokoro request is cached).",
    )
    # ChatTTS's options (a model that does not take one refuses it: 400 unsupported_parameter).
    temperature = serializers.FloatField(
        required=False, default=0.3, min_value=0.01, max_value=2.0, help_text="ChatTTS only: sampling temperature."
    )
    top_p = serializers.FloatField(
        required=False, default=0.7, min_value=0.01, max_value=1.0, help_text="ChatTTS only: nucleus sampling."
    )
    top_k = serializers.IntegerField(
        required=False, default=20, min_value=1, max_value=100, help_text="ChatTTS only: top-k sampling."
    )
    refine_text = serializers.BooleanField(
        required=False, default=False, help_text="ChatTTS only: let the model add pauses and laughter."
    )
    refine_prompt = StrictCharField(
        required=False,
        default="",
        allow_blank=True,
        help_text="ChatTTS only: refinement tags.",
        validators=[
            RegexValidator(
                REFINE_TAG, "refine_prompt takes ChatTTS refinement tags only, e.g. '[oral_2][laugh_0][break_4]'."
            )
        ],
    )
    # VoxCPM2's options (named as its package names them).
    cfg_value = serializers.FloatField(
        required=False,
        default=2.0,
        min_value=0.5,
        max_value=10.0,
        help_text="VoxCPM2 only: classifier-free guidance (higher follows the text and design more closely).",
    )
    inference_timesteps = serializers.IntegerField(
        required=False,
        default=10,
        min_value=1,
        max_value=50,
        help_text="VoxCPM2 only: flow-matching solver steps per 160 ms of audio (more: finer, slower).",
    )
    lexicons = serializers.ListField(
        child=serializers.CharField(max_length=40),
        required=False,
        default=list,
        max_length=8,
        help_text="Pronunciation lexicons (ids, up to 8) applied in this order, before the organization's "
        "default lexicons.",
    )
    default_lexicons = serializers.BooleanField(
        required=False,
        default=True,
        help_text="Apply the organization's default lexicons after those named (the default); false: only the "
        "lexicons named, e.g. to hear a text without them.",
    )
    stream_format = serializers.ChoiceField(
        choices=["audio", "sse"],
        required=False,
        default="audio",
        help_text="audio: the audio bytes, streamed as generated; sse: speech.audio.delta events, then "
        "speech.audio.done.",
    )

    def validate(self, attrs):
        spec = offer.spec_for(attrs.get("model", ""))  # 404 model_not_found for one not served
        attrs["model"] = spec.name  # the engine that speaks it (jobs and the ledger keep this)
        sent = self.initial_data if isinstance(self.initial_data, dict) else {}
        for option in MODEL_OPTIONS:
            if option in sent and option not in spec.options:
                raise serializers.ValidationError(
                    {option: [f"Unsupported parameter: '{option}' is not supported with the model '{spec.name}'."]},
                    code="unsupported_parameter",
                )
        voice = attrs["voice"]
        if spec.voice(voice) is None and not VOICE_ID.fullmatch(voice):
            valid = ", ".join(spec.voice_ids())
            message = f"Unknown voice '{voice}' for the model '{spec.name}'. Valid voices: {valid}."
            raise serializers.ValidationError({"voice": [message]}, code="invalid_value")
        chosen = attrs.pop("output_format", None)
        if chosen is not None:
            named = self.initial_data.get("response_format") if isinstance(self.initial_data, dict) else None
            if named is not None and output_format(attrs["response_format"]).codec != output_format(chosen).codec:
                raise serializers.ValidationError(
                    {"output_format": [f"'{chosen}' and response_format '{named}' name different codecs; send one."]},
                    code="invalid_value",
                )
            attrs["response_format"] = chosen
        attrs["response_format"] = SampleRateField.apply(attrs["response_format"], attrs.pop("sample_rate", None))
        return attrs

    def to_internal_value(self, data):
        # Unknown fields are refused, as OpenAI refuses them (a typo such as `format` would
        # otherwise pass unnoticed). The WebSocket protocol maps its own names first.
        if isinstance(data, dict) and self.context.get("reject_unknown", True):
            unknown = [name for name in data if name not in self.fields]
            if unknown:
                raise unknown_parameter(unknown[0])
        organization = self.context.get("organization")
        if isinstance(data, dict) and organization is not None:
            data = with_defaults(data, organization)  # its default model and voice where the body names none
        return super().to_internal_value(data)


class JobInputField(InputField):
    length = JobInputLengthValidator


@extend_schema_serializer(component_name="Job")  # a request body: documented as JobRequest
class JobRequestSerializer(SpeechRequestSerializer):
    input = JobInputField(
        help_text="Text (inline tags like [laugh]) or SSML (input_format). Up to the plan's characters per job."
    )
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
    language = serializers.CharField(help_text="en-us, en-gb, zh, or multi (a ChatTTS speaker speaks both).")
    alias = serializers.DictField(
        required=False,
        help_text="On an OpenAI name the organization aliased: the model, voice and its name it speaks with "
        "(PUT /v1/organization/voice_aliases).",
    )


class VoiceListSerializer(serializers.Serializer):
    object = serializers.ChoiceField(choices=["list"])
    model = serializers.CharField(help_text="The model whose voices these are.")
    data = VoiceSerializer(many=True)


class StreamTicketSerializer(serializers.Serializer):
    ticket = serializers.CharField()
    expires_in = serializers.IntegerField(help_text="Seconds the ticket is valid for.")
    url = serializers.CharField(help_text="The WebSocket URL to open with it.")
