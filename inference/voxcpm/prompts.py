"""What a VoxCPM2 row's language models read before its first patch, as the package's
`_generate_with_prompt_cache` lays it out, cut in two: the voice's prefix (a clone's reference,
`[ref_start, reference patches, ref_end]`: the same for every row of that voice, so its keys and
values are kept, `references.Prompt`) and the rest (the text, with a design before it, then
`audio_start`, then, when continuing a clone's recording, its patches).

Each part is `Positions`: token ids, audio patches, and which positions are text and which audio.

Imports torch at module level: reached only through the engine (worker processes).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .params import VoxCPMParams

AUDIO_START, AUDIO_END, REF_START, REF_END = 101, 102, 103, 104  # VoxCPM2Model's markers


@dataclass
class Positions:
    tokens: torch.Tensor  # (T,) token ids (0 where the position is audio)
    feats: torch.Tensor  # (T, patch_size, latent_dim) audio patches (zeros where the position is text)
    audio: torch.Tensor  # (T,) bool: the position is audio (else text)

    def __len__(self) -> int:
        return self.tokens.size(0)


def _text(ids: list[int], patch: tuple[int, int]) -> Positions:
    return Positions(
        torch.tensor(ids, dtype=torch.long), torch.zeros(len(ids), *patch), torch.zeros(len(ids), dtype=torch.bool)
    )


def _audio(patches: torch.Tensor) -> Positions:
    n = patches.size(0)
    return Positions(torch.zeros(n, dtype=torch.long), patches.float(), torch.ones(n, dtype=torch.bool))


def _join(*parts: Positions) -> Positions:
    return Positions(
        torch.cat([p.tokens for p in parts]), torch.cat([p.feats for p in parts]), torch.cat([p.audio for p in parts])
    )


def voice_prefix(reference: torch.Tensor) -> Positions:
    """A clone's prefix: its reference patches between the reference markers."""
    patch = (reference.size(1), reference.size(2))
    return _join(_text([REF_START], patch), _audio(reference), _text([REF_END], patch))


def rest(
    tokenizer, params: VoxCPMParams, text: str, reference: torch.Tensor | None, patch: tuple[int, int]
) -> Positions:
    """What follows the prefix: the text as the model reads it (a design before it; a clone's
    transcript before it when continuing), `audio_start`, then the recording continued."""
    if params.mode == "continuation" and reference is not None:
        ids = tokenizer(params.reference_text + " " + params.prompt(text)) + [AUDIO_START]
        return _join(_text(ids, patch), _audio(reference))
    return _text(tokenizer(params.prompt(text)) + [AUDIO_START], patch)


def max_patches(tokenizer, params: VoxCPMParams, text: str) -> int:
    """The package's own cap on a row's patches: six a token of its text, plus ten."""
    return len(tokenizer(params.prompt(text))) * 6 + 10
