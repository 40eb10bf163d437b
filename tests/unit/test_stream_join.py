"""Joining windowed decodes (inference.batch.StreamJoin) and ordering a batch's events, without a
model: a synthetic signal stands for a full decode, and each window is that signal with errors near
its edges, as a convolutional decoder without context beyond the window gives."""

from __future__ import annotations

import numpy as np

from inference.batch import Audio, Done, in_order
from inference.chattts.params import SAMPLES_PER_TOKEN
from inference.chattts.windows import CROSSFADE_SAMPLES, FADE_SAMPLES, HOLD_SAMPLES, StreamJoin, decoded_length
from inference.engine import fade_edges


def signal(tokens: int) -> np.ndarray:
    t = np.arange(decoded_length(tokens), dtype=np.float64)
    return (0.3 * np.sin(t / 37.0) + 0.2 * np.sin(t / 5.3 + 1.0)).astype(np.float32)


def window(full: np.ndarray, start: int, end: int, total: int, error: float, edge: int) -> np.ndarray:
    """Tokens [start, end) of a `total`-token row decoded alone: within `edge` samples of a window
    edge that is not the row's own, the samples are off, by up to `error` right at the edge."""
    out = full[start * SAMPLES_PER_TOKEN : decoded_length(end)].astype(np.float64)
    ramp = np.linspace(0.0, error, edge)[-len(out) :]  # a short window: the part of it nearest the edge
    if start:
        out[: len(ramp)] += ramp[::-1]
    if end < total:
        out[-len(ramp) :] -= ramp
    return out.astype(np.float32)


def stream(full: np.ndarray, total: int, chunk: int, error: float = 0.0, edge: int = 3000) -> list[np.ndarray]:
    join = StreamJoin()
    chunks = []
    for end in [*range(chunk, total, chunk), total]:
        start, end = join.next_window(end)
        chunks.append(join.push(window(full, start, end, total, error, edge), start, end, end == total))
    return chunks


def test_a_row_pushed_whole_is_exactly_fade_edges_of_its_decode():
    full = signal(40)
    join = StreamJoin()
    np.testing.assert_array_equal(join.push(full, 0, 40, final=True), fade_edges(full))


def test_windows_join_into_the_whole_decode_when_edge_errors_stay_within_the_margins():
    """The held tail (HOLD_SAMPLES) is redone by the next window, which starts CONTEXT_TOKENS back:
    errors within 3000 samples of a window edge (what the full-size decoder shows) never reach
    the output."""
    full = signal(130)
    chunks = stream(full, 130, 24, error=0.2, edge=3000)
    joined = np.concatenate(chunks)
    assert len(joined) == decoded_length(130) == 130 * SAMPLES_PER_TOKEN - SAMPLES_PER_TOKEN // 2
    np.testing.assert_allclose(joined, fade_edges(full), atol=1e-6)
    # Every chunk but the last holds back the samples the next window will redo.
    assert len(chunks[0]) == decoded_length(24) - HOLD_SAMPLES
    assert all(len(c) == 24 * SAMPLES_PER_TOKEN for c in chunks[1:-1])


def test_wider_edge_errors_are_confined_to_the_crossfades_and_make_no_step():
    full = signal(130)
    edge, error = HOLD_SAMPLES - CROSSFADE_SAMPLES // 2, 0.2
    chunks = stream(full, 130, 24, error=error, edge=edge)
    joined = np.concatenate(chunks)
    diff = np.abs(joined - fade_edges(full))
    boundaries = np.cumsum([len(c) for c in chunks])[:-1]
    for i in np.nonzero(diff > 1e-6)[0]:
        assert any(b <= i < b + CROSSFADE_SAMPLES for b in boundaries), i
    # A fading error: smaller than the error at the window edge...
    assert 0 < diff.max() < error * (edge - (HOLD_SAMPLES - CROSSFADE_SAMPLES)) / edge
    # ...and a step no larger than the signal's own plus the error's slope and the fade's.
    steps = np.abs(np.diff(joined))
    allowed = np.abs(np.diff(full)).max() + error / edge + error / CROSSFADE_SAMPLES + 1e-6
    assert steps.max() <= allowed


def test_the_row_fades_in_and_ends_at_zero():
    full = signal(60) + 0.5
    joined = np.concatenate(stream(full, 60, 8))
    ramp = np.linspace(0.0, 1.0, FADE_SAMPLES, dtype=np.float32)
    assert joined[0] == 0.0 and joined[-1] == 0.0
    np.testing.assert_allclose(joined[:FADE_SAMPLES], full[:FADE_SAMPLES] * ramp, atol=1e-6)
    np.testing.assert_allclose(joined[-FADE_SAMPLES:], full[-FADE_SAMPLES:] * ramp[::-1], atol=1e-6)


def test_small_chunks_still_give_the_whole_row():
    full = signal(30)
    for chunk in (1, 3, 7):
        joined = np.concatenate(stream(full, 30, chunk, error=0.2))
        np.testing.assert_allclose(joined, fade_edges(full), atol=1e-6)


def test_a_stopped_row_glides_from_its_last_sample_to_silence():
    full = signal(60) + 0.5
    join = StreamJoin()
    start, end = join.next_window(24)
    sent = join.push(window(full, start, end, 60, 0.0, 3000), start, end, final=False)
    ramp = join.stop()
    assert ramp[0] == sent[-1] and ramp[-1] == 0.0 and len(ramp) == FADE_SAMPLES
    assert len(StreamJoin().stop()) == 0  # nothing sent: nothing to end


def test_events_come_out_in_row_order_whatever_order_the_rows_end_in():
    a, b, c = (np.full(2, v, dtype=np.float32) for v in (1.0, 2.0, 3.0))
    events = [
        Audio("b", b),
        Audio("a", a),
        Done("c", 0, np.zeros((0, 4))),
        Audio("b", b),
        Done("b", 2, np.zeros((2, 4))),
        Audio("a", a),
        Done("a", 2, np.zeros((2, 4))),
    ]
    out = [(i, None if s is None else float(s[0])) for i, s in in_order(events, ["a", "b", "c"])]
    assert out == [(0, 1.0), (0, 1.0), (0, None), (1, 2.0), (1, 2.0), (1, None), (2, None)]
