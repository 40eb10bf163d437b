"""The audio-token loop for a batch of rows that each have their own seed and sampling settings,
over ChatTTS's GPT with a static KV cache (`kvcache`) and, on CUDA, captured steps (`graphs`).

Each row samples with its own noise and settings (`sampling`), so its tokens do not depend on its
batch companions or its place in the batch; a row that ends (its end token, its budget, or a
stop) leaves the batch at once (its slot freed), and rows that `admit` returns join it between two
steps (continuous batching). `GPTParts.static_cache=False` runs the previous loop over a cache that
grows by concatenation (`growing`), the reference for tests and benchmarks.

What stays shared is floating point: a row's logits in a batch differ from its logits alone by
rounding (padding, matrix shapes), so a token can differ only where two candidates' p / q tie to
within that rounding.

What waits for the device at every step: the end-token flags (`eos`), which the caller needs on the
host to end rows (and to decode their audio). Everything else in the step is queued on the device:
the rows' slots and columns are host bookkeeping, and the index tensors that map rows to slots are
rebuilt only when a row joins or leaves.

Imports torch at module level: it is reached only through the engine's methods (worker
processes), never when the web process imports `inference`.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Sequence

import torch

from .graphs import DecodeGraphs, bucket, uses_graphs
from .growing import generate_growing
from .kvcache import StaticKV
from .sampling import Admit, BatchState, GPTParts, RowPlan, Step, embed, forward, padded, prefill, sample

__all__ = ["GPTParts", "RowPlan", "Step", "generate"]


def _rows_run(parts: GPTParts, live: int) -> int:
    """The slots a step runs for `live` rows: a bucket for a captured step, one more for 3, 7, … rows
    on a CPU (`sampling.padded`: a free slot, whose results are dropped), else the live rows."""
    if uses_graphs(parts):
        return bucket(live)
    return len(padded(list(range(live)), parts.device_gpt.type == "cpu"))


class _Batch:
    """The static cache with the host's view of it: which row (by key) holds which slot, and the
    index tensors between the batch's order (the rows' plans) and the slots' order."""

    def __init__(self, parts: GPTParts) -> None:
        self.parts = parts
        self.model = weakref.ref(parts.llama)
        self.kv = StaticKV(parts.device_gpt)
        self.kv.full_view = uses_graphs(parts)
        self.kv.unmasked = getattr(parts.llama.config, "_attn_implementation", "") == "sdpa"
        self.graphs = DecodeGraphs() if self.kv.full_view else None
        self.slot_keys: list[str] = []
        self.to_slots = self.to_rows = torch.zeros(0, dtype=torch.long)

    @classmethod
    def take(cls, parts: GPTParts) -> _Batch:
        """The previous batch's cache and captured steps when it ran the same model the same way
        (a worker's batches: allocated and captured once, grown when a batch needs more), else new."""
        batch = _IDLE.pop() if _IDLE else None
        if batch is None or batch.model() is not parts.llama or batch.kv.full_view != uses_graphs(parts):
            return cls(parts)
        batch.parts, batch.slot_keys = parts, []
        batch.kv.reset()
        return batch

    def admit(self, emb: torch.Tensor, attention_mask: torch.Tensor, plans: Sequence[RowPlan]) -> torch.Tensor:
        """Prefill rows and place them in free slots; returns their last hidden states."""
        hidden, cache, mask, position = prefill(self.parts, emb, attention_mask)
        slots = _rows_run(self.parts, self.kv.rows + len(plans))
        self.kv.admit(cache, mask, position, max(p.max_tokens for p in plans), slots)
        self.slot_keys += [p.key for p in plans]
        return hidden

    def release(self, keys: Sequence[str]) -> None:
        slot_of = {k: s for s, k in enumerate(self.slot_keys)}
        for slot in sorted((slot_of[k] for k in keys), reverse=True):
            moved = self.kv.release(slot)
            self.slot_keys[slot] = self.slot_keys[moved]
            self.slot_keys.pop()

    def index(self, plans: Sequence[RowPlan]) -> None:
        """The rows (in the batch's order) to slots and back, after rows joined or left."""
        slot_of = {k: s for s, k in enumerate(self.slot_keys)}
        row_of = {p.key: i for i, p in enumerate(plans)}
        run = _rows_run(self.parts, len(plans))
        rows = [row_of[k] for k in self.slot_keys] + [len(plans) - 1] * (run - len(plans))  # free slots: a copy
        self.to_rows = torch.tensor([slot_of[p.key] for p in plans], device=self.parts.device)
        self.to_slots = torch.tensor(rows, device=self.parts.device)

    @torch.inference_mode()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """One decode step from the rows' tokens (n, num_vq), in the batch's order; their hidden
        states (n, hidden), in the same order."""
        parts, kv = self.parts, self.kv
        emb = embed(parts, tokens.index_select(0, self.to_slots))
        rows_run = emb.size(0)
        mask = kv.begin_step(rows_run)
        hidden = self.graphs.step(parts, kv, emb, mask) if self.graphs and not self.graphs.failed else None
        if hidden is None:
            hidden, _ = forward(parts, emb, mask, kv.position[:rows_run, None], kv)
        kv.end_step()
        return hidden.index_select(0, self.to_rows)


_IDLE: list[_Batch] = []  # the last batch, when no batch is running (one model per worker process)


def generate(
    parts: GPTParts,
    emb: torch.Tensor,
    attention_mask: torch.Tensor,
    plans: Sequence[RowPlan],
    stop: Callable[[str], bool],
    forced: dict[str, torch.Tensor] | None = None,
    admit: Admit | None = None,
) -> Iterator[Step]:
    """Run the rows from their prompts (`emb` (n, T, hidden), left-padded; `attention_mask` (n, T))
    until every row has ended; one `Step` per decode step. Torch runs in inference mode, but not
    across the yields (the mode is thread state; it must not leak into the caller).

    `admit` (continuous batching): asked before every step while rows are generating; rows it
    returns are prefilled and join the batch at that step, each from its own first token.

    `forced` (benchmarks): a row's tokens (steps, num_vq) to feed back instead of those it samples,
    so that two models can be compared step by step on the same prefix (teacher forcing)."""
    if not parts.static_cache:
        yield from generate_growing(parts, emb, attention_mask, plans, stop, forced, admit)
        return
    batch = _Batch.take(parts)
    try:
        yield from _steps(batch, emb, attention_mask, plans, stop, forced, admit)
    finally:
        _IDLE[:] = [batch]


def _steps(
    batch: _Batch,
    emb: torch.Tensor,
    attention_mask: torch.Tensor,
    plans: Sequence[RowPlan],
    stop: Callable[[str], bool],
    forced: dict[str, torch.Tensor] | None,
    admit: Admit | None,
) -> Iterator[Step]:
    parts = batch.parts
    num_vq = len(parts.emb_code)
    with torch.inference_mode():
        state = BatchState(parts, plans, num_vq)
        hidden = batch.admit(emb, attention_mask, plans)
        batch.index(state.plans)
    counts = [0] * len(plans)  # tokens each row has drawn
    while True:
        keys = [p.key for p in state.plans]
        joining = admit(len(keys)) if admit is not None else None
        if joining is not None and len(joining[2]):
            new_emb, new_attention, new_plans = joining
            with torch.inference_mode():
                hidden = torch.cat([hidden, batch.admit(new_emb, new_attention, new_plans)])
                state.extend(BatchState(parts, new_plans, num_vq))
                batch.index(state.plans)
            counts += [0] * len(new_plans)
            keys = [p.key for p in state.plans]
        tokens = sample(parts, state, hidden, num_vq)
        eos = tokens.eq(parts.eos).any(1).tolist()  # the step's one wait for the device
        stopped = [stop(k) for k in keys]
        kept = [not (e or s) for e, s in zip(eos, stopped, strict=True)]
        ended = [not k or c + 1 >= p.max_tokens for k, c, p in zip(kept, counts, state.plans, strict=True)]
        yield Step(keys=keys, tokens=tokens, hiddens=hidden, stopped=stopped, kept=kept, ended=ended)
        if all(ended):
            return
        with torch.inference_mode():
            if any(ended):
                live_rows = [i for i, e in enumerate(ended) if not e]
                index = torch.tensor(live_rows, device=parts.device)
                state.keep(index, num_vq)
                tokens = tokens.index_select(0, index)
                counts = [counts[i] for i in live_rows]
                batch.release([k for k, e in zip(keys, ended, strict=True) if e])
                batch.index(state.plans)
            if forced is not None:
                tokens = torch.stack([forced[p.key][c] for p, c in zip(state.plans, counts, strict=True)])
                tokens = tokens.to(parts.device)
            counts = [c + 1 for c in counts]
            hidden = batch.step(tokens)
