"""What every engine shares, so that an engine writes only what is its own.

An engine class derives from `BatchEngine` and writes `load`, `read`, `row_budget`,
`voice_problem`, `run_rows` (its batch loop, as an iterator of `batch.Event`s) and `warm_up`;
`generate_batch` (the worker's call), `synthesize` and `stream` (a single request on the batch
path, `inference.requests`) come from here. `load` picks its device, precision and model version
with the functions below. No torch at import time: the web process imports the engine packages'
specs, never this module's callers.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import numpy as np

from . import requests
from .batch import Audio, BatchRow, BatchSink, Event
from .engine import SynthesisRequest
from .spec import RANDOM_WEIGHTS, EngineSpec


class BatchEngine:
    spec: ClassVar[EngineSpec]

    @property
    def sample_rate(self) -> int:
        return self.spec.sample_rate

    def row_budget(self, text: str, params: Any) -> int:
        raise NotImplementedError

    def run_rows(
        self,
        rows: list[BatchRow],
        stop: Callable[[str], bool],
        chunk_tokens: int = 24,
        more: Callable[[int], list[BatchRow]] | None = None,
    ) -> Iterator[Event]:
        raise NotImplementedError

    def generate_batch(
        self,
        rows: list[BatchRow],
        sink: BatchSink,
        chunk_tokens: int = 24,
        more: Callable[[int], list[BatchRow]] | None = None,
    ) -> None:
        """Run `rows` to their end, each row's audio and its end (with word timings where the
        engine gives them) reported to `sink` as they happen; `more(live)`, asked between steps
        with the number of rows still generating, returns rows that join (continuous batching)."""
        for event in self.run_rows(rows, sink.stop_requested, chunk_tokens, more):
            if isinstance(event, Audio):
                sink.audio(event.key, event.samples)
            else:
                sink.done(event.key, event.tokens, event.words)

    def keep_voice_prompts(self, max_bytes: int) -> None:
        """Bound what the engine keeps per voice (an engine with `spec.voice_affinity`); else nothing."""

    def voice_prompt_counts(self) -> tuple[int, int] | None:
        """(prompts built so far, bytes kept now) where the engine keeps voices' prompts, else None."""
        return None

    def _budget(self, params: Any) -> Callable[[str], int]:
        return lambda segment: self.row_budget(segment, params)

    def synthesize(
        self,
        request: SynthesisRequest,
        should_stop: Callable[[], bool] | None = None,
        on_segment: Callable[[int], None] | None = None,
    ) -> Iterator[np.ndarray]:
        """One piece per segment, in order, with a pause between two (`requests.synthesize`)."""
        budget = self._budget(request.params)
        return requests.synthesize(self.run_rows, budget, request, should_stop, on_segment, self.sample_rate)

    def stream(
        self,
        request: SynthesisRequest,
        should_stop: Callable[[], bool] | None = None,
        chunk_tokens: int = 24,
        on_segment: Callable[[int], None] | None = None,
    ) -> Iterator[np.ndarray]:
        """Audio in order as it is generated: the first segment alone (its audio soonest), then the
        others in batches (`requests.stream`); chunks of ~`chunk_tokens` where the engine streams
        within a segment, else each segment whole."""
        budget = self._budget(request.params)
        return requests.stream(self.run_rows, budget, request, should_stop, chunk_tokens, on_segment, self.sample_rate)


def pick_device(device: str):
    """`device` as a torch device; empty: cuda when present, else the CPU."""
    import torch  # noqa: PLC0415  (torch: worker processes only)

    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def pick_precision(precision: str, precisions: tuple[str, ...]) -> str:
    """`precision` checked against what the engine runs; "auto" is float32 (what measured best on
    a CPU and on an H200 for both engines, docs/benchmarks.md)."""
    if precision == "auto":
        return "fp32"
    if precision not in precisions:
        others = f" or one of {', '.join(precisions)}" if precisions else ""
        raise ValueError(f"precision must be auto{others}, not {precision!r}")
    return precision


def model_version(name: str, parts: list[str], precision: str = "fp32", random_weights: bool = False) -> str:
    """The model version cache keys carry: `name`, a digest of what changes the audio of a text
    (the files' checksums, the code that runs them, the text preparation), the precision when not
    float32, and "-random" for a random checkpoint (noise, not speech)."""
    digest = hashlib.sha256("|".join(parts).encode()).hexdigest()[:12]
    suffix = ("" if precision == "fp32" else f"-{precision}") + (RANDOM_WEIGHTS if random_weights else "")
    return f"{name}-{digest}{suffix}"
