"""Windowed decoding of ChatTTS rows: each chunk decodes a window of the new tokens plus some tokens
of left context, never the whole prefix again. The decoders are convolutional, so a window's last
samples lack right context and are provisional: `StreamJoin` holds them back, and the next window
replaces them with a short crossfade. No torch here.
"""

from __future__ import annotations

import numpy as np

from ..engine import FADE_SECONDS
from ..spec import SAMPLE_RATE
from .params import SAMPLES_PER_TOKEN

# Windowed decoding. Measured on the full-size checkpoint (bench/engine_batch.py prints it): a
# window's samples differ from a decode of the whole row by more than 1e-5 of its peak only within
# ~3100 samples of either window edge. Held-back samples are the ones within HOLD_SAMPLES of a
# window's end; a window starts CONTEXT_TOKENS before the previous window's end, which puts the
# first sample it contributes 3840 samples past its own left edge.
CONTEXT_TOKENS = 16
HOLD_SAMPLES = 4096
CROSSFADE_SAMPLES = 1024
FADE_SAMPLES = int(FADE_SECONDS * SAMPLE_RATE)
# The vocoder's centred ISTFT gives 512 samples a token less half a hop at the end of a decode.
DECODE_TAIL = SAMPLES_PER_TOKEN // 2


def decoded_length(tokens: int) -> int:
    """Samples that decoding `tokens` tokens at once gives."""
    return max(0, tokens * SAMPLES_PER_TOKEN - DECODE_TAIL)


class StreamJoin:
    """One row's audio, assembled from window decodes and sent in order without clicks.

    `push(audio, start, end, final)` takes the decode of tokens [start, end), whose sample 0 is
    absolute sample start * 512, and returns the samples that are now final. All but the last
    HOLD_SAMPLES are final; the next window's samples replace the held ones, crossfading over
    CROSSFADE_SAMPLES from the held (right-edge) version to the new one. The row fades in over its
    first FADE_SAMPLES; its final push fades the end out, so the last sample is 0. Pushing the whole
    row at once gives exactly `engine.fade_edges` of its decode.
    """

    def __init__(self) -> None:
        self.sent = 0  # absolute samples returned so far
        self.decoded_to = 0  # tokens covered by the windows so far
        self.tail = np.zeros(0, dtype=np.float32)  # held samples [sent, sent + len(tail))
        self.last = 0.0  # the last sample returned

    def next_window(self, end: int) -> tuple[int, int]:
        """The tokens to decode now that the row has `end` tokens: the new ones and their context."""
        start = max(0, min(self.decoded_to - CONTEXT_TOKENS, self.sent // SAMPLES_PER_TOKEN))
        return start, end

    def push(self, audio: np.ndarray, start: int, end: int, final: bool) -> np.ndarray:
        offset = start * SAMPLES_PER_TOKEN
        if offset > self.sent:
            raise ValueError(f"window starts at sample {offset}, after the {self.sent} already sent")
        audio = np.asarray(audio, dtype=np.float32).reshape(-1)
        stop = offset + len(audio)
        cut = stop if final else max(self.sent, stop - HOLD_SAMPLES)
        new = audio[self.sent - offset : cut - offset].copy()
        # A joint with audio already sent: glide from the held version to the new one. (Before
        # anything is sent a window may be shorter than the hold; its tail is not worth keeping.)
        n = min(CROSSFADE_SAMPLES, len(self.tail), len(new)) if self.sent else 0
        if n:
            w = np.linspace(0.0, 1.0, n + 2, dtype=np.float32)[1:-1]  # strictly between the two
            new[:n] = self.tail[:n] * (1.0 - w) + new[:n] * w
        if final and self.sent == 0:
            fade = min(FADE_SAMPLES, len(new) // 2)  # fade_edges' rule for a short row
        else:
            fade = FADE_SAMPLES
        if self.sent < fade:  # the row's start: fade in
            ramp = np.linspace(0.0, 1.0, fade, dtype=np.float32)[self.sent : min(cut, fade)]
            new[: len(ramp)] *= ramp
        if final and len(new):
            k = min(fade, len(new))
            new[-k:] *= np.linspace(0.0, 1.0, fade, dtype=np.float32)[::-1][-k:]
        self.tail = audio[cut - offset :].copy()
        self.sent = cut
        self.decoded_to = end
        if len(new):
            self.last = float(new[-1])
        return new

    def stop(self) -> np.ndarray:
        """The row was stopped: glide from the last sample sent to silence (nothing if none)."""
        self.tail = np.zeros(0, dtype=np.float32)
        if self.sent == 0 or self.last == 0.0:
            return np.zeros(0, dtype=np.float32)
        ramp = np.linspace(self.last, 0.0, FADE_SAMPLES, dtype=np.float32)
        self.last = 0.0
        return ramp
