"""Voices: the built-in ones (read-only) and the organization's own, made from a seed or a ChatTTS
speaker embedding string by `voices.actions.create_voice` (as the API makes them) and
deleted; owners and admins change them. Any voice can be heard: `voice_preview` is the API's
preview (`synthesis.api.speech.preview`: a fixed sentence, cached, not billed)."""

from __future__ import annotations

from asgiref.sync import async_to_sync
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from accounts.tenancy import scoped
from billing import offer
from billing.limits import limits_for
from synthesis.api.speech import preview
from synthesis.audio.formats import encode
from synthesis.service.prepared import CachedSpeech
from tts_saas.errors import ApiError
from voices.actions import create_voice
from voices.catalog import builtin_listing
from voices.models import Voice

from ..access import member_required, page, require_admin
from ..forms import VoiceForm, add_api_error


@member_required
def voices(request):
    org = request.principal.organization
    form = VoiceForm(request.POST or None)
    if request.method == "POST":
        require_admin(request, "create voices")
        if form.is_valid():
            try:
                voice = create_voice(org, form.body())
            except ApiError as exc:
                add_api_error(form, exc)
            else:
                messages.info(request, f"Voice {voice.name} created: use it as {voice.id}.")
                return redirect("dashboard:voices")
    limits = limits_for(org)
    own = list(scoped(Voice, org).order_by("created_at"))
    allowed = limits.allowed_voices
    builtin = builtin_listing(offer.default_spec())
    rows = [_row(v["id"], v, "built-in", available=not allowed or v["id"] in allowed) for v in builtin]
    rows += [_row(v.id, v, _made_from(v), available=v.status == Voice.Status.READY, custom=True) for v in own]
    return page(
        request,
        "voices.html",
        "voices",
        voices=rows,
        form=form,
        used=len(own),
        limit=limits.max_custom_voices,
        can_manage=request.principal.is_admin,
    )


def _made_from(voice: Voice) -> str:
    if voice.source == Voice.Source.SEED:
        return f"seed {voice.seed}"
    if voice.source == Voice.Source.RECORDING:
        return "recording" if voice.status == Voice.Status.READY else f"recording ({voice.status})"
    return "embedding"


def _row(voice_id: str, voice, source: str, available: bool = True, custom: bool = False) -> dict:
    """One line of the voices page; `voice` is a built-in one (a dict) or an own one (a Voice)."""
    name, description = (
        (voice["name"], voice["description"]) if isinstance(voice, dict) else (voice.name, voice.description)
    )
    return {
        "id": voice_id,
        "name": name,
        "description": description,
        "source": source,
        "available": available,
        "custom": custom,
    }


@member_required
def voice_preview(request, voice_id: str):
    """The voice's preview as MP3 (whole: it is a few seconds); an error in the API's JSON shape."""
    principal = request.principal
    try:
        result = async_to_sync(preview)(
            principal, limits_for(principal.organization), voice_id, "mp3", request.request_id
        )
        pcm = result.pcm16 if isinstance(result, CachedSpeech) else async_to_sync(result.read_all)()
    except ApiError as exc:
        return exc.response()
    response = HttpResponse(encode(pcm, "mp3"), content_type="audio/mpeg")
    response["Cache-Control"] = "private, max-age=3600"
    return response


@require_POST
@member_required
def delete_voice(request, voice_id: str):
    require_admin(request, "delete voices")
    voice = scoped(Voice, request.principal.organization).filter(pk=voice_id).first()
    if voice is None:
        raise Http404
    voice.delete()
    messages.info(request, f"Voice {voice.name} deleted: requests that name {voice_id} are refused from now on.")
    return redirect("dashboard:voices")
