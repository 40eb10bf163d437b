"""A single request on the batch path: its segments become rows, its audio comes out in order.

`synthesize` runs up to MAX_BATCH segments as rows of one batch and decodes each once, whole, when
it ends; `stream` runs the first segment alone (its first chunk comes soonest) and the others in
batches of MAX_BATCH, a later segment's chunks held until the segments before it are done. Both
put a pause between segments, report `on_segment(n)` when n segments are done, and end early when
`should_stop()` says so. No torch here: the engine's `run_rows` does the work, in any engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

import numpy as np

from .batch import BatchRow, Event, in_order
from .engine import SynthesisRequest, pause
from .spec import SAMPLE_RATE

MAX_BATCH = 4  # a request's segments per batch

RunRows = Callable[[list[BatchRow], Callable[[str], bool], int], Iterator[Event]]
Budget = Callable[[str], int]  # a segment's most units (the engine's `row_budget`)


class _Stop:
    """A request's `should_stop` as a batch's per-row stop check; remembers that it fired."""

    def __init__(self, should_stop: Callable[[], bool] | None) -> None:
        self.should_stop = should_stop
        self.stopped = False

    def __call__(self, key: str = "") -> bool:
        if not self.stopped and self.should_stop is not None and self.should_stop():
            self.stopped = True
        return self.stopped


def request_rows(request: SynthesisRequest, budget: Budget) -> list[BatchRow]:
    """The request's segments as rows keyed by their index, each with its own budget."""
    budgets = request.max_tokens or [budget(s) for s in request.segments]
    return [
        BatchRow(key=str(i), text=text, params=request.params, max_tokens=budget)
        for i, (text, budget) in enumerate(zip(request.segments, budgets, strict=True))
    ]


def synthesize(
    run_rows: RunRows,
    budget: Budget,
    request: SynthesisRequest,
    should_stop: Callable[[], bool] | None = None,
    on_segment: Callable[[int], None] | None = None,
    sample_rate: int = SAMPLE_RATE,
) -> Iterator[np.ndarray]:
    rows = request_rows(request, budget)
    stop = _Stop(should_stop)
    for start in range(0, len(rows), MAX_BATCH):
        group = rows[start : start + MAX_BATCH]
        if stop():
            return
        whole = max(r.max_tokens for r in group) or 1  # no chunk before a row's end
        pieces: list[np.ndarray] = []
        for i, samples in in_order(run_rows(group, stop, whole), [r.key for r in group]):
            if stop.stopped:
                return
            if samples is not None:
                pieces.append(samples)
                continue
            if start + i:
                yield pause(sample_rate)
            yield np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.float32)
            pieces = []
            if on_segment is not None:
                on_segment(start + i + 1)


def stream(
    run_rows: RunRows,
    budget: Budget,
    request: SynthesisRequest,
    should_stop: Callable[[], bool] | None = None,
    chunk_tokens: int = 24,
    on_segment: Callable[[int], None] | None = None,
    sample_rate: int = SAMPLE_RATE,
) -> Iterator[np.ndarray]:
    rows = request_rows(request, budget)
    rows[:1] = [replace(row, early=True) for row in rows[:1]]  # its first audio is awaited
    stop = _Stop(should_stop)
    groups = [(0, rows[:1])] + [(s, rows[s : s + MAX_BATCH]) for s in range(1, len(rows), MAX_BATCH)]
    for start, group in groups:
        if not group or stop():
            return
        opened = 0  # the last segment a pause was sent for
        for i, samples in in_order(run_rows(group, stop, chunk_tokens), [r.key for r in group]):
            if stop.stopped:
                return
            index = start + i
            if index > opened:
                opened = index
                yield pause(sample_rate)
            if samples is not None:
                yield samples
            elif on_segment is not None:
                on_segment(index + 1)
