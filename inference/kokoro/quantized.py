"""`TTS_PRECISION=int8` on a CPU: the generator's convolutions in 8-bit integers.

The decoder is ~82 % of a request on a CPU, nearly all of it the generator's resblocks:
convolutions of 128-256 channels at 20 and 120 times the frame rate, at the cores' peak float32
arithmetic; in int8 (oneDNN's int8 convolution through PyTorch's `onednn` operators, with
AVX512-VNNI or AVX-VNNI where the CPU has them) the same convolution takes ~0.45 of the time on
this project's 2-core machine (docs/benchmarks.md). Each of the resblocks' convolutions is replaced
at load by `Int8Conv1d`, and each resblock runs through `WindowedResblock`:

- weights: int8. Where each output channel's weights lie on a grid of at most 255 steps (Kokoro's
  real weights as this project installs them: an int8 export's, dequantised), its grid's step is its
  scale: the same numbers in int8, nothing lost. Otherwise one scale per output channel (symmetric:
  the largest magnitude maps to 127);
- activations: quantised at every call from their own range (dynamic quantisation, uint8, all 8
  bits), the result in float32. Each convolution's input is cut into windows of WINDOW outputs
  (plus the kernel's reach on both sides), each quantised over its own range, and the windows go
  through oneDNN as one batch: the generator's activations are heavy-tailed in time, and one scale
  for a whole sentence (onnxruntime's DynamicQuantizeLinear in the int8 export does that) left the
  quiet moments a few levels (Whisper heard +0.7 to +2.2 points of WER on read sentences).

What stays float32: the text side (ALBERT, the encoders, durations: word timings are the float32
model's exactly), the F0/N predictor, the decoder's frame-rate blocks (no faster in int8 here, and
most of the error left), the transposed (upsampling) convolutions, the harmonic source and its
convolutions, AdaIN's statistics and Snake's activations, the final convolution (its output goes
through an exponential) and the inverse STFT. On a GPU the engine refuses int8 (its float32 and
bfloat16 kernels are faster there).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeGuard

import torch
from torch import nn

from .fused import Compiled, adain_snake

# A resblock convolution of fewer input channels than this stays float32: too little work for
# quantising its input to pay (Kokoro's have 128 or 256; the harmonic source's 22 are not resblocks).
MIN_CHANNELS = 64
# The generator's resblocks quantise each convolution's input per window of this many outputs.
WINDOW = 256
VERSION = f"generator/windows/{WINDOW}"  # part of an int8 model's version (and so of cache keys)


class Int8Conv1d(nn.Module):
    """A `nn.Conv1d` (zero padding to the input's length, stride 1, no groups) in int8 through
    oneDNN: its weights int8 per output channel, its input quantised to uint8 (all 8 bits: PyTorch's
    `conv1d_dynamic` keeps 7) per window of WINDOW outputs over each window's own range, its result
    float32. `WindowedResblock` runs the same steps with AdaIN + Snake and the residual joined to
    them; called as a module it runs them alone."""

    def __init__(self, conv: nn.Conv1d):
        super().__init__()
        weight = conv.weight.detach().float()
        scale = _grid_steps(weight)
        if scale is None:
            scale = (weight.abs().amax(dim=(1, 2)) / 127).clamp_min(1e-12).double()
        self.w_scale = scale.float()
        self.w_zero = torch.zeros(weight.shape[0], dtype=torch.int32)
        qweight = (weight.double() / scale[:, None, None]).round().clamp(-128, 127).to(torch.int8)
        self.bias = torch.zeros(weight.shape[0]) if conv.bias is None else conv.bias.detach().float()
        # No padding: each window carries the kernel's reach on both sides (`padded`, `cut`). The
        # input's scale and zero point given here only pick oneDNN's kernel; each call passes its own.
        self.reach = conv.dilation[0] * (conv.kernel_size[0] - 1) // 2  # its padding (`_eligible`)
        self.shape = (list(conv.stride), [0], list(conv.dilation), conv.groups)
        self.packed = torch.ops.onednn.qconv_prepack(qweight, self.w_scale, 1.0, 0, *self.shape)
        # Each output channel's sum of weights: the zero points' share of its sums (`joined`).
        self.w_sum = (qweight.double().sum(dim=(1, 2)) * scale).float()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x (rows, channels, length) -> (rows, channels out, length), channels last in memory."""
        u8, scale, zero = cut(padded(x.transpose(1, 2), self.reach), self.reach)
        return joined(self.windowed(u8), scale, zero, self.w_sum, self.bias, x.shape[0], x.shape[-1]).transpose(1, 2)

    def windowed(self, u8: torch.Tensor) -> torch.Tensor:
        """Windows quantised by `cut` (windows, window + 2 * reach, channels) -> each window's sums
        of weights x integers (windows, window, channels out): `joined` makes them the output."""
        return torch.ops.onednn.qconv_pointwise.tensor(
            u8.transpose(1, 2), _ONE, _ZERO, self.packed, self.w_scale, self.w_zero, None,
            *self.shape, 1.0, 0, torch.float32, "none", [], None,
        ).transpose(1, 2)  # fmt: skip


_ONE, _ZERO = torch.tensor(1.0), torch.tensor(0, dtype=torch.int32)


def padded(y: torch.Tensor, reach: int) -> torch.Tensor:
    """`y` (rows, length, channels) with `reach` zeros before it and enough after it for whole
    windows of WINDOW outputs and the last one's reach: what `cut` takes. (Zeros joined on rather
    than a pad: compiled, each part is written where it lies, with no bounds test per element.)
    Past the end at least one zero before the reach, so never a single one (a length a multiple of
    WINDOW gets one more window, cut off by `joined`): compiled, a part of size 1 would be a shape
    of its own, compiled again at a listener's request (once in 256 lengths for a reach of 1)."""
    rows, length, channels = y.shape
    after = (-length - 1) % WINDOW + 1 + reach
    return torch.cat([y.new_zeros(rows, reach, channels), y, y.new_zeros(rows, after, channels)], dim=1)


def cut(y: torch.Tensor, reach: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`padded`'s output (rows, reach + n * WINDOW + reach, channels) in n windows of WINDOW
    outputs, each with `reach` samples of its neighbours on both sides, each as uint8 over its own
    range: (rows * n windows, WINDOW + 2 * reach, channels) integers, each window's scale and zero
    point (rows * n, 1, 1)."""
    rows, length, channels = y.shape
    n = (length - 2 * reach) // WINDOW
    # Each window's samples by index (an unfold's size would make torch.compile specialise on reach).
    at = torch.arange(n, device=y.device)[:, None] * WINDOW + torch.arange(WINDOW + 2 * reach, device=y.device)
    w = y[:, at]  # rows, n, samples, channels
    low = torch.clamp(w.amin(dim=(2, 3), keepdim=True), max=0)
    high = torch.clamp(w.amax(dim=(2, 3), keepdim=True), min=0)
    scale = torch.clamp((high - low) / 255, min=1e-12)
    zero = torch.round(-low / scale)
    u8 = torch.clamp(torch.round(w / scale) + zero, 0, 255).to(torch.uint8)
    return u8.reshape(-1, WINDOW + 2 * reach, channels), scale.reshape(-1, 1, 1), zero.reshape(-1, 1, 1)


def joined(
    raw: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor, w_sum: torch.Tensor, bias, rows: int, length: int
):
    """`Int8Conv1d.windowed`'s sums back to the convolution's output (rows, length, channels): in
    each window scale x (sums - zero point x the weights' sum) + bias."""
    y = scale * (raw - zero * w_sum) + bias
    return y.reshape(rows, -1, y.shape[-1])[:, :length]


def _snake_padded(x, mask, h, weight, bias, eps, alpha, reach):
    """AdaIN + Snake of `x` (rows, channels, length), `padded` for the next convolution."""
    return padded(adain_snake(x, mask, h, weight, bias, eps, alpha).transpose(1, 2), reach)


def _joined_snake_padded(raw, scale, zero, w_sum, conv_bias, mask, h, weight, bias, eps, alpha, reach):
    """The first convolution's windows joined, AdaIN + Snake, `padded` for the second."""
    x = joined(raw, scale, zero, w_sum, conv_bias, mask.shape[0], mask.shape[-1]).transpose(1, 2)
    return _snake_padded(x, mask, h, weight, bias, eps, alpha, reach)


def _joined_added(raw, scale, zero, w_sum, conv_bias, x):
    """The second convolution's windows joined and added to the resblock's input (rows, channels,
    length; channels last in memory, as the result)."""
    return (x.transpose(1, 2) + joined(raw, scale, zero, w_sum, conv_bias, x.shape[0], x.shape[-1])).transpose(1, 2)


class WindowedResblock:
    """kokoro's AdaINResBlock1 (the generator's) with its convolutions in int8, each input quantised
    per window of WINDOW outputs (`cut`) rather than over the whole input: the generator's
    activations are heavy-tailed in time (a few loud moments set a whole sentence's scale and leave
    the quiet ones a few levels; docs/benchmarks.md). Between two convolutions: the windows joined
    with AdaIN + Snake and zeros around (one formula), then cut (another: Snake's output is made
    once, not again for each pass of the cut over it); compiled or not. Everything channels last in
    memory (rows, length, channels), as oneDNN reads and writes it: a window is a block of memory."""

    def __init__(self, compiled: bool):
        def step(formula: Callable, name: str) -> Callable:
            return Compiled(formula, f"int8 {name}") if compiled else formula

        self.first = step(_snake_padded, "AdaIN + Snake, padded")
        self.middle = step(_joined_snake_padded, "join, AdaIN + Snake, padded")
        self.cut = step(cut, "cut")
        self.last = step(_joined_added, "join and residual")

    def __call__(self, block: Any, x: torch.Tensor, s: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (rows, channels, length); mask (rows, 1, length): each row's samples (ones where no row is
        padded). Zeros past each row's end, as `model._resblock1`; the result channels last."""
        x = channels_last(x)
        for c1, c2, n1, n2, a1, a2 in zip(
            block.convs1, block.convs2, block.adain1, block.adain2, block.alpha1, block.alpha2, strict=True
        ):
            y = self.first(x, mask, n1.fc(s).unsqueeze(-1), n1.norm.weight, n1.norm.bias, n1.norm.eps, a1, c1.reach)
            u8, scale, zero = self.cut(y, c1.reach)
            y = self.middle(
                c1.windowed(u8), scale, zero, c1.w_sum, c1.bias,
                mask, n2.fc(s).unsqueeze(-1), n2.norm.weight, n2.norm.bias, n2.norm.eps, a2, c2.reach,
            )  # fmt: skip
            u8, scale, zero = self.cut(y, c2.reach)
            x = self.last(c2.windowed(u8), scale, zero, c2.w_sum, c2.bias, x)
        return x * mask


def channels_last(x: torch.Tensor) -> torch.Tensor:
    """(rows, channels, length) with channels last in memory: a copy unless it is already."""
    return x.transpose(1, 2).contiguous().transpose(1, 2)


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
    """A convolution `Int8Conv1d` can take: zero padding to its input's length, stride 1, no groups."""
    return (
        type(module) is nn.Conv1d
        and module.padding_mode == "zeros"
        and module.groups == 1
        and module.stride == (1,)
        and isinstance(module.padding, tuple)
        and 2 * module.padding[0] == module.dilation[0] * (module.kernel_size[0] - 1)
        and module.in_channels >= MIN_CHANNELS
    )


def quantize_decoder(decoder: nn.Module, compiled: bool = True) -> int:
    """Replace the convolutions of the generator's resblocks (`resblocks`, `noise_res`: nearly all
    of the decoder's work) with `Int8Conv1d` in place (after weight norm is folded), each block run
    by `WindowedResblock`, its formulas through torch.compile where `compiled`. Everything else
    stays float32: the frame-rate blocks before the generator gained no time in int8 (their
    activations are small; quantising them costs what the integer convolution saves) and were most
    of int8's remaining distance from float32's audio (docs/benchmarks.md). Returns how many
    convolutions were replaced."""
    if compiled:
        # torch specialises sizes of 1 (a reach of 1, one row against many) and channel counts that
        # match another tensor's (256 or 128 per stage): a warm-up compiles 11 graphs, up to 4 of
        # one formula, and other batch shapes may add more; above torch's default of 8 per function.
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)
    generator: Any = decoder.generator
    windowed = WindowedResblock(compiled)
    replaced = 0
    for block in [*generator.resblocks, *generator.noise_res]:
        for convs in (block.convs1, block.convs2):
            for i, conv in enumerate(convs):
                if _eligible(conv):
                    convs[i] = Int8Conv1d(conv)
                    replaced += 1
        if all(isinstance(c, Int8Conv1d) for c in [*block.convs1, *block.convs2]):
            block.int8 = windowed  # read by model._resblock1
    return replaced
