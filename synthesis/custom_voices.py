"""An organization's own voices: /v1/audio/voices (create, list, read, delete) and `resolve_voice`,
which turns a request's `voice` into the speaker the worker uses.

A voice is made from a seed (a ChatTTS speaker sampled from the model's speaker statistics with that
seed, as the built-in voices are) or from a ChatTTS speaker embedding string (what
`Chat.sample_random_speaker()` returns, e.g. one saved from the ChatTTS web UI). Its id (`voice_…`)
is used as `voice` — a string or `{"id": …}` — on every endpoint, the WebSocket and jobs. The
request carries the speaker itself (seed or embedding) to the worker, so a voice created on one web
process works at once on every worker; workers keep the speakers they have decoded. Built-in voices
are read-only; another organization's voice does not exist for this one.
"""

from __future__ import annotations

import lzma
import re
from dataclasses import dataclass

import numpy as np
import pybase16384 as b14
from django.db import IntegrityError, transaction
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.decorators import api_view, authentication_classes, parser_classes, permission_classes
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from accounts.models import Organization
from accounts.tenancy import scoped
from billing.limits import limits_for
from billing.policy import OptionalApiKeyAuthentication
from inference.text import TextError, prepare
from inference.voices import VOICES
from tts_saas.errors import ApiError, error_responses, validation_error
from tts_saas.parsers import JSONParser
from tts_saas.redis import get_redis

from .audio import decode_recording
from .lexicons import StrictSerializer
from .models import Voice
from .queue import enqueue_voice_recording

VOICE_ID = re.compile(r"voice_[0-9a-f]{16}")
NAME = re.compile(r"\A[\w .'()-]{1,64}\Z")
_LZMA = [{"id": lzma.FILTER_LZMA2, "preset": 9 | lzma.PRESET_EXTREME}]
MAX_SPEAKER_CHARS = 8192  # an embedding string: ~854 characters for ChatTTS's 768 values


def speaker_problem(speaker: str) -> str | None:
    """Why `speaker` is not a ChatTTS speaker embedding string (base16384 of LZMA2-compressed
    float16 values), or None. The number of values must match the model's hidden size, which only a
    worker knows: it checks that when it uses the voice."""
    if not speaker or len(speaker) > MAX_SPEAKER_CHARS:
        return f"speaker must be a ChatTTS speaker embedding string (at most {MAX_SPEAKER_CHARS} characters)"
    try:
        decompressor = lzma.LZMADecompressor(format=lzma.FORMAT_RAW, filters=_LZMA)
        data = decompressor.decompress(b14.decode_from_string(speaker), max_length=2 * 4097)
    except (lzma.LZMAError, ValueError, TypeError):
        return "speaker is not a ChatTTS speaker embedding string (base16384 of LZMA2-compressed float16 values)"
    if not decompressor.eof or len(data) % 2 or not 16 <= len(data) // 2 <= 4096:
        return "speaker does not decode to a speaker embedding (16 to 4,096 float16 values)"
    values = np.frombuffer(data, dtype=np.float16).astype(np.float32)
    norm = float(np.linalg.norm(values))
    if not np.isfinite(values).all() or not 1e-3 < norm < 6e4:
        return "speaker's values are not finite, or all (nearly) zero"
    return None


def canonical(speaker: str) -> str:
    """The embedding re-encoded as ChatTTS encodes it (trailing characters that decode to nothing
    are dropped), so that one embedding has one string, hence one cache key."""
    values = lzma.decompress(b14.decode_from_string(speaker), format=lzma.FORMAT_RAW, filters=_LZMA)
    return b14.encode_to_string(lzma.compress(values, format=lzma.FORMAT_RAW, filters=_LZMA))


@dataclass(frozen=True)
class Speaker:
    """What the worker needs of a voice (`inference.engine.SynthesisParams`' fields)."""

    voice_seed: int
    speaker: str = ""
    sample: str = ""
    sample_text: str = ""


def resolve_voice(organization, value: str) -> Speaker:
    """A request's `voice` (a built-in name or this organization's `voice_…` id) as what the worker
    needs; 400 for a voice not of this organization or one whose recording failed, 409 for one
    whose recording is still being encoded."""
    if value in VOICES:
        return Speaker(VOICES[value].seed)
    voice = scoped(Voice, organization).filter(pk=value).first()
    if voice is None:
        raise ApiError(400, f"voice: No voice '{value}' in this organization.", "invalid_value", "voice")
    if voice.status == Voice.Status.PROCESSING:
        raise ApiError(
            409, "The voice's recording is still being encoded; try again in a few seconds.", "voice_not_ready", "voice"
        )
    if voice.status == Voice.Status.FAILED:
        raise ApiError(400, f"The voice could not be made from its recording: {voice.error}", "invalid_voice", "voice")
    return Speaker(voice.seed or 0, voice.speaker, voice.sample, voice.sample_text)


RECORDING_SECONDS = (1.0, 15.0)  # ChatTTS's zero-shot works best on short references (<= ~10 s)
RECORDING_KEY = "tts:voice_recording:{}"  # the decoded recording, for the worker to encode (an hour)


class VoiceSerializerBase(StrictSerializer):
    """What every way of making a voice asks: its name (not a built-in one's) and description."""

    name = serializers.RegexField(NAME, max_length=64, help_text="Letters, digits, spaces and . ' ( ) - _")
    description = serializers.CharField(max_length=300, required=False, default="", allow_blank=True)

    def validate_name(self, name: str) -> str:
        if name.strip() != name or name.lower() in VOICES:
            raise serializers.ValidationError(f"'{name}' is a built-in voice's name or has surrounding spaces.")
        return name


class RecordingVoiceSerializer(VoiceSerializerBase):
    transcript = serializers.CharField(max_length=300, help_text="Exactly what the recording says.")
    audio = serializers.FileField(help_text="1 to 15 s of one speaker: wav, mp3, flac, ogg/opus, m4a or webm.")
    keep_upload = serializers.BooleanField(
        required=False, default=False, help_text="Keep the uploaded file with the voice (it is not kept otherwise)."
    )

    def validate_transcript(self, transcript: str) -> str:
        if any(tag in transcript for tag in ("[Stts]", "[spk_emb]", "[empty_spk]", "[Ptts]")):
            raise serializers.ValidationError("The transcript holds a ChatTTS control token.")
        try:
            prepare(transcript)
        except TextError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return " ".join(transcript.split())


class VoiceCreateSerializer(VoiceSerializerBase):
    seed = serializers.IntegerField(
        required=False, min_value=0, max_value=2**31 - 1, help_text="A speaker sampled with this seed."
    )
    speaker = serializers.CharField(
        required=False,
        trim_whitespace=True,
        max_length=MAX_SPEAKER_CHARS,
        help_text="A ChatTTS speaker embedding string.",
    )

    def validate_speaker(self, speaker: str) -> str:
        problem = speaker_problem(speaker)
        if problem:
            raise serializers.ValidationError(problem)
        return canonical(speaker)

    def validate(self, attrs):
        if ("seed" in attrs) == ("speaker" in attrs):
            raise serializers.ValidationError({"seed": ["Give exactly one of seed and speaker."]}, code="invalid_value")
        return attrs


class OwnVoiceSerializer(serializers.ModelSerializer):
    object = serializers.SerializerMethodField()

    class Meta:
        model = Voice
        fields = [
            "id",
            "object",
            "name",
            "description",
            "source",
            "seed",
            "speaker",
            "transcript",
            "status",
            "error",
            "created_at",
        ]

    def get_object(self, voice) -> str:
        return "voice"


class AudioVoiceSerializer(serializers.Serializer):
    id = serializers.CharField(help_text="What `voice` takes: a built-in name or a voice_… id.")
    name = serializers.CharField()
    description = serializers.CharField()
    custom = serializers.BooleanField(help_text="The organization's own voice (built-in voices are read-only).")


@extend_schema_serializer(many=False)
class AudioVoiceListSerializer(serializers.Serializer):
    voices = AudioVoiceSerializer(many=True)


def _listing(organization) -> list[dict]:
    allowed = limits_for(organization).allowed_voices if organization is not None else ()
    voices = [
        {"id": v.name, "name": v.name, "description": v.description, "custom": False}
        for v in VOICES.values()
        if not allowed or v.name in allowed
    ]
    if organization is not None:
        voices += [
            {"id": v.id, "name": v.name, "description": v.description, "custom": True}
            for v in scoped(Voice, organization).order_by("created_at")
        ]
    return voices


@extend_schema(
    methods=["GET"],
    operation_id="audio_voices_list",
    responses={200: AudioVoiceListSerializer},
    auth=[{"ApiKey": []}, {}],
    description="The voices in the shape Open WebUI reads; with a key, the plan's built-in voices and the "
    "organization's own (a key is optional: Open WebUI may send none).",
)
@extend_schema(
    methods=["POST"],
    operation_id="audio_voices_create",
    auth=[{"ApiKey": []}],
    request={"application/json": VoiceCreateSerializer, "multipart/form-data": RecordingVoiceSerializer},
    responses={
        201: OwnVoiceSerializer,
        **error_responses(
            {
                400: "The request body is not valid.",
                401: "A key is needed to create a voice.",
                403: "The plan's limit on voices is reached.",
                409: "The organization has a voice of that name.",
            }
        ),
    },
    description="A voice from a seed or a ChatTTS speaker embedding string (JSON), or from a reference "
    "recording and its transcript (multipart; the voice is `processing` until a worker has encoded it).",
)
@api_view(["GET", "POST"])
@parser_classes([JSONParser, MultiPartParser])
@authentication_classes([OptionalApiKeyAuthentication])
@permission_classes([AllowAny])
def audio_voices(request) -> Response:
    org = getattr(request.user, "organization", None)  # anonymous: AnonymousUser
    if request.method == "GET":
        return Response({"voices": _listing(org)})
    if org is None:
        raise ApiError(401, "Creating a voice needs an API key.", "invalid_api_key")
    if request.content_type.startswith("multipart/form-data"):
        voice = create_voice_from_recording(org, request.data)
    else:
        voice = create_voice(org, request.data)
    return Response(OwnVoiceSerializer(voice).data, status=status.HTTP_201_CREATED)


def create_voice_from_recording(org, body) -> Voice:
    """A voice from a reference recording and its transcript: checked and decoded here (24 kHz
    mono), encoded by a worker's model (ChatTTS's `sample_audio_speaker`), usable once `ready`."""
    incoming = RecordingVoiceSerializer(data=body)
    if not incoming.is_valid():
        raise validation_error(incoming.errors)
    data = incoming.validated_data
    upload = data["audio"]
    try:
        recording = decode_recording(upload.read(), *RECORDING_SECONDS)
    except ValueError as exc:
        raise ApiError(400, f"audio: {exc}", "invalid_value", "audio") from None
    voice = _create(
        org,
        name=data["name"],
        description=data["description"],
        source=Voice.Source.RECORDING,
        transcript=data["transcript"],
        status=Voice.Status.PROCESSING,
    )
    if data["keep_upload"]:
        upload.seek(0)
        voice.upload.save(f"{voice.id}-{upload.name[-60:]}", upload, save=True)
    pcm = (np.clip(recording, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    get_redis().set(RECORDING_KEY.format(voice.id), pcm, ex=3600)
    enqueue_voice_recording(voice.id)
    return voice


def create_voice(org, body) -> Voice:
    """A new voice of `org` from a request body (the API's and the dashboard's): validated, within
    the plan's limit, its name unique in the organization; ApiError otherwise."""
    incoming = VoiceCreateSerializer(data=body)
    if not incoming.is_valid():
        raise validation_error(incoming.errors)
    data = incoming.validated_data
    return _create(
        org,
        name=data["name"],
        description=data["description"],
        source=Voice.Source.SEED if "seed" in data else Voice.Source.EMBEDDING,
        seed=data.get("seed"),
        speaker=data.get("speaker", ""),
    )


def _create(org, **fields) -> Voice:
    """A voice of `org`, within its plan's limit and with a name of its own."""
    limit = limits_for(org).max_custom_voices
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=org.pk).first()  # one creation at a time
        if scoped(Voice, org).count() >= limit:
            raise ApiError(403, f"Your plan allows {limit} voices of your own; delete one first.", "plan_limit_reached")
        try:
            with transaction.atomic():
                return Voice.objects.create(organization=org, **fields)
        except IntegrityError:
            raise ApiError(409, f"A voice named '{fields['name']}' exists already.", "name_taken", "name") from None


def _voice(org, voice_id: str) -> Voice:
    voice = scoped(Voice, org).filter(pk=voice_id).first() if VOICE_ID.fullmatch(voice_id) else None
    if voice is None:
        raise ApiError(404, f"No voice '{voice_id[:70]}' in this organization.", "not_found")
    return voice


@extend_schema(
    methods=["GET"],
    operation_id="audio_voice_retrieve",
    responses={200: OwnVoiceSerializer, **error_responses({404: "No voice with that id in this organization."})},
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
    """One of the organization's voices (a built-in one by name too); DELETE removes one of its own."""
    org = request.user.organization
    if voice_id in VOICES:
        if request.method == "DELETE":
            raise ApiError(403, f"'{voice_id}' is a built-in voice: built-in voices are read-only.", "voice_read_only")
        builtin = VOICES[voice_id]
        return Response(
            {
                "id": builtin.name,
                "object": "voice",
                "name": builtin.name,
                "description": builtin.description,
                "source": "builtin",
                "seed": builtin.seed,
                "speaker": "",
                "created_at": None,
            }
        )
    voice = _voice(org, voice_id)
    body = OwnVoiceSerializer(voice).data
    if request.method == "DELETE":
        voice.delete()
        body["deleted"] = True
    return Response(body)
