"""The public synthesis endpoints. Views parse, call one action, render."""

from __future__ import annotations

import json

from asgiref.sync import sync_to_async
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework.decorators import api_view
from rest_framework.response import Response

from billing.policy import aauthenticate_request
from inference.voices import VOICES
from tts_saas.errors import ApiError, validation_error

from . import actions, audio
from .serializers import SpeechRequestSerializer


def api_errors(view):
    """Async views: turn ApiError into the OpenAI error body."""

    async def wrapped(request, *args, **kwargs):
        try:
            return await view(request, *args, **kwargs)
        except ApiError as exc:
            return exc.response()

    wrapped.__name__ = view.__name__
    return wrapped


def parse_json(request: HttpRequest) -> dict:
    try:
        body = json.loads(request.body or b"")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, f"The request body is not valid JSON: {exc}", "invalid_json") from exc
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", "invalid_json")
    return body


@csrf_exempt
@require_POST
@api_errors
async def speech(request: HttpRequest) -> HttpResponse:
    """POST /v1/audio/speech — OpenAI-compatible: returns the audio bytes."""
    principal, limits = await aauthenticate_request(request)
    serializer = SpeechRequestSerializer(data=parse_json(request))
    if not serializer.is_valid():
        raise validation_error(serializer.errors)
    data = serializer.validated_data
    result = await actions.speak(principal, limits, data, request.request_id)
    fmt = data["response_format"]
    if fmt in ("pcm", "wav"):  # no codec work: stay on the event loop
        body = audio.encode(result.pcm16, fmt)
    else:
        body = await sync_to_async(audio.encode, thread_sensitive=False)(result.pcm16, fmt)
    response = HttpResponse(body, content_type=audio.CONTENT_TYPES[fmt])
    response["x-cache"] = "hit" if result.cache_hit else "miss"
    response["x-seed"] = str(result.seed)
    response["x-audio-duration"] = f"{len(result.pcm16) / 2 / audio.SAMPLE_RATE:.3f}"
    if result.job_id:
        response["x-job-id"] = result.job_id
    return response


@extend_schema(responses=OpenApiTypes.OBJECT)
@api_view(["GET"])
def voices(request) -> Response:
    """GET /v1/voices — the built-in voices."""
    data = [{"voice_id": v.name, "name": v.name, "description": v.description} for v in VOICES.values()]
    return Response({"object": "list", "data": data})


def health(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})
