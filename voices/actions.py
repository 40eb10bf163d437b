"""Making an organization's voices: what each way of making one asks, refused from the model's spec
when the model cannot (a ChatTTS speaker from a seed or an embedding string, a reference recording,
a Kokoro mix of built-in voices), within the plan's limit, the name unique in the organization.
The API and the dashboard both call `create_voice`."""

from __future__ import annotations

import re
import secrets
from typing import Any

from django.db import IntegrityError, transaction
from rest_framework import serializers

from accounts.models import Organization
from accounts.tenancy import scoped
from billing import offer
from billing.limits import Limits, limits_for
from inference.chattts.speakers import MAX_SPEAKER_CHARS, canonical, speaker_problem
from inference.registry import SPECS
from inference.spec import EngineSpec
from tts_saas.errors import ApiError, validation_error
from tts_saas.queueing import send
from tts_saas.serializers import StrictSerializer

from . import cloning
from .models import Voice
from .recordings import CONSENT_STATEMENT, check_transcript, decode_upload, start_encoding

NAME = re.compile(r"\A[\w .'()-]{1,64}\Z")
MAX_MIX = 8  # voices in a mix


class VoiceSerializerBase(StrictSerializer):
    """What every way of making a voice asks: its name (not a built-in one's), description, model."""

    name = serializers.RegexField(NAME, max_length=64, help_text="Letters, digits, spaces and . ' ( ) - _")
    description = serializers.CharField(max_length=300, required=False, default="", allow_blank=True)
    model = serializers.CharField(
        required=False, max_length=64, help_text="The model the voice is for (default: the deployment's default)."
    )

    def validate_name(self, name: str) -> str:
        builtin = any(spec.voice(name) is not None or spec.voice(name.lower()) is not None for spec in SPECS.values())
        if name.strip() != name or builtin:
            raise serializers.ValidationError(f"'{name}' is a built-in voice's name or has surrounding spaces.")
        return name


class RecordingVoiceSerializer(VoiceSerializerBase):
    transcript = serializers.CharField(
        max_length=300,
        required=False,
        default="",
        allow_blank=True,
        help_text="Exactly what the recording says (ChatTTS needs it; on VoxCPM2 it makes the clone closer).",
    )
    audio = serializers.FileField(
        help_text="One speaker, 1 to 15 s (ChatTTS) or 1 to 30 s (VoxCPM2): wav, mp3, flac, ogg/opus, m4a or webm."
    )
    keep_upload = serializers.BooleanField(
        required=False, default=False, help_text="Keep the uploaded file with the voice (it is not kept otherwise)."
    )
    consent = serializers.BooleanField(
        required=False, default=False, help_text=f"Required, true: you state: {CONSENT_STATEMENT}"
    )


class MixPartSerializer(StrictSerializer):
    voice = serializers.CharField(max_length=64, help_text="A built-in voice of the model (e.g. af_heart).")
    weight = serializers.FloatField(min_value=0.01, max_value=100, help_text="Its share (weights are normalised).")


class VoiceCreateSerializer(VoiceSerializerBase):
    seed = serializers.IntegerField(
        required=False, min_value=0, max_value=2**31 - 1, help_text="ChatTTS: a speaker sampled with this seed."
    )
    speaker = serializers.CharField(
        required=False,
        trim_whitespace=True,
        max_length=MAX_SPEAKER_CHARS,
        help_text="ChatTTS: a speaker embedding string.",
    )
    mix = MixPartSerializer(
        many=True,
        required=False,
        max_length=MAX_MIX,  # type: ignore[call-arg]  # ListSerializer's, not in the stubs
        help_text=f"Kokoro: 1 to {MAX_MIX} built-in voices with weights; the voice is their weighted sum.",
    )

    design = serializers.CharField(
        required=False,
        max_length=300,
        help_text="VoxCPM2: a voice design, as `instructions` take one; a worker speaks a sample in it once and keeps "
        "it as the voice's reference, so the voice sounds the same in every request (a design alone varies).",
    )
    sample_text = serializers.CharField(
        required=False,
        max_length=300,
        help_text="With `design`: what the sample says (default: two short English sentences).",
    )

    def validate_speaker(self, speaker: str) -> str:
        problem = speaker_problem(speaker)
        if problem:
            raise serializers.ValidationError(problem)
        return canonical(speaker)

    def validate(self, attrs):
        given = [name for name in ("speaker", "mix", "design") if name in attrs]
        if "seed" in attrs and "design" not in attrs:  # a design's seed goes with it
            given.append("seed")
        if len(given) != 1:
            raise serializers.ValidationError(
                {"seed": ["Give exactly one of seed, speaker (ChatTTS), mix (Kokoro) and design (VoxCPM2)."]},
                code="invalid_value",
            )
        if "sample_text" in attrs and "design" not in attrs:
            raise serializers.ValidationError({"sample_text": ["sample_text goes with design."]}, code="invalid_value")
        return attrs


def model_of(data: dict) -> EngineSpec:
    """The voice's model: one this deployment serves (404 `model_not_found` naming them otherwise)."""
    return offer.spec_for(data.get("model", ""))


def _refuse(spec: EngineSpec, what: str, instead: str, param: str) -> ApiError:
    return ApiError(
        400, f"Model '{spec.name}' ({spec.title}) cannot make a voice {what}. {instead}", "invalid_value", param
    )


def _mix(spec: EngineSpec, parts: list[dict]) -> list[list]:
    if not 1 <= len(parts) <= MAX_MIX:
        raise ApiError(400, f"mix: give 1 to {MAX_MIX} voices.", "invalid_value", "mix")
    mix: dict[str, float] = {}
    for i, part in enumerate(parts):
        voice = spec.voice(part["voice"])
        if voice is None:
            raise ApiError(
                400,
                f"mix[{i}].voice: '{part['voice']}' is not a built-in voice of '{spec.name}'.",
                "invalid_value",
                "mix",
            )
        if voice.id in mix:
            raise ApiError(400, f"mix[{i}].voice: '{voice.id}' is in the mix twice.", "invalid_value", "mix")
        mix[voice.id] = part["weight"]
    total = sum(mix.values())
    return [[voice, round(weight / total, 6)] for voice, weight in mix.items()]


def create_voice(org, body) -> Voice:
    """A new voice of `org` from a request body (the API's and the dashboard's): validated for its
    model, within the plan's limit, its name unique in the organization; ApiError otherwise."""
    incoming = VoiceCreateSerializer(data=body)
    if not incoming.is_valid():
        raise validation_error(incoming.errors)
    data = incoming.validated_data
    spec = model_of(data)
    limits = limits_for(org)
    offer.check_allowed(limits, spec)
    if "design" in data:
        return _designed(org, limits, spec, data)
    if "mix" in data:
        if not spec.features.mixed_voices:
            raise _refuse(spec, "as a mix of voices", "Give a seed or a speaker embedding string.", "mix")
        fields: dict[str, Any] = {"source": Voice.Source.MIX, "mix": _mix(spec, data["mix"])}
    else:
        if not spec.features.speaker_voices:
            instead = "Give `mix`: built-in voices with weights." if spec.features.mixed_voices else ""
            raise _refuse(spec, "from a seed or a speaker embedding string", instead, "seed")
        source = Voice.Source.SEED if "seed" in data else Voice.Source.EMBEDDING
        fields = {"source": source, "seed": data.get("seed"), "speaker": data.get("speaker", "")}
    return _create(org, limits, name=data["name"], description=data["description"], model=spec.name, **fields)


DESIGN_SAMPLE = "Hello! This is how my voice sounds when I read a few words aloud, calmly and clearly."
DESIGN_VOICE = "synthesis.tasks.design_voice"


def _designed(org, limits: Limits, spec: EngineSpec, data: dict) -> Voice:
    """A voice design made fixed (a model that follows `instructions` and clones): `processing`
    until a worker of the model has spoken its sample and kept it as the voice's reference."""
    if not (spec.features.instructions and spec.features.recording_voices):
        raise _refuse(spec, "from a design", "Voice designs are VoxCPM2's (`instructions`).", "design")
    sample_text = data.get("sample_text") or DESIGN_SAMPLE
    try:
        sample_text = check_transcript(sample_text, spec)
    except serializers.ValidationError as exc:
        raise validation_error({"sample_text": exc.detail}) from None
    voice = _create(
        org,
        limits,
        name=data["name"],
        description=data["description"],
        model=spec.name,
        source=Voice.Source.DESIGN,
        design=" ".join(data["design"].split()),
        seed=data.get("seed", secrets.randbelow(2**31)),
        transcript=sample_text,
        status=Voice.Status.PROCESSING,
    )
    send(DESIGN_VOICE, voice.id, queue=spec.queue_name, priority=0, expires=3600)
    return voice


def create_voice_from_recording(org, body) -> Voice:
    """A voice from a reference recording (and its transcript), for a model that can make one,
    where the operator, the plan, the organization's rate and retention allow, with the creator's
    consent statement."""
    incoming = RecordingVoiceSerializer(data=body)
    if not incoming.is_valid():
        raise validation_error(incoming.errors)
    data = incoming.validated_data
    spec = model_of(data)
    limits = limits_for(org)
    offer.check_allowed(limits, spec)
    if not spec.features.recording_voices:
        instead = (
            "It has no voice cloning: its voices are trained style vectors. Make a mix of its built-in voices "
            "instead (JSON body with `mix`)."
            if spec.features.mixed_voices
            else ""
        )
        raise _refuse(spec, "from a recording", instead, "audio")
    cloning.check_allowed(limits)
    try:
        transcript = check_transcript(data["transcript"], spec)
    except serializers.ValidationError as exc:
        raise validation_error({"transcript": exc.detail}) from None
    upload = data["audio"]
    recording = decode_upload(upload, spec)
    cloning.check_consent(data["consent"])
    cloning.check_retention(org, data["keep_upload"])
    cloning.count_attempt(org)
    voice = _create(
        org,
        limits,
        cloned=True,
        name=data["name"],
        description=data["description"],
        model=spec.name,
        source=Voice.Source.RECORDING,
        transcript=transcript,
        status=Voice.Status.PROCESSING,
        consent=cloning.consent_record(),
    )
    cloning.record_consent(voice)
    if data["keep_upload"]:
        upload.seek(0)
        voice.upload.save(f"{voice.id}-{upload.name[-60:]}", upload, save=True)
    start_encoding(voice, spec, recording)
    return voice


def _create(org, limits: Limits, cloned: bool = False, **fields) -> Voice:
    """A voice of `org`, within its plan's limit (and its limit on cloned voices when `cloned`) and
    with a name of its own."""
    limit = limits.max_custom_voices
    with transaction.atomic():
        Organization.objects.select_for_update().filter(pk=org.pk).first()  # one creation at a time
        if cloned:
            cloning.check_count(org, limits)
        if scoped(Voice, org).count() >= limit:
            raise ApiError(403, f"Your plan allows {limit} voices of your own; delete one first.", "plan_limit_reached")
        try:
            with transaction.atomic():
                return Voice.objects.create(organization=org, **fields)
        except IntegrityError:
            raise ApiError(409, f"A voice named '{fields['name']}' exists already.", "name_taken", "name") from None
