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
from .batch import Audio, BatchRow, BatchSink, Event, Joining
from .engine import SynthesisRequest
from .spec import CPU_MAX_BATCH, RANDOM_WEIGHTS, EngineSpec

# The rows a worker generates together when TTS_MAX_BATCH is not set (`BatchEngine.default_max_batch`).
# On a CPU 4: a step of n rows costs nearly n steps of one there (the cores are busy either way), so
# larger batches only make each row's audio later. On a GPU as many rows as fit in half the free
# memory at worker start, at `row_bytes` each, and at most 64: on an H200 a ChatTTS step of 64 rows
# cost 1.8x one of a single row (2.3 s against 0.8 s for 215 tokens, with CUDA graphs), Kokoro made
# 438 audio seconds a second at 64 rows and 457 at 128 with first audio 130 against 204 ms, and
# VoxCPM2's step took as long at 64 rows as at one (docs/benchmarks.md, "GPU sweep").
GPU_MAX_BATCH = 64
GPU_MEMORY_SHARE = 0.5  # the rest: the caching allocator's slack, other processes, the next growth


class BatchEngine:
    spec: ClassVar[EngineSpec]
    # One row's device memory at its longest (its caches and the batch's activations for it), for
    # the default batch on a GPU; engines measure their own.
    ROW_BYTES: ClassVar[int] = 256 * 2**20

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
        more: Joining | None = None,
    ) -> Iterator[Event]:
        raise NotImplementedError

    def generate_batch(
        self,
        rows: list[BatchRow],
        sink: BatchSink,
        chunk_tokens: int = 24,
        more: Joining | None = None,
    ) -> None:
        """Run `rows` to their end, each row's audio and its end (with word timings where the
        engine gives them) reported to `sink` as they happen; `more(live)`, asked between steps
        with the number of rows still generating, returns rows that join (continuous batching)."""
        for event in self.run_rows(rows, sink.stop_requested, chunk_tokens, more):
            if isinstance(event, Audio):
                sink.audio(event.key, event.samples)
            else:
                sink.done(event.key, event.tokens, event.words)

    def row_bytes(self) -> int:
        return self.ROW_BYTES

    def default_max_batch(self) -> int:
        """The rows to generate together when the operator sets none: CPU_MAX_BATCH on a CPU; on a
        GPU what half its free memory holds at `row_bytes` a row, between 1 and GPU_MAX_BATCH."""
        device = getattr(self, "device", None)
        if getattr(device, "type", "cpu") != "cuda":
            return CPU_MAX_BATCH
        import torch  # noqa: PLC0415  (torch: worker processes only)

        free, _ = torch.cuda.mem_get_info(device)
        return max(1, min(GPU_MAX_BATCH, int(free * GPU_MEMORY_SHARE) // self.row_bytes()))

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
