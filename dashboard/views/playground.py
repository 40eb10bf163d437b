"""The playground, which speaks through the WebSocket with a member's ticket: a model picker (the
served models the plan allows, each with its licence), the voices and options of the model picked
(from its spec), a character counter with the month's remaining quota (at the plan's weight for the
model), an SSML toggle (`input_format`, snippets inserted at the caret, a parse error said under the
text with the caret put at its line and column, SSML's marks listed after playing), Stop, replay
and seeking of what was generated (no second bill), a download in the format picked (what was
generated, encoded here: never generated twice) and the request as curl or Python code."""

from __future__ import annotations

import logging
import re
import secrets

import redis
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_POST
from rest_framework import serializers

from accounts.auth import check_active, issue_ticket
from accounts.tenancy import scoped
from billing import offer
from billing.limits import Limits, limits_for
from billing.usage import month_summary
from inference.spec import EngineSpec
from synthesis.api.defaults import default_model
from synthesis.api.serializers import SpeechRequestSerializer
from synthesis.audio import formats as audio
from tts_saas.errors import ApiError, error_response
from tts_saas.limits import large_body
from tts_saas.redis import get_redis
from voices.catalog import builtin_listing, own_voices
from voices.models import Lexicon

from .. import engines
from ..access import member_required, page, require_active
from ..throttles import by_user, throttled

logger = logging.getLogger(__name__)


@member_required
def playground(request):
    """`?model=` and `?voice=` preselect (an own voice alone names its model); else the default model."""
    org = request.principal.organization
    limits = limits_for(org)
    month = month_summary(org)
    specs = offer.allowed_specs(limits)
    own = list(own_voices(org).only("id", "name", "model"))
    selected = request.GET.get("voice", "")
    default = default_model(org)
    chosen = chosen_model(specs, request.GET.get("model", ""), selected, {v.id: v.model for v in own}, default)
    if not selected and chosen is not None and chosen.name == default:
        selected = org.default_voice  # the organization's default voice, if it chose one
    options = offered_options(specs)
    return page(
        request,
        "playground.html",
        "playground",
        models=[model_entry(spec, limits, [v for v in own if v.model == spec.name]) for spec in specs],
        model=chosen.name if chosen else "",
        seed=[o for o in options if o["name"] == "seed"],
        options=[o for o in options if o["name"] != "seed"],
        selected=selected,
        formats=[audio.output_format(name) for name in download_formats(limits.allowed_formats)],
        max_chars=limits.max_input_chars,
        remaining=max(0, month.limits.monthly_characters - month.used),
        lexicons=lexicon_choices(org, request.GET.getlist("lexicon")),
        base_url=request.build_absolute_uri("/v1").rstrip("/"),
    )


def lexicon_choices(org, asked: list[str]) -> list[dict]:
    """The organization's lexicons to pick from: the defaults checked (every request gets them),
    and those `?lexicon=` names (a lexicon's page links here to try it)."""
    return [
        {
            "id": lexicon.id,
            "name": lexicon.name,
            "entries": len(lexicon.entries or []),
            "is_default": lexicon.is_default,
            "checked": lexicon.is_default or lexicon.id in asked,
        }
        for lexicon in scoped(Lexicon, org).order_by("created_at")
    ]


def chosen_model(
    specs: list[EngineSpec], asked: str, voice: str, own: dict[str, str], default: str
) -> EngineSpec | None:
    """The model asked for if the plan allows it, else the one of the organization's voice asked
    for, else the `default` model (or the first allowed one) — one that has the voice if any does."""
    allowed = {spec.name: spec for spec in specs}
    if asked in allowed:
        return allowed[asked]
    if own.get(voice) in allowed:
        return allowed[own[voice]]
    ordered = sorted(specs, key=lambda spec: spec.name != default)
    return next((spec for spec in ordered if voice and spec.voice(voice)), ordered[0] if ordered else None)


def model_entry(spec: EngineSpec, limits: Limits, own: list) -> dict:
    """A model of the picker: its card, the plan's weight, its built-in voices the plan allows
    (OpenAI's names say which of the engine's voices they are) and the organization's own."""
    builtin = []
    for voice in builtin_listing(spec, limits.allowed_voices):
        found = spec.voice(voice["id"])
        assert found is not None  # listed: it exists
        label = voice["name"] if found.id == voice["id"] else f"{voice['name']} ({found.id})"
        # What it sounds like, as its card says it (before: bare ids): "American English, female".
        said = re.split(r" \(|; |\.$", found.description, maxsplit=1)[0].strip()
        builtin.append({"id": voice["id"], "label": f"{label} · {said}" if said else label})
    weight = float(limits.model_weights.get(spec.name, 1.0))
    card = engines.card(spec)
    hint = ", ".join(card["languages"]) + (f" · each character billed as {weight:g}" if weight != 1 else "")
    return {**card, "weight": weight, "hint": hint, "builtin": builtin, "own": own}


def offered_options(specs: list[EngineSpec]) -> list[dict]:
    """The request's options beyond text, voice and speed that some allowed model takes, as inputs
    (ranges and defaults from the speech request's fields); `models` says which take each: the
    seed those it changes (`features.seeds`), the others those whose spec lists them."""
    out = []
    for name, field in SpeechRequestSerializer().fields.items():
        takers = [s.name for s in specs if (s.features.seeds if name == "seed" else name in s.options)]
        if not takers:
            continue
        hint = re.sub(r"^[^:]{1,40} only: ", "", field.help_text or "")  # "ChatTTS only: …": the picker says so
        out.append(
            {
                "name": name,
                "id": f"pg-{name.replace('_', '-')}",
                "label": name.replace("_", " ").capitalize().replace("Top ", "Top-"),
                "type": input_type(field),
                "min": getattr(field, "min_value", None),
                "max": getattr(field, "max_value", None),
                "step": 1 if isinstance(field, serializers.IntegerField) else "any",
                "placeholder": "random" if name == "seed" else field.default,
                "hint": "" if name == "seed" else hint[:1].upper() + hint[1:],
                "models": " ".join(takers),
            }
        )
    return out


def input_type(field: serializers.Field) -> str:
    if isinstance(field, serializers.BooleanField):
        return "checkbox"
    return "number" if isinstance(field, serializers.IntegerField | serializers.FloatField) else "text"


@require_POST
@member_required
def playground_ticket(request):
    """A single-use WebSocket ticket for the signed-in member (CSRF-protected POST)."""
    try:
        check_active(request.principal.organization)
    except ApiError as exc:  # the reason, in the JSON the page reads (a suspension: why, and whom to ask)
        return exc.response()
    ticket = issue_ticket(request.principal)
    response = JsonResponse({"ticket": ticket, "url": f"/v1/audio/stream?ticket={ticket}"})
    response["Cache-Control"] = "no-store"  # a credential, if only for a minute
    return response


# Offered for download, the API's names; WAV is made in the browser, the others by `encode`.
DOWNLOAD_FORMATS = ("wav", "mp3", "opus", "aac", "flac", "pcm", "ulaw_8000", "alaw_8000")


def download_formats(allowed: tuple[str, ...]) -> list[str]:
    """The download formats the plan allows (its codecs; none listed: all)."""
    return [name for name in DOWNLOAD_FORMATS if not allowed or audio.output_format(name).codec in allowed]


MAX_ENCODE_SECONDS = 600  # of 24 kHz audio, what one download may carry
MAX_ENCODE_BYTES = MAX_ENCODE_SECONDS * audio.SAMPLE_RATE * 2
ENCODING_LOCK_SECONDS = 120  # one download encodes at a time per organization; a crashed one frees it


@large_body(MAX_ENCODE_BYTES, "application/octet-stream")
@require_POST
@member_required
@throttled("encode", (by_user, "TTS_PLAYGROUND_ENCODE_RATE"))
def playground_encode(request):
    """What the playground generated (24 kHz 16-bit PCM, the body) as a file in `?format=`:
    encoded, not generated again, so nothing is billed. Encoding runs in the web process: one at a
    time per organization, at most MAX_ENCODE_SECONDS, throttled per member."""
    require_active(request)
    org = request.principal.organization
    name = request.GET.get("format", "")
    offered = download_formats(limits_for(org).allowed_formats)
    if name not in offered:
        return error_response(400, f"format must be one of {', '.join(offered)}.", "invalid_format", "format")
    lock, token = f"tts:playground-encode:{org.pk}", secrets.token_hex(8)
    if not get_redis().set(lock, token, nx=True, ex=ENCODING_LOCK_SECONDS):
        return error_response(
            429,
            "Another download of your organization is being encoded: try again in a moment.",
            "encoding_busy",
            headers={"Retry-After": "5"},
        )
    try:
        pcm = request.read(MAX_ENCODE_BYTES + 1)  # read under the lock: one such body in memory at a time
        if len(pcm) > MAX_ENCODE_BYTES or len(pcm) % 2:
            return error_response(400, f"Send at most {MAX_ENCODE_SECONDS} s of 16-bit PCM.", "invalid_audio")
        body = audio.encode(pcm, name)
    finally:
        try:
            get_redis().eval(RELEASE, 1, lock, token)
        except redis.RedisError:  # it expires by itself; the download is not lost for it
            logger.warning("could not release the playground's encoding lock", exc_info=True)
    spec = audio.output_format(name)
    response = HttpResponse(body, content_type=spec.content_type)
    response["Content-Disposition"] = f'attachment; filename="speech.{spec.extension}"'
    return response


# Deletes the lock only if it is still ours (it may have expired and been taken by another).
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0"
