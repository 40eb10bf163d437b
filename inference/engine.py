"""The engine interface the worker drives: a request in, float32 mono 24 kHz audio out.

A request is a list of segments. The ChatTTS engine runs segments as rows of left-padded batches
(`inference.batch`), and rows of different requests, with different parameters, may share a batch.
`SynthesisParams` is frozen and hashable.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .text import SAMPLE_RATE

# Joining segments: a short pause between sentences, with fades so the cuts do not click.
PAUSE_SECONDS = 0.12
FADE_SECONDS = 0.01


class ModelUnavailable(RuntimeError):
    """The model could not be loaded; the message says why and what to set."""


@dataclass(frozen=True)
class SynthesisParams:
    voice_seed: int  # the named voice's speaker seed
    seed: int  # sampling seed: same text + voice + seed gives the same audio
    temperature: float = 0.3
    top_p: float = 0.7
    top_k: int = 20
    speed: int = 5  # ChatTTS [speed_N], 0..9
    refine_text: bool = False
    refine_prompt: str = ""
    use_decoder: bool = True
    speaker: str = ""  # a ChatTTS speaker embedding string (an organization's voice); else voice_seed's
    sample: str = ""  # a recording's codes (ChatTTS `spk_smp`): the voice is the recording's speaker
    sample_text: str = ""  # what the recording says, spelled out (ChatTTS `txt_smp`)


@dataclass
class SynthesisRequest:
    segments: list[str]  # normalised text, already split into generations
    params: SynthesisParams
    max_tokens: list[int] = field(default_factory=list)  # per segment


class Engine(Protocol):
    sample_rate: int
    model_version: str

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


def ramp_down(last_sample: float, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """A streamed segment's last chunk was sent unfaded: glide from its last sample to silence."""
    return np.linspace(last_sample, 0.0, int(FADE_SECONDS * sample_rate), dtype=np.float32)


def pause(sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    return np.zeros(int(PAUSE_SECONDS * sample_rate), dtype=np.float32)


def to_pcm16(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1.0, 1.0) * 32767).astype("<i2").tobytes()
