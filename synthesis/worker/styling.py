"""A job's SSML styles on the worker: each segment's own row parameters (another voice, rate or
language), the silence before and after it, its volume and pitch (applied to its audio as it
comes), and the time of each of its marks in the audio as sent.

A mark at a segment's edge is exact (its first or last sample); inside a segment it is the start
of the first word after it where the engine gives word timings (Kokoro), else a time between the
segment's start and end in proportion to the characters before it, marked approximate.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from inference.engine import PAUSE_SECONDS
from inference.text.preparation import TextError
from inference.text.ssml_text import SegmentStyle
from synthesis.audio.captions import Mark, Word


class Styling:
    def __init__(self, job, engine, params: Any):
        self.engine = engine
        self.rate = engine.spec.sample_rate
        self.styles = [SegmentStyle.from_dict(d) for d in job.styles] if job.styles else []
        self.params = [engine.spec.params(**d["params"]) if "params" in d else params for d in (job.styles or ())] or [
            params
        ] * len(job.segments)
        self._pitch: dict[int, Any] = {}

    def style(self, segment: int) -> SegmentStyle | None:
        return self.styles[segment] if self.styles else None

    def gap(self, segment: int, continued: bool, before: float = 0.0) -> np.ndarray:
        """The silence before a segment: its break's, else the pause between sentences (none within one).
        `before`: seconds of silence already at the end of the audio before it (after its last word,
        where the engine gives word timings): an SSML break is the pause between the words, so that
        much less of it is added."""
        style = self.style(segment)
        if style is not None and style.pause_ms is not None:
            seconds = max(0.0, style.pause_ms / 1000 - before)
        else:
            seconds = PAUSE_SECONDS if segment and not continued else 0.0
        return np.zeros(int(seconds * self.rate), dtype=np.float32)

    def tail(self, before: float = 0.0) -> np.ndarray:
        """The silence after the last segment: an SSML break at the end, less the `before` seconds of
        silence already after its last word (as `gap`)."""
        style = self.style(len(self.styles) - 1) if self.styles else None
        seconds = max(0.0, style.after_ms / 1000 - before) if style is not None and style.after_ms else 0.0
        return np.zeros(int(seconds * self.rate), dtype=np.float32)

    def shape(self, segment: int, samples: np.ndarray, last: bool = False) -> np.ndarray:
        """A segment's audio with its pitch and volume (`last`: its row ended, the filter's rest out)."""
        style = self.style(segment)
        if style is None:
            return samples
        if style.pitch:
            if segment not in self._pitch:
                from inference.stretch import PitchShift  # noqa: PLC0415  (PyAV filters: only where asked)

                self._pitch[segment] = PitchShift(self.rate, style.pitch)
            shifter = self._pitch[segment]
            samples = shifter.feed(samples) if len(samples) else samples
            if last:
                samples = np.concatenate([samples, shifter.finish()])
                del self._pitch[segment]
        if style.volume_db:
            samples = samples * np.float32(10 ** (style.volume_db / 20))
        return samples

    def marks(
        self, segment: int, text: str, read: str, start: float, end: float, words: tuple[Word, ...] | None
    ) -> tuple[Mark, ...]:
        style = self.style(segment)
        if style is None or not style.marks:
            return ()
        out = []
        for name, offset, ms in style.marks:
            if offset < 0:  # after the last words, that far into the closing break (from the last word's end)
                out.append(Mark(name, round((words[-1].end if words else end) + ms / 1000, 3)))
                continue
            if offset == 0 and ms:  # in the break before the words, that far before them
                out.append(Mark(name, round(start - ms / 1000, 3)))
                continue
            time, approximate = self._time(text, read, offset, start, end, words, self.params[segment])
            out.append(Mark(name, round(time, 3), approximate))
        return tuple(out)

    def _time(
        self, text: str, read: str, offset: int, start: float, end: float, words: tuple[Word, ...] | None, params: Any
    ) -> tuple[float, bool]:
        if offset <= 0 or not text[:offset].strip():
            return start, False
        if offset >= len(text.rstrip()) or not any(ch.isalnum() for ch in text[offset:]):
            return end, False
        if not words:
            return start + (end - start) * offset / len(text), True
        try:
            before = self.engine.read(text[:offset], params)
        except TextError:
            before = ""
        cut = len(before) if read.startswith(before) else round(len(read) * offset / len(text))
        cursor = 0
        for word in words:
            at = read.find(word.text, cursor)
            if at < 0:
                continue
            if at >= cut:
                return word.start, False
            cursor = at + len(word.text)
        return end, False
