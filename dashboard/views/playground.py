"""The playground, which speaks through the WebSocket with a member's ticket: a character counter
with the month's remaining quota, Stop, replay and seeking of what was generated (no second bill),
a download in the format picked (what was generated, encoded here: never generated twice) and the
request as curl or Python code."""

from __future__ import annotations

import logging
import secrets

import redis
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_POST

from accounts.auth import issue_ticket
from accounts.tenancy import scoped
from billing import offer
from billing.limits import limits_for
from billing.usage import month_summary
from synthesis.audio import formats as audio
from tts_saas.errors import error_response
from tts_saas.limits import large_body
from tts_saas.redis import get_redis
from voices.catalog import builtin_listing
from voices.models import Voice

from ..access import member_required, page, require_active
from ..throttles import by_user, throttled

logger = logging.getLogger(__name__)


@member_required
def playground(request):
    """The plan's built-in voices, then the organization's own (by id); `?voice=` preselects one."""
    org = request.principal.organization
    limits = limits_for(org)
    month = month_summary(org)
    voices = builtin_listing(offer.default_spec(), limits.allowed_voices)
    return page(
        request,
        "playground.html",
        "playground",
        voices=voices,
        own_voices=scoped(Voice, org).order_by("created_at").only("id", "name"),
        selected=request.GET.get("voice", ""),
        formats=[audio.output_format(name) for name in download_formats(limits.allowed_formats)],
        max_chars=limits.max_input_chars,
        remaining=max(0, month.limits.monthly_characters - month.used),
        base_url=request.build_absolute_uri("/v1").rstrip("/"),
    )


@require_POST
@member_required
def playground_ticket(request):
    """A single-use WebSocket ticket for the signed-in member (CSRF-protected POST)."""
    require_active(request)
    ticket = issue_ticket(request.principal)
    return JsonResponse({"ticket": ticket, "url": f"/v1/audio/stream?ticket={ticket}"})


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
