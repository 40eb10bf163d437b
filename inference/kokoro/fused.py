"""The generator's AdaIN + Snake1D as one expression, for `torch.compile` to fuse on a GPU.

`model._resblock1` asks `current()`: None runs kokoro's ops one by one (its own block where no row
is padded); otherwise this module's function, compiled or not, with the rows' mask (all ones where
no row is padded). One model per worker process, so the choice is a process setting
(`KokoroEngine.load`'s `fused`). Float rounding apart (the reductions add in another order), the
same audio: tests/test_kokoro_engine.py runs the formula uncompiled against kokoro's ops, and
bench/kokoro_gpu.py the compiled one on a GPU.

Imports torch at module level: reached only through the engine's methods (worker processes).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch

logger = logging.getLogger(__name__)


def adain_snake(
    x: torch.Tensor,
    mask: torch.Tensor,
    h: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float,
    alpha: torch.Tensor,
) -> torch.Tensor:
    """`model._adain` then Snake1D in one expression (h: the AdaIN's style projection, rows x 2C x 1), for
    `torch.compile` to fuse into a reduction and one pass over x, where the eager ops are ~15 passes
    through memory (the generator's full-rate tensors: most of a GPU's decode time, docs/benchmarks.md)."""
    gamma, beta = torch.chunk(h, chunks=2, dim=1)
    n = mask.sum(-1, keepdim=True)
    mean = (x * mask).sum(-1, keepdim=True) / n
    var = (((x - mean) * mask) ** 2).sum(-1, keepdim=True) / n
    y = (x - mean) * torch.rsqrt(var + eps) * weight[None, :, None] + bias[None, :, None]
    y = ((1 + gamma) * y + beta) * mask
    return y + (1 / alpha) * (torch.sin(alpha * y) ** 2)


# The generator's AdaIN + Snake: None runs them op by op (kokoro's block where no row is padded);
# `use_fused` sets `adain_snake`, compiled or not. One model per worker process: a process setting.
_FUSED: Callable[..., torch.Tensor] | None = None


def use_fused(mode: str) -> None:
    """'off': op by op; 'eager': `adain_snake` uncompiled (its formula, for tests); 'compiled': it
    through `torch.compile` (dynamic shapes: one compilation per process, at the first decode)."""
    global _FUSED  # a worker process's setting, made once at load
    if mode == "off":
        _FUSED = None
    elif mode == "eager":
        _FUSED = adain_snake
    elif mode == "compiled":
        _FUSED = Compiled(adain_snake, "the generator's AdaIN + Snake")
    else:
        raise ValueError(f"unknown fused mode {mode!r}")


class Compiled:
    """A formula through `torch.compile` (dynamic shapes); a compilation that fails (no compiler for
    the device, an unsupported op) is logged once and the same formula runs uncompiled from then on."""

    def __init__(self, formula: Callable, name: str) -> None:
        self.formula, self.name = formula, name
        self.compiled: Callable | None = torch.compile(formula, dynamic=True)

    def __call__(self, *args):
        if self.compiled is not None:
            try:
                return self.compiled(*args)
            except Exception:  # the eager formula is the same computation
                logger.warning("torch.compile of %s failed: running it eagerly", self.name, exc_info=True)
                self.compiled = None
        return self.formula(*args)


def current() -> Callable[..., torch.Tensor] | None:
    return _FUSED
