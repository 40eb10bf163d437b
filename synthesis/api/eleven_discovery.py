"""ElevenLabs' discovery routes under `/elevenlabs/` (`synthesis.api.elevenlabs` has the speech):
voices (built in and the organization's own), models, the user and their subscription, each in
ElevenLabs' shape (`eleven_shapes`), behind the same policy as /v1."""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse

from billing import offer
from billing.policy import authorize
from billing.usage import month_summary
from tts_saas.errors import ApiError
from voices.catalog import builtin_listing, own_voices
from voices.models import Voice

from . import eleven_openapi as docs
from . import eleven_shapes as shapes
from .elevenlabs import eleven
from .openapi import documented_by


def _voices(org, limits) -> list[dict]:
    """The built-in voices of the models the plan allows (an id shared by two models listed once,
    for the first), then the organization's own voices that are made."""
    listed: dict[str, dict] = {}
    for spec in offer.allowed_specs(limits):
        for v in builtin_listing(spec, limits.allowed_voices):
            if v["id"] not in listed:
                listed[v["id"]] = shapes.voice(v["id"], v["name"], "premade", spec, v["description"], v["language"])
    for own in own_voices(org).filter(status=Voice.Status.READY):
        if offer.find(own.model) is None:  # a voice of a model this deployment does not serve
            continue
        category = "cloned" if own.source == "recording" else "generated"
        listed[own.id] = shapes.voice(own.id, own.name, category, offer.find(own.model), own.description)
    return list(listed.values())


@eleven
@documented_by(docs.VoicesDoc)
def voices(request: HttpRequest) -> JsonResponse:
    """GET /elevenlabs/v1/voices."""
    principal, limits = authorize(request)
    return JsonResponse({"voices": _voices(principal.organization, limits)})


@eleven
@documented_by(docs.VoicesPageDoc)
def voices_page(request: HttpRequest) -> JsonResponse:
    """GET /elevenlabs/v2/voices (search; one page)."""
    principal, limits = authorize(request)
    search = request.GET.get("search", "").lower()
    found = [
        v
        for v in _voices(principal.organization, limits)
        if search in v["name"].lower() or search in v["voice_id"].lower()
    ]
    return JsonResponse({"voices": found, "has_more": False, "total_count": len(found), "next_page_token": None})


@eleven
@documented_by(docs.VoiceDoc)
def voice(request: HttpRequest, voice_id: str) -> JsonResponse:
    """GET /elevenlabs/v1/voices/{voice_id}."""
    principal, limits = authorize(request)
    found = next((v for v in _voices(principal.organization, limits) if v["voice_id"] == voice_id), None)
    if found is None:
        raise ApiError(404, f"A voice with the voice_id '{voice_id[:70]}' was not found.", "voice_not_found")
    return JsonResponse(found)


@eleven
@documented_by(docs.ModelsDoc)
def models(request: HttpRequest) -> JsonResponse:
    """GET /elevenlabs/v1/models: the models the plan allows (ElevenLabs' names mean the voice's)."""
    _, limits = authorize(request)
    listed = [shapes.model(spec, limits.model_weights.get(spec.name, 1.0)) for spec in offer.allowed_specs(limits)]
    return JsonResponse(listed, safe=False)


def _subscription(org) -> dict:
    return shapes.subscription(month_summary(org), own_voices(org).count())


@eleven
@documented_by(docs.SubscriptionDoc)
def user_subscription(request: HttpRequest) -> JsonResponse:
    """GET /elevenlabs/v1/user/subscription: this month's characters and limit."""
    principal, _ = authorize(request)
    return JsonResponse(_subscription(principal.organization))


@eleven
@documented_by(docs.UserDoc)
def user(request: HttpRequest) -> JsonResponse:
    """GET /elevenlabs/v1/user: the key's organization as ElevenLabs' user."""
    principal, _ = authorize(request)
    org = principal.organization
    return JsonResponse(
        {
            "user_id": f"org_{org.pk}",
            "workspace_id": f"org_{org.pk}",
            "first_name": org.name,
            "subscription": _subscription(org),
            "is_new_user": False,
            "xi_api_key": None,
            "can_use_delayed_payment_methods": False,
            "is_onboarding_completed": True,
            "is_onboarding_checklist_completed": True,
            "created_at": int(org.created_at.timestamp()),
            "seat_type": "workspace_member",
        }
    )
