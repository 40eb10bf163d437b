"""Asynchronous jobs: submit, look up, list, fetch the audio and captions, cancel, and follow a job's
audio (GET /v1/jobs/{id}/stream)."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.http import FileResponse, HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from accounts.tenancy import TenantScopedViewSet, scoped
from billing.limits import limits_for
from billing.policy import aauthorize
from inference import registry
from synthesis.api.openapi import JobStreamDoc, audio_responses, documented_by
from synthesis.api.serializers import JobListSerializer, JobRequestSerializer, JobSerializer
from synthesis.api.speech import api_errors, audio_response
from synthesis.api.timing_serializers import CaptionSerializer
from synthesis.audio import captions, streams
from synthesis.audio import formats as audio
from synthesis.audio.held import take_audio
from synthesis.models import Job
from synthesis.service.feed import JobAudioFeed
from synthesis.service.jobs import Submission, cancel_job, request_digest
from synthesis.service.prepared import check_format, enforce_plan_limits, prepare_speech
from synthesis.service.speech import admit_job
from tts_saas.errors import ApiError, error_responses, require_methods, validation_error
from tts_saas.serializers import refuse_any_body


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
    feed = JobAudioFeed(job.id, characters=job.characters, queue_timeout=3600, rate=registry.sample_rate(job.model))
    await feed.check_not_expired()  # 410 now, while the status line can still say so
    if not await streams.starts_at_beginning(job.id):
        raise feed.truncated()
    return audio_response(feed, fmt, request.GET.get("stream_format") == "sse", owner=False)


class JobListQuery(serializers.Serializer):
    status = serializers.ChoiceField(choices=Job.Status.choices, required=False)
    limit = serializers.IntegerField(min_value=1, max_value=100, default=20)
    # Capped: an offset past what PostgreSQL's bigint holds failed the query (500), and paging
    # a million rows deep is not what this list is for.
    offset = serializers.IntegerField(min_value=0, max_value=1_000_000, default=0)


NO_JOB = {404: "No such job in this organization."}


class CaptionsQuery(serializers.Serializer):
    format = serializers.ChoiceField(choices=captions.FORMATS, default="json", help_text="json, srt or vtt.")


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
                    400: "The request body is not valid, or names an option or language the model does not take.",
                    403: "The model, voice or response_format is not in the plan, or the organization is suspended.",
                    404: "The model is not served here (model_not_found).",
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
                    410: "A zero-retention job's audio was handed out already, or its hour ran out.",
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
        incoming = JobRequestSerializer(data=request.data, context={"organization": request.user.organization})
        if not incoming.is_valid():
            raise validation_error(incoming.errors)
        data = dict(incoming.validated_data)
        callback_url = data.pop("callback_url")
        key = request.headers.get("Idempotency-Key", "")[:255]
        digest = request_digest({**data, "callback_url": callback_url})
        principal, limits = request.user, limits_for(request.user.organization)
        enforce_plan_limits(limits, data, job=True)
        speech = prepare_speech(data, principal.organization, limits)
        base = request.build_absolute_uri("/").rstrip("/")
        how = Submission(
            interactive=False, callback_url=callback_url, base_url=base, idempotency_key=key, request_hash=digest
        )
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
        spec = audio.output_format(job.response_format)
        if job.zero_retention:
            data = take_audio(job.id)
            if data is None:
                raise ApiError(
                    410,
                    "Under zero retention a job's audio is handed out once, within an hour of its end: it is gone.",
                    "audio_gone",
                )
            response = HttpResponse(data, content_type=spec.content_type)
            response["Content-Disposition"] = f'attachment; filename="{job.id}.{spec.extension}"'
            response["Cache-Control"] = "no-store"
            return response
        if not job.result:
            raise ApiError(404, "This job's audio is not stored (interactive jobs are not kept).", "no_result")
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
        if job.zero_retention:
            raise ApiError(404, "Under zero retention a job's captions (its text) are not kept.", "no_result")
        body = captions.render([captions.Caption.from_dict(c) for c in job.captions], fmt)
        if isinstance(body, dict):
            return Response({"object": "captions", "job_id": str(job.id), **body})
        return HttpResponse(body, content_type=f"{captions.CONTENT_TYPES[fmt]}; charset=utf-8")

    @action(detail=True, methods=["post"])
    def cancel(self, request, job_id=None):
        refuse_any_body(request)
        job = cancel_job(self.get_object())
        return Response(JobSerializer(job).data, status=status.HTTP_202_ACCEPTED)
