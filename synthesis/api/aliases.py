"""An organization's voice aliases: OpenAI's voice names (alloy, ash, … cedar) mapped to voices of its
own choosing, built in, designed or cloned, on any model its plan allows. Some clients send only
OpenAI's names (Pipecat's OpenAI service refuses any other before it sends anything), so this is
how an organization gives its agents its own voices through them.

`GET/PUT /v1/organization/voice_aliases` (the `organization` scope) and the dashboard's Settings
page set them; `apply` rewrites a request body before it is validated (REST, jobs, WebSocket,
through `defaults.with_defaults`): a body whose `voice` is an aliased name speaks the alias's voice
with the alias's model, where it names no model, one of OpenAI's model names (`tts-1`), or the
alias's model itself. A body that names another model explicitly keeps that model's built-in voice
of the name (it asked for that model). An alias is checked when set; one that stopped being usable
later refuses the requests that rely on it: a model no longer served with 409
`invalid_organization_setting` naming the alias; one no longer in the plan with the plan's 403, as any
request; a deleted voice takes its aliases with it (`voices.cleanup`), so the name speaks as built in
again.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from accounts.keys import set_voice_aliases
from accounts.models import Organization
from accounts.tenancy import OwnOrganizationViewSet
from billing import offer
from billing.limits import limits_for
from tts_saas.errors import ApiError, error_responses
from tts_saas.serializers import StrictSerializer
from voices.catalog import resolve_voice, stored_aliases

ADMIN_ONLY = {
    403: "The key lacks the organization scope, a model is not in the plan, or the organization is suspended."
}


def openai_names() -> tuple[str, ...]:
    """OpenAI's voice names, in OpenAI's order (every engine maps the same names)."""
    return tuple(offer.default_spec().openai_voices)


class AliasSerializer(StrictSerializer):
    model = serializers.CharField(max_length=64, help_text="A model this deployment serves and the plan includes.")
    voice = serializers.CharField(
        max_length=64, help_text="A voice of that model: built in (e.g. af_heart) or the organization's own (voice_…)."
    )


class VoiceAliasesSerializer(StrictSerializer):
    aliases = serializers.DictField(
        child=AliasSerializer(),
        help_text="OpenAI's voice name -> the model and voice it speaks with; names left out speak as built in.",
    )


def check(org: Organization, aliases: dict) -> dict:
    """The aliases as stored ({name: {"model": engine name, "voice": id}}), or ApiError: a name that
    is not one of OpenAI's (400), a model not served (404) or not in the plan (403), a voice the model
    cannot speak with or that is still being made (400), a built-in voice not in the plan (403)."""
    names, limits, stored = openai_names(), limits_for(org), {}
    for name, alias in aliases.items():
        if name not in names:
            raise ApiError(
                400,
                f"aliases: '{name[:40]}' is not one of OpenAI's voice names ({', '.join(names)}).",
                "invalid_value",
                "aliases",
            )
        spec = offer.spec_for(alias["model"])
        offer.check_allowed(limits, spec)
        try:
            resolve_voice(org, alias["voice"], spec)
        except ApiError as exc:
            raise ApiError(400, f"aliases.{name}: {exc.message}", "invalid_value", f"aliases.{name}") from None
        offer.check_voice_allowed(limits, spec, alias["voice"])
        stored[name] = {"model": spec.name, "voice": alias["voice"]}
    return {name: stored[name] for name in names if name in stored}  # OpenAI's order


def _voice_name(data: dict) -> str | None:
    voice = data.get("voice")
    if isinstance(voice, dict):  # {"id": …}, as OpenAI's newer voice objects
        voice = voice.get("id")
    return voice if isinstance(voice, str) else None


def apply(data: dict, org: Organization) -> dict:
    """`data` (a request body) with its voice's alias, if the organization set one (module docstring)."""
    name = _voice_name(data) if org.voice_aliases else None
    alias = stored_aliases(org).get(name) if name else None
    model = data.get("model", "")
    if alias is None or not isinstance(model, str):  # no alias; a model the serializer refuses
        return data
    if offer.names_engine(model):
        named = offer.find(model)
        if named is None or named.name != alias["model"]:
            return data  # another model, named explicitly: its own voice of that name
    # No database here (the speech view validates in its event loop): the voice and the plan are
    # checked after, as for any request's voice; a deleted voice takes its aliases with it (cleanup).
    spec = offer.find(alias["model"])
    if spec is None:
        raise ApiError(
            409,
            f"Your organization's voice alias '{name}' speaks with the model '{alias['model']}', which is not "
            "served here: an owner or admin must set it again (dashboard: Settings, or PUT "
            "/v1/organization/voice_aliases). Meanwhile, name another voice.",
            "invalid_organization_setting",
            "voice",
        )
    voice = data["voice"]
    voice = {**voice, "id": alias["voice"]} if isinstance(voice, dict) else alias["voice"]
    return {**data, "model": spec.name, "voice": voice}


class VoiceAliasesViewSet(OwnOrganizationViewSet):
    serializer_class = VoiceAliasesSerializer

    @extend_schema(
        summary="The organization's voice aliases",
        responses={200: VoiceAliasesSerializer, **error_responses(ADMIN_ONLY)},
    )
    def retrieve(self, request):
        return Response({"aliases": request.user.organization.voice_aliases})

    @extend_schema(
        summary="Set the organization's voice aliases (all of them: names left out speak as built in)",
        description="A request whose voice is an aliased OpenAI name speaks the alias's voice with the alias's model, "
        "where it names no model, one of OpenAI's (tts-1, gpt-4o-mini-tts) or the alias's own.",
        request=VoiceAliasesSerializer,
        responses={
            200: VoiceAliasesSerializer,
            **error_responses(
                {
                    400: "Not one of OpenAI's names, or not a voice of that model.",
                    404: "A model is not served.",
                    **ADMIN_ONLY,
                }
            ),
        },
    )
    def update(self, request):
        incoming = VoiceAliasesSerializer(data=request.data)
        incoming.is_valid(raise_exception=True)
        org = request.user.organization
        aliases = check(org, incoming.validated_data["aliases"])
        set_voice_aliases(org, aliases, request.user)
        return Response({"aliases": org.voice_aliases})
