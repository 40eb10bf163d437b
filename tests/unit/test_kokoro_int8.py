"""Kokoro's int8 convolution on a CPU (`TTS_PRECISION=int8`, inference/kokoro/quantized.py): weights
that lie on an int8 grid (the real weights: an int8 export's, dequantised) and inputs that do give
float32's numbers exactly; other weights and inputs within 8 bits' rounding. The generator's
resblocks quantise each convolution's input per window of time: a loud moment no longer costs the
quiet ones their precision, and a row's audio does not depend on the rows beside it."""

from __future__ import annotations

import copy

import pytest
import torch
from kokoro.istftnet import AdaINResBlock1
from torch import nn

from inference.kokoro import model
from inference.kokoro.quantized import WINDOW, Int8Conv1d, WindowedResblock, _grid_steps, padded
from inference.kokoro.weights import fold_weight_norm

pytestmark = pytest.mark.filterwarnings("ignore:.*quantized tensor creation.*:UserWarning")


def conv_on_a_grid(channels: int = 32, kernel: int = 5, dilation: int = 3) -> nn.Conv1d:
    """Weights (q - zero point) * scale: one scale per output channel, q spanning at most 255 steps."""
    g = torch.Generator().manual_seed(0)
    conv = nn.Conv1d(channels, channels, kernel, dilation=dilation, padding=dilation * (kernel - 1) // 2)
    scales = torch.rand(channels, generator=g) * 0.01 + 1e-3
    q = torch.randint(-70, 71, conv.weight.shape, generator=g).float()
    with torch.no_grad():
        conv.weight.copy_(q * scales[:, None, None])
    return conv


def test_any_weights_and_inputs_within_eight_bits_rounding():
    g = torch.Generator().manual_seed(2)
    conv = nn.Conv1d(64, 48, 7, padding=3)
    assert _grid_steps(conv.weight.detach()) is None  # random floats: one scale per channel instead
    x = torch.randn(2, 64, 300, generator=g) * 3 + 1
    with torch.no_grad():
        want = conv(x)
    got = Int8Conv1d(conv)(x)
    error = float((got - want).norm() / want.norm())
    assert 0 < error < 0.03, error  # 8-bit inputs: ~1 % here (7 bits, PyTorch's conv1d_dynamic: ~2 %)


def test_the_layout_of_the_input_does_not_change_the_result():
    conv = conv_on_a_grid()
    x = torch.randn(1, 32, 250, generator=torch.Generator().manual_seed(3))
    channels_last = x.transpose(1, 2).contiguous().transpose(1, 2)  # what oneDNN's own output is
    int8 = Int8Conv1d(conv)
    torch.testing.assert_close(int8(channels_last), int8(x))


def test_weights_on_an_int8_grid_and_each_windows_input_on_a_uint8_grid_give_float32s_numbers():
    """Across the windows' edges and at the ends too (the zero padding is each window's zero point)."""
    conv = conv_on_a_grid(kernel=7, dilation=3)  # reaches 9 samples into each neighbouring window
    assert _grid_steps(conv.weight.detach()) is not None
    g = torch.Generator().manual_seed(4)
    length = 2 * WINDOW + WINDOW // 2  # two whole windows and a part
    x = 0.05 * (torch.randint(0, 256, (2, 32, length), generator=g).float() - 128)
    for start in range(0, length, WINDOW):  # each window's range: exactly 255 steps of 0.05
        x[:, 0, start + 100], x[:, 0, start + 101] = -128 * 0.05, 127 * 0.05
    with torch.no_grad():
        want = conv(x)
    got = Int8Conv1d(conv)(x)
    assert got.shape == want.shape
    # The same sums of products, added in another order: float32's rounding apart.
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))


def test_a_length_of_whole_windows_is_neither_cut_short_nor_compiled_again():
    """Such a length (once in 256) gets one window more, cut off; compiled, no part of the padding
    is ever one sample long, a shape of its own: such a request ran the graphs a warm-up made
    rather than waiting ~1 s for new ones."""
    conv = conv_on_a_grid(kernel=3, dilation=1)  # reach 1: a length of whole windows left 1 zero after it
    x = 0.05 * (torch.randint(0, 256, (1, 32, 2 * WINDOW), generator=torch.Generator().manual_seed(8)).float() - 128)
    with torch.no_grad():
        want = conv(x)
    torch.testing.assert_close(Int8Conv1d(conv)(x), want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))

    compiled = torch.compile(padded, dynamic=True)
    graphs = torch._dynamo.utils.counters["stats"]["unique_graphs"]
    compiled(torch.randn(2, WINDOW + 44, 8), 1)  # what a warm-up saw
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs + 1
    lengths = (2 * WINDOW, 3 * WINDOW - 1, 3 * WINDOW, 4 * WINDOW + 1)
    shapes = [compiled(torch.randn(2, length, 8), 1).shape[1] for length in lengths]
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == graphs + 1
    assert shapes == [1 + (length // WINDOW + 1) * WINDOW + 1 for length in lengths]


def resblock(channels: int = 64) -> nn.Module:
    """kokoro's generator resblock (AdaINResBlock1) with random weights, weight norm folded as the
    engine loads it, each convolution's weights on an int8 grid (as the real weights are)."""
    torch.manual_seed(5)
    block = AdaINResBlock1(channels, kernel_size=7, dilation=(1, 3, 5), style_dim=128)
    block = fold_weight_norm(block).eval()
    with torch.no_grad():
        for alpha in [*block.alpha1, *block.alpha2]:
            alpha.uniform_(0.5, 1.5)
        for conv in [*block.convs1, *block.convs2]:
            step = conv.weight.abs().amax(dim=(1, 2), keepdim=True) / 127
            conv.weight.copy_((conv.weight / step).round() * step)
    return block


class OneScale(nn.Module):
    """A convolution whose input is quantised to uint8 over the whole input's range (one scale, as
    onnxruntime's DynamicQuantizeLinear in Kokoro's int8 export): what the windows improve on."""

    def __init__(self, conv: nn.Conv1d):
        super().__init__()
        self.conv = conv

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        low, high = torch.clamp(x.amin(), max=0), torch.clamp(x.amax(), min=0)
        scale = (high - low) / 255
        zero = torch.round(-low / scale)
        return self.conv((torch.clamp(torch.round(x / scale) + zero, 0, 255) - zero) * scale)


def quantised(block: nn.Module, windowed: bool) -> nn.Module:
    """`block`'s convolutions in int8, as the engine runs them (`windowed`), or each input over one
    scale."""
    for convs in (block.convs1, block.convs2):
        for i, conv in enumerate(convs):
            convs[i] = Int8Conv1d(conv) if windowed else OneScale(conv)
    if windowed:
        block.int8 = WindowedResblock(compiled=False)
    return block


def speech_like(length: int, loud: slice, seed: int = 6) -> torch.Tensor:
    """Quiet activity everywhere and one loud moment: the generator's activations, in miniature."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 64, length, generator=g)
    x[:, :, loud] *= 40
    return x


def test_a_loud_moment_no_longer_costs_the_quiet_windows_their_precision():
    block = resblock()
    x, s = speech_like(4 * WINDOW, slice(3 * WINDOW + 100, 3 * WINDOW + 160)), torch.randn(1, 128)
    with torch.no_grad():
        want = block(x, s)
        one_scale = quantised(copy.deepcopy(block), windowed=False)(x, s)
        windows = model._resblock1(quantised(copy.deepcopy(block), windowed=True), x, s, None)

    def error(got: torch.Tensor, part: slice) -> float:
        return float((got[..., part] - want[..., part]).norm() / want[..., part].norm())

    quiet = slice(0, 2 * WINDOW)  # beyond the loud window's reach
    assert error(windows, quiet) < error(one_scale, quiet) / 4, (error(windows, quiet), error(one_scale, quiet))
    assert error(windows, quiet) < 0.02
    assert error(windows, slice(None)) < 0.02  # and no worse where it is loud
    assert windows.is_contiguous(memory_format=torch.contiguous_format) is False  # channels last, as oneDNN's


def test_rows_padded_together_are_quantised_as_each_row_alone():
    block = quantised(resblock(), windowed=True)
    short = speech_like(WINDOW + 300, slice(50, 90), seed=7)
    long_ = speech_like(3 * WINDOW, slice(2 * WINDOW + 50, 2 * WINDOW + 150))
    s = torch.randn(2, 128)
    x = torch.zeros(2, 64, 3 * WINDOW)
    x[0, :, : short.shape[-1]], x[1] = short[0], long_[0]
    mask = (torch.arange(3 * WINDOW)[None, :] < torch.tensor([[short.shape[-1]], [3 * WINDOW]])).unsqueeze(1).float()
    with torch.no_grad():
        both = model._resblock1(block, x, s, mask)
        alone = [model._resblock1(block, short, s[:1], None), model._resblock1(block, long_, s[1:], None)]
    # Float rounding apart (the style's projection over two rows adds in another order), which may
    # move a value across a quantisation level here and there: 0.15 % and 0.007 % measured, where
    # int8 itself is ~1 % from float32.
    for got, want in ((both[:1, :, : short.shape[-1]], alone[0]), (both[1:], alone[1])):
        assert float((got - want).norm() / want.norm()) < 0.005
    assert float(both[0, :, short.shape[-1] :].abs().max()) == 0  # zeros past the short row's end
