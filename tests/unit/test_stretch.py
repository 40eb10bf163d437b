"""The time-stretch for engines with no speed control (`inference.stretch`): the length scales by
1/speed, the pitch stays (a sine keeps its frequency), fed in uneven chunks as a row streams."""

from __future__ import annotations

import numpy as np
import pytest

from inference.stretch import TimeStretch, factors

RATE = 48000


def sine(seconds: float = 1.0, hz: float = 440.0) -> np.ndarray:
    return (0.5 * np.sin(2 * np.pi * hz * np.arange(round(seconds * RATE)) / RATE)).astype(np.float32)


def peak_hz(samples: np.ndarray) -> float:
    spectrum = np.abs(np.fft.rfft(samples * np.hanning(len(samples))))
    return np.argmax(spectrum) * RATE / len(samples)


@pytest.mark.parametrize("speed", [0.25, 0.5, 0.8, 1.5, 2.0, 4.0])
def test_the_length_scales_and_the_pitch_stays(speed):
    stretch, source, out, pos = TimeStretch(RATE, speed), sine(), [], 0
    for size in (7680, 100, 3333, 7680, 1, 20000, 99999):  # as a row's chunks come
        out.append(stretch.feed(source[pos : pos + size]))
        pos += size
    out.append(stretch.finish())
    audio = np.concatenate(out)
    assert len(audio) == pytest.approx(len(source) / speed, rel=0.02)
    assert abs(peak_hz(audio) - 440) <= 440 * 0.01
    assert np.abs(audio).max() == pytest.approx(0.5, abs=0.1)


def test_speeds_beyond_one_filters_range_are_chains_and_bad_ones_refused():
    assert factors(1.5) == [1.5] and factors(4.0) == [2.0, 2.0] and factors(0.25) == [0.5, 0.5]
    assert np.prod(factors(3.1)) == pytest.approx(3.1)
    with pytest.raises(ValueError, match="0.25 to 4.0"):
        factors(5.0)
