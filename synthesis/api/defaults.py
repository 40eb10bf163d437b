"""An organization's default model and voice: what a request speaks with when it names no model
(or one of OpenAI's names: `tts-1` means the organization's default), and the voice when it names
none and speaks with that model. `GET/PUT /v1/organization/speech_defaults` (the `organization`
scope) and the dashboard's Settings page set them; `with_defaults` fills them into a request body
before it is validated (REST, jobs, WebSocket, previews). Empty: the deployment's defaults
(`billing.offer.default_spec`, "alloy"). A stored default the checks would refuse (a raw UPDATE, an old row)
is never a 500: a model that is not served means the deployment's default, as one no longer served
does (the operator is told, once per process); a voice that is not one of its model's refuses the
requests that rely on it, saying so (409 `invalid_organization_setting`, not an error about a
voice they did not name), logged for the operator."""

from __future__ import annotations

import functools
import logging

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from accounts.keys import set_speech_defaults
from accounts.models import Organization
from accounts.tenancy import OwnOrganizationViewSet
from billing import offer
from billing.limits import limits_for
from inference.spec import EngineSpec
from tts_saas.errors import ApiError, error_responses
from tts_saas.serializers import StrictSerializer
from voices.catalog import resolve_voice

from . import aliases

logger = logging.getLogger(__name__)

ADMIN_ONLY = {
    403: "The key lacks the organization scope, the model is not in the plan, or the organization is suspended."
}


def default_model(org: Organization) -> str:
    """The model the organization speaks with by default: its own choice while it is served, else
    the deployment's."""
    if org.default_model and offer.find(org.default_model) is not None:
        return org.default_model
    if org.default_model:
        _not_served(org.pk, org.default_model)
    return offer.default_spec().name


@functools.lru_cache(maxsize=1024)
def _not_served(org_id: int | None, model: str) -> None:
    """Told once per process and value: the organization's requests speak with the deployment's model."""
    logger.warning(
        "organization %s: its default model %r is not served here; its requests use the deployment's default",
        org_id,
        model,
        extra={"org_id": org_id, "setting": "default_model"},
    )


def model_for(model: str, org: Organization) -> str:
    """The model a request means: as named, or the organization's default (else the deployment's)
    where it names none or one of OpenAI's names."""
    return model if offer.names_engine(model) else default_model(org)


def _check_default_voice(org: Organization, spec: EngineSpec) -> None:
    """The stored default voice is one of `spec`'s (built in, or the organization's own of that
    model and made), else 409 saying so, logged for the operator; one still being made is left to
    the request's own check, which says so."""
    try:
        resolve_voice(org, org.default_voice, spec)
    except ApiError as exc:
        if exc.code == "voice_not_ready":
            return
        voice = org.default_voice[:64]
        logger.error(
            "organization %s: its default voice %r is not a usable voice of %s, so requests that name none are refused",
            org.pk,
            voice,
            spec.name,
            extra={"org_id": org.pk, "setting": "default_voice"},
        )
        raise ApiError(
            409,
            f"Your organization's default voice '{voice}' is not a usable voice of {spec.name}, so requests that "
            "name no voice are refused: an owner or admin must set the default voice again (dashboard: Settings, "
            "or PUT /v1/organization/speech_defaults). Meanwhile, name a voice in the request.",
            "invalid_organization_setting",
            "voice",
        ) from None


def with_defaults(data: dict, org: Organization) -> dict:
    """`data` (a request body) with its voice's alias (`aliases.apply`), then the organization's
    defaults where it leaves them open."""
    data = aliases.apply(data, org)
    if not (org.default_model or org.default_voice):
        return data
    model = data.get("model", "")
    if isinstance(model, str):
        data = {**data, "model": model_for(model, org)}
    # The voice is of the default model it was chosen with: only while that model is served.
    own = offer.find(org.default_model) if org.default_voice and org.default_model else None
    if own is not None and "voice" not in data:
        spec = offer.find(data.get("model") or "") if isinstance(data.get("model"), str) else None
        if spec is not None and spec.name == own.name:
            _check_default_voice(org, spec)
            data = {**data, "voice": org.default_voice}
    return data


class SpeechDefaultsSerializer(StrictSerializer):
    model = serializers.CharField(
        max_length=64,
        allow_blank=True,
        help_text="A model this deployment serves and the plan includes; empty: the deployment's default.",
    )
    voice = serializers.CharField(
        max_length=64,
        allow_blank=True,
        help_text="A voice of that model (built in, or the organization's own); empty: alloy.",
    )


def check(org: Organization, model: str, voice: str) -> tuple[str, str]:
    """The defaults as stored (a model's engine name; a voice is stored with its model, the
    deployment's default when none is given), or ApiError: a model not served (404), a model or
    built-in voice not in the plan (403), a voice the model cannot speak with (400)."""
    spec = offer.spec_for(model) if model else offer.default_spec()
    limits = limits_for(org)
    if model or voice:
        offer.check_allowed(limits, spec)
    if voice:
        resolve_voice(org, voice, spec)  # built in, or the organization's own of that model and ready
        offer.check_voice_allowed(limits, spec, voice)
    return (spec.name if model or voice else ""), voice


class SpeechDefaultsViewSet(OwnOrganizationViewSet):
    serializer_class = SpeechDefaultsSerializer

    @extend_schema(
        summary="The organization's default model and voice",
        responses={200: SpeechDefaultsSerializer, **error_responses(ADMIN_ONLY)},
    )
    def retrieve(self, request):
        org = request.user.organization
        return Response({"model": org.default_model, "voice": org.default_voice})

    @extend_schema(
        summary="Set the organization's default model and voice",
        description="Requests that name no model, or one of OpenAI's names (tts-1, gpt-4o-mini-tts), speak with the "
        "default model; those that name no voice and speak with that model use the default voice.",
        request=SpeechDefaultsSerializer,
        responses={
            200: SpeechDefaultsSerializer,
            **error_responses({400: "Not a voice of that model.", 404: "The model is not served.", **ADMIN_ONLY}),
        },
    )
    def update(self, request):
        incoming = SpeechDefaultsSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        org = request.user.organization
        try:
            model, voice = check(org, incoming.validated_data["model"], incoming.validated_data["voice"])
        except ApiError as exc:
            if exc.code == "voice_not_ready":  # a voice still being made is not a default yet
                raise ApiError(400, exc.message, "invalid_value", "voice") from None
            raise
        set_speech_defaults(org, model, voice, request.user)
        return Response({"model": org.default_model, "voice": org.default_voice})
