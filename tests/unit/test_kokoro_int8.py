"""Kokoro's int8 convolution on a CPU (`TTS_PRECISION=int8`, inference/kokoro/quantized.py): weights
that lie on an int8 grid (the real weights: an int8 export's, dequantised) and inputs that do give
float32's numbers exactly; other weights and inputs within 8 bits' rounding."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from inference.kokoro.quantized import Int8Conv1d, _grid_steps

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


def test_weights_on_an_int8_grid_and_inputs_on_a_uint8_grid_give_float32s_numbers():
    conv = conv_on_a_grid()
    steps = _grid_steps(conv.weight.detach())
    assert steps is not None
    g = torch.Generator().manual_seed(1)
    x = 0.05 * (torch.randint(0, 256, (1, 32, 400), generator=g).float() - 128)
    x[0, 0, 0], x[0, 0, 1] = -128 * 0.05, 127 * 0.05  # the call's range: exactly 255 steps of 0.05
    with torch.no_grad():
        want = conv(x)
    got = Int8Conv1d(conv)(x)
    # The same sums of products, added in another order: float32's rounding apart (edges included:
    # the zero padding is the input's zero point).
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * float(want.abs().max()))


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
