"""What this deployment offers: the models it serves, as the API names them — which engines run
(TTS_ENGINES), what a request's `model` means — and what an organization's plan allows of them.

A model id is an engine's name (`chattts`, `kokoro`) or that name with its version (`kokoro-v1.0`);
OpenAI's names (`tts-1`, `tts-1-hd`, `gpt-4o-mini-tts`, TTS_MODEL_ALIASES) and their dated snapshots
(`gpt-4o-mini-tts-2025-12-15`) mean the deployment's default engine (TTS_DEFAULT_MODEL; unset, the
first served engine whose audio may be sold: a non-commercial model speaks only when named or chosen),
or the organization's default model where it chose one (`synthesis.api.defaults`). Everything
about an engine comes from its spec (`inference.registry`): nothing here knows one engine from another.
"""

from __future__ import annotations

import re
from datetime import date

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from inference.registry import SPECS, served_spec
from inference.spec import EngineSpec
from tts_saas.errors import ApiError

from .limits import Limits

DATED = re.compile(r"(?P<name>.+)-(?P<date>\d{4}-\d{2}-\d{2})")  # OpenAI's snapshots


def served() -> list[EngineSpec]:
    """The engines this deployment runs, in TTS_ENGINES order, each as its model directory serves it
    (TTS_<ENGINE>_MODEL_DIR: its voices those the directory holds, `inference.registry.served_spec`)."""
    unknown = [name for name in settings.TTS_ENGINES if name not in SPECS]
    if unknown or not settings.TTS_ENGINES:
        raise ImproperlyConfigured(
            f"TTS_ENGINES={','.join(settings.TTS_ENGINES)}: name one or more of {', '.join(SPECS)}"
            + (f" (unknown: {', '.join(unknown)})" if unknown else "")
        )
    return [served_spec(name, settings.TTS_MODEL_DIRS.get(name, "")) for name in settings.TTS_ENGINES]


def default_spec() -> EngineSpec:
    """The deployment's default engine: TTS_DEFAULT_MODEL where the operator chose one, else the first
    served engine whose audio may be sold (`EngineSpec.commercial`), else the first served."""
    specs = {spec.name: spec for spec in served()}
    if not settings.TTS_DEFAULT_MODEL:
        return next((spec for spec in specs.values() if spec.commercial), next(iter(specs.values())))
    if settings.TTS_DEFAULT_MODEL not in specs:
        raise ImproperlyConfigured(
            f"TTS_DEFAULT_MODEL={settings.TTS_DEFAULT_MODEL} is not one of TTS_ENGINES ({', '.join(specs)})."
        )
    return specs[settings.TTS_DEFAULT_MODEL]


def aliases() -> list[str]:
    """OpenAI's model names, which mean the default engine."""
    return list(settings.TTS_MODEL_ALIASES)


def model_ids() -> list[str]:
    """Every id /v1/models lists: the served engines, then OpenAI's names for the default one."""
    return [spec.name for spec in served()] + aliases()


def find(model: str) -> EngineSpec | None:
    """The served engine a model id names (see the module's docstring), or None."""
    specs = {spec.name: spec for spec in served()}
    if model in specs:
        return specs[model]
    for spec in specs.values():
        if model == f"{spec.name}-{spec.version}":
            return spec
    return default_spec() if is_alias(model) else None


def is_alias(model: str) -> bool:
    """Whether `model` is one of OpenAI's names (dated or not), which mean the default model."""
    dated = DATED.fullmatch(model)
    if dated is None:
        return model in aliases()
    try:
        date.fromisoformat(dated["date"])
    except ValueError:
        return False
    return dated["name"] in aliases()


def names_engine(model: str) -> bool:
    """Whether a request's `model` names an engine itself: not empty, not one of OpenAI's names
    (which mean the organization's default model)."""
    return bool(model) and not is_alias(model)


def spec_for(model: str) -> EngineSpec:
    """The engine a request's `model` names; 404 `model_not_found` (as OpenAI answers) when this
    deployment does not serve it, naming those it does."""
    spec = find(model) if model else default_spec()
    if spec is None:
        known = f" ({SPECS[model].title} is not served here)" if model in SPECS else ""
        raise ApiError(
            404,
            f"The model '{model}' does not exist{known}. Served models: {', '.join(model_ids())}.",
            "model_not_found",
            "model",
        )
    return spec


def check_allowed(limits: Limits, spec: EngineSpec) -> None:
    """403 when the organization's plan does not include the model."""
    if limits.allowed_models and spec.name not in limits.allowed_models:
        raise ApiError(
            403,
            f"The model '{spec.name}' is not in your plan; available: {', '.join(limits.allowed_models)}.",
            "model_not_in_plan",
            "model",
        )


def allowed_specs(limits: Limits | None) -> list[EngineSpec]:
    """The served engines an organization's plan allows (all of them without an organization)."""
    return [s for s in served() if limits is None or not limits.allowed_models or s.name in limits.allowed_models]


def check_voice_allowed(limits: Limits, spec: EngineSpec, voice: str) -> None:
    """403 when `voice` is one of the model's built-in voices and the plan lists others only (an
    organization's own voices are not limited by name)."""
    if limits.allowed_voices and spec.voice(voice) is not None and voice not in limits.allowed_voices:
        raise ApiError(
            403,
            f"Voice '{voice}' is not in your plan; available: {', '.join(limits.allowed_voices)}.",
            "not_in_plan",
            "voice",
        )
