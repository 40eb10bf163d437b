"""The engines this code knows, by model id: their specs (pure data, for the web) and, in a worker
process, the engine itself (`load`), imported only then (torch, the model's packages)."""

from __future__ import annotations

from dataclasses import asdict
from importlib import import_module

from .chattts.spec import SPEC as CHATTTS
from .engine import Engine, EngineOptions
from .kokoro.spec import SPEC as KOKORO
from .spec import SAMPLE_RATE, EngineSpec
from .voxcpm.spec import SPEC as VOXCPM

SPECS: dict[str, EngineSpec] = {spec.name: spec for spec in (CHATTTS, KOKORO, VOXCPM)}


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
    noise, not speech), made by the engine package's `checkpoint.make_checkpoint`."""
    return import_module(f"inference.{name}.checkpoint").make_checkpoint(size, out, seed=seed)
