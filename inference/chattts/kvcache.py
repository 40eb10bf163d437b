"""The batch's KV cache, allocated once: a fixed number of row slots by a fixed number of columns
per layer, written in place, so that a decode step has the same shapes from one step to the next.

- Every row of the batch writes its step's key and value at the same column (`write`), which
  advances by one a step; a row's prompt is written right-aligned to it when the row joins (as the
  growing cache left-pads a joining row's prompt to the batch's length), and its attention mask
  (`valid`) says which columns it attends to: its prompt without padding, then its steps.
- The live rows hold the slots [0, rows); a row that leaves frees its slot by moving the last
  live row into it (its filled columns only), so the transformer always runs the first rows.
- When `write` reaches the last column, the columns no live row attends to (those before the
  first live row's prompt) are dropped by shifting every row left; only when there are none does
  the cache grow (a new allocation, twice as long). Rows joining grow it (slots or columns) when
  they need more than it has; never otherwise.
- Slots that hold no row (freed, or never used) still run when the transformer runs more rows
  than are live (`rows_run`): they attend to their own column only, so their values stay finite
  and a masked column never multiplies a NaN.

Two views of the same buffers for attention: the filled columns only (`lo` to `write`, where
`lo` is the first column a live row attends to: what the growing cache held) on a CPU and in eager
CUDA, or every column (`full_view`: the shapes CUDA graphs replay, the write column read from
the device) when the step is captured (`graphs`).

Imports torch and transformers at module level: reached only through the engine's methods
(worker processes), never when the web process imports `inference`.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache

COLUMNS_QUANTUM = 64  # the cache's length is a multiple of this (fewer sizes for the allocator)


def _round_up(n: int, quantum: int) -> int:
    return -(-n // quantum) * quantum


class StaticKV(Cache):
    """transformers' `Cache` interface (its attention layers call `update`) over preallocated
    slots; the loop places rows (`admit`, `release`) and runs steps (`begin_step`, `end_step`)."""

    def __init__(self, device: torch.device) -> None:
        super().__init__(layers=[])
        self.device = device
        self.keys: list[torch.Tensor] = []  # per layer (capacity, heads, length, head_dim)
        self.values: list[torch.Tensor] = []
        self.valid = torch.zeros(0, 0, dtype=torch.bool, device=device)  # (capacity, length)
        self.position = torch.zeros(0, dtype=torch.long, device=device)  # each slot's last position
        self.start: list[int] = []  # per live slot: the first column its row's prompt holds
        self.write = 0  # the column the next step writes
        self.column = torch.zeros(1, dtype=torch.long, device=device)  # `write`, for captured steps
        self.full_view = False  # attend over every column (captured steps) instead of the filled ones
        self.generation = 0  # bumped by every new allocation (captured steps hold the old addresses)
        self._dense: bool | None = None  # every live row attends to every filled column (None: unknown)
        # With no mask, transformers makes none for SDPA at one query (`get_mask_sizes`); other
        # attention implementations are always given the mask.
        self.unmasked = False

    @property
    def rows(self) -> int:
        return len(self.start)

    @property
    def capacity(self) -> int:
        return self.valid.size(0)

    @property
    def length(self) -> int:
        return self.valid.size(1)

    @property
    def lo(self) -> int:
        """The first column a live row attends to: the filled view starts there."""
        return min(self.start, default=self.write)

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self.keys, *self.values))

    # transformers' side: every attention layer writes its step and reads what it attends to.

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        keys, values = self.keys[layer_idx], self.values[layer_idx]
        n = key_states.size(0)
        if self.full_view:
            keys[:n].index_copy_(2, self.column, key_states)
            values[:n].index_copy_(2, self.column, value_states)
            return keys[:n], values[:n]
        keys[:n, :, self.write] = key_states[:, :, 0]
        values[:n, :, self.write] = value_states[:, :, 0]
        return keys[:n, :, self.lo : self.write + 1], values[:n, :, self.lo : self.write + 1]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.write

    def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
        return (self.length if self.full_view else self.write + 1 - self.lo), 0

    # The loop's side.

    def reset(self) -> None:
        """No rows: the buffers stay, for the next batch."""
        self.start, self.write, self._dense = [], 0, None

    @torch.inference_mode()
    def admit(self, prompts: Cache, mask: torch.Tensor, position: torch.Tensor, budget: int, slots: int) -> int:
        """Rows prefilled into `prompts` (transformers' cache, m rows of T columns, left-padded;
        `mask` (m, T), `position` (m, 1) their last positions) placed in the next free slots, their
        prompts ending at `write`; `budget`: the most steps any of them may run; `slots`: the
        slots the next steps may run (at least rows + m). Returns the first slot they hold."""
        m, width = mask.shape
        first = self.rows
        length = max(self.length, _round_up(width + budget, COLUMNS_QUANTUM))
        if not self.keys or slots > self.capacity or length > self.length:
            self._allocate(prompts, max(slots, self.capacity), length)
        if width > self.write:  # the batch's rows move right so that the prompts fit before `write`
            self._shift(width - self.write)
        columns = slice(self.write - width, self.write)
        layers: list[Any] = list(prompts.layers)  # DynamicLayers: `keys`, `values`
        for layer, new in enumerate(layers):
            self.keys[layer][first : first + m, :, columns] = new.keys
            self.values[layer][first : first + m, :, columns] = new.values
        self.valid[first : first + m] = False
        self.valid[first : first + m, columns] = mask.to(self.device)
        self.position[first : first + m] = position.to(self.device).view(-1)
        self.start += [self.write - width] * m
        self._dense = None
        return first

    @torch.inference_mode()
    def release(self, slot: int) -> int:
        """Free `slot`: the last live row moves into it. Returns the slot that moved (or `slot`)."""
        last = self.rows - 1
        if slot != last:
            columns = slice(self.start[last], self.write)
            for keys, values in zip(self.keys, self.values, strict=True):
                keys[slot, :, columns] = keys[last, :, columns]
                values[slot, :, columns] = values[last, :, columns]
            self.valid[slot] = self.valid[last]
            self.position[slot] = self.position[last]
            self.start[slot] = self.start[last]
        self.start.pop()
        self._dense = None
        return last

    @torch.inference_mode()
    def begin_step(self, rows_run: int) -> torch.Tensor | None:
        """Before a step of the first `rows_run` slots: room for its column (compaction, or growth),
        its column attended by every slot, positions one further. Returns the attention mask
        (rows_run, 1, 1, keys) for the view the step attends to, or None when the live rows attend
        to all of it (slots without a row then attend to their own stale, finite columns)."""
        if self.write == self.length:
            lead = self.lo
            if lead > 0:
                self._shift(-lead)
            else:
                self._allocate(None, self.capacity, 2 * self.length)
        self.valid[:, self.write] = True
        self.position[:rows_run] += 1
        if self.full_view:
            return self.valid[:rows_run, None, None, :]
        if self._dense is None:  # known again after rows joined or left: one wait for the device
            self._dense = bool(self.valid[: self.rows, self.lo : self.write].all())
        if self._dense and self.unmasked:
            return None  # every row attends to every filled column: no mask (SDPA's unmasked kernel)
        return self.valid[:rows_run, None, None, self.lo : self.write + 1].contiguous()

    def end_step(self) -> None:
        self.write += 1

    # Storage.

    def _allocate(self, like: Cache | None, capacity: int, length: int) -> None:
        """New buffers of `capacity` slots by `length` columns, the live rows' filled columns copied."""
        if self.keys:
            template = self.keys[0]
            layers, shape, dtype = len(self.keys), template.shape, template.dtype
        else:
            assert like is not None, "the first allocation takes its shapes from the prompts' cache"
            first: Any = like.layers[0]
            template = first.keys
            layers, shape, dtype = len(like.layers), template.shape, template.dtype
        full = (capacity, shape[1], length, shape[3])
        keys = [torch.zeros(full, dtype=dtype, device=self.device) for _ in range(layers)]
        values = [torch.zeros(full, dtype=dtype, device=self.device) for _ in range(layers)]
        valid = torch.zeros(capacity, length, dtype=torch.bool, device=self.device)
        position = torch.zeros(capacity, dtype=torch.long, device=self.device)
        if self.keys:
            rows, filled = self.rows, slice(0, self.write)
            for old, new in zip((*self.keys, *self.values), (*keys, *values), strict=True):
                new[:rows, :, filled] = old[:rows, :, filled]
            valid[:rows, filled] = self.valid[:rows, filled]
            position[:rows] = self.position[:rows]
        self.keys, self.values, self.valid, self.position = keys, values, valid, position
        self.generation += 1

    def _shift(self, by: int) -> None:
        """Every live row's columns `by` to the right (> 0: room on the left) or left (< 0: the
        columns no row attends to dropped); `write` and the rows' starts follow."""
        rows, lo, write = self.rows, self.lo, self.write
        source = slice(lo, write)
        target = slice(lo + by, write + by)
        for buffer in (*self.keys, *self.values):
            buffer[:rows, :, target] = buffer[:rows, :, source].clone()
        self.valid[:rows, target] = self.valid[:rows, source].clone()
        if by > 0:
            self.valid[:rows, lo : lo + by] = False
        else:
            self.valid[:, write + by :] = False
        self.start = [s + by for s in self.start]
        self.write += by
        self._dense = None
