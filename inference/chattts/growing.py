"""The previous KV cache of the per-row-seeded loop, kept as the reference the static cache
(`kvcache`, `generation`) is tested and benchmarked against (`GPTParts.static_cache=False`).

The cache is transformers' DynamicCache: rows that join are prefilled into their own cache and
concatenated to the batch's (left-padded to the longer sequence), rows that leave are dropped with
`batch_select_indices`, and every step concatenates one position to every layer and to the mask, so
a step's shapes change with every step and the allocator sees a new size each time.

Imports torch at module level: it is reached only through the engine's methods (worker
processes), never when the web process imports `inference`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import torch

from .sampling import Admit, BatchState, GPTParts, RowPlan, Step, embed, forward, padded, prefill, sample


def _left_pad(t: torch.Tensor, length: int, dim: int) -> torch.Tensor:
    """`t` padded with zeros (False) on the left of `dim` to `length`: masked positions."""
    missing = length - t.size(dim)
    if missing <= 0:
        return t
    shape = list(t.shape)
    shape[dim] = missing
    return torch.cat([t.new_zeros(shape), t], dim)


@torch.inference_mode()
def _join(cache, mask, position, new_cache, new_mask, new_position):
    """One batch from two: the sequence axes left-padded to the longer one (the padding is masked
    out, so a row attends to exactly what it attended to before), the rows one after the other."""
    length = max(mask.size(1), new_mask.size(1))
    for layer, new_layer in zip(cache.layers, new_cache.layers, strict=True):
        layer.keys = torch.cat([_left_pad(layer.keys, length, 2), _left_pad(new_layer.keys, length, 2)])
        layer.values = torch.cat([_left_pad(layer.values, length, 2), _left_pad(new_layer.values, length, 2)])
    mask = torch.cat([_left_pad(mask, length, 1), _left_pad(new_mask, length, 1)])
    return cache, mask, torch.cat([position, new_position])


@torch.inference_mode()
def _trim(cache, mask: torch.Tensor) -> torch.Tensor:
    """Drop the leading positions that every row masks out (left padding of rows that have left):
    a batch that rows keep joining never ends, and its cache must not grow with its lifetime."""
    lead = int(mask.long().argmax(1).min())  # the first position any row attends to
    if lead == 0:
        return mask
    for layer in cache.layers:
        layer.keys = layer.keys[:, :, lead:].contiguous()
        layer.values = layer.values[:, :, lead:].contiguous()
    return mask[:, lead:].contiguous()


def generate_growing(
    parts: GPTParts,
    emb: torch.Tensor,
    attention_mask: torch.Tensor,
    plans: Sequence[RowPlan],
    stop: Callable[[str], bool],
    forced: dict[str, torch.Tensor] | None = None,
    admit: Admit | None = None,
) -> Iterator[Step]:
    """`generation.generate` over the growing cache (the same steps, for the same rows)."""
    num_vq = len(parts.emb_code)
    cpu = parts.device_gpt.type == "cpu"
    # The transformer's batch holds the live rows in order, then a copy if `padded` adds one.
    with torch.inference_mode():
        state = BatchState(parts, plans, num_vq)
        slots = torch.tensor(padded(list(range(len(plans))), cpu))
        emb = emb[slots.to(emb.device)]
    hidden, cache, mask, position = prefill(parts, emb, attention_mask[slots.to(attention_mask.device)])
    counts = [0] * len(plans)  # tokens each row has drawn
    while True:
        keys = [p.key for p in state.plans]
        hidden = hidden[: len(keys)]
        joining = admit(len(keys)) if admit is not None else None
        if joining is not None and len(joining[2]):
            new_emb, new_attention, new_plans = joining
            with torch.inference_mode():
                live = torch.arange(len(keys), device=parts.device_gpt)
                cache.batch_select_indices(live)  # without the padding copy, if any
                new_hidden, new_cache, new_mask, new_position = prefill(parts, new_emb, new_attention)
                cache, mask, position = _join(
                    cache, mask.index_select(0, live), position.index_select(0, live), new_cache, new_mask, new_position
                )
                state.extend(BatchState(parts, new_plans, num_vq))
                hidden = torch.cat([hidden, new_hidden])
                counts += [0] * len(new_plans)
                keys = [p.key for p in state.plans]
                gpt_index = torch.tensor(padded(list(range(len(keys))), cpu), device=parts.device_gpt)
                if len(gpt_index) > len(keys):
                    cache.batch_select_indices(gpt_index)
                    mask = mask.index_select(0, gpt_index)
                    position = position.index_select(0, gpt_index)
                mask = _trim(cache, mask)
        tokens = sample(parts, state, hidden, num_vq)
        eos = tokens.eq(parts.eos).any(1).tolist()
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
                gpt_index = torch.tensor(padded(live_rows, cpu), device=parts.device_gpt)
                cache.batch_select_indices(gpt_index)
                mask = _trim(cache, mask.index_select(0, gpt_index))
                position = position.index_select(0, gpt_index)
            if forced is not None:
                tokens = torch.stack([forced[p.key][c] for p, c in zip(state.plans, counts, strict=True)])
                tokens = tokens.to(parts.device)
            counts = [c + 1 for c in counts]
            mask = torch.cat([mask, mask.new_ones(mask.size(0), 1)], 1)
            position = position + 1
            tokens = tokens[padded(list(range(len(tokens))), cpu)]
        hidden, cache = forward(parts, embed(parts, tokens), mask, position, cache)
