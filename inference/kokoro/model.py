"""Kokoro's forward pass over a padded batch: rows of different lengths, voices and speeds in one
call, each row's audio as if it ran alone (`KModel.forward_with_tokens` takes one row: hexgrad/kokoro
issue 55).

We run `KModel`'s own modules and weights, and rewrite only the glue that assumed one row:
- ALBERT gets an attention mask; the text and duration encoders already take per-row lengths;
  the duration LSTM and the F0/N LSTM run over packed sequences (kokoro runs them unpacked).
- Durations are divided by each row's speed; each row gets its own alignment (padded frames: none).
- Every InstanceNorm (AdaIN, in the F0/N blocks and the whole decoder) takes its statistics over
  the row's own frames only, and every convolution sees zeros past a row's end, as a row alone sees
  its zero padding. Each resolution has its mask: F frames, 2F after the F0/decoder upsampling,
  20F and 120F + 1 in the generator (upsample rates 10 and 6, then a one-sample reflection pad).
- The harmonic source is made per row: its noise comes from a generator seeded with SEED for every
  row (in the order kokoro draws it), so a row's audio never depends on its batch, and the same
  text, voice and speed always give the same audio. kokoro's own call draws from torch's global
  RNG: seeded with SEED it gives what a row alone gives here (tests/test_kokoro_engine.py).
- The ISTFT runs per row on its own frames (its window normalisation at the end differs otherwise).

Where no row of a group is padded (one row, or rows of one length), kokoro's own AdaIN blocks run
unchanged (InstanceNorm's fused kernel, fewer temporaries).

Measured (tiny checkpoint, CPU fp32, rows of 0.8 to 9 s with different voices, a mix and speeds
0.8 to 1.5): a row in a batch differs from the same row alone by at most 6.3e-7 of its peak with
the decoder row by row or in groups of similar lengths (`decoder_groups`), 1.4e-6 with every row padded
to the longest; full checkpoint, a batch of 8 rows: 5.9e-7 and 1.3e-6 (bench/kokoro_engine.py).
One row here differs from `KModel.forward_with_tokens` by ~1e-6. The tests enforce 1e-5 of the
peak. The difference is float rounding: matrix products and reductions over another batch or
padded length add in another order. It could exceed that only where rounding flips a duration (a
value within ~1e-6 of .5 frames) or a sample's voiced/unvoiced decision (F0 within ~1e-6 of
10 Hz): then that phoneme or sample differs.

Rows whose frame counts differ a lot would spend the decoder (most of the cost) on padding: the
decoder runs in groups of rows of similar length (`decoder_groups`), of at most `decoder_rows` rows; the
text side runs all rows at once. On a CPU the engine gives the decoder one row at a time: its
activations (128-256 channels x 120 samples a frame) outgrow the caches, so rows padded together
run slower than one by one there (8 rows: x0.80 of the throughput one by one, full checkpoint,
2 cores; bench/kokoro_engine.py) and take more memory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import fused as fused_ops

SEED = 0  # the harmonic source's noise (the same for every row)
STYLE_DIM = 128  # a voice pack's vector: decoder style (first 128), prosody style (last 128)
# A decoder group admits a row while its padded frames stay within this factor of its real frames.
PADDING_ALLOWED = 1.25


@dataclass(frozen=True)
class RowInput:
    ids: Sequence[int]  # the phonemes' ids, without the start and end inputs (at most 510)
    style: torch.Tensor  # (256,): the voice pack's entry for this row's phoneme count
    speed: float = 1.0


@dataclass(frozen=True)
class RowOutput:
    audio: np.ndarray  # float32, 600 samples a frame
    durations: np.ndarray  # frames per input: start, each phoneme, end


def _mask(lengths: torch.Tensor, size: int) -> torch.Tensor | None:
    """(rows, 1, size) float: 1 within each row's length; None when no row is padded (one row, or
    rows of one length): kokoro's own modules then run as they are."""
    if bool((lengths == size).all()):
        return None
    return (torch.arange(size, device=lengths.device)[None, :] < lengths[:, None]).unsqueeze(1).float()


def _masked(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    return x if mask is None else x * mask


def lstm(lstm: nn.LSTM, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """A bidirectional LSTM over each row's own length (batch first); zeros past it."""
    packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
    lstm.flatten_parameters()
    out, _ = lstm(packed)
    out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
    return out


def _adain(adain, x: torch.Tensor, s: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """kokoro's AdaIN1d (InstanceNorm1d, affine, then the style's scale and shift) with statistics
    over each row's own frames; zeros past them."""
    if mask is None:
        return adain(x, s)
    h = adain.fc(s).view(s.size(0), -1, 1)
    gamma, beta = torch.chunk(h, chunks=2, dim=1)
    n = mask.sum(-1, keepdim=True)
    mean = (x * mask).sum(-1, keepdim=True) / n
    var = (((x - mean) * mask) ** 2).sum(-1, keepdim=True) / n
    norm = adain.norm
    x = (x - mean) * torch.rsqrt(var + norm.eps) * norm.weight[None, :, None] + norm.bias[None, :, None]
    return ((1 + gamma) * x + beta) * mask


def _resblk(block, x: torch.Tensor, s: torch.Tensor, mask: torch.Tensor | None):
    """kokoro's AdainResBlk1d (F0/N predictor, decoder) on padded rows: (output, its mask)."""
    if mask is None:
        return block(x, s), None
    up = block.upsample_type != "none"
    out_mask = F.interpolate(mask, scale_factor=2, mode="nearest") if up else mask
    r = block.actv(_adain(block.norm1, x, s, mask))
    r = block.pool(r)  # the transposed convolution's bias lands past a row's end too
    if up:
        r = r * out_mask
    r = block.conv1(block.dropout(r))
    r = block.actv(_adain(block.norm2, r, s, out_mask))
    r = block.conv2(block.dropout(r))
    out = (r + block._shortcut(x)) * torch.rsqrt(torch.tensor(2))
    return out * out_mask, out_mask


def _resblock1(block, x: torch.Tensor, s: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """kokoro's AdaINResBlock1 (the generator's) on padded rows; its AdaIN + Snake fused where
    `fused.current()` gives one (every row then takes the mask, all ones where none is padded)."""
    windowed = getattr(block, "int8", None)  # quantized.WindowedResblock: TTS_PRECISION=int8
    if windowed is not None:
        return windowed(block, x, s, x.new_ones(x.size(0), 1, x.size(-1)) if mask is None else mask)
    fused = fused_ops.current()
    if fused is not None:
        keep = x.new_ones(x.size(0), 1, x.size(-1)) if mask is None else mask
        for c1, c2, n1, n2, a1, a2 in zip(
            block.convs1, block.convs2, block.adain1, block.adain2, block.alpha1, block.alpha2, strict=True
        ):
            xt = c1(fused(x, keep, n1.fc(s).unsqueeze(-1), n1.norm.weight, n1.norm.bias, n1.norm.eps, a1))
            xt = c2(fused(xt, keep, n2.fc(s).unsqueeze(-1), n2.norm.weight, n2.norm.bias, n2.norm.eps, a2))
            x = xt + x
        return x * keep
    if mask is None:
        return block(x, s)
    for c1, c2, n1, n2, a1, a2 in zip(
        block.convs1, block.convs2, block.adain1, block.adain2, block.alpha1, block.alpha2, strict=True
    ):
        xt = _adain(n1, x, s, mask)
        xt = xt + (1 / a1) * (torch.sin(a1 * xt) ** 2)  # Snake1D (0 stays 0)
        xt = c1(xt)
        xt = _adain(n2, xt, s, mask)
        xt = xt + (1 / a2) * (torch.sin(a2 * xt) ** 2)
        xt = c2(xt)
        x = xt + x
    return x * mask


def f0_n(predictor, en: torch.Tensor, s: torch.Tensor, frames: torch.Tensor):
    """ProsodyPredictor.F0Ntrain on padded rows: F0 and N curves (rows, 2 * frames), zero past."""
    x = lstm(predictor.shared, en.transpose(-1, -2), frames).transpose(-1, -2)
    mask = _mask(frames, en.shape[-1])
    curves = []
    for blocks, proj in ((predictor.F0, predictor.F0_proj), (predictor.N, predictor.N_proj)):
        y, m = x, mask
        for block in blocks:
            y, m = _resblk(block, y, s, m)
        curves.append(_masked(proj(y), m).squeeze(1))
    return curves[0], curves[1]


def harmonics(generator, f0_curve: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
    """The generator's harmonic source and its STFT, row by row with the row's own noise; zero
    padded to the longest: (rows, n_fft + 2, 120 * frames + 1)."""
    device = f0_curve.device
    rows = []
    for i, n in enumerate(frames.tolist()):
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            torch.manual_seed(SEED)
            f0 = generator.f0_upsamp(f0_curve[i : i + 1, None, : 2 * n]).transpose(1, 2)
            har_source, _, _ = generator.m_source(f0)
        spec, phase = generator.stft.transform(har_source.transpose(1, 2).squeeze(1))
        rows.append(torch.cat([spec, phase], dim=1)[0])
    width = max(r.shape[-1] for r in rows)
    return torch.stack([F.pad(r, (0, width - r.shape[-1])) for r in rows])


def _in(dtype: torch.dtype | None, block, x: torch.Tensor, s: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """A generator resblock (`_resblock1`), its convolutions in `dtype` where one is given (the
    result back in float32); the harmonic source, the STFT and everything else stay float32."""
    if dtype is None:
        return _resblock1(block, x, s, mask)
    with torch.autocast(x.device.type, dtype=dtype):
        return _resblock1(block, x, s, mask).float()


class Abandoned(Exception):
    """`generate`'s rows were all stopped between two of its blocks: their audio is not wanted."""


def generate(
    generator,
    x: torch.Tensor,
    s: torch.Tensor,
    f0_curve: torch.Tensor,
    frames: torch.Tensor,
    dtype=None,
    har: torch.Tensor | None = None,
    abandon: Callable[[], bool] | None = None,
):
    """kokoro's iSTFTNet Generator on padded rows (x: rows, channels, 2 * frames): audio per row;
    `dtype`: the resblocks' convolutions in it (`_in`); `har`: the harmonic source's STFT when it is
    given (a window's slice of its sentence's), else made from `f0_curve`. `abandon`, asked before
    each of its eight high-rate blocks (nearly all of a decode's work): True raises Abandoned, so a
    stopped row's compute ends within a block (~1/8 of its decode), not at the decode's end."""
    if har is None:
        har = harmonics(generator, f0_curve, frames)

    def check() -> None:
        if abandon is not None and abandon():
            raise Abandoned

    length = 2 * frames
    for i in range(generator.num_upsamples):
        last = i == generator.num_upsamples - 1
        length = length * generator.ups[i].stride[0]
        x_source = generator.noise_convs[i](har)
        x = generator.ups[i](F.leaky_relu(x, negative_slope=0.1))
        if last:
            x = generator.reflection_pad(x)
        mask = _mask(length + 1 if last else length, x.shape[-1])
        check()
        # The noise's resblock first: in int8 its output is channels last in memory, and so the sum,
        # the layout the stage's int8 resblocks read (each would copy x into it otherwise).
        x = _in(dtype, generator.noise_res[i], x_source, s, mask) + x
        xs = None
        for j in range(generator.num_kernels):
            check()
            y = _in(dtype, generator.resblocks[i * generator.num_kernels + j], x, s, mask)
            xs = y if xs is None else xs + y
        assert xs is not None
        x = _masked(xs / generator.num_kernels, mask)
    x = generator.conv_post(F.leaky_relu(x))
    half = generator.post_n_fft // 2 + 1
    spec, phase = torch.exp(x[:, :half, :]), torch.sin(x[:, half:, :])
    return [
        generator.stft.inverse(spec[i : i + 1, :, : n + 1], phase[i : i + 1, :, : n + 1]).reshape(-1)
        for i, n in enumerate(length.tolist())
    ]


def decoder_features(
    decoder, asr: torch.Tensor, f0_curve: torch.Tensor, n_curve: torch.Tensor, s: torch.Tensor, frames: torch.Tensor
) -> torch.Tensor:
    """kokoro's Decoder up to its generator, on padded rows: asr (rows, 512, frames), curves (rows,
    2 * frames) -> the generator's input (rows, channels, 2 * frames). A small part of the
    decoder's work (its convolutions run at the frame rate; the generator's at 20 and 120 times it)."""
    f0 = decoder.F0_conv(f0_curve.unsqueeze(1))
    n = decoder.N_conv(n_curve.unsqueeze(1))
    mask = _mask(frames, asr.shape[-1])
    x, mask = _resblk(decoder.encode, torch.cat([asr, f0, n], dim=1), s, mask)
    asr_res = decoder.asr_res(asr)
    res = True
    for block in decoder.decode:
        if res:
            x = torch.cat([x, asr_res, f0, n], dim=1)
        x, mask = _resblk(block, x, s, mask)
        if block.upsample_type != "none":
            res = False
    return x


def run_decoder(
    decoder,
    asr: torch.Tensor,
    f0_curve: torch.Tensor,
    n_curve: torch.Tensor,
    s: torch.Tensor,
    frames: torch.Tensor,
    dtype: torch.dtype | None = None,
    abandon: Callable[[], bool] | None = None,
) -> list[torch.Tensor]:
    """kokoro's Decoder on padded rows: asr (rows, 512, frames), curves (rows, 2 * frames); `abandon`
    as `generate`'s."""
    x = decoder_features(decoder, asr, f0_curve, n_curve, s, frames)
    return generate(decoder.generator, x, s, f0_curve, frames, dtype, abandon=abandon)


def decoder_groups(frames: list[int], limit: int = 0) -> list[list[int]]:
    """Row indices in decoder groups of at most `limit` rows (0: any): longest first, a row joining
    while the group's padded frames stay within PADDING_ALLOWED of its real ones."""
    order = sorted(range(len(frames)), key=lambda i: -frames[i])
    groups: list[list[int]] = []
    for i in order:
        g = groups[-1] if groups else None
        if g is None or (limit and len(g) >= limit):
            groups.append([i])
        elif frames[g[0]] * (len(g) + 1) <= PADDING_ALLOWED * (sum(frames[j] for j in g) + frames[i]):
            g.append(i)
        else:
            groups.append([i])
    return groups
