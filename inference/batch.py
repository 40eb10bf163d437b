"""The cross-request batch interface: rows in, each row's audio out through a sink as it is made.

A row is one normalised segment with its own voice, seed, settings and budget; rows from different
requests share one batch. An engine's `generate_batch` runs a batch to its end and reports each row
to a `BatchSink`: its audio in order, as it is made (ChatTTS: every `chunk_tokens` tokens; Kokoro:
the sentence whole), then `done` the moment that row ends, whatever the other rows do. This module
needs no torch (the web process may import it).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class Word:
    """A word of a row and when it is spoken, in seconds from the row's first sample."""

    text: str
    start: float
    end: float

    def as_dict(self) -> dict:
        return {"text": self.text, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class BatchRow:
    key: str  # the caller's id for this row
    text: str  # one normalised segment
    params: Any  # the engine's (ChatTTSParams, KokoroParams)
    max_tokens: int  # this row's token budget
    # Its first audio is awaited (a live request's first segment): an engine that makes a row whole
    # sends it in parts as it decodes them (Kokoro: in windows).
    early: bool = False
    # When its listener runs out of the audio made before it (time.monotonic()), for a live request's
    # later segment; None: nobody waits on it yet. An engine makes the earliest first where it can.
    deadline: float | None = None


class Joining(Protocol):
    """Rows that join a running batch (continuous batching), asked between steps with the number of
    rows still generating: any that wait, as far as there is room; with `urgent`, only live requests'
    first segments (someone waits for their first audio: an engine may start them at once)."""

    def __call__(self, live: int, urgent: bool = False) -> list[BatchRow]: ...


class BatchSink(Protocol):
    def audio(self, key: str, samples: np.ndarray) -> None:
        """A float32 chunk of the row's audio, in order, as it is decoded."""

    def done(self, key: str, tokens: int, words: Sequence[Word] = ()) -> None:
        """The row ended (end token, budget or stop) after `tokens` units; `words`: its word
        timings, where the engine knows them."""

    def stop_requested(self, key: str) -> bool:
        """Checked at every decode step: True ends that row; the others go on."""


@dataclass(frozen=True)
class Audio:
    key: str
    samples: np.ndarray


@dataclass(frozen=True)
class Done:
    key: str
    tokens: int
    ids: np.ndarray  # the row's generated units (ChatTTS: (tokens, num_vq) audio tokens), for tests
    words: tuple[Word, ...] = ()


Event = Audio | Done


def in_order(events: Iterable[Event], keys: Sequence[str]) -> Iterator[tuple[int, np.ndarray | None]]:
    """A batch's events as (row index, chunk) in the order of `keys`: a later row's chunks wait
    until every row before it is done; (index, None) says that row is done."""
    index = {k: i for i, k in enumerate(keys)}
    held: dict[int, list[np.ndarray]] = {}
    done: set[int] = set()
    playing = 0
    for event in events:
        i = index[event.key]
        if isinstance(event, Audio):
            if i == playing:
                yield i, event.samples
            else:
                held.setdefault(i, []).append(event.samples)
            continue
        done.add(i)
        while playing in done:
            yield playing, None
            playing += 1
            for samples in held.pop(playing, []):
                yield playing, samples
