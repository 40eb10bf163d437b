"""`TTS_PRECISION=int8` on a CPU: the decoder's convolutions in 8-bit integers.

The decoder is ~82 % of a request on a CPU, nearly all of it convolutions of 128-1024 channels
that run at the cores' peak float32 arithmetic; in int8 (oneDNN's int8 convolution through
PyTorch's `onednn` operators, with AVX512-VNNI or AVX-VNNI where the CPU has them) the same
convolution takes ~0.45 of the time on this project's 2-core machine (docs/benchmarks.md). Each
one is replaced at load by `Int8Conv1d`:

- weights: int8. Where each output channel's weights lie on a grid of at most 255 steps (Kokoro's
  real weights as this project installs them: an int8 export's, dequantised), its grid's step is its
  scale: the same numbers in int8, nothing lost. Otherwise one scale per output channel (symmetric:
  the largest magnitude maps to 127);
- activations: quantised at every call from that call's own range (dynamic quantisation, uint8,
  all 8 bits; `quantize_input`, compiled), the result in float32: what onnxruntime's
  DynamicQuantizeLinear and ConvInteger do in the int8 export.

What stays float32: the text side (ALBERT, the encoders, durations: word timings are the float32
model's exactly), the F0/N predictor, the transposed (upsampling) convolutions, those of few input
channels, AdaIN's statistics and Snake's activations, the harmonic source, the final convolution
(its output goes through an exponential) and the inverse STFT. On a GPU the engine refuses int8
(its float32 and bfloat16 kernels are faster there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeGuard

import torch
from torch import nn

from .fused import Compiled

# Convolutions of fewer input channels than this stay float32 (F0's and N's one channel, the
# harmonic source's 22): too little work for quantising the input to pay.
MIN_CHANNELS = 64


def quantize_input(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`x` (batch, length, channels) as uint8 over its own range, zero on the grid (what onnxruntime's
    DynamicQuantizeLinear does): (the integers, their scale, the zero point)."""
    low, high = torch.clamp(x.amin(), max=0), torch.clamp(x.amax(), min=0)
    scale = torch.clamp((high - low) / 255, min=1e-12)
    zero = torch.round(-low / scale)
    return torch.clamp(torch.round(x / scale) + zero, 0, 255).to(torch.uint8), scale, zero.to(torch.int32)


class Int8Conv1d(nn.Module):
    """A `nn.Conv1d` (zero padding, no groups) in int8 through oneDNN: its weights int8 per output
    channel, its input quantised per call to uint8 over the call's own range (all 8 bits: PyTorch's
    `conv1d_dynamic` keeps 7) by `quantize`, its result float32."""

    def __init__(self, conv: nn.Conv1d, quantize: Callable = quantize_input):
        super().__init__()
        weight = conv.weight.detach().float()
        scale = _grid_steps(weight)
        if scale is None:
            scale = (weight.abs().amax(dim=(1, 2)) / 127).clamp_min(1e-12).double()
        self.w_scale = scale.float()
        self.w_zero = torch.zeros(weight.shape[0], dtype=torch.int32)
        qweight = (weight.double() / scale[:, None, None]).round().clamp(-128, 127).to(torch.int8)
        self.bias = None if conv.bias is None else conv.bias.detach().float()
        self.shape = (list(conv.stride), list(conv.padding), list(conv.dilation), conv.groups)
        # The input's scale and zero point given here only pick oneDNN's kernel; each call passes its own.
        self.packed = torch.ops.onednn.qconv_prepack(qweight, self.w_scale, 1.0, 0, *self.shape)
        self.quantize = quantize

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # oneDNN reads and writes channels last (batch, length, channels): quantised in that layout
        # the input needs no copy (the previous convolution's output is in it already).
        u8, scale, zero = self.quantize(x.transpose(1, 2))
        return torch.ops.onednn.qconv_pointwise.tensor(
            u8.transpose(1, 2), scale, zero, self.packed, self.w_scale, self.w_zero, self.bias,
            *self.shape, 1.0, 0, torch.float32, "none", [], None,
        )  # fmt: skip


def _grid_steps(weight: torch.Tensor) -> torch.Tensor | None:
    """Each output channel's grid step, where every channel's weights lie on a grid with zero on it
    spanning at most -127..127 steps (an int8 export's weights, dequantised: (q - zero point) *
    scale, one scale per channel or per tensor); else None."""
    steps = []
    for channel in weight.double().flatten(1):
        values = torch.unique(channel)
        gaps = values.diff()
        gaps = gaps[gaps > 1e-6 * values.abs().max()]
        if not len(gaps):  # one value (a channel of zeros): any step that holds it
            steps.append(values.abs().max().clamp_min(1e-12) / 127)
            continue
        for divisor in (1, 2, 3, 4):  # the smallest gap may span a few steps
            step = gaps.min() / divisor
            on_grid = channel / step
            if (on_grid - on_grid.round()).abs().max() <= 1e-3 and on_grid.round().abs().max() <= 127:
                steps.append(step)
                break
        else:
            return None
    return torch.stack(steps)


def _eligible(module: nn.Module) -> TypeGuard[nn.Conv1d]:
    return (
        type(module) is nn.Conv1d
        and module.padding_mode == "zeros"
        and module.groups == 1
        and isinstance(module.padding, tuple)
        and module.in_channels >= MIN_CHANNELS
    )


def quantize_decoder(decoder: nn.Module, compiled: bool = True) -> int:
    """Replace the decoder's eligible convolutions with `Int8Conv1d` in place (after weight norm is
    folded); the generator's last convolution stays float32. `compiled`: their inputs quantised by
    `quantize_input` through torch.compile (two passes over the input; uncompiled, five). Returns
    how many were replaced."""
    quantize = Compiled(quantize_input, "int8 input quantisation") if compiled else quantize_input
    keep = {id(decoder.get_submodule("generator.conv_post"))}
    replaced = 0
    for parent in list(decoder.modules()):
        for name, child in list(parent.named_children()):
            if _eligible(child) and id(child) not in keep:
                setattr(parent, name, Int8Conv1d(child, quantize))
                replaced += 1
    return replaced
