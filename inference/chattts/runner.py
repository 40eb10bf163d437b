"""One batch from its prompts to each row's audio: generation steps, windowed decodes, events.

Every `chunk_tokens` tokens of a row, and when it ends, the row's new tokens are decoded with
CONTEXT_TOKENS of left context (`windows.StreamJoin` says which window) and joined to what the row has
sent. Rows that reach a window in the same step with the same window are decoded in one call (rows
start together, so chunk windows line up). A row that ends is decoded, reported and dropped at once.

Under load a step of n rows costs more than a step of one (1.5-1.8x at 4 rows on a 2-core CPU), so
a row's first chunk would come later than a lone row's. While more than one row generates, a row's
first window is therefore decoded after LOADED_FIRST_CHUNK_TOKENS tokens instead of `chunk_tokens`
(when that is fewer); its next windows keep the batch's rhythm (every `chunk_tokens` tokens). The
rule counts tokens, not time: the same batch gives the same windows, and the same audio, every run.

Imports torch at module level: it is reached only through `engine`'s methods (worker
processes), never when the web process imports `inference`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from ..batch import Audio, Done, Event
from .generation import GPTParts, RowPlan, generate
from .windows import HOLD_SAMPLES, StreamJoin

# Between steps, given the number of rows generating: rows to join the batch (prompt embeddings,
# attention mask, plans, use_decoder per row), or None.
Admit = Callable[[int], "tuple[torch.Tensor, torch.Tensor, Sequence[RowPlan], Sequence[bool]] | None"]

# Decodes features (rows, channels, tokens) with the Decoder (True: hidden states) or the DVAE
# (False: token ids) and the vocoder: float32 audio (rows, samples).
Decode = Callable[[torch.Tensor, bool], np.ndarray]

# 16 tokens decode to 8192 samples, of which the last HOLD_SAMPLES wait for the next window: the
# first 0.16 s are sent (24, the default chunk, send 0.33 s).
LOADED_FIRST_CHUNK_TOKENS = 16
assert LOADED_FIRST_CHUNK_TOKENS * 512 > HOLD_SAMPLES


class _Ledger:
    """Every live row's tokens and hidden states in two device tensors (slot, token, ·), written for
    all rows of a step at once: one indexed write each, not two small copies a row (on a GPU those
    were ~130 copies a step at 64 rows, most of the host's time beside the captured step). A row
    takes a slot when it joins and frees it when it ends; the tensors grow (rows, tokens) when a
    joining row needs more and never shrink during a run."""

    def __init__(self) -> None:
        self.ids: torch.Tensor | None = None  # (slots, max_tokens, num_vq)
        self.hiddens: torch.Tensor | None = None  # (slots, max_tokens, hidden)
        self.free: list[int] = []
        self.slots = 0
        self.length = 0

    def place(self, max_tokens: int) -> int:
        """A slot for a row of at most `max_tokens` tokens (storage is made at the first write)."""
        if max_tokens > self.length:
            self.length = max(max_tokens, self.length * 2)
            self._grow()
        if not self.free:
            more = self.slots * 2 or 1
            self.free = list(range(more - 1, self.slots - 1, -1))  # the lowest first
            self.slots = more
            self._grow()
        return self.free.pop()

    def release(self, slot: int) -> None:
        self.free.append(slot)

    def _grow(self) -> None:
        for name in ("ids", "hiddens"):
            old = getattr(self, name)
            if old is not None and (old.size(0) < self.slots or old.size(1) < self.length):
                new = old.new_zeros(self.slots, self.length, old.size(2))
                new[: old.size(0), : old.size(1)] = old
                setattr(self, name, new)

    def write(self, slots: list[int], positions: list[int], ids: torch.Tensor, hiddens: torch.Tensor | None) -> None:
        """Row i of the step (`ids[i]`, `hiddens[i]`) at token `positions[i]` of slot `slots[i]`."""
        if self.ids is None:
            self.ids = ids.new_zeros(self.slots, self.length, ids.size(1))
        if hiddens is not None and self.hiddens is None:
            self.hiddens = hiddens.new_zeros(self.slots, self.length, hiddens.size(1))
        index = torch.tensor([slots, positions], device=ids.device)
        self.ids.index_put_((index[0], index[1]), ids)
        if hiddens is not None:
            assert self.hiddens is not None
            self.hiddens.index_put_((index[0], index[1]), hiddens)


@dataclass
class _Row:
    key: str
    max_tokens: int
    use_decoder: bool
    ledger: _Ledger
    join: StreamJoin = field(default_factory=StreamJoin)
    slot: int = -1
    tokens: int = 0

    def __post_init__(self) -> None:
        self.slot = self.ledger.place(self.max_tokens)

    def window(self, start: int, end: int) -> torch.Tensor:
        """What the decoder decodes for tokens [start, end): hidden states or token ids."""
        features = self.ledger.hiddens if self.use_decoder else self.ledger.ids
        assert features is not None, "a row with no tokens has nothing to decode"
        return features[self.slot, start:end]

    def token_ids(self) -> np.ndarray:
        if self.ledger.ids is None or not self.tokens:
            return np.zeros((0, 0), dtype=np.int64)
        return self.ledger.ids[self.slot, : self.tokens].cpu().numpy()


def _decode_windows(rows: list[tuple[_Row, bool]], decode: Decode) -> list[Audio]:
    """Decode each row's next window (final: the last one), grouping equal windows in one call."""
    groups: dict[tuple[bool, int, int], list[tuple[_Row, bool]]] = {}
    for row, final in rows:
        if row.tokens:
            start, end = row.join.next_window(row.tokens)
            groups.setdefault((row.use_decoder, start, end), []).append((row, final))
    events = []
    for (use_decoder, start, end), members in groups.items():
        with torch.inference_mode():
            features = torch.stack([r.window(start, end) for r, _ in members]).transpose(1, 2).contiguous()
            audio = decode(features, use_decoder)
        for (row, final), samples in zip(members, audio, strict=True):
            chunk = row.join.push(samples, start, end, final)
            if len(chunk):
                events.append(Audio(row.key, chunk))
    order = {row.key: i for i, (row, _) in enumerate(rows)}
    return sorted(events, key=lambda e: order[e.key])


def run(
    parts: GPTParts,
    decode: Decode,
    emb: torch.Tensor,
    attention_mask: torch.Tensor,
    plans: Sequence[RowPlan],
    use_decoder: Sequence[bool],
    chunk_tokens: int,
    stop: Callable[[str], bool],
    admit: Admit | None = None,
) -> Iterator[Event]:
    """The rows' audio chunks and ends, as they happen (each row's events in order). `admit`:
    rows joining while the batch runs (as `generation.generate`, each with its `use_decoder`)."""
    ledger = _Ledger()
    rows = {
        p.key: _Row(p.key, p.max_tokens, u, ledger) for p, u in zip(plans, use_decoder, strict=True) if p.max_tokens > 0
    }

    def joining(live: int):
        new = admit(live) if admit is not None else None
        if new is None:
            return None
        new_emb, new_mask, new_plans, new_use_decoder = new
        for p, u in zip(new_plans, new_use_decoder, strict=True):
            rows[p.key] = _Row(p.key, max(p.max_tokens, 1), u, ledger)
        return new_emb, new_mask, new_plans

    for p in plans:
        if p.max_tokens <= 0:
            yield Done(p.key, 0, np.zeros((0, 0), dtype=np.int64))
    live = [p for p in plans if p.max_tokens > 0]
    if not live:
        return
    keep = [i for i, p in enumerate(plans) if p.max_tokens > 0]
    if len(keep) < len(plans):
        with torch.inference_mode():
            emb, attention_mask = emb[keep], attention_mask[keep]
    for step in generate(parts, emb, attention_mask, live, stop, admit=joining if admit is not None else None):
        windows: list[tuple[_Row, bool]] = []
        stopped: list[_Row] = []
        loaded = len(step.keys) > 1
        with torch.inference_mode():
            written = [i for i, kept in enumerate(step.kept) if kept]
            if written:
                step_rows = [rows[step.keys[i]] for i in written]
                everyone = len(written) == len(step.keys)
                pick = None if everyone else torch.tensor(written, device=step.tokens.device)
                ids = step.tokens if pick is None else step.tokens.index_select(0, pick)
                hiddens = None
                if any(r.use_decoder for r in step_rows):
                    hiddens = step.hiddens if pick is None else step.hiddens.index_select(0, pick)
                ledger.write([r.slot for r in step_rows], [r.tokens for r in step_rows], ids, hiddens)
                for row in step_rows:
                    row.tokens += 1
            for i, key in enumerate(step.keys):
                row = rows[key]
                early = loaded and row.tokens == LOADED_FIRST_CHUNK_TOKENS and not row.join.decoded_to
                if step.stopped[i]:
                    stopped.append(row)
                elif step.ended[i] or row.tokens % chunk_tokens == 0 or early:
                    windows.append((row, step.ended[i]))
        yield from _decode_windows(windows, decode)
        for row in stopped:
            ramp = row.join.stop()
            if len(ramp):
                yield Audio(row.key, ramp)
        for i, key in enumerate(step.keys):
            if step.ended[i]:
                yield Done(key, rows[key].tokens, rows[key].token_ids())
                ledger.release(rows.pop(key).slot)  # its slot serves the next row to join
