"""The OpenAPI schema's pieces that drf-spectacular cannot find by itself, all still generated from
serializers: documentation stand-ins for the async views (plain Django views it cannot introspect),
Server-Sent Events framing, and the error responses every authenticated operation shares. The
hooks are named in SPECTACULAR_SETTINGS."""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured
from django.urls import URLResolver, get_resolver
from drf_spectacular.generators import EndpointEnumerator
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, PolymorphicProxySerializer, extend_schema
from rest_framework import serializers
from rest_framework.views import APIView

from synthesis.api.serializers import (
    JobStreamQuerySerializer,
    SpeechAudioDeltaSerializer,
    SpeechAudioDoneSerializer,
    SpeechRequestSerializer,
    SpeechStreamErrorSerializer,
)
from synthesis.api.timing_serializers import SpeechAudioSegmentSerializer
from synthesis.audio import formats as audio
from tts_saas.errors import ELEVENLABS_PREFIX, error_responses

SSE = "text/event-stream"

SPEECH_STREAM_EVENT = PolymorphicProxySerializer(
    component_name="SpeechStreamEvent",
    serializers={
        "speech.audio.delta": SpeechAudioDeltaSerializer,
        "speech.audio.segment": SpeechAudioSegmentSerializer,
        "speech.audio.done": SpeechAudioDoneSerializer,
        "error": SpeechStreamErrorSerializer,
    },
    resource_type_field_name="type",
)


def audio_responses(description: str, *, events: bool = True) -> dict:
    """A 200 in each audio format's content type, and (`events`) one of speech events (SSE)."""
    binary = OpenApiResponse(OpenApiTypes.BINARY, description=description)
    content_types = dict.fromkeys([*audio.CONTENT_TYPES.values(), *audio.G711_CONTENT_TYPES.values()])
    responses: dict = {(200, content_type): binary for content_type in content_types}
    if events:
        responses[200, SSE] = OpenApiResponse(SPEECH_STREAM_EVENT, description=description)
    return responses


def documented_by(stand_in: type[APIView]):
    """Marks a view drf-spectacular cannot introspect as documented by `stand_in`, a DRF view
    that is never routed; `add_stand_ins` puts it in the schema at the view's path."""

    def mark(view):
        view.openapi_stand_in = stand_in
        return view

    return mark


class SpeechDoc(APIView):
    @extend_schema(
        summary="Text to speech (OpenAI-compatible)",
        description="`model` picks the engine: `kokoro` (Kokoro-82M, Apache-2.0: may be sold; deterministic, word "
        "timings), "
        "`voxcpm` (VoxCPM2, Apache-2.0: may be sold; 30 languages, 48 kHz, voices designed from `instructions`) "
        "or `chattts` (ChatTTS, non-commercial weights; sampled, inline tags), those this deployment serves (GET "
        "/v1/models); OpenAI's names mean the default one. An option or inline tag the model does not take is a "
        "400 naming it and the model. A cache hit returns the whole file; otherwise the audio streams out as it "
        "is generated (stream_format=sse: speech.audio.delta events, a speech.audio.segment event with the text, "
        "start and end of each sentence segment — and on Kokoro its words' timings — as its audio completes, then"
        " speech.audio.done). Response headers: x-model, x-cache (hit, miss, shared), x-seed, x-audio-duration "
        "(cache hits), x-instructions (applied or ignored, when instructions were sent), x-request-id. With an "
        "Idempotency-Key, a retried request follows the job already accepted.",
        request=SpeechRequestSerializer,
        examples=[
            OpenApiExample(
                "Kokoro", {"model": "kokoro", "input": "Hello there.", "voice": "af_heart"}, request_only=True
            ),
            OpenApiExample(
                "ChatTTS", {"model": "chattts", "input": "你好 [laugh]", "voice": "alloy", "seed": 7}, request_only=True
            ),
            OpenApiExample("Speech", {"model": "tts-1", "input": "Hello there.", "voice": "nova"}, request_only=True),
            OpenApiExample("Events", {"input": "Hello there.", "stream_format": "sse"}, request_only=True),
        ],
        responses={
            **audio_responses("The audio, in response_format, or its events (stream_format=sse)."),
            **error_responses(
                {
                    400: "The request body is not valid, or names an option or language the model does not take.",
                    403: "The model, voice or response_format is not in the plan, or the organization is suspended.",
                    404: "The model is not served here (model_not_found).",
                    409: "The Idempotency-Key was used with another body, or the job was cancelled.",
                    429: "Rate limit, concurrency cap or monthly character quota (Retry-After).",
                    503: "No synthesis worker, the model is unavailable, or the service is at capacity (Retry-After).",
                }
            ),
        },
    )
    def post(self, request):
        raise NotImplementedError("documentation only: POST /v1/audio/speech is synthesis.api.speech.speech")


class JobStreamDoc(APIView):
    @extend_schema(
        summary="Follow a job's audio",
        description="From the job's start, live or after the fact while its stream is kept (TTS_STREAM_TTL).",
        parameters=[JobStreamQuerySerializer],
        responses={
            **audio_responses("The job's audio, in `format`, or its events (stream_format=sse)."),
            **error_responses(
                {
                    400: "Unknown format.",
                    403: "The format is not in the plan, or the organization is suspended.",
                    404: "No such job in this organization.",
                    410: "The job has finished and its stream is no longer kept; GET /v1/jobs/{job_id}/audio has "
                    "its stored audio.",
                }
            ),
        },
    )
    def get(self, request, job_id):
        raise NotImplementedError("documentation only: GET /v1/jobs/{job_id}/stream is synthesis.api.jobs.job_stream")


class VoicePreviewQuerySerializer(serializers.Serializer):
    format = serializers.CharField(required=False, default="mp3", help_text="Any output format name.")
    model = serializers.CharField(
        required=False, help_text="A built-in voice's model (default: the deployment's); an own voice has its own."
    )


class VoicePreviewDoc(APIView):
    @extend_schema(
        summary="Hear a voice",
        description="A short fixed sentence in the voice (a built-in one of `model`, or the organization's own), "
        "not billed; cached per voice and model version.",
        parameters=[VoicePreviewQuerySerializer],
        responses={
            **audio_responses("The preview, in `format`.", events=False),
            **error_responses(
                {
                    400: "Unknown format.",
                    403: "The model or format is not in the plan.",
                    404: "No such voice in this organization, or the model is not served.",
                    409: "The voice's recording is still being encoded.",
                    503: "No synthesis worker can take it now (Retry-After).",
                }
            ),
        },
    )
    def get(self, request, voice_id):
        raise NotImplementedError("documentation only: synthesis.api.speech.voice_preview")


def _routes(patterns, prefix: str = ""):
    """(route, callback) of every URL pattern, routes written as drf-spectacular writes them."""
    for pattern in patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, route)
        else:
            yield route, pattern.callback


def add_stand_ins(endpoints):
    """drf-spectacular preprocessing hook: each view marked `documented_by` joins the endpoints
    as its stand-in, at the view's own path (path parameters typed by its converters)."""
    enumerator = EndpointEnumerator()
    for route, callback in _routes(get_resolver().url_patterns):
        stand_in = getattr(callback, "openapi_stand_in", None)
        if stand_in is None:
            continue
        view = stand_in.as_view()
        for method in enumerator.get_allowed_methods(view):
            endpoints.append((enumerator.get_path_from_regex(route), route, method, view))
    return endpoints


def frame_event_streams(result, generator, request, public):
    """drf-spectacular postprocessing hook: a text/event-stream response is declared with the
    serializer of the JSON each event carries in its `data` field; the schema there describes one
    event (before OpenAPI 3.2's itemSchema), so it becomes {data: a string holding that JSON}."""
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            for response in operation.get("responses", {}).values():
                media = response.get("content", {}).get(SSE)
                if media is None or "schema" not in media:
                    continue
                media["schema"] = {
                    "type": "object",
                    "properties": {
                        "data": {
                            "type": "string",
                            "contentMediaType": "application/json",
                            "contentSchema": media["schema"],
                        }
                    },
                    "required": ["data"],
                }
    return result


# What any authenticated request may be answered, by the authentication, the rate limit and the
# middleware, whatever the operation.
COMMON_ERRORS = {
    401: "Missing, malformed, revoked or expired API key.",
    403: "The organization is suspended.",
    413: "The request body is larger than TTS_MAX_BODY_BYTES.",
    429: "Rate limit exceeded (Retry-After).",
    431: "Too many or too large request header fields.",
    503: "A backing service is briefly unavailable (Retry-After).",
}


def add_common_errors(result, generator, request, public):
    """drf-spectacular postprocessing hook: every operation that takes an API key documents the
    errors in COMMON_ERRORS, with the error body (ElevenLabs' under /elevenlabs/), unless it
    documents that status itself."""
    schemas = result.get("components", {}).get("schemas", {})
    shapes = {"/v1/": "Error", ELEVENLABS_PREFIX: "ElevenLabsError"}
    for name in shapes.values():
        if name not in schemas:
            raise ImproperlyConfigured(f"No operation documents an error in the {name} shape: no such component.")
    for path, operations in result.get("paths", {}).items():
        shape = next(name for prefix, name in shapes.items() if path.startswith(prefix))
        error = {"application/json": {"schema": {"$ref": f"#/components/schemas/{shape}"}}}
        for operation in operations.values():
            if not any(operation.get("security", [])):
                continue  # public (the schema itself)
            responses = operation.setdefault("responses", {})
            for status, description in COMMON_ERRORS.items():
                responses.setdefault(str(status), {"description": description, "content": error})
            operation["responses"] = dict(sorted(responses.items()))
    return result
