"""The public synthesis endpoints. Views parse, call one action, render."""

from __future__ import annotations

import asyncio
import base64
import json
import logging

from asgiref.sync import async_to_sync
from django.http import FileResponse, HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action, api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from accounts.auth import issue_ticket
from accounts.tenancy import TenantScopedViewSet, scoped
from accounts.tickets import TICKET_SECONDS
from billing.limits import limits_for
from billing.policy import OptionalApiKeyAuthentication, aauthorize
from inference.text import SAMPLES_PER_TOKEN
from inference.voices import VOICES
from tts_saas.errors import ApiError, error_responses, require_methods, validation_error
from tts_saas.parsers import load_json
from tts_saas.threads import in_thread

from . import audio, captions, streams
from .captions import Caption
from .feed import JobAudioFeed
from .jobs import Submission, cancel_job, request_digest
from .models import Job
from .openapi import JobStreamDoc, SpeechDoc, VoicePreviewDoc, audio_responses, documented_by
from .prepared import CachedSpeech, check_format, enforce_plan_limits, prepare_speech
from .serializers import (
    JobListSerializer,
    JobRequestSerializer,
    JobSerializer,
    SpeechRequestSerializer,
    StreamTicketSerializer,
    VoiceListSerializer,
    known_model,
    model_names,
)
from .speech import abandon, admit_job, preview, speak

logger = logging.getLogger(__name__)


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
    body = load_json(request.body)
    if not isinstance(body, dict):
        raise ApiError(400, "The request body must be a JSON object.", "invalid_json")
    return body


def _sse(event: dict) -> bytes:
    return f"data: {json.dumps(event, separators=(',', ':'))}\n\n".encode()


def _segment_event(caption: Caption) -> bytes:
    return _sse({"type": "speech.audio.segment", **caption.as_dict()})


def _usage(characters: int, samples: int) -> dict:
    tokens = samples // SAMPLES_PER_TOKEN
    return {
        "input_tokens": characters,
        "output_tokens": tokens,
        "total_tokens": characters + tokens,
        "characters": characters,
        "audio_seconds": round(samples / audio.SAMPLE_RATE, 3),
    }


class StreamAborted(Exception):
    """A raw audio response cannot be completed: the server closes the connection mid-body."""


async def audio_body(feed: JobAudioFeed, fmt: str, sse: bool, owner: bool):
    """The response body of a job's audio: encoded chunks as they come (or SSE events). If the
    `owner` of a live request goes away, the job is asked to stop, so no GPU time is spent on
    audio nobody hears; a mere follower (GET /v1/jobs/{id}/stream) leaving changes nothing."""
    encoder = audio.StreamEncoder(fmt)
    abandoned = True  # until the audio is all out

    def out(data: bytes) -> bytes:
        return _sse({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode()}) if sse else data

    try:
        async for item in feed.events():
            if isinstance(item, Caption):  # a segment's audio is all out: when it was spoken
                if sse:
                    yield _segment_event(item)
                continue
            data = encoder.feed(item)
            if data:
                yield out(data)
        data = encoder.finish()
        if data:
            yield out(data)
        abandoned = False
        if sse:
            yield _sse({"type": "speech.audio.done", "usage": _usage(feed.characters, feed.samples)})
    except ApiError as exc:  # the status line has gone: say why in SSE and the log
        logger.warning("stream ended by a job error: %s", exc.message, extra={"job_id": feed.job_id})
        # A job whose worker was lost runs again for a retry with its Idempotency-Key: keep it.
        abandoned = exc.code != "worker_lost"
        if not sse:
            # Raw audio has no way to say so: break the connection (no final chunk), so that the
            # client sees an incomplete body rather than audio that merely ends early.
            raise StreamAborted(exc.code) from exc
        yield _sse({"type": "error", "error": {"code": exc.code, "message": exc.message}})
    finally:
        if owner and abandoned:
            await abandon(feed.job_id)


def audio_response(feed: JobAudioFeed, fmt: str, sse: bool, owner: bool) -> StreamingHttpResponse:
    content_type = "text/event-stream" if sse else audio.output_format(fmt).content_type
    response = StreamingHttpResponse(audio_body(feed, fmt, sse, owner), content_type=content_type)
    response["x-job-id"] = feed.job_id
    response["Cache-Control"] = "no-cache"
    return response


@documented_by(SpeechDoc)
@csrf_exempt
@require_methods("POST")
@api_errors
async def speech(request: HttpRequest) -> HttpResponse:
    """POST /v1/audio/speech — OpenAI-compatible. A cache hit returns the whole file; otherwise
    the audio streams out as the worker generates it."""
    principal, limits = await aauthorize(request)
    serializer = SpeechRequestSerializer(data=parse_json(request))
    if not serializer.is_valid():
        raise validation_error(serializer.errors)
    data = serializer.validated_data
    fmt, sse = data["response_format"], data["stream_format"] == "sse"
    key = request.headers.get("Idempotency-Key", "")[:255]
    result = await speak(principal, limits, data, request.request_id, idempotency_key=key)
    if isinstance(result, CachedSpeech):
        if fmt in ("pcm", "wav"):  # no codec work: stay on the event loop
            body = audio.encode(result.pcm16, fmt)
        else:
            body = await in_thread(audio.encode)(result.pcm16, fmt)
        if sse:
            events = _sse({"type": "speech.audio.delta", "audio": base64.b64encode(body).decode()})
            events += b"".join(_segment_event(c) for c in result.captions)
            usage = _usage(len(data["input"]), len(result.pcm16) // 2)
            response = HttpResponse(
                events + _sse({"type": "speech.audio.done", "usage": usage}), content_type="text/event-stream"
            )
        else:
            response = HttpResponse(body, content_type=audio.output_format(fmt).content_type)
        response["x-audio-duration"] = f"{len(result.pcm16) / 2 / audio.SAMPLE_RATE:.3f}"
        response["x-cache"] = "hit"
    else:
        shared = getattr(result, "shared", False)
        try:
            await result.first_audio()  # errors before the first audio keep their own status code
        except BaseException:  # an error, or the client went away (the view is cancelled)
            if not shared:
                await asyncio.shield(abandon(result.job_id))  # a queued job: refunded, slot freed
            raise
        response = audio_response(result, fmt, sse, owner=not shared)
        response["x-cache"] = "shared" if shared else "miss"
    response["x-seed"] = str(result.seed)
    return response


@documented_by(VoicePreviewDoc)
@csrf_exempt
@require_methods("GET")
@api_errors
async def voice_preview(request: HttpRequest, voice_id: str) -> HttpResponse:
    """GET /v1/audio/voices/{id}/preview?format=mp3 — a short fixed sentence in the voice (a built-in
    one or the organization's own), not billed; cached per voice and model version."""
    principal, limits = await aauthorize(request)
    fmt = request.GET.get("format", "mp3")
    result = await preview(principal, limits, voice_id, fmt, request.request_id)
    if isinstance(result, CachedSpeech):
        response = HttpResponse(
            await in_thread(audio.encode)(result.pcm16, fmt), content_type=audio.output_format(fmt).content_type
        )
        response["x-cache"] = "hit"
        return response
    await result.first_audio()
    response = audio_response(result, fmt, False, owner=not getattr(result, "shared", False))
    response["x-cache"] = "miss"
    return response


@documented_by(JobStreamDoc)
@csrf_exempt  # a bearer-key API: another method is a 405, not a CSRF page
@require_methods("GET")
@api_errors
async def job_stream(request: HttpRequest, job_id) -> HttpResponse:
    """GET /v1/jobs/{id}/stream?format=pcm|wav|mp3|... — follow a job's audio from its start, live
    or after the fact (while its stream is kept, TTS_STREAM_TTL)."""
    principal, limits = await aauthorize(request)
    job = await scoped(Job, principal.organization).filter(pk=job_id).afirst()
    if job is None:
        raise ApiError(404, f"No job {job_id}.", "not_found")
    fmt = request.GET.get("format", "pcm")
    try:
        audio.output_format(fmt)
    except ValueError as exc:
        raise ApiError(400, str(exc).replace("output_format", "format", 1), "invalid_value", "format") from None
    check_format(limits, fmt, "format")
    feed = JobAudioFeed(job.id, characters=job.characters, queue_timeout=3600)
    await feed.check_not_expired()  # 410 now, while the status line can still say so
    if not await streams.starts_at_beginning(job.id):
        raise feed.truncated()
    return audio_response(feed, fmt, request.GET.get("stream_format") == "sse", owner=False)


@extend_schema(responses=VoiceListSerializer)
@api_view(["GET"])
def voices(request) -> Response:
    """GET /v1/voices — the built-in voices."""
    data = [{"voice_id": v.name, "name": v.name, "description": v.description} for v in VOICES.values()]
    return Response({"object": "list", "data": data})


CREATED = 1_700_000_000  # the models' `created` (OpenAI's field; fixed: this service's models do not change)


class ModelSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField(default="model")
    created = serializers.IntegerField()
    owned_by = serializers.CharField()


class ModelListSerializer(serializers.Serializer):
    object = serializers.CharField(default="list")
    data = ModelSerializer(many=True)


def _model(name: str) -> dict:
    return {"id": name, "object": "model", "created": CREATED, "owned_by": "tts_saas"}


@extend_schema(responses={200: ModelListSerializer}, operation_id="models_list")
@api_view(["GET"])
def models(request) -> Response:
    """GET /v1/models — OpenAI's model list: this service's model and the names it answers to."""
    return Response({"object": "list", "data": [_model(name) for name in model_names()]})


@extend_schema(responses={200: ModelSerializer, **error_responses({404: "No such model."})})
@api_view(["GET"])
def model(request, model_id: str) -> Response:
    """GET /v1/models/{id} — one model (its dated snapshots too, e.g. gpt-4o-mini-tts-2025-12-15)."""
    if not known_model(model_id):
        raise ApiError(404, f"The model '{model_id}' does not exist.", "model_not_found", "model")
    return Response(_model(model_id))


class AudioModelSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()


class AudioModelListSerializer(serializers.Serializer):
    models = AudioModelSerializer(many=True)


@extend_schema(responses={200: AudioModelListSerializer}, auth=[{"ApiKey": []}, {}])
@api_view(["GET"])
@authentication_classes([OptionalApiKeyAuthentication])
@permission_classes([AllowAny])
def audio_models(request) -> Response:
    """GET /v1/audio/models — the models in the shape Open WebUI reads (`{"models": [{"id"}]}`)."""
    return Response({"models": [{"id": name, "name": name} for name in model_names()]})


@extend_schema(request=None, responses={201: StreamTicketSerializer})
@api_view(["POST"])
def stream_ticket(request) -> Response:
    """POST /v1/audio/stream/tickets — a single-use ticket for a browser WebSocket (60 s)."""
    ticket = issue_ticket(request.user)
    return Response(
        {"ticket": ticket, "expires_in": TICKET_SECONDS, "url": f"/v1/audio/stream?ticket={ticket}"},
        status=status.HTTP_201_CREATED,
    )


class JobListQuery(serializers.Serializer):
    status = serializers.ChoiceField(choices=Job.Status.choices, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=100, default=20)
    # Capped: an offset past what PostgreSQL's bigint holds failed the query (500), and paging
    # a million rows deep is not what this list is for.
    offset = serializers.IntegerField(min_value=0, max_value=1_000_000, default=0)


NO_JOB = {404: "No such job in this organization."}


class CaptionsQuery(serializers.Serializer):
    format = serializers.ChoiceField(choices=captions.FORMATS, default="json", help_text="json, srt or vtt.")


class CaptionSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="The segment's text as sent.")
    start = serializers.FloatField(help_text="Seconds from the start of the audio to the segment's first sample.")
    end = serializers.FloatField(help_text="Seconds to its last sample.")


class CaptionsSerializer(serializers.Serializer):
    object = serializers.CharField(default="captions")
    job_id = serializers.UUIDField()
    segments = CaptionSerializer(many=True)


@extend_schema_view(
    create=extend_schema(
        request=JobRequestSerializer,
        responses={
            202: JobSerializer,
            **error_responses(
                {
                    400: "The request body is not valid.",
                    403: "The voice or response_format is not in the plan, or the organization is suspended.",
                    409: "The Idempotency-Key was used with another body.",
                    429: "Rate limit, concurrency cap or monthly character quota (Retry-After).",
                    503: "The job queue is unavailable or at capacity (Retry-After).",
                }
            ),
        },
    ),
    list=extend_schema(
        parameters=[JobListQuery], responses={200: JobListSerializer, **error_responses({400: "Invalid query."})}
    ),
    retrieve=extend_schema(responses={200: JobSerializer, **error_responses(NO_JOB)}),
    audio=extend_schema(
        responses={
            **audio_responses("The stored audio, in the job's response_format.", events=False),
            **error_responses(
                {
                    404: "No such job in this organization, or its audio is not stored.",
                    409: "The job has not succeeded.",
                }
            ),
        }
    ),
    captions=extend_schema(
        parameters=[CaptionsQuery],
        responses={
            (200, "application/json"): CaptionsSerializer,
            (200, "application/x-subrip"): OpenApiTypes.STR,
            (200, "text/vtt"): OpenApiTypes.STR,
            **error_responses({400: "Unknown format.", 404: NO_JOB[404], 409: "The job has not succeeded."}),
        },
    ),
    cancel=extend_schema(request=None, responses={202: JobSerializer, **error_responses(NO_JOB)}),
)
class JobViewSet(mixins.RetrieveModelMixin, TenantScopedViewSet):
    """Asynchronous jobs: submit, look up, list, fetch the audio, cancel."""

    model = Job
    serializer_class = JobSerializer
    lookup_url_kwarg = "job_id"

    def perform_content_negotiation(self, request, force=False):
        if self.action == "captions":  # its ?format= names the captions' format, not a renderer
            return JSONRenderer(), JSONRenderer.media_type
        return super().perform_content_negotiation(request, force)

    def create(self, request):
        incoming = JobRequestSerializer(data=request.data)
        if not incoming.is_valid():
            raise validation_error(incoming.errors)
        data = dict(incoming.validated_data)
        callback_url = data.pop("callback_url")
        key = request.headers.get("Idempotency-Key", "")[:255]
        digest = request_digest({**data, "callback_url": callback_url})
        principal, limits = request.user, limits_for(request.user.organization)
        enforce_plan_limits(limits, data, job=True)
        speech = prepare_speech(data, principal.organization)
        how = Submission(interactive=False, callback_url=callback_url, idempotency_key=key, request_hash=digest)
        job = async_to_sync(admit_job)(principal, limits, speech, request._request.request_id, how)
        response = Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
        if job.request_id != request._request.request_id:
            response["Idempotent-Replayed"] = "true"
        return response

    def list(self, request):
        query = JobListQuery(data=request.query_params)
        if not query.is_valid():
            raise validation_error(query.errors)
        jobs = self.get_queryset()
        if "status" in query.validated_data:
            jobs = jobs.filter(status=query.validated_data["status"])
        limit, offset = query.validated_data["limit"], query.validated_data["offset"]
        page = list(jobs.order_by("-created_at")[offset : offset + limit + 1])
        return Response(
            {
                "object": "list",
                "data": JobSerializer(page[:limit], many=True).data,
                "has_more": len(page) > limit,
            }
        )

    @action(detail=True, methods=["get"])
    def audio(self, request, job_id=None):
        job = self.get_object()
        if job.status != Job.Status.SUCCEEDED:
            raise ApiError(409, f"The job is {job.status}; its audio exists once it has succeeded.", "job_not_ready")
        if not job.result:
            raise ApiError(404, "This job's audio is not stored (interactive jobs are not kept).", "no_result")
        spec = audio.output_format(job.response_format)
        return FileResponse(
            job.result.open("rb"), content_type=spec.content_type, filename=f"{job.id}.{spec.extension}"
        )

    @action(detail=True, methods=["get"])
    def captions(self, request, job_id=None):
        fmt = request.query_params.get("format", "json")
        if fmt not in captions.FORMATS:
            raise ApiError(
                400,
                f"Unsupported format '{fmt}'. Valid formats: {', '.join(captions.FORMATS)}.",
                "invalid_value",
                "format",
            )
        job = self.get_object()
        if job.status != Job.Status.SUCCEEDED:
            raise ApiError(409, f"The job is {job.status}; its captions exist once it has succeeded.", "job_not_ready")
        body = captions.render([captions.Caption.from_dict(c) for c in job.captions], fmt)
        if isinstance(body, dict):
            return Response({"object": "captions", "job_id": str(job.id), **body})
        return HttpResponse(body, content_type=f"{captions.CONTENT_TYPES[fmt]}; charset=utf-8")

    @action(detail=True, methods=["post"])
    def cancel(self, request, job_id=None):
        job = cancel_job(self.get_object())
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
