"""The engines this code knows, by model id: their specs (pure data, for the web) and, in a worker
process, the engine itself (`load`), imported only then (torch, the model's packages)."""

from __future__ import annotations

import functools
from dataclasses import asdict
from importlib import import_module
from importlib.util import find_spec

from .chattts.spec import SPEC as CHATTTS
from .engine import Engine, EngineOptions
from .kokoro.spec import SPEC as KOKORO
from .spec import SAMPLE_RATE, EngineSpec
from .voxcpm.spec import SPEC as VOXCPM

SPECS: dict[str, EngineSpec] = {spec.name: spec for spec in (CHATTTS, KOKORO, VOXCPM)}
REAL = "real"  # make_checkpoint's size for an engine's real weights


@functools.cache
def served_spec(name: str, model_dir: str) -> EngineSpec:
    """Engine `name`'s spec as the model directory `model_dir` serves it (`EngineSpec.served_by`):
    read once per process and directory."""
    return SPECS[name].served_by(model_dir)


def sample_rate(model: str) -> int:
    """The rate (Hz) of the audio model `model` generates: what its jobs' PCM, cache entries and
    streams carry (24 kHz for a model this code does not know)."""
    spec = SPECS.get(model)
    return spec.sample_rate if spec is not None else SAMPLE_RATE


def engine_class(name: str):
    module, _, cls = SPECS[name].engine.partition(":")
    return getattr(import_module(module), cls)


def load(name: str, options: EngineOptions) -> Engine:
    """The engine `name` loaded as `options` say (a worker process: imports torch and the model)."""
    return engine_class(name).load(**asdict(options))


def make_checkpoint(name: str, size: str, out, seed: int = 0):
    """A randomly initialised checkpoint of engine `name` in its official layout (tests, benchmarks:
    noise, not speech), made by the engine package's `checkpoint.make_checkpoint`; `size` "real":
    the engine's real weights converted from installed packages by its `real_weights.make_checkpoint`
    (ValueError for an engine that has none)."""
    if size == REAL:
        if not has_real_weights(name):
            others = ", ".join(real_weight_engines()) or "none"
            raise ValueError(f"{name} has no real weights to convert here (engines that have: {others})")
        return import_module(f"inference.{name}.real_weights").make_checkpoint(out)
    return import_module(f"inference.{name}.checkpoint").make_checkpoint(size, out, seed=seed)


def has_real_weights(name: str) -> bool:
    """Whether engine `name`'s package converts real weights from installed packages (`real_weights`)."""
    return find_spec(f"inference.{name}.real_weights") is not None


def real_weight_engines() -> list[str]:
    return [name for name in SPECS if has_real_weights(name)]
