"""The engine interface the worker drives: rows in, float32 mono 24 kHz audio out.

Every engine runs segments (sentences) as rows of batches (`inference.batch`); rows of different
requests, with different parameters, share a batch. A row's parameters are the engine's own frozen,
hashable dataclass (`EngineSpec.params`), built in the web process from the request and read back
by the worker from the job. A single request (`SynthesisRequest`) runs on the same batch path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .spec import SAMPLE_RATE, EngineSpec

if TYPE_CHECKING:
    from .batch import BatchRow, BatchSink, Joining

# Joining segments: a short pause between sentences, with fades so the cuts do not click.
PAUSE_SECONDS = 0.12
FADE_SECONDS = 0.01


class ModelUnavailable(RuntimeError):
    """The model could not be loaded; the message says why and what to set."""


@dataclass(frozen=True)
class EngineOptions:
    """How a worker loads its engine (from the worker's settings)."""

    model_dir: str = ""  # a local directory in the engine's official layout; empty: its own download
    device: str = ""  # "" = cuda when present
    hf_cache_dir: str = ""
    fixed_length: bool = False  # benchmarks: every row runs to its budget
    precision: str = "auto"
    threads: int | None = None  # torch intra-op threads (0: auto)


@dataclass
class SynthesisRequest:
    segments: list[str]  # normalised text, already split into generations
    params: Any  # the engine's parameters (ChatTTSParams, KokoroParams)
    max_tokens: list[int] = field(default_factory=list)  # per segment (ChatTTS's token budgets)


class Engine(Protocol):
    """What the worker drives. Each engine package's `engine` module has one class with a `load`
    classmethod taking `EngineOptions`' fields and a `check_model_dir(path)` staticmethod (a clear
    message when a directory cannot hold its model, cheap: the worker calls it before loading);
    `run_rows` is `generate_batch` as an iterator of `batch.Event`s (what `synthesize` and `stream`
    consume). An engine whose spec has `recording_voices` also has `voice_from_recording(audio,
    transcript) -> dict` (the voice row's fields)."""

    spec: EngineSpec
    sample_rate: int
    model_version: str  # the weights, the code that runs them and the text preparation: part of cache keys
    random_weights: bool
    device: Any

    def read(self, segment: str, params: Any = None) -> str:
        """What the model reads for a segment as sent (numbers spelled out...), for a row of
        `params` (an engine whose reading depends on the voice or language reads them; None: as
        for its default voice); raises TextError."""

    def row_budget(self, text: str, params: Any) -> int:
        """The most units (tokens, frames) a row of `text` may generate."""

    def voice_problem(self, params: Any) -> str | None:
        """Why this model cannot use the row's voice (an embedding of another model), or None."""

    def default_max_batch(self) -> int:
        """The rows to generate together when the operator sets none (`base.BatchEngine`)."""

    def generate_batch(
        self,
        rows: list[BatchRow],
        sink: BatchSink,
        chunk_tokens: int = 24,
        more: Joining | None = None,
    ) -> None:
        """Run `rows` to their end, each row's audio and end reported to `sink` as they happen;
        `more(live)` between steps returns rows that join (continuous batching)."""

    def warm_up(self) -> None: ...

    def keep_voice_prompts(self, max_bytes: int) -> None:
        """Bound the voices' prompts the engine keeps (where it keeps any)."""

    def voice_prompt_counts(self) -> tuple[int, int] | None:
        """(prompts built so far, bytes kept now), or None where the engine keeps none."""

    def synthesize(
        self,
        request: SynthesisRequest,
        should_stop: Callable[[], bool] | None = None,
        on_segment: Callable[[int], None] | None = None,
    ) -> Iterator[np.ndarray]:
        """Yield the request's audio in order, one piece per segment (float32, mono), batching
        segments; `on_segment(n)` reports that n segments are done; `should_stop()` ends early."""

    def stream(
        self,
        request: SynthesisRequest,
        should_stop: Callable[[], bool] | None = None,
        chunk_tokens: int = 24,
        on_segment: Callable[[int], None] | None = None,
    ) -> Iterator[np.ndarray]:
        """Yield the request's audio in order as it is generated, in chunks of ~chunk_tokens."""


def fade_edges(audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    n = min(int(FADE_SECONDS * sample_rate), len(audio) // 2)
    if n == 0:
        return audio
    audio = audio.astype(np.float32, copy=True)
    ramp = np.linspace(0.0, 1.0, n, dtype=np.float32)
    audio[:n] *= ramp
    audio[-n:] *= ramp[::-1]
    return audio


def fade_in(audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    n = min(int(FADE_SECONDS * sample_rate), len(audio))
    audio = audio.astype(np.float32, copy=True)
    audio[:n] *= np.linspace(0.0, 1.0, n, dtype=np.float32)
    return audio


def fade_out(audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    n = min(int(FADE_SECONDS * sample_rate), len(audio))
    audio = audio.astype(np.float32, copy=True)
    if n:
        audio[-n:] *= np.linspace(1.0, 0.0, n, dtype=np.float32)
    return audio


def ramp_down(last_sample: float, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """A streamed segment's last chunk was sent unfaded: glide from its last sample to silence."""
    return np.linspace(last_sample, 0.0, int(FADE_SECONDS * sample_rate), dtype=np.float32)


def pause(sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    return np.zeros(int(PAUSE_SECONDS * sample_rate), dtype=np.float32)


def to_pcm16(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
