"""The audio-token loop for a batch of rows that each have their own seed and sampling settings.

ChatTTS's `GPT.generate` samples a whole batch with one temperature/top-p/top-k and one generator
that it re-seeds with the one seed at every step, so a row's tokens depend on its batch companions
and on its place in the batch. This loop is a copy of that loop over the same GPT forward and KV
cache, with the sampling step made per row:

- each row's sampling noise comes from its own generator seeded with its own seed. ChatTTS
  re-seeds before every draw, and `torch.multinomial` draws one sample as argmax(p / q) with
  q ~ Exp(1) from the generator, so its noise is the same q at every step: here q is drawn once
  per row, and a row alone gives the same tokens as `Chat.infer` with that seed;
- temperature, top-p, top-k and the end-token floor (min tokens) are per row; the repetition
  penalty looks at the row's own last 16 tokens, as ChatTTS's does;
- a row that ends (its end token, its budget, or a stop) leaves the batch and the KV cache at
  once, and the others go on in a smaller batch.

What stays shared is floating point: a row's logits in a batch differ from its logits alone by
rounding (padding, matrix shapes), so a token can differ only where two candidates' p / q tie to
within that rounding.

Imports torch at module level: it is reached only through the engine's methods (worker
processes), never when the web process imports `inference`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

REPETITION_PENALTY = 1.05  # ChatTTS's InferCodeParams default
REPETITION_WINDOW = 16  # tokens the penalty looks back (ChatTTS's past_window)
MIN_TOKENS_TO_KEEP = 3  # top-p and top-k never keep fewer (ChatTTS's warpers)


@dataclass(frozen=True)
class RowPlan:
    key: str
    seed: int
    temperature: float
    top_p: float
    top_k: int
    max_tokens: int
    min_tokens: int = 0  # the end token is masked until the row has this many (fixed-length runs)


@dataclass(frozen=True)
class GPTParts:
    """The pieces of ChatTTS's GPT the loop runs; `engine` builds them from a loaded Chat."""

    llama: torch.nn.Module  # transformers LlamaModel without its token embedding
    emb_code: Sequence[Callable[[torch.Tensor], torch.Tensor]]  # per codebook: ids -> embedding
    heads: torch.Tensor  # (num_vq * vocab, hidden): every codebook's head weight, weight norm applied
    num_audio_tokens: int  # the last one is the end token
    device: torch.device  # embeddings, heads and sampling
    device_gpt: torch.device  # the transformer
    dtype: torch.dtype  # the transformer's activations (float32, bfloat16)
    # What the transformer calls its KV cache: `cache` from transformers 5.2x (which still takes
    # `past_key_values`, with a warning, until 5.40), `past_key_values` before (5.17 and earlier).
    cache_name: str = "cache"

    @property
    def eos(self) -> int:
        return self.num_audio_tokens - 1


@dataclass
class Step:
    """One decode step: `keys[i]` sampled `tokens[i]` from `hiddens[i]` (the Decoder's input)."""

    keys: list[str]
    tokens: torch.Tensor  # (n, num_vq)
    hiddens: torch.Tensor  # (n, hidden), float32
    stopped: list[bool]  # the row was stopped: this step's token is not its
    kept: list[bool]  # the token belongs to the row (not its end token, not stopped)
    ended: list[bool]  # the row ends with this step (end token, budget or stop)


def sample_noise(seed: int, num_vq: int, vocab: int, device: torch.device) -> torch.Tensor:
    """The row's Exp(1) noise: what `torch.multinomial(p, 1, generator=g.manual_seed(seed))` draws."""
    generator = torch.Generator(device=device).manual_seed(seed)
    return torch.empty(num_vq, vocab, device=device).exponential_(1, generator=generator)


def warp(logits: torch.Tensor, top_p: torch.Tensor, top_k: torch.Tensor) -> torch.Tensor:
    """Top-p then top-k with per-row settings, as transformers' warpers compute them one value at a
    time (`top_p` holds 1 - top_p, `top_k` the effective k, one row each)."""
    sorted_logits, sorted_indices = torch.sort(logits, descending=False)
    cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    remove = cumulative <= top_p
    remove[..., -MIN_TOKENS_TO_KEEP:] = False
    logits = logits.masked_fill(remove.scatter(1, sorted_indices, remove), -float("inf"))
    kth = torch.sort(logits, descending=True).values.gather(1, top_k - 1)
    return logits.masked_fill(logits < kth, -float("inf"))


def penalise(logits: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
    """ChatTTS's repetition penalty; `history` holds each (row, codebook)'s last tokens (at most
    REPETITION_WINDOW of them; a row that joined later has fewer, padded on the left with the
    value `logits.size(1)`, which counts for no token)."""
    if history.size(1) == 0:
        return logits
    freq = F.one_hot(history, logits.size(1) + 1).sum(1)[:, :-1]
    alpha = torch.pow(REPETITION_PENALTY, freq)
    return torch.where(logits < 0, logits.multiply(alpha), logits.divide(alpha))


class BatchState:
    """The per-row tensors of the rows still generating, kept in the batch's order."""

    def __init__(self, parts: GPTParts, plans: Sequence[RowPlan], num_vq: int) -> None:
        dev = parts.device
        self.plans = list(plans)
        vocab = parts.num_audio_tokens
        self.noise = torch.cat([sample_noise(p.seed, num_vq, vocab, dev) for p in plans])

        # Per (row, codebook) columns, as the logits are laid out.
        def column(values: list, dtype: torch.dtype) -> torch.Tensor:
            return torch.tensor(values, dtype=dtype, device=dev).repeat_interleave(num_vq).unsqueeze(1)

        self.temperature = column([p.temperature for p in plans], torch.float32)
        self.top_p = column([1 - p.top_p for p in plans], torch.float32)
        self.top_k = column([min(max(p.top_k, MIN_TOKENS_TO_KEEP), vocab) for p in plans], torch.long)
        self.min_tokens = torch.tensor([p.min_tokens for p in plans], device=dev).repeat_interleave(num_vq)
        self.steps = torch.zeros(len(plans) * num_vq, dtype=torch.long, device=dev)  # tokens drawn, per row
        self.history = torch.zeros(len(plans) * num_vq, 0, dtype=torch.long, device=dev)
        self.vocab = vocab

    COLUMNS = ("noise", "temperature", "top_p", "top_k", "min_tokens", "steps")

    def keep(self, index: torch.Tensor, num_vq: int) -> None:
        self.plans = [self.plans[i] for i in index.tolist()]
        rows = (index.unsqueeze(1) * num_vq + torch.arange(num_vq, device=index.device)).reshape(-1)
        rows = rows.to(self.noise.device)
        for name in (*self.COLUMNS, "history"):
            setattr(self, name, getattr(self, name).index_select(0, rows))

    def extend(self, other: BatchState) -> None:
        """Rows joining the batch (continuous batching) come after the rows already in it."""
        self.plans += other.plans
        for name in self.COLUMNS:
            setattr(self, name, torch.cat([getattr(self, name), getattr(other, name)]))
        pad = self.history.size(1) - other.history.size(1)
        joined = F.pad(other.history, (pad, 0), value=self.vocab)  # no history yet: counts for nothing
        self.history = torch.cat([self.history, joined])


@torch.inference_mode()
def sample(parts: GPTParts, state: BatchState, hidden: torch.Tensor, num_vq: int) -> torch.Tensor:
    """Each row's next tokens (n, num_vq) from its hidden state (n, hidden)."""
    # One product for every codebook's head (ChatTTS runs one per codebook, each recomputing its
    # weight norm: four products and four norms a step, where one product does the same work).
    logits = F.linear(hidden, parts.heads).view(-1, parts.num_audio_tokens)  # (n * num_vq, vocab)
    logits /= state.temperature
    logits = penalise(logits, state.history)
    logits = warp(logits, state.top_p, state.top_k)
    floor = state.min_tokens > state.steps
    if bool(floor.any()):
        logits[floor, parts.eos] = -float("inf")
    scores = F.softmax(logits, dim=-1)
    tokens = torch.argmax(scores / state.noise, dim=-1)
    state.history = torch.cat([state.history, tokens.unsqueeze(1)], 1)[:, -REPETITION_WINDOW:]
    state.steps += 1
    return tokens.view(-1, num_vq)


@torch.inference_mode()
def _forward(parts: GPTParts, emb: torch.Tensor, mask: torch.Tensor, position: torch.Tensor, cache=None):
    """The transformer over new positions; returns (the last position's hidden state, the cache)."""
    out = parts.llama(
        inputs_embeds=emb.to(parts.device_gpt, parts.dtype),
        attention_mask=mask,
        position_ids=position,
        use_cache=True,
        **{parts.cache_name: cache},
    )
    hidden = out.last_hidden_state.narrow(1, -1, 1).squeeze(1).to(parts.device, torch.float32)
    return hidden, getattr(out, parts.cache_name)


@torch.inference_mode()
def _embed(parts: GPTParts, tokens: torch.Tensor) -> torch.Tensor:
    """A step's tokens (n, num_vq) as the next input (n, 1, hidden), summed as ChatTTS sums them."""
    ids = tokens.unsqueeze(1)
    return torch.stack([emb(ids[:, :, q]) for q, emb in enumerate(parts.emb_code)], 3).sum(3)


def padded(rows: list[int], cpu: bool) -> list[int]:
    """The transformer's batch for these rows. On CPU, MKL's matrix products are slow for some row
    counts: a step of the full-size GPT took 209 ms for 3 rows against 165 ms for 4, and 284 ms for
    7 against 211 ms for 8 (while 2, 5 and 6 rows cost less than 4 or 8). So 3, 7, 11, … rows run
    as one more, a copy of the last row whose results are dropped."""
    if cpu and len(rows) % 4 == 3:
        return [*rows, rows[-1]]
    return rows


# Called between steps with the number of rows generating: new rows to join the batch (their
# prompt embeddings (m, T, hidden), left-padded, their attention mask (m, T), their plans), or None.
Admit = Callable[[int], "tuple[torch.Tensor, torch.Tensor, Sequence[RowPlan]] | None"]


@torch.inference_mode()
def _prefill(parts: GPTParts, emb: torch.Tensor, attention_mask: torch.Tensor):
    """Rows' prompts through the transformer: (last hidden states, cache, mask, last positions)."""
    mask = attention_mask.to(parts.device_gpt).bool()
    position = mask.long().cumsum(-1) - 1
    position.masked_fill_(~mask, 1)
    hidden, cache = _forward(parts, emb, mask, position)
    return hidden, cache, mask, position.narrow(1, -1, 1)


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
    num_vq = len(parts.emb_code)
    cpu = parts.device_gpt.type == "cpu"
    # The transformer's batch holds the live rows in order, then a copy if `padded` adds one.
    with torch.inference_mode():
        state = BatchState(parts, plans, num_vq)
        slots = torch.tensor(padded(list(range(len(plans))), cpu))
        emb = emb[slots.to(emb.device)]
    hidden, cache, mask, position = _prefill(parts, emb, attention_mask[slots.to(attention_mask.device)])
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
                new_hidden, new_cache, new_mask, new_position = _prefill(parts, new_emb, new_attention)
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
        hidden, cache = _forward(parts, _embed(parts, tokens), mask, position, cache)
