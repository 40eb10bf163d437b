"""Static per-row KV slots for one of VoxCPM2's language models (the text-semantic LM or the
residual acoustic LM), so that rows of different requests share its steps.

The package keeps one row's cache (`MiniCPMModel.setup_cache(1, ...)`). Here a buffer holds
`capacity` rows by `columns` positions per layer, allocated once and written in place: a row is
prefilled into its slot from the column its voice's prefix ends at (`prefill`), and each step writes
every live row's new key and value at that row's own next column (`step`): rows of different
lengths, no padding, no concatenation. Rows leave by `keep` (the kept rows move down, in order, so
the live rows always hold the slots [0, rows)). The buffers grow (a new allocation, copied) only
when a joining row needs more slots or columns than they have.

The layers' weights and norms are the package's own modules; only the attention's cache handling
is ours (the same operations as `MiniCPMAttention.forward_step`, with one position per row).

Imports torch and voxcpm at module level: reached only through the engine (worker processes).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from voxcpm.modules.minicpm4.model import MiniCPMDecoderLayer, MiniCPMModel, apply_rotary_pos_emb

COLUMNS_QUANTUM = 64  # columns are allocated in multiples of this (fewer sizes for the allocator)


class Slots:
    def __init__(self, lm: MiniCPMModel) -> None:
        config = lm.config
        self.lm = lm
        self.heads = config.num_attention_heads
        self.kv_heads = config.num_key_value_heads
        self.head_dim = config.kv_channels or config.hidden_size // config.num_attention_heads
        self.keys = torch.zeros(0)  # (layers, capacity, kv_heads, columns, head_dim)
        self.values = torch.zeros(0)
        self.lengths: list[int] = []  # per live row: the columns it holds

    @property
    def rows(self) -> int:
        return len(self.lengths)

    def nbytes(self) -> int:
        return self.keys.numel() * self.keys.element_size() * 2

    def reserve(self, rows: int, columns: int, dtype: torch.dtype, device: torch.device) -> None:
        """Room for `rows` live rows of up to `columns` positions (grown only when needed)."""
        capacity, length = (self.keys.size(1), self.keys.size(3)) if self.keys.dim() == 5 else (0, 0)
        if rows <= capacity and columns <= length:
            return
        rows, columns = max(rows, capacity), max(columns, length)
        columns = math.ceil(columns / COLUMNS_QUANTUM) * COLUMNS_QUANTUM
        shape = (len(self.lm.layers), rows, self.kv_heads, columns, self.head_dim)
        keys = torch.zeros(shape, dtype=dtype, device=device)
        values = torch.zeros(shape, dtype=dtype, device=device)
        if self.rows:
            filled = max(self.lengths)
            keys[:, : self.rows, :, :filled] = self.keys[:, : self.rows, :, :filled]
            values[:, : self.rows, :, :filled] = self.values[:, : self.rows, :, :filled]
        self.keys, self.values = keys, values

    def add(self, prefix: tuple[torch.Tensor, torch.Tensor] | None = None) -> int:
        """A new row in the next slot, holding `prefix` (a voice's keys and values, from `prefix_of`)
        or nothing; `reserve` first. Returns its slot."""
        slot = self.rows
        length = 0
        if prefix is not None:
            keys, values = prefix
            length = keys.size(2)
            self.keys[:, slot, :, :length] = keys
            self.values[:, slot, :, :length] = values
        self.lengths.append(length)
        return slot

    def prefix_of(self, slot: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """A copy of the first `length` positions of a row: what a voice's prefix gives the model."""
        return self.keys[:, slot, :, :length].clone(), self.values[:, slot, :, :length].clone()

    def keep(self, rows: list[int]) -> None:
        """Only `rows` (slots, increasing) stay; they move down to the slots [0, len(rows))."""
        for new, old in enumerate(rows):
            if new != old:
                filled = self.lengths[old]
                self.keys[:, new, :, :filled] = self.keys[:, old, :, :filled]
                self.values[:, new, :, :filled] = self.values[:, old, :, :filled]
        self.lengths = [self.lengths[old] for old in rows]

    def clear(self) -> None:
        self.lengths = []

    @torch.inference_mode()
    def prefill(self, slot: int, embeds: torch.Tensor) -> torch.Tensor:
        """Run `embeds` (1, T, hidden) through the model after what the row holds (causal), their
        keys and values written into its slot; returns the hidden states (1, T, hidden), normed."""
        start, width = self.lengths[slot], embeds.size(1)
        positions = torch.arange(start, start + width, device=embeds.device)
        mask = None
        if start:  # the new positions see the prefix and, causally, each other
            columns = torch.arange(start + width, device=embeds.device)
            mask = (columns[None, :] <= positions[:, None])[None, None]
        hidden = embeds
        for index, layer in enumerate(self.lm.layers):

            def attend(q, k, v, index=index):
                self.keys[index, slot, :, start : start + width] = k[0]
                self.values[index, slot, :, start : start + width] = v[0]
                keys = self.keys[index, slot : slot + 1, :, : start + width]
                values = self.values[index, slot : slot + 1, :, : start + width]
                return F.scaled_dot_product_attention(
                    q, keys, values, attn_mask=mask, is_causal=mask is None, enable_gqa=True
                )

            hidden = self._layer(layer, hidden, positions, attend)
        self.lengths[slot] = start + width
        return self.lm.norm(hidden)

    @torch.inference_mode()
    def step(self, embeds: torch.Tensor) -> torch.Tensor:
        """One position for every live row (`embeds` (rows, hidden), in slot order), each at its
        own next column; returns their hidden states (rows, hidden), normed."""
        rows = self.rows
        device = embeds.device
        positions = torch.tensor(self.lengths, device=device)
        slots = torch.arange(rows, device=device)
        width = max(self.lengths) + 1
        mask = (torch.arange(width, device=device)[None, :] <= positions[:, None])[:, None, None, :]
        hidden = embeds[:, None, :]
        for index, layer in enumerate(self.lm.layers):

            def attend(q, k, v, index=index):
                self.keys[index, slots, :, positions] = k[:, :, 0]
                self.values[index, slots, :, positions] = v[:, :, 0]
                keys = self.keys[index, :rows, :, :width]
                values = self.values[index, :rows, :, :width]
                return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, enable_gqa=True)

            hidden = self._layer(layer, hidden, positions[:, None], attend)
        self.lengths = [n + 1 for n in self.lengths]
        return self.lm.norm(hidden[:, 0])

    def _layer(self, layer: MiniCPMDecoderLayer, hidden: torch.Tensor, positions: torch.Tensor, attend):
        """`MiniCPMDecoderLayer.forward` with `attend(q, k, v)` doing the cache's part:
        `positions` (T,) for one row's T positions, or (rows, 1) for one position per row."""
        attn = layer.self_attn
        batch, width, _ = hidden.shape
        residual = hidden
        hidden = layer.input_layernorm(hidden)
        q = attn.q_proj(hidden).view(batch, width, self.heads, self.head_dim).transpose(1, 2)
        k = attn.k_proj(hidden).view(batch, width, self.kv_heads, self.head_dim).transpose(1, 2)
        v = attn.v_proj(hidden).view(batch, width, self.kv_heads, self.head_dim).transpose(1, 2)
        if self.lm.rope_emb is not None:
            cos, sin = self.lm.rope_emb(positions)
            if positions.dim() == 2:  # (rows, 1, dim) -> (rows, 1 head, 1 position, dim)
                cos, sin = cos[:, None], sin[:, None]
            q, k = apply_rotary_pos_emb(q, k, cos, sin)
        out = attend(q.contiguous(), k.contiguous(), v.contiguous())
        out = attn.o_proj(out.transpose(1, 2).reshape(batch, width, self.heads * self.head_dim))
        scale = layer.scale_depth / math.sqrt(layer.num_hidden_layers) if layer.use_mup else 1.0
        hidden = residual + out * scale
        residual = hidden
        hidden = layer.mlp(layer.post_attention_layernorm(hidden))
        return residual + hidden * scale
