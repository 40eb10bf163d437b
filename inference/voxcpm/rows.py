"""VoxCPM2's rows generated together: rows of different requests share each language-model step.

One step makes one patch (160 ms of 48 kHz audio) for every live row, as the package's `_inference`
does for one: the local diffusion decoder (`UnifiedCFM`'s Euler solver with classifier-free
guidance) turns each row's hidden states into a patch, AudioVAE V2 decodes the rows' patches
together (its causal convolutions' state kept per row, `decoder.RowDecoder`), the local encoder
embeds them, the stop head is read, and the text-semantic and residual acoustic LMs take one
position each in per-row static slots (`slots.Slots`). Rows join between steps (`more`), each from
its own prefill (a clone's prefix taken from its kept prompt, built once); a row that ends leaves at
once. The diffusion's noise comes from each row's own generator (its seed): a row's patches do not
depend on its companions but for floating point (matrix shapes), within a stated tolerance
(tests/test_voxcpm_engine.py). Rows with different `inference_timesteps` run the solver apart.

Imports torch at module level: reached only through the engine (worker processes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import numpy as np
import torch

from ..batch import Audio, BatchRow, Done, Event, Joining
from ..engine import fade_in
from . import prompts
from .decoder import RowDecoder
from .params import VoxCPMParams
from .references import Prompt, Prompts
from .slots import Slots

MIN_PATCHES = 2  # the package's own min_len: no stop before the patch after this one


class _Row:
    """A live row's host side: its budget and stop rule, its noise, its audio on its way out."""

    def __init__(self, row: BatchRow, rate: int, budget: int, min_index: int) -> None:
        p: VoxCPMParams = row.params
        self.key, self.params = row.key, p
        self.budget, self.min_index = budget, min_index
        self.noise = torch.Generator().manual_seed(p.seed)  # the row's own: same seed, same patches
        self.stretch = None
        if p.speed != 1.0:
            from ..stretch import TimeStretch  # noqa: PLC0415  (PyAV: only for a row that changes speed)

            self.stretch = TimeStretch(rate, p.speed)
        self.rate = rate
        self.pending: list[np.ndarray] = []
        self.first = True
        self.patches = 0

    def take(self, samples: np.ndarray, chunk: int) -> Iterator[Event]:
        self.patches += 1
        self.pending.append(samples)
        if len(self.pending) >= chunk:
            yield from self._out()

    def finish(self) -> Iterator[Event]:
        yield from self._out()
        if self.stretch is not None:
            tail = self.stretch.finish()
            if len(tail):
                yield Audio(self.key, tail)
        yield Done(self.key, self.patches, np.zeros(0, dtype=np.int64))

    def _out(self) -> Iterator[Event]:
        if not self.pending:
            return
        audio = np.concatenate(self.pending)
        self.pending = []
        if self.first:
            audio = fade_in(audio, self.rate)  # a row starts from silence, not mid-wave
            self.first = False
        if self.stretch is not None:
            audio = self.stretch.feed(audio)
        if len(audio):
            yield Audio(self.key, audio)


class RowBatch:
    """The running rows of one model: their slots in both language models, their decoder state,
    their last hidden states and patches. Reused from batch to batch (the slots stay allocated)."""

    def __init__(self, model, device, prompts_kept: Prompts, lock: threading.RLock, fixed_length: bool = False):
        self.model = model
        self.device = device
        self.dtype = next(model.base_lm.parameters()).dtype
        self.prompts = prompts_kept
        self.lock = lock  # the model's modules are shared with other threads' batches (a designed voice)
        self.fixed_length = fixed_length
        self.base = Slots(model.base_lm)
        self.residual = Slots(model.residual_lm)
        self.decoder = RowDecoder(model.audio_vae)
        self.patch = (model.patch_size, model.audio_vae.latent_dim)
        cfg = model.config.lm_config
        self.scale_emb = cfg.scale_emb if cfg.use_mup else 1.0
        self.rows: list[_Row] = []
        self.lm_hidden = self.res_hidden = self.cond = torch.zeros(0)  # (rows, ...): set by `run`

    def run(
        self,
        rows: list[BatchRow],
        stop: Callable[[str], bool],
        chunk: int,
        more: Joining | None,
        prompt_of: Callable[[str], Prompt],
    ) -> Iterator[Event]:
        """Run `rows` (and those `more(live)` gives between steps) to their ends: each row's audio
        every `chunk` patches and its end; `stop(key)` ends a row; `prompt_of(reference)` is a
        clone's kept prompt."""
        hidden = self.model.config.lm_config.hidden_size
        self.base.clear()
        self.residual.clear()
        self.decoder.reset()
        self.rows = []
        self.lm_hidden = torch.zeros(0, hidden, device=self.device, dtype=self.dtype)
        self.res_hidden = torch.zeros(0, hidden, device=self.device, dtype=self.dtype)
        self.cond = torch.zeros(0, *self.patch, device=self.device, dtype=self.dtype)
        seen: set[str] = set()
        joining = rows
        while True:
            for row in joining:
                if row.key in seen:
                    raise ValueError("the rows' keys must be unique within a batch")
                seen.add(row.key)
            stopped = {r.key for r in joining if stop(r.key)}
            with self.lock:
                self._admit([r for r in joining if r.key not in stopped], prompt_of)
            for key in stopped:
                yield Done(key, 0, np.zeros(0, dtype=np.int64))
            arrived = more(len(self.rows)) if more is not None and joining else []
            if arrived:  # came while those were prefilled (seconds for a long prompt): in before the step
                joining = arrived
                continue
            if not self.rows:
                return
            with self.lock:
                audio, flags = self._patch()
            ended = []
            for i, live in enumerate(self.rows):
                yield from live.take(audio[i], chunk)
                last = live.patches >= live.budget or (live.patches - 1 > live.min_index and flags[i] == 1)
                if last or stop(live.key):
                    ended.append(i)
                    yield from live.finish()
            with self.lock:
                self._leave(ended)
                if self.rows:
                    self._step()
            joining = more(len(self.rows)) if more is not None else []
            if not self.rows and not joining:
                return

    @torch.inference_mode()
    def _admit(self, joining: list[BatchRow], prompt_of: Callable[[str], Prompt]) -> None:
        """Each joining row prefilled into a new slot of both LMs (a clone's prefix from its prompt)."""
        if not joining:
            return
        model, tokenizer = self.model, self.model.text_tokenizer
        planned, columns = [], 0
        for row in joining:
            p: VoxCPMParams = row.params
            prompt = prompt_of(p.reference) if p.reference else None
            rest = prompts.rest(tokenizer, p, row.text, prompt.patches if prompt else None, self.patch)
            before = len(prompt.patches) + 2 if prompt else 0  # the prefix's positions
            if self.fixed_length:
                budget = min_index = max(1, row.max_tokens)
            else:
                budget = max(1, min(row.max_tokens, prompts.max_patches(tokenizer, p, row.text)))
                min_index = min(MIN_PATCHES, budget)
            budget = max(1, min(budget, model.config.max_length - before - len(rest)))  # the positions it has
            columns = max(columns, before + len(rest) + budget)
            planned.append((row, prompt, rest, budget, min_index))
        for slots in (self.base, self.residual):
            slots.reserve(slots.rows + len(joining), columns, self.dtype, self.device)
        for row, prompt, rest, budget, min_index in planned:
            slot = self._start(prompt)
            lm, res = self._prefill(slot, rest)
            self.lm_hidden = torch.cat((self.lm_hidden, lm[None]))
            self.res_hidden = torch.cat((self.res_hidden, res[None]))
            self.cond = torch.cat((self.cond, rest.feats[-1:].to(self.device, self.dtype)))
            self.rows.append(_Row(row, model.sample_rate, budget, min_index))
        self.decoder.join(len(planned))

    def _start(self, prompt: Prompt | None) -> int:
        """A new slot in both LMs, holding the clone's prefix (built the first time it is used)."""
        if prompt is None:
            self.residual.add()
            return self.base.add()
        if prompt.prefix is None:
            slot = self.base.add()
            self.residual.add()
            self._prefill(slot, prompts.voice_prefix(prompt.patches))
            width = len(prompt.patches) + 2
            prompt.prefix = (self.base.prefix_of(slot, width), self.residual.prefix_of(slot, width))
            self.prompts.built += 1
            self.prompts.trim()
            return slot
        self.residual.add(prompt.prefix[1])
        return self.base.add(prompt.prefix[0])

    def _prefill(self, slot: int, part: prompts.Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """`_inference`'s prefill for one row's positions after what its slots hold: the last
        position's hidden states of the text LM (quantised where it is audio) and the residual LM."""
        model, device, dtype = self.model, self.device, self.dtype
        audio = part.audio.to(device)
        text_mask, audio_mask = (~audio).to(dtype)[:, None], audio.to(dtype)[:, None]
        feat_embed = torch.zeros(len(part), model.config.lm_config.hidden_size, device=device, dtype=dtype)
        if audio.any():  # the local encoder embeds each patch alone: only the audio positions need it
            feats = part.feats[part.audio].to(device, dtype)
            feat_embed[audio] = model.enc_to_lm_proj(model.feat_encoder(feats[None]))[0]
        text_embed = model.base_lm.embed_tokens(part.tokens.to(device)) * self.scale_emb
        combined = text_mask * text_embed + audio_mask * feat_embed
        enc = self.base.prefill(slot, combined[None])[0]
        enc = model.fsq_layer(enc) * audio_mask + enc * text_mask
        residual_in = model.fusion_concat_proj(torch.cat((enc, audio_mask * feat_embed), dim=-1))
        res = self.residual.prefill(slot, residual_in[None])[0]
        return enc[-1], res[-1]

    @torch.inference_mode()
    def _patch(self) -> tuple[np.ndarray, list[int]]:
        """Every live row's next patch (kept as the next step's input and condition), its audio
        (rows, samples) and the stop head's flags."""
        model = self.model
        mu = torch.cat((model.lm_to_dit_proj(self.lm_hidden), model.res_to_dit_proj(self.res_hidden)), dim=-1)
        cond = self.cond.transpose(1, 2).contiguous()
        patches = torch.empty(len(self.rows), self.patch[1], self.patch[0], device=self.device, dtype=self.dtype)
        for steps in sorted({r.params.inference_timesteps for r in self.rows}):
            group = [i for i, r in enumerate(self.rows) if r.params.inference_timesteps == steps]
            index = torch.tensor(group, device=self.device)
            noise = torch.stack(
                [torch.randn(self.patch[1], self.patch[0], generator=self.rows[i].noise) for i in group]
            )
            cfg = torch.tensor([self.rows[i].params.cfg_value for i in group], dtype=self.dtype)
            patches[index] = _solve(
                model.feat_decoder,
                noise.to(self.device, self.dtype),
                mu.index_select(0, index),
                cond.index_select(0, index),
                steps,
                cfg.to(self.device)[:, None, None],
            )
        audio = self.decoder.decode(patches.float()).squeeze(1).cpu().numpy()
        self.cond = patches.transpose(1, 2)  # (rows, patch_size, latent_dim)
        flags = model.stop_head(model.stop_actn(model.stop_proj(self.lm_hidden))).argmax(dim=-1).tolist()
        return audio, flags

    @torch.inference_mode()
    def _leave(self, ended: list[int]) -> None:
        if not ended:
            return
        kept = [i for i in range(len(self.rows)) if i not in set(ended)]
        index = torch.tensor(kept, device=self.device, dtype=torch.long)
        self.rows = [self.rows[i] for i in kept]
        self.base.keep(kept)
        self.residual.keep(kept)
        self.decoder.keep(index)
        self.lm_hidden, self.res_hidden, self.cond = (
            t.index_select(0, index) for t in (self.lm_hidden, self.res_hidden, self.cond)
        )

    @torch.inference_mode()
    def _step(self) -> None:
        """The rows' last patches through the local encoder, then one position of each LM."""
        model = self.model
        embed = model.enc_to_lm_proj(model.feat_encoder(self.cond[:, None]))[:, 0]
        lm = model.fsq_layer(self.base.step(embed))
        self.lm_hidden = lm
        self.res_hidden = self.residual.step(model.fusion_concat_proj(torch.cat((lm, embed), dim=-1)))


def _solve(
    cfm, noise: torch.Tensor, mu: torch.Tensor, cond: torch.Tensor, steps: int, cfg: torch.Tensor
) -> torch.Tensor:
    """`UnifiedCFM.forward` + `solve_euler` (sway sampling, CFG-Zero*: the first step's velocity
    zero, then classifier-free guidance with an optimised scale) for rows that each have their own
    noise and guidance value."""
    t_span = torch.linspace(1, 0, steps + 1, device=mu.device, dtype=mu.dtype)
    t_span = t_span + (torch.cos(torch.pi / 2 * t_span) - 1 + t_span)
    t, dt = t_span[0], t_span[0] - t_span[1]
    x, rows = noise, noise.size(0)
    zero_init_steps = max(1, int(len(t_span) * 0.04))
    for step in range(1, len(t_span)):
        if step > zero_init_steps:
            times = t.expand(2 * rows)
            deltas = dt.expand(2 * rows) if cfm.mean_mode else torch.zeros_like(times)
            out = cfm.estimator(
                torch.cat((x, x)), torch.cat((mu, torch.zeros_like(mu))), times, torch.cat((cond, cond)), deltas
            )
            positive, negative = out[:rows], out[rows:]
            flat_p, flat_n = positive.reshape(rows, -1), negative.reshape(rows, -1)
            scale = (flat_p * flat_n).sum(1) / (flat_n.pow(2).sum(1) + 1e-8)
            scale = scale.view(rows, 1, 1)
            x = x - dt * (negative * scale + cfg * (positive - negative * scale))
        t = t - dt
        if step < len(t_span) - 1:
            dt = t - t_span[step + 1]
    return x
