"""A time-stretch that keeps the pitch, for engines with no speed control of their own (OpenAI's
`speed`, 0.25-4.0): FFmpeg's `atempo` filter through PyAV, fed chunk by chunk as a row streams (its
state carries across chunks, so the joins do not click), flushed at the row's end. `atempo` takes a
factor of 0.5 to 2 per instance for the best quality: beyond that the factor is a chain of them.
`PitchShift` (SSML's prosody pitch, on every engine) keeps the duration: the audio read at a rate
raised by the factor (higher and shorter), resampled back, and stretched to its length again."""

from __future__ import annotations

from fractions import Fraction

import av
import numpy as np


def factors(speed: float) -> list[float]:
    """`speed` as a product of factors in [0.5, 2]."""
    if not 0.25 <= speed <= 4.0:
        raise ValueError(f"speed must be 0.25 to 4.0, not {speed}")
    out = []
    while speed < 0.5:
        out.append(0.5)
        speed /= 0.5
    while speed > 2.0:
        out.append(2.0)
        speed /= 2.0
    return out + [speed]


class _Filters:
    """Mono float32 audio at `rate` Hz through a chain of FFmpeg filters: `feed` returns what is
    ready (maybe nothing: the filters work in windows of ~20 ms), `finish` the rest."""

    def __init__(self, rate: int, filters: list[tuple[str, str]]):
        self.rate = rate
        self._pts = 0
        self._graph = av.filter.Graph()
        chain = [self._graph.add_abuffer(format="flt", sample_rate=rate, layout="mono", time_base=Fraction(1, rate))]
        chain += [self._graph.add(name, args) for name, args in filters]
        chain.append(self._graph.add("abuffersink"))
        for a, b in zip(chain, chain[1:], strict=False):
            a.link_to(b)
        self._graph.configure()

    def _pull(self) -> np.ndarray:
        out = []
        while True:
            try:
                frame = self._graph.pull()
            except (BlockingIOError, av.error.EOFError):
                break
            out.append(frame.to_ndarray().reshape(-1))
        return np.concatenate(out).astype(np.float32, copy=False) if out else np.zeros(0, dtype=np.float32)

    def feed(self, samples: np.ndarray) -> np.ndarray:
        if not len(samples):
            return np.zeros(0, dtype=np.float32)
        frame = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(samples, dtype=np.float32).reshape(1, -1), format="flt", layout="mono"
        )
        frame.sample_rate, frame.pts, frame.time_base = self.rate, self._pts, Fraction(1, self.rate)
        self._pts += len(samples)
        self._graph.push(frame)
        return self._pull()

    def finish(self) -> np.ndarray:
        self._graph.push(None)
        return self._pull()


class TimeStretch(_Filters):
    """Audio at `rate` Hz played `speed` times as fast, same pitch."""

    def __init__(self, rate: int, speed: float):
        super().__init__(rate, [("atempo", f"{f:.6f}") for f in factors(speed)])


class PitchShift(_Filters):
    """Audio at `rate` Hz `semitones` higher (lower when negative), same duration."""

    def __init__(self, rate: int, semitones: float):
        if abs(semitones) > 12:
            raise ValueError(f"a pitch shift is at most 12 semitones, not {semitones}")
        factor = 2 ** (semitones / 12)
        chain = [("asetrate", str(round(rate * factor))), ("aresample", str(rate))]
        super().__init__(rate, chain + [("atempo", f"{f:.6f}") for f in factors(1 / factor)])
