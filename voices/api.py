"""/v1/audio/voices: the voices of a model (built-in and the organization's own) in the shape Open
WebUI reads, creating the organization's voices, reading and deleting one."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, PolymorphicProxySerializer, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, authentication_classes, parser_classes, permission_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from accounts.tenancy import scoped
from billing import offer
from billing.limits import limits_for
from billing.policy import OptionalApiKeyAuthentication
from inference.spec import EngineSpec
from tts_saas.errors import ApiError, error_responses
from tts_saas.parsers import JSONParser
from tts_saas.serializers import refuse_any_body

from .actions import RecordingVoiceSerializer, VoiceCreateSerializer, create_voice, create_voice_from_recording
from .catalog import VOICE_ID, builtin_listing, own_voices, with_aliases
from .models import Voice


class OwnVoiceSerializer(serializers.ModelSerializer):
    object = serializers.SerializerMethodField()

    class Meta:
        model = Voice
        fields = [
            "id",
            "object",
            "name",
            "description",
            "model",
            "source",
            "seed",
            "speaker",
            "design",
            "mix",
            "transcript",
            "consent",
            "status",
            "error",
            "created_at",
        ]

    def get_object(self, voice) -> str:
        return "voice"


class BuiltinVoiceSerializer(serializers.Serializer):
    """A model's built-in voice, read by name (`GET /v1/audio/voices/{name}?model=`)."""

    id = serializers.CharField()
    object = serializers.ChoiceField(choices=["voice"])
    name = serializers.CharField()
    description = serializers.CharField()
    model = serializers.CharField()
    language = serializers.CharField()
    source = serializers.ChoiceField(choices=["builtin"])  # type: ignore[assignment]  # a field named source
    voice = serializers.CharField(help_text="The engine's own voice this name is.")
    created_at = serializers.DateTimeField(allow_null=True)


A_VOICE = PolymorphicProxySerializer(
    component_name="AnyVoice",
    serializers=[OwnVoiceSerializer, BuiltinVoiceSerializer],
    resource_type_field_name=None,
)


class AudioVoiceSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="What `voice` takes: a built-in name or a voice_… id.")
    name = serializers.CharField()
    description = serializers.CharField()
    model = serializers.CharField(help_text="The model the voice speaks on.")
    language = serializers.CharField(help_text="en-us, en-gb, zh, multi (a ChatTTS speaker), or '' (own voices).")
    custom = serializers.BooleanField(help_text="The organization's own voice (built-in voices are read-only).")
    alias = serializers.DictField(
        required=False,
        help_text="On an OpenAI name the organization aliased: the model, voice and its name it speaks with "
        "(PUT /v1/organization/voice_aliases).",
    )


@extend_schema_serializer(many=False)
class AudioVoiceListSerializer(serializers.Serializer):
    voices = AudioVoiceSerializer(many=True)


MODEL_PARAMETER = OpenApiParameter(
    "model", str, description="The model whose voices to list (default: the deployment's default model)."
)


def listing(organization, spec: EngineSpec, named: bool = False) -> list[dict]:
    """The model's built-in voices (those the plan allows, with a key) and the organization's own."""
    allowed = limits_for(organization).allowed_voices if organization is not None else ()
    voices = [{**v, "model": spec.name, "custom": False} for v in builtin_listing(spec, allowed)]
    voices = with_aliases(voices, organization, model=spec.name if named else "")
    if organization is not None:
        voices += [
            {"id": v.id, "name": v.name, "description": v.description, "model": v.model, "language": "", "custom": True}
            for v in own_voices(organization, spec)
        ]
    return voices


@extend_schema(
    methods=["GET"],
    operation_id="audio_voices_list",
    parameters=[MODEL_PARAMETER],
    responses={200: AudioVoiceListSerializer, **error_responses({404: "The model is not served."})},
    auth=[{"ApiKey": []}, {}],  # type: ignore[list-item]  # drf-spectacular takes security requirement objects
    description="The voices of a model in the shape Open WebUI reads; with a key, the plan's built-in voices and "
    "the organization's own (a key is optional: Open WebUI may send none).",
)
@extend_schema(
    methods=["POST"],
    operation_id="audio_voices_create",
    auth=[{"ApiKey": []}],  # type: ignore[list-item]
    request={"application/json": VoiceCreateSerializer, "multipart/form-data": RecordingVoiceSerializer},
    responses={
        201: OwnVoiceSerializer,
        **error_responses(
            {
                400: "The request body is not valid, or the model cannot make such a voice.",
                401: "A key is needed to create a voice.",
                403: "The plan's limit on voices is reached, or the model is not in the plan.",
                404: "The model is not served here (model_not_found).",
                409: "The organization has a voice of that name.",
            }
        ),
    },
    description="A voice for a model: on ChatTTS from a seed or a speaker embedding string (JSON), or from a "
    "reference recording and its transcript (multipart; `processing` until a worker has encoded it); on VoxCPM2 "
    "a clone of a recording, its transcript optional (multipart), or a voice `design` made fixed (JSON: a sample "
    "spoken once in it is kept as its reference); on Kokoro a mix of its built-in voices with "
    "weights (JSON `mix`). A voice from a recording needs `consent: true` (the creator's statement that they "
    "have the speaker's consent, kept with the voice and in the audit log), a plan that includes cloning and "
    "a deployment that allows it (403 otherwise), and is rate-limited per organization (429). A model that "
    "cannot make the voice asked is a 400 that says why.",
)
@api_view(["GET", "POST"])
@parser_classes([JSONParser, MultiPartParser])
@authentication_classes([OptionalApiKeyAuthentication])
@permission_classes([AllowAny])
def audio_voices(request) -> Response:
    org = getattr(request.user, "organization", None)  # anonymous: AnonymousUser
    if request.method == "GET":
        asked = request.query_params.get("model", "")
        return Response({"voices": listing(org, offer.spec_for(asked), offer.names_engine(asked))})
    if org is None:
        raise ApiError(401, "Creating a voice needs an API key.", "invalid_api_key")
    if request.content_type.startswith("multipart/form-data"):
        voice = create_voice_from_recording(org, request.data)
    else:
        voice = create_voice(org, request.data)
    return Response(OwnVoiceSerializer(voice).data, status=status.HTTP_201_CREATED)


def own_voice(org, voice_id: str) -> Voice:
    voice = scoped(Voice, org).filter(pk=voice_id).first() if VOICE_ID.fullmatch(voice_id) else None
    if voice is None:
        raise ApiError(404, f"No voice '{voice_id[:70]}' in this organization.", "not_found")
    return voice


@extend_schema(
    methods=["GET"],
    operation_id="audio_voice_retrieve",
    parameters=[MODEL_PARAMETER],
    responses={200: A_VOICE, **error_responses({404: "No voice with that id in this organization."})},
)
@extend_schema(
    methods=["DELETE"],
    operation_id="audio_voice_destroy",
    responses={
        200: OwnVoiceSerializer,
        **error_responses({403: "Built-in voices are read-only.", 404: "No voice with that id in this organization."}),
    },
)
@api_view(["GET", "DELETE"])
def audio_voice(request, voice_id: str) -> Response:
    """One of the organization's voices (a built-in one of a model by name too); DELETE removes one of
    its own."""
    org = request.user.organization
    if not VOICE_ID.fullmatch(voice_id):
        spec = offer.spec_for(request.query_params.get("model", ""))
        builtin = spec.voice(voice_id)
        if builtin is None:
            raise ApiError(404, f"No voice '{voice_id[:70]}' in this organization.", "not_found")
        if request.method == "DELETE":
            raise ApiError(403, f"'{voice_id}' is a built-in voice: built-in voices are read-only.", "voice_read_only")
        return Response(
            {
                "id": voice_id,
                "object": "voice",
                "name": voice_id,
                "description": builtin.description,
                "model": spec.name,
                "language": builtin.language,
                "source": "builtin",
                "voice": builtin.id,  # the engine's own voice this name is
                "created_at": None,
            }
        )
    voice = own_voice(org, voice_id)
    body = OwnVoiceSerializer(voice).data
    if request.method == "DELETE":
        refuse_any_body(request)
        voice.delete()
        body["deleted"] = True
    return Response(body)
