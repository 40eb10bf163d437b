"""ElevenLabs' REST wire in /v1/openapi.json: documentation stand-ins (`documented_by`) for the plain
views of `elevenlabs` and `eleven_discovery`, their bodies and responses from `eleven_serializers`,
their errors in ElevenLabs' shape, and the `xi-api-key` header as a security scheme. The sockets
(stream-input, multi-stream-input) are WebSockets, which OpenAPI cannot describe: docs/elevenlabs.md."""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.authentication import BaseAuthentication
from rest_framework.views import APIView

from billing.policy import MeteredApiKeyAuthentication
from synthesis.api.eleven_serializers import (
    AudioWithTimestampsSerializer,
    ElevenLabsErrorSerializer,
    ElevenLabsModelSerializer,
    ElevenLabsSpeechSerializer,
    ElevenLabsSubscriptionSerializer,
    ElevenLabsUserSerializer,
    ElevenLabsVoiceSerializer,
    ElevenLabsVoicesPageSerializer,
    ElevenLabsVoicesSerializer,
)
from synthesis.api.openapi import audio_responses
from synthesis.audio.formats import ALL_FORMATS
from tts_saas.errors import error_responses

NDJSON = "application/x-ndjson"


class XiApiKey(BaseAuthentication):
    """Documentation only: ElevenLabs' key header (the views map it to the API key's policy)."""

    def authenticate(self, request):
        raise NotImplementedError("documentation only")


class XiApiKeyScheme(OpenApiAuthenticationExtension):
    target_class = "synthesis.api.eleven_openapi.XiApiKey"
    name = "XiApiKey"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "xi-api-key", "description": "An API key of this service."}


class ElevenLabsDoc(APIView):
    authentication_classes = [XiApiKey, MeteredApiKeyAuthentication]  # xi-api-key or Authorization: Bearer


def errors(descriptions: dict[int, str]) -> dict:
    return error_responses(descriptions, ElevenLabsErrorSerializer)


SPEECH_ERRORS = {
    400: "output_format names a format not served here (the message lists those served).",
    403: "The model, voice or format is not in the plan, or the organization is suspended.",
    404: "No such voice for this organization (voice_not_found), or the model is not served.",
    409: "The Idempotency-Key was used with another body.",
    422: "The body is not valid: an unknown field, a wrong type, text too long for the plan, a speed out of range.",
    429: "Rate limit (too_many_requests), concurrency cap (too_many_concurrent_requests) or monthly characters "
    "(quota_exceeded); Retry-After.",
    503: "No synthesis worker can take it now (system_busy; Retry-After).",
}


class SpeechQuerySerializer(serializers.Serializer):
    output_format = serializers.ChoiceField(
        choices=ALL_FORMATS,
        required=False,
        default="mp3_44100_128",
        help_text="ElevenLabs' names as named: mp3_<rate>_<kbps>, pcm_<rate>, ulaw_8000, alaw_8000, "
        "opus_48000_<kbps>; this service's names too (wav, pcm…).",
    )
    enable_logging = serializers.BooleanField(
        required=False, default=True, help_text="false: zero retention (no text or audio kept, no cache)."
    )


SPEECH = {
    "request": ElevenLabsSpeechSerializer,
    "parameters": [SpeechQuerySerializer],
}
SPEECH_DESCRIPTION = (
    "ElevenLabs' text to speech on this service's models: the voice's model (or model_id's), speed from "
    "voice_settings, the plan's limits and billing as /v1/audio/speech. What no model here does (stability, "
    "style, previous_text…) is accepted and named in the x-ignored-settings response header. Headers: x-model, "
    "x-seed, x-job-id. docs/elevenlabs.md says what maps to what."
)


class TextToSpeechDoc(ElevenLabsDoc):
    @extend_schema(
        summary="Text to speech (ElevenLabs)",
        description=f"{SPEECH_DESCRIPTION} The audio streams out as it is made (here and at …/stream alike).",
        responses={**audio_responses("The audio, in output_format.", events=False), **errors(SPEECH_ERRORS)},
        **SPEECH,
    )
    def post(self, request, voice_id):
        raise NotImplementedError("documentation only: synthesis.api.elevenlabs.text_to_speech")


class WithTimestampsDoc(ElevenLabsDoc):
    @extend_schema(
        summary="Text to speech with character timestamps (ElevenLabs)",
        description=f"{SPEECH_DESCRIPTION} The whole audio, base64, and each character's start and end in seconds "
        "(from Kokoro's durations, else the sentences' spans).",
        responses={200: AudioWithTimestampsSerializer, **errors(SPEECH_ERRORS)},
        **SPEECH,
    )
    def post(self, request, voice_id):
        raise NotImplementedError("documentation only: synthesis.api.elevenlabs.with_timestamps")


class StreamWithTimestampsDoc(ElevenLabsDoc):
    @extend_schema(
        summary="Text to speech streamed with character timestamps (ElevenLabs)",
        description=f"{SPEECH_DESCRIPTION} One JSON object a line (application/x-ndjson): audio pieces as they are "
        "made, each sentence's characters as it ends; an error after the first line comes as a last line in the "
        "error shape.",
        responses={
            (200, NDJSON): OpenApiResponse(AudioWithTimestampsSerializer, description="One object a line."),
            **errors(SPEECH_ERRORS),
        },
        **SPEECH,
    )
    def post(self, request, voice_id):
        raise NotImplementedError("documentation only: synthesis.api.elevenlabs.stream_with_timestamps")


class VoicesQuerySerializer(serializers.Serializer):
    search = serializers.CharField(required=False, help_text="A part of the name or id.")


class VoicesDoc(ElevenLabsDoc):
    @extend_schema(
        summary="List voices (ElevenLabs, v1)",
        operation_id="elevenlabs_v1_voices_list",
        description="The plan's built-in voices (premade) and the organization's own (cloned, generated).",
        responses={200: ElevenLabsVoicesSerializer},
    )
    def get(self, request):
        raise NotImplementedError("documentation only: synthesis.api.eleven_discovery.voices")


class VoicesPageDoc(ElevenLabsDoc):
    @extend_schema(
        summary="Search voices (ElevenLabs, v2)",
        operation_id="elevenlabs_v2_voices_search",
        description="The voices of v1 in one page, `search` filtering them by name or id.",
        parameters=[VoicesQuerySerializer],
        responses={200: ElevenLabsVoicesPageSerializer},
    )
    def get(self, request):
        raise NotImplementedError("documentation only: synthesis.api.eleven_discovery.voices_page")


class VoiceDoc(ElevenLabsDoc):
    @extend_schema(
        summary="Get a voice (ElevenLabs)",
        operation_id="elevenlabs_v1_voice_retrieve",
        responses={200: ElevenLabsVoiceSerializer, **errors({404: "No such voice for this organization."})},
    )
    def get(self, request, voice_id):
        raise NotImplementedError("documentation only: synthesis.api.eleven_discovery.voice")


class ModelsDoc(ElevenLabsDoc):
    @extend_schema(
        summary="List models (ElevenLabs)",
        description="The models the plan allows, each with its licence in `description`.",
        responses={200: ElevenLabsModelSerializer(many=True)},
    )
    def get(self, request):
        raise NotImplementedError("documentation only: synthesis.api.eleven_discovery.models")


class UserDoc(ElevenLabsDoc):
    @extend_schema(summary="Get the user (ElevenLabs)", responses={200: ElevenLabsUserSerializer})
    def get(self, request):
        raise NotImplementedError("documentation only: synthesis.api.eleven_discovery.user")


class SubscriptionDoc(ElevenLabsDoc):
    @extend_schema(
        summary="Get the subscription (ElevenLabs)",
        description="This month's characters used and included, and the plan.",
        responses={200: ElevenLabsSubscriptionSerializer},
    )
    def get(self, request):
        raise NotImplementedError("documentation only: synthesis.api.eleven_discovery.user_subscription")
