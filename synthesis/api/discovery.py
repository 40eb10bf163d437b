"""What a client can ask for, for clients that probe: the models served (OpenAI's /v1/models, Open
WebUI's /v1/audio/models), each with its licence, languages and features, and the voices of a model
(/v1/voices; /v1/audio/voices is the voices app's)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view, authentication_classes, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from billing import offer
from billing.limits import limits_for
from billing.policy import OptionalApiKeyAuthentication
from inference.spec import EngineSpec
from inference.text import ssml_subset
from synthesis.api.serializers import VoiceListSerializer
from synthesis.service import workers
from tts_saas.errors import ApiError, error_responses
from voices.catalog import builtin_listing, with_aliases

CREATED = 1_700_000_000  # the models' `created` (OpenAI's field; fixed)


class LicenseTermsSerializer(serializers.Serializer):
    spdx = serializers.CharField()
    url = serializers.CharField()
    commercial_use = serializers.BooleanField()
    summary = serializers.CharField()


class LicenseSerializer(serializers.Serializer):
    code = LicenseTermsSerializer()
    weights = LicenseTermsSerializer()
    commercial_use = serializers.BooleanField(help_text="May its audio be sold (code and weights both allow it)?")


class ModelSerializer(serializers.Serializer):
    id = serializers.CharField()
    object = serializers.CharField(default="model")
    created = serializers.IntegerField()
    owned_by = serializers.CharField()
    engine = serializers.CharField(help_text="The engine that speaks for this id (OpenAI's names: the default one).")
    title = serializers.CharField()
    version = serializers.CharField()
    description = serializers.CharField()
    license = LicenseSerializer()
    languages = serializers.ListField(child=serializers.CharField())
    features = serializers.DictField()
    ssml = serializers.DictField(child=serializers.CharField(), help_text="What each SSML element does on this model.")
    options = serializers.ListField(child=serializers.CharField(), help_text="Request options only this model takes.")
    available = serializers.BooleanField(help_text="Whether the key's plan includes it.")
    random_weights = serializers.BooleanField(
        allow_null=True,
        help_text="Whether its workers load randomly initialised weights, as tests and offline machines do: "
        "its audio is noise, not speech. null while no worker of it is ready.",
    )


class ModelListSerializer(serializers.Serializer):
    object = serializers.CharField(default="list")
    data = ModelSerializer(many=True)


def describe(model_id: str, spec: EngineSpec, available: bool = True) -> dict:
    return {
        "id": model_id,
        "object": "model",
        "created": CREATED,
        "owned_by": "tts_saas",
        "engine": spec.name,
        "title": spec.title,
        "version": spec.version,
        "description": spec.description,
        "license": {
            "code": spec.code_license.as_dict(),
            "weights": spec.weights_license.as_dict(),
            "commercial_use": spec.commercial,
        },
        "languages": list(spec.languages),
        "features": spec.features.as_dict(),
        "options": sorted(spec.options),
        # What each SSML element does on it (input_format ssml).
        "ssml": ssml_subset.describe(
            spec.name, spec.features.phoneme_lexicons, spec.features.word_timings, spec.languages
        ),
        "available": available,
        "random_weights": workers.serves_random_weights(spec.name),
    }


def listed(limits=None) -> list[dict]:
    """Every served model, then OpenAI's names for the default one."""
    allowed = {spec.name for spec in offer.allowed_specs(limits)}
    default = offer.default_spec()
    models = [describe(spec.name, spec, spec.name in allowed) for spec in offer.served()]
    return models + [describe(alias, default, default.name in allowed) for alias in offer.aliases()]


@extend_schema(responses={200: ModelListSerializer}, operation_id="models_list")
@api_view(["GET"])
def models(request) -> Response:
    """GET /v1/models — OpenAI's model list: the models served, each with its licence (may its audio
    be sold?), languages and features, and the OpenAI names that mean the default one."""
    return Response({"object": "list", "data": listed(limits_for(request.user.organization))})


@extend_schema(responses={200: ModelSerializer, **error_responses({404: "No such model is served."})})
@api_view(["GET"])
def model(request, model_id: str) -> Response:
    """GET /v1/models/{id} — one model (dated snapshots of OpenAI's names too, e.g. gpt-4o-mini-tts-2025-12-15)."""
    spec = offer.find(model_id)
    if spec is None:
        raise ApiError(404, f"The model '{model_id[:128]}' does not exist.", "model_not_found", "model")
    allowed = spec in offer.allowed_specs(limits_for(request.user.organization))
    return Response(describe(model_id, spec, allowed))


class AudioModelSerializer(serializers.Serializer):
    id = serializers.CharField()
    name = serializers.CharField()
    license = serializers.CharField(help_text="The weights' licence (SPDX id), e.g. Apache-2.0, CC-BY-NC-4.0.")
    commercial_use = serializers.BooleanField()
    languages = serializers.ListField(child=serializers.CharField())


class AudioModelListSerializer(serializers.Serializer):
    models = AudioModelSerializer(many=True)


@extend_schema(responses={200: AudioModelListSerializer}, auth=[{"ApiKey": []}, {}])
@api_view(["GET"])
@authentication_classes([OptionalApiKeyAuthentication])
@permission_classes([AllowAny])
def audio_models(request) -> Response:
    """GET /v1/audio/models — the models in the shape Open WebUI reads (`{"models": [{"id"}]}`)."""
    out = []
    for entry in listed():
        license_ = entry["license"]
        out.append(
            {
                "id": entry["id"],
                "name": f"{entry['title']} ({entry['engine']})" if entry["id"] != entry["engine"] else entry["title"],
                "license": license_["weights"]["spdx"],
                "commercial_use": license_["commercial_use"],
                "languages": entry["languages"],
            }
        )
    return Response({"models": out})


VOICES_MODEL = OpenApiParameter("model", str, description="Whose voices (default: the deployment's default model).")


@extend_schema(
    parameters=[VOICES_MODEL], responses={200: VoiceListSerializer, **error_responses({404: "No such model."})}
)
@api_view(["GET"])
def voices(request) -> Response:
    """GET /v1/voices — a model's built-in voices (OpenAI's names first, then the model's own)."""
    spec = offer.spec_for(request.query_params.get("model", ""))
    data = [
        {"voice_id": v["id"], "name": v["name"], "description": v["description"], "language": v["language"]}
        for v in builtin_listing(spec)
    ]
    asked = request.query_params.get("model", "")
    named = spec.name if offer.names_engine(asked) else ""  # its requests use only its aliases
    data = with_aliases(data, getattr(request.user, "organization", None), "voice_id", named)
    return Response({"object": "list", "model": spec.name, "data": data})
