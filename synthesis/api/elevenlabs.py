"""ElevenLabs' REST wire on this service, under `/elevenlabs/` (the `elevenlabs` SDK and the apps and
frameworks built on it change only their base URL and key): text to speech (whole, streamed, with
character timestamps), voices, models, the user and their subscription. One implementation
underneath: the key (`xi-api-key`, or `Authorization: Bearer`) is checked by the same policy as
`/v1` (scopes, allowlists, rate and concurrency limits, quota, usage and audit), the speech is made
by the same `speak`; only the shapes differ (`eleven_shapes`), errors included. What a model cannot
do of what a request asks (stability, style, previous_text…) is accepted and named in the response's
`x-ignored-settings` header; docs/elevenlabs.md says what maps to what."""

from __future__ import annotations

import asyncio
import base64
import functools
import inspect
import json
import logging

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from accounts.tenancy import scoped
from billing import offer
from billing.limits import limits_for
from billing.policy import aauthorize
from synthesis.api.defaults import default_model
from synthesis.api.eleven_serializers import ElevenLabsSpeechSerializer
from synthesis.api.openapi import documented_by
from synthesis.api.serializers import SpeechRequestSerializer
from synthesis.api.speech import audio_response, encoded, first_audio, parse_json
from synthesis.audio import formats as audio
from synthesis.audio.captions import Caption
from synthesis.service.prepared import CachedSpeech
from synthesis.service.speech import abandon, speak
from tts_saas.errors import ApiError, require_methods, validation_error
from tts_saas.threads import in_thread
from voices.catalog import VOICE_ID
from voices.models import Voice

from . import eleven_openapi as docs
from . import eleven_shapes as shapes

logger = logging.getLogger(__name__)

DEFAULT_FORMAT = "mp3_44100_128"  # ElevenLabs' default output_format
BODY_FIELDS = frozenset(ElevenLabsSpeechSerializer().fields)
NO_CONTROL = ("stability", "similarity_boost", "style", "use_speaker_boost")  # no model here has these
SAID = ("language_code", "previous_text", "next_text", "previous_request_ids", "next_request_ids", "audio_effects")


def _key_from_xi(request: HttpRequest) -> None:
    """ElevenLabs' `xi-api-key` header as the policy reads a key (`Authorization: Bearer`)."""
    key = request.META.get("HTTP_XI_API_KEY")
    if key and not request.META.get("HTTP_AUTHORIZATION"):
        request.META["HTTP_AUTHORIZATION"] = f"Bearer {key}"
        request.__dict__.pop("headers", None)  # read again from META


def _as_eleven(exc: ApiError) -> JsonResponse:
    status = exc.status
    if status == 400 and exc.param != "output_format":  # a request ElevenLabs' validation refuses: 422
        status = 422
    return shapes.error(status, exc.code, exc.message, exc.headers)


def eleven(view):
    """An ElevenLabs route: its key header, and its error shape for every refusal."""
    if inspect.iscoroutinefunction(view):

        async def wrapped(request, *args, **kwargs):
            _key_from_xi(request)
            try:
                return await view(request, *args, **kwargs)
            except ApiError as exc:
                return _as_eleven(exc)

    else:

        def wrapped(request, *args, **kwargs):
            _key_from_xi(request)
            try:
                return view(request, *args, **kwargs)
            except ApiError as exc:
                return _as_eleven(exc)

    return csrf_exempt(functools.wraps(view)(wrapped))


def _model_for(org, voice_id: str, model_id: str, limits) -> str:
    """The model a request speaks with: one this service serves when `model_id` names it; else
    (ElevenLabs' own names, `eleven_…`, or none) the voice's (`model_for_voice`)."""
    if model_id and not model_id.startswith("eleven_"):
        return offer.spec_for(model_id).name  # 404 model_not_found for one not served
    return model_for_voice(org, voice_id, limits)


def model_for_voice(org, voice_id: str, limits=None) -> str:
    """The model a voice speaks with: an own voice's model, the default model where the voice is one
    of its own, else the first model of the plan that has it; 404 `voice_not_found` for none."""
    own = None
    if VOICE_ID.fullmatch(voice_id):  # an own voice's id (anything else, a NUL byte too, is never a row)
        own = scoped(Voice, org).filter(pk=voice_id).values_list("model", flat=True).first()
    if own:
        return own
    default = default_model(org)
    if offer.spec_for(default).voice(voice_id) is not None:
        return default
    for spec in offer.allowed_specs(limits or limits_for(org)):
        if spec.voice(voice_id) is not None:
            return spec.name
    raise ApiError(404, f"A voice with the voice_id '{voice_id[:70]}' was not found.", "voice_not_found")


def lexicon_ids(locators) -> list[str]:
    """ElevenLabs' pronunciation dictionary locators as this service's lexicon ids."""
    if not isinstance(locators, list) or not all(isinstance(x, dict) for x in locators):
        raise ApiError(400, "pronunciation_dictionary_locators must be a list of objects.", "invalid_value")
    return [str(x.get("pronunciation_dictionary_id", "")) for x in locators]


def _speech_request(request: HttpRequest, voice_id: str, org, limits) -> tuple[dict, list[str]]:
    """Our speech request for ElevenLabs' body and query, and what of it no model here applies."""
    body = parse_json(request)
    unknown = sorted(set(body) - BODY_FIELDS)
    if unknown:
        raise ApiError(400, f"Unknown field(s): {', '.join(unknown)}.", "unknown_parameter", unknown[0])
    checked = ElevenLabsSpeechSerializer(data=body)
    if not checked.is_valid():
        raise validation_error(checked.errors)
    body = checked.validated_data
    settings = body.get("voice_settings") or {}
    model = _model_for(org, voice_id, str(body.get("model_id") or ""), limits)
    out: dict = {"model": model, "input": body["text"], "voice": voice_id}
    out["output_format"] = request.GET.get("output_format") or DEFAULT_FORMAT
    if settings.get("speed") is not None:
        out["speed"] = settings["speed"]
    if body.get("seed") is not None:
        out["seed"] = body["seed"]
    if body.get("pronunciation_dictionary_locators"):
        out["lexicons"] = [x["pronunciation_dictionary_id"] for x in body["pronunciation_dictionary_locators"]]
    if request.GET.get("enable_logging") == "false":  # ElevenLabs' zero retention
        out["zero_retention"] = True
    if body.get("apply_text_normalization"):
        out["text_normalization"] = body["apply_text_normalization"]
    ignored = [f"voice_settings.{name}" for name in NO_CONTROL if settings.get(name) is not None]
    ignored += [name for name in SAID if body.get(name)]
    return out, ignored


async def _spoken(request: HttpRequest, voice_id: str):
    principal, limits = await aauthorize(request)
    org = principal.organization
    body, ignored = await in_thread(_speech_request)(request, voice_id, org, limits)
    serializer = SpeechRequestSerializer(data=body, context={"organization": org})
    if not await in_thread(serializer.is_valid)():
        raise validation_error(serializer.errors)
    data = serializer.validated_data
    key = request.headers.get("Idempotency-Key", "")[:255]
    result = await speak(principal, limits, data, request.request_id, idempotency_key=key)
    if not isinstance(result, CachedSpeech):
        await first_audio(result)
    return data, result, ignored


def _headers(response: HttpResponse, data: dict, result, ignored: list[str]) -> HttpResponse:
    response["x-model"] = data["model"]
    response["x-seed"] = str(result.seed)
    if ignored:
        response["x-ignored-settings"] = ", ".join(ignored)
    if not isinstance(result, CachedSpeech):
        response["x-job-id"] = result.job_id
    return response


@eleven
@documented_by(docs.TextToSpeechDoc)
@require_methods("POST")
async def text_to_speech(request: HttpRequest, voice_id: str) -> HttpResponse:
    """POST /elevenlabs/v1/text-to-speech/{voice_id}[/stream]: the audio, streamed as it is made."""
    data, result, ignored = await _spoken(request, voice_id)
    fmt = data["response_format"]
    if isinstance(result, CachedSpeech):
        response = HttpResponse(await encoded(result, fmt), content_type=audio.output_format(fmt).content_type)
    else:
        response = audio_response(result, fmt, False, owner=not getattr(result, "shared", False))
    return _headers(response, data, result, ignored)


def _line(audio_bytes: bytes, captions: list[Caption], after: Caption | None = None) -> bytes:
    aligned = shapes.alignment(captions, after)
    body = {
        "audio_base64": base64.b64encode(audio_bytes).decode(),
        "alignment": aligned,
        "normalized_alignment": aligned,
    }
    return json.dumps(body, separators=(",", ":")).encode()


async def _timed(result, fmt: str):
    """(encoded audio, captions) pieces as the audio comes: each audio chunk, then each sentence's
    captions as it ends. A client that leaves stops the job (as the plain stream does)."""
    if isinstance(result, CachedSpeech):
        yield await encoded(result, fmt), result.captions
        return
    encoder, finished = audio.StreamEncoder(fmt, result.rate), False
    try:
        async for item in result.events():
            if isinstance(item, Caption):
                yield b"", [item]
            elif data := encoder.feed(item):
                yield data, []
        yield encoder.finish(), []
        finished = True
    except ApiError as exc:  # a lost worker's job runs again for a retry with its Idempotency-Key: kept
        finished = exc.code == "worker_lost"
        raise
    finally:
        if not finished and not getattr(result, "shared", False):
            await asyncio.shield(abandon(result.job_id))


@eleven
@documented_by(docs.WithTimestampsDoc)
@require_methods("POST")
async def with_timestamps(request: HttpRequest, voice_id: str) -> HttpResponse:
    """POST …/with-timestamps: the whole audio (base64) and every character's start and end."""
    data, result, ignored = await _spoken(request, voice_id)
    pieces, captions = [], []
    timed = _timed(result, data["response_format"])
    try:
        async for piece, said in timed:
            pieces.append(piece)
            captions.extend(said)
    finally:  # the client left: its job stops now, not when the generator is collected
        await timed.aclose()
    response = HttpResponse(_line(b"".join(pieces), captions), content_type="application/json")
    return _headers(response, data, result, ignored)


@eleven
@documented_by(docs.StreamWithTimestampsDoc)
@require_methods("POST")
async def stream_with_timestamps(request: HttpRequest, voice_id: str) -> HttpResponse:
    """POST …/stream/with-timestamps: one JSON object a line, audio chunks as they come and each
    sentence's characters (times from the audio's start) as it ends."""
    data, result, ignored = await _spoken(request, voice_id)

    async def lines():
        last = None  # the sentence before: each sentence's characters come with the space before them
        timed = _timed(result, data["response_format"])
        try:
            async for piece, said in timed:
                if piece or said:
                    yield _line(piece, said, last) + b"\n"
                last = said[-1] if said else last
        except ApiError as exc:  # the status line has gone: the last line says why, in ElevenLabs' shape
            job_id = getattr(result, "job_id", None)
            logger.warning("stream ended by a job error: %s", exc.message, extra={"job_id": job_id})
            yield shapes.error(exc.status, exc.code, exc.message).content + b"\n"
        finally:  # the client left: its job stops now
            await timed.aclose()

    response = StreamingHttpResponse(lines(), content_type="application/x-ndjson")
    response["Cache-Control"] = "no-cache"
    return _headers(response, data, result, ignored)


@eleven
def not_found(request: HttpRequest) -> JsonResponse:
    """Any other path under /elevenlabs/: ElevenLabs' 404, naming what this service answers."""
    raise ApiError(404, f"No route {request.path[:100]}; see docs/elevenlabs.md for those served.", "not_found")
