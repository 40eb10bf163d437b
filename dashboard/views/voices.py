"""Voices: the built-in ones of every model served (read-only, a section per model with its
licence) and the organization's own, each of one model, made by `voices.actions` (as the API makes
them) from what the model can make — a speaker from a seed, an embedding string or an uploaded
recording with its transcript (encoded by a worker: the page follows its status), or a mix of
built-in voices — and deleted; owners and admins change them. Any voice can be heard:
`voice_preview` is the API's preview (`synthesis.api.speech.preview`: a fixed sentence, cached, not
billed) on the model `?model=` names (an own voice: its own model)."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlencode

from asgiref.sync import async_to_sync
from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.views.decorators.http import require_POST

from accounts.auth import check_active
from accounts.tenancy import scoped
from billing import offer
from billing.limits import limits_for
from inference.spec import EngineSpec
from synthesis.api.speech import preview
from synthesis.audio.formats import encode
from synthesis.service.prepared import CachedSpeech
from tts_saas.errors import ApiError
from voices.actions import create_voice, create_voice_from_recording
from voices.catalog import builtin_listing, own_voices
from voices.models import Voice

from .. import engines
from ..access import member_required, page, require_admin
from ..voice_form import VoiceForm


@member_required
def voices(request):
    org = request.principal.organization
    limits = limits_for(org)
    allowed = offer.allowed_specs(limits)
    form = VoiceForm(
        request.POST or None,
        request.FILES or None,
        specs=allowed,
        default=offer.default_spec().name,
        allowed_voices=limits.allowed_voices,
    )
    if request.method == "POST":
        require_admin(request, "create voices")
        if form.is_valid():
            try:
                voice = (create_voice_from_recording if form.recording() else create_voice)(org, form.body())
            except ApiError as exc:
                form.add_api_error(exc)
            else:
                if voice.status == Voice.Status.PROCESSING:
                    made = "its description" if voice.source == Voice.Source.DESIGN else "the recording"
                    said = f"is being made from {made}: it can be used once it is ready (this page shows it)"
                else:
                    said = "created"
                messages.info(request, f"Voice {voice.name} {said}. Use it as {voice.id}.")
                return redirect("dashboard:voices")
    own = list(own_voices(org))
    allowed_names = {spec.name for spec in allowed}
    sections = [builtin_section(spec, spec.name in allowed_names, limits.allowed_voices) for spec in offer.served()]
    search = BuiltinSearch.from_query(request.GET)
    models = search.apply(sections)
    return page(
        request,
        "voices.html",
        "voices",
        models=models,
        search=search,
        builtin_shown=sum(m["visible"] for m in models),
        languages=sorted({(r["language_code"], r["language"]) for m in sections for r in m["rows"]}),
        builtin_total=sum(len(m["rows"]) for m in sections),
        own=[own_row(voice, voice.model in allowed_names) for voice in own],
        form=form,
        speaker_models=" ".join(spec.name for spec in form.speaking()),
        recording_models=" ".join(spec.name for spec in allowed if spec.features.recording_voices),
        mix_models=" ".join(spec.name for spec in form.mixing()),
        design_models=" ".join(spec.name for spec in form.designing()),
        used=len(own),
        limit=limits.max_custom_voices,
        full=len(own) >= limits.max_custom_voices,
        can_manage=request.principal.is_admin,
    )


@dataclass(frozen=True)
class BuiltinSearch:
    """The built-in voices' filter from the query string (so it works without JavaScript; the
    page's script applies the same rules as one types): words in the id or description, a model,
    a language. Rows that do not match are sent hidden, so the script can show them again."""

    query: str = ""
    model: str = ""
    language: str = ""

    @classmethod
    def from_query(cls, params) -> BuiltinSearch:
        return cls(params.get("q", "").strip()[:100], params.get("model", ""), params.get("language", ""))

    @property
    def active(self) -> bool:
        return bool(self.query or self.model or self.language)

    def matches(self, model: str, row: dict) -> bool:
        text = f"{row['id']} {row['description']} {row['language']}".lower()
        return (
            (not self.model or model == self.model)
            and (not self.language or row["language_code"] == self.language)
            and all(word in text for word in self.query.lower().split())
        )

    def apply(self, sections: list[dict]) -> list[dict]:
        shown = []
        for section in sections:
            rows = [{**row, "hidden": not self.matches(section["name"], row)} for row in section["rows"]]
            visible = sum(not row["hidden"] for row in rows)
            shown.append({**section, "rows": rows, "visible": visible})
        return shown


def playground_link(model: str, voice: str) -> str:
    return f"{reverse('dashboard:playground')}?{urlencode({'model': model, 'voice': voice})}"


def builtin_section(spec: EngineSpec, allowed: bool, allowed_voices: tuple[str, ...]) -> dict:
    """A model's card with its built-in voices, each heard and used on that model where the plan allows."""
    rows = []
    for voice in builtin_listing(spec):
        available = allowed and (not allowed_voices or voice["id"] in allowed_voices)
        rows.append(
            {
                **voice,
                "language": engines.language_name(voice["language"]),
                "language_code": voice["language"],
                "available": available,
                "unavailable": "" if available else "not on your plan",
                "preview": f"{reverse('dashboard:voice-preview', args=[voice['id']])}?model={spec.name}",
                "use": playground_link(spec.name, voice["id"]),
            }
        )
    return {**engines.card(spec, allowed), "rows": rows}


def made_from(voice: Voice) -> str:
    if voice.source == Voice.Source.SEED:
        return f"seed {voice.seed}"
    if voice.source == Voice.Source.RECORDING:
        return "recording" if voice.status == Voice.Status.READY else f"recording ({voice.status})"
    if voice.source == Voice.Source.DESIGN:
        return "design" if voice.status == Voice.Status.READY else f"design ({voice.status})"
    if voice.source == Voice.Source.MIX:
        return "mix: " + ", ".join(f"{name} {100 * weight:.0f}%" for name, weight in voice.mix)
    return "embedding"


def own_row(voice: Voice, allowed: bool) -> dict:
    """One of the organization's voices; usable while ready and its model is served and in the plan."""
    ready = voice.status == Voice.Status.READY
    return {
        "own": True,
        "id": voice.id,
        "name": voice.name,
        "description": voice.description,
        "model": voice.model,
        "model_title": engines.title_of(voice.model),
        "source": made_from(voice),
        "status": voice.status,
        "error": voice.error if voice.status == Voice.Status.FAILED else "",
        "available": allowed and ready,
        "unavailable": "its model is not on your plan"
        if not allowed
        else ("" if ready else f"not usable: {voice.status}"),
        "preview": reverse("dashboard:voice-preview", args=[voice.id]),
        "use": playground_link(voice.model, voice.id),
    }


@member_required
def voice_preview(request, voice_id: str):
    """The voice's preview as MP3 (whole: it is a few seconds) on `?model=` (a built-in voice; the
    default model when none is named); an error in the API's JSON shape."""
    principal = request.principal
    try:
        check_active(principal.organization)  # a suspended organization speaks nothing, previews included
        result = async_to_sync(preview)(
            principal,
            limits_for(principal.organization),
            voice_id,
            "mp3",
            request.request_id,
            request.GET.get("model", ""),
        )
        pcm = result.pcm16 if isinstance(result, CachedSpeech) else async_to_sync(result.read_all)()
    except ApiError as exc:
        return exc.response()
    response = HttpResponse(encode(pcm, "mp3", result.rate), content_type="audio/mpeg")  # the model's rate
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
