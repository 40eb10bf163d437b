"""What every decode step of the per-row-seeded loop shares, whatever holds its KV cache: the rows'
plans, the GPT's parts, the per-row sampling step, and the transformer's prefill and forward.

ChatTTS's `GPT.generate` samples a whole batch with one temperature/top-p/top-k and one generator
that it re-seeds with the one seed at every step, so a row's tokens depend on its batch companions
and on its place in the batch. Here the sampling step is per row:

- each row's sampling noise comes from its own generator seeded with its own seed. ChatTTS
  re-seeds before every draw, and `torch.multinomial` draws one sample as argmax(p / q) with
  q ~ Exp(1) from the generator, so its noise is the same q at every step: here q is drawn once
  per row, and a row alone gives the same tokens as `Chat.infer` with that seed;
- temperature, top-p, top-k and the end-token floor (min tokens) are per row; the repetition
  penalty looks at the row's own last 16 tokens, as ChatTTS's does.

The step runs on the device with no host synchronisation of its own (the end-token floor is a
masked write, not a branch on the device's values).

Imports torch at module level: it is reached only through the engine's methods (worker
processes), never when the web process imports `inference`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
    # The KV cache: preallocated slots (`kvcache`), or the previous cache that grows by
    # concatenation (`growing`: the reference the static one is tested and benchmarked against).
    static_cache: bool = True
    # On CUDA, the decode step's transformer replayed from CUDA graphs (`graphs`); never on a CPU.
    cuda_graphs: bool = True

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


# Called between steps with the number of rows generating: new rows to join the batch (their
# prompt embeddings (m, T, hidden), left-padded, their attention mask (m, T), their plans), or None.
Admit = Callable[[int], "tuple[torch.Tensor, torch.Tensor, Sequence[RowPlan]] | None"]


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
    # The end token is masked for rows under their floor: a masked write, where a branch on
    # `floor.any()` would wait for the device at every step.
    floor = state.min_tokens > state.steps
    logits[:, parts.eos] = logits[:, parts.eos].masked_fill(floor, -float("inf"))
    scores = F.softmax(logits, dim=-1)
    tokens = torch.argmax(scores / state.noise, dim=-1)
    state.history = torch.cat([state.history, tokens.unsqueeze(1)], 1)[:, -REPETITION_WINDOW:]
    state.steps += 1
    return tokens.view(-1, num_vq)


@torch.inference_mode()
def forward(parts: GPTParts, emb: torch.Tensor, mask: torch.Tensor | None, position: torch.Tensor, cache=None):
    """The transformer over new positions; returns (the last position's hidden state, the cache).
    `mask` is (rows, keys) for the transformer to make causal, (rows, 1, queries, keys) as is, or
    None (every key, one query)."""
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
def embed(parts: GPTParts, tokens: torch.Tensor) -> torch.Tensor:
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


@torch.inference_mode()
def prefill(parts: GPTParts, emb: torch.Tensor, attention_mask: torch.Tensor):
    """Rows' prompts through the transformer (a fresh transformers DynamicCache): (last hidden
    states, cache, mask, last positions)."""
    mask = attention_mask.to(parts.device_gpt).bool()
    position = mask.long().cumsum(-1) - 1
    position.masked_fill_(~mask, 1)
    hidden, cache = forward(parts, emb, mask, position)
    return hidden, cache, mask, position.narrow(1, -1, 1)
