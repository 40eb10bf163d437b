"""The speech endpoints: POST /v1/audio/speech (OpenAI-compatible: the whole file from the cache,
or the audio streamed as the worker makes it, raw or as server-sent events), a voice's preview, and
the browser's WebSocket ticket. Views parse, call one action, render."""

from __future__ import annotations

import asyncio
import base64
import json
import logging

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import api_view
from rest_framework.response import Response

from accounts.auth import Principal, issue_ticket
from accounts.origins import browser_cors
from accounts.tenancy import scoped
from accounts.tickets import TICKET_SECONDS
from billing import offer
from billing.limits import Limits
from billing.policy import aauthorize
from inference.registry import SPECS
from inference.spec import SAMPLE_RATE
from synthesis.api.defaults import model_for
from synthesis.api.openapi import SpeechDoc, VoicePreviewDoc, documented_by
from synthesis.api.serializers import SpeechRequestSerializer, StreamTicketSerializer
from synthesis.audio import formats as audio
from synthesis.audio.captions import Caption
from synthesis.service.feed import JobAudioFeed
from synthesis.service.prepared import CachedSpeech
from synthesis.service.speech import abandon, speak
from tts_saas.errors import ApiError, require_methods, validation_error
from tts_saas.parsers import load_json
from tts_saas.threads import in_thread
from voices.models import Voice

AUDIO_TOKEN_SAMPLES = 512  # usage's `output_tokens`: audio in 512-sample units (ChatTTS's token)

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


def _usage(characters: int, samples: int, rate: int) -> dict:
    tokens = samples * SAMPLE_RATE // rate // AUDIO_TOKEN_SAMPLES  # 512-sample units at 24 kHz
    return {
        "input_tokens": characters,
        "output_tokens": tokens,
        "total_tokens": characters + tokens,
        "characters": characters,
        "audio_seconds": round(samples / rate, 3),
    }


class StreamAborted(Exception):
    """A raw audio response cannot be completed: the server closes the connection mid-body."""


async def audio_body(feed: JobAudioFeed, fmt: str, sse: bool, owner: bool):
    """The response body of a job's audio: encoded chunks as they come (or SSE events). If the
    `owner` of a live request goes away, the job is asked to stop, so no GPU time is spent on
    audio nobody hears; a mere follower (GET /v1/jobs/{id}/stream) leaving changes nothing."""
    encoder = audio.StreamEncoder(fmt, feed.rate)
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
            yield _sse({"type": "speech.audio.done", "usage": _usage(feed.characters, feed.samples, feed.rate)})
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


async def encoded(result: CachedSpeech, fmt: str) -> bytes:
    """A cache hit's audio in `fmt`: raw PCM or WAV at the model's rate on the event loop (no codec
    work), any other format in a thread."""
    if fmt in ("pcm", "wav") and result.rate == audio.SAMPLE_RATE:
        return audio.encode(result.pcm16, fmt, result.rate)
    return await in_thread(audio.encode)(result.pcm16, fmt, result.rate)


async def first_audio(result: JobAudioFeed) -> None:
    """Wait for a live request's first audio; errors before it keep their own status code. If an error
    or the client's leaving (the view cancelled) comes first, the job is abandoned unless others
    listen to it (a queued job: refunded, its slot freed)."""
    try:
        await result.first_audio()
    except BaseException:
        if not getattr(result, "shared", False):
            await asyncio.shield(abandon(result.job_id))
        raise


def audio_response(feed: JobAudioFeed, fmt: str, sse: bool, owner: bool) -> StreamingHttpResponse:
    content_type = "text/event-stream" if sse else audio.output_format(fmt).content_type
    response = StreamingHttpResponse(audio_body(feed, fmt, sse, owner), content_type=content_type)
    response["x-job-id"] = feed.job_id
    response["Cache-Control"] = "no-cache"
    return response


@documented_by(SpeechDoc)
@csrf_exempt
@browser_cors
@require_methods("POST")
@api_errors
async def speech(request: HttpRequest) -> HttpResponse:
    """POST /v1/audio/speech — OpenAI-compatible. A cache hit returns the whole file; otherwise
    the audio streams out as the worker generates it."""
    principal, limits = await aauthorize(request)
    serializer = SpeechRequestSerializer(data=parse_json(request), context={"organization": principal.organization})
    if not serializer.is_valid():
        raise validation_error(serializer.errors)
    data = serializer.validated_data
    fmt, sse = data["response_format"], data["stream_format"] == "sse"
    key = request.headers.get("Idempotency-Key", "")[:255]
    result = await speak(principal, limits, data, request.request_id, idempotency_key=key)
    if isinstance(result, CachedSpeech):
        body = await encoded(result, fmt)
        if sse:
            events = _sse({"type": "speech.audio.delta", "audio": base64.b64encode(body).decode()})
            events += b"".join(_segment_event(c) for c in result.captions)
            usage = _usage(result.characters, len(result.pcm16) // 2, result.rate)
            response = HttpResponse(
                events + _sse({"type": "speech.audio.done", "usage": usage}), content_type="text/event-stream"
            )
        else:
            response = HttpResponse(body, content_type=audio.output_format(fmt).content_type)
        response["x-audio-duration"] = f"{len(result.pcm16) / 2 / result.rate:.3f}"
        response["x-cache"] = "hit"
    else:
        shared = getattr(result, "shared", False)
        await first_audio(result)
        response = audio_response(result, fmt, sse, owner=not shared)
        response["x-cache"] = "shared" if shared else "miss"
    response["x-seed"] = str(result.seed)
    response["x-model"] = data["model"]  # the model that spoke (OpenAI's names: the default one)
    if data.get("instructions", "").strip():  # OpenAI's clients send them to any model: say what became of them
        response["x-instructions"] = "applied" if SPECS[data["model"]].features.instructions else "ignored"
    return response


PREVIEW_TEXT = "Hello! This is how I sound. 你好，这是我的声音。"
# A built-in voice of one other language is heard in it (Kokoro's Spanish, French... voices).
PREVIEW_TEXTS = {
    "es": "¡Hola! Así es como sueno.",
    "fr": "Bonjour ! Voici ma voix.",
    "it": "Ciao! Ecco come suono.",
    "pt-br": "Olá! É assim que eu soo.",
    "hi": "नमस्ते! मेरी आवाज़ ऐसी है।",
    "ja": "こんにちは。これが私の声です。",
}
PREVIEW_SEED = 20251130  # one preview per voice and model version: cached after the first


async def preview(
    principal: Principal, limits: Limits, voice_id: str, fmt: str, request_id: str, model: str = ""
) -> CachedSpeech | JobAudioFeed:
    """A voice heard (a built-in one of `model`, the organization's default model when none is named, or the
    organization's own, on its own model): a fixed sentence and seed, generated and cached like any
    request, billed nothing. 404 for a voice neither built in nor of this organization."""
    own = await scoped(Voice, principal.organization).filter(pk=voice_id).afirst()
    text = PREVIEW_TEXT
    if own is not None:
        model = own.model
    else:
        model = model_for(model, principal.organization)
        builtin = offer.spec_for(model).voice(voice_id)
        if builtin is None:
            raise ApiError(404, f"No voice '{voice_id[:70]}' in this organization.", "not_found")
        text = PREVIEW_TEXTS.get(builtin.language, PREVIEW_TEXT)
    body = {"model": model, "input": text, "voice": voice_id, "seed": PREVIEW_SEED, "response_format": fmt}
    serializer = SpeechRequestSerializer(data=body)
    if not serializer.is_valid():
        raise validation_error(serializer.errors)
    return await speak(principal, limits, serializer.validated_data, request_id, free=True)


@documented_by(VoicePreviewDoc)
@csrf_exempt
@require_methods("GET")
@api_errors
async def voice_preview(request: HttpRequest, voice_id: str) -> HttpResponse:
    """GET /v1/audio/voices/{id}/preview?format=mp3&model= — a short fixed sentence in the voice (a
    built-in one of the model, or the organization's own), not billed; cached per voice and model
    version."""
    principal, limits = await aauthorize(request)
    fmt = request.GET.get("format", "mp3")
    result = await preview(principal, limits, voice_id, fmt, request.request_id, request.GET.get("model", ""))
    if isinstance(result, CachedSpeech):
        response = HttpResponse(await encoded(result, fmt), content_type=audio.output_format(fmt).content_type)
        response["x-cache"] = "hit"
        return response
    await result.first_audio()
    response = audio_response(result, fmt, False, owner=not getattr(result, "shared", False))
    response["x-cache"] = "miss"
    return response


@extend_schema(request=None, responses={201: StreamTicketSerializer})
@api_view(["POST"])
def stream_ticket(request) -> Response:
    """POST /v1/audio/stream/tickets — a single-use ticket for a browser WebSocket (60 s)."""
    ticket = issue_ticket(request.user)
    response = Response(
        {"ticket": ticket, "expires_in": TICKET_SECONDS, "url": f"/v1/audio/stream?ticket={ticket}"},
        status=status.HTTP_201_CREATED,
    )
    response["Cache-Control"] = "no-store"  # a credential, if only for a minute
    return response
