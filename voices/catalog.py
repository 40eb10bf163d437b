"""Which voices a request may name, and what a named voice is for the engine that speaks it.

A request's `voice` is a built-in voice of its model (OpenAI's 13 names, each a fixed voice of every
engine, or the engine's own ids such as Kokoro's `af_heart`) or one of the organization's voices
(`voice_…`), which belongs to one model. `resolve_voice` gives the engine's `params.from_request`
what it needs: {"builtin": id}, or the voice row's fields (a ChatTTS speaker, a Kokoro mix).
"""

from __future__ import annotations

import re

from accounts.tenancy import scoped
from inference.spec import EngineSpec
from tts_saas.errors import ApiError

from .models import Voice

VOICE_ID = re.compile(r"voice_[0-9a-f]{16}")


def resolve_voice(organization, value: str, spec: EngineSpec) -> dict:
    """A request's `voice` for the engine `spec`: 400 for a voice that is neither built in nor the
    organization's, one of another model, or one whose recording failed; 409 for one whose recording
    is still being encoded."""
    builtin = spec.voice(value)
    if builtin is not None:
        return {"builtin": builtin.id}
    voice = scoped(Voice, organization).filter(pk=value).first() if VOICE_ID.fullmatch(value) else None
    if voice is None:
        raise ApiError(
            400,
            f"voice: No voice '{value[:70]}' for model '{spec.name}' "
            f"(GET /v1/audio/voices?model={spec.name} lists them).",
            "invalid_value",
            "voice",
        )
    if voice.model != spec.name:
        raise ApiError(
            400,
            f"voice: '{voice.name}' is a voice of model '{voice.model}'; model '{spec.name}' cannot speak with it.",
            "invalid_value",
            "voice",
        )
    if voice.status == Voice.Status.PROCESSING:
        raise ApiError(
            409,
            "The voice is still being made (its recording or design); try again in a few seconds.",
            "voice_not_ready",
            "voice",
        )
    if voice.status == Voice.Status.FAILED:
        made = "from its design" if voice.source == Voice.Source.DESIGN else "from its recording"
        raise ApiError(400, f"The voice could not be made {made}: {voice.error}", "invalid_voice", "voice")
    return {
        "seed": voice.seed or 0,
        "speaker": voice.speaker,
        "sample": voice.sample,
        "sample_text": voice.sample_text,
        "mix": voice.mix,
    }


def builtin_listing(spec: EngineSpec, allowed: tuple[str, ...] = ()) -> list[dict]:
    """The engine's built-in voices a plan allows (`allowed`: names; empty: all): OpenAI's names
    first (each says which voice of the engine it is), then the engine's own."""
    voices = []
    for name in spec.voice_ids():
        if allowed and name not in allowed:
            continue
        voice = spec.voice(name)
        assert voice is not None
        same = voice.id == name
        description = (
            voice.description if same else f"{voice.description} OpenAI's '{name}': {spec.title}'s {voice.id}."
        )
        voices.append({"id": name, "name": name, "description": description, "language": voice.language})
    return voices


def stored_aliases(organization) -> dict[str, dict]:
    """The organization's voice aliases as `synthesis.api.aliases.check` stores them, {name: {"model",
    "voice"}}; an entry of another shape (a row written otherwise) is left out, never a 500."""
    stored = getattr(organization, "voice_aliases", None)
    return {
        n: a
        for n, a in (stored.items() if isinstance(stored, dict) else ())
        if isinstance(a, dict) and isinstance(a.get("model"), str) and isinstance(a.get("voice"), str)
    }


def with_aliases(entries: list[dict], organization, key: str = "id", model: str = "") -> list[dict]:
    """`entries` (a voice listing) with, on each of OpenAI's names the organization aliased, the
    voice it speaks with: {"model", "voice", "name"} (synthesis.api.aliases sets and applies them).
    `model`: the engine the listing's request named explicitly, whose requests use only the aliases
    to that engine; empty (no model, or OpenAI's names): every alias applies."""
    aliases = {n: a for n, a in stored_aliases(organization).items() if not model or a["model"] == model}
    if not aliases:
        return entries
    own = {v.id: v.name for v in scoped(Voice, organization).filter(pk__in=[a["voice"] for a in aliases.values()])}
    return [
        {**e, "alias": {**aliases[e[key]], "name": own.get(aliases[e[key]]["voice"], aliases[e[key]]["voice"])}}
        if e[key] in aliases
        else e
        for e in entries
    ]


def own_voices(organization, spec: EngineSpec | None = None):
    """The organization's voices (of one model when `spec` is given), oldest first."""
    voices = scoped(Voice, organization).order_by("created_at")
    return voices.filter(model=spec.name) if spec is not None else voices
