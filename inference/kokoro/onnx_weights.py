"""Kokoro-82M's weights read back out of its int8 ONNX export (kokoro-onnx's `kokoro-v1.0.int8.onnx`):
every tensor of `KModel`'s five state dicts from the graph's initializers (numpy and onnx only; the
files and the strict load are `real_weights`).

The export is KModel's own graph, run through onnxruntime's dynamic quantisation. What it did to
the weights, and how each comes back:
- Names: a tensor the graph uses as it is (biases, LayerNorm, Snake's alphas, AdaIN's fc) keeps
  torch's name under the exporter's wrapper (`encoder.bert.…`, `decoder.decoder.…`: `PREFIXES`).
  The others are found by the operator that uses them: its bias's name, else its node's scope
  (`/encoder/predictor/lstm/LSTM_quant` → `predictor.lstm`).
- Linear layers: MatMulInteger on an int8 [in, out] matrix with a per-column scale and zero point,
  then transposed to torch's [out, in]. Embeddings: an int8 table read by Gather, then
  DequantizeLinear. Convolutions: ConvInteger on a uint8 kernel with one scale and zero point. Zero
  points are shared between layers (one initializer, named after whichever layer came first), so
  no quantisation parameter is taken by name: each weight's scale is traced through the graph from
  the operator that reads it (the Mul that rescales its integer output), its zero point is that
  operator's input.
- Weight norm: the export folded each `weight_g * weight_v / ‖weight_v‖` into one kernel (a Mul in
  the graph). KModel gets that kernel as `weight_v` and its norm as `weight_g`: the same weight
  (a channel quantised to zeros: `weight_norm`).
- LSTMs (DynamicQuantizeLSTM): int8 W [dirs, in, 4H] and R [dirs, H, 4H] with a scale and zero
  point per direction, gates in ONNX's order (i, o, f, c) where torch's is (i, f, g, o), and one
  bias [dirs, 8H] that torch splits into bias_ih and bias_hh.
- Not in the graph, as the forward never reads them: each AdaIN's instance-norm affine (kokoro
  sets affine=True only to work around an old exporter bug; never trained: 1 and 0) and ALBERT's
  pooler (KModel reads ALBERT's last hidden state only: zeros here). `DEFAULTED` names them.

The weights become those the graph computes with: each quantised one (q - zero point) * scale, in
float32, exactly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# The exporter's wrapper modules → KModel's (a predictor block the wrapper called directly has no
# `predictor` in its node scope: `/encoder/F0.0/…`).
PREFIXES = (
    ("encoder.bert_encoder.", "bert_encoder."),
    ("encoder.bert.", "bert."),
    ("encoder.text_encoder.", "text_encoder."),
    ("encoder.predictor.", "predictor."),
    ("decoder.decoder.", "decoder."),
)
ENCODER_MODULES = ("bert", "bert_encoder", "text_encoder", "predictor")
# ONNX's LSTM gates are (i, o, f, c); torch's (i, f, g=c, o): torch's block k is ONNX's GATES[k].
GATES = (0, 2, 3, 1)
# Tensors of KModel the graph does not hold (the forward never reads them), and their values.
DEFAULTED = {
    "AdaIN's instance-norm weight": (re.compile(r"\.norm[12]?\.norm\.weight$|adain[12]\.\d+\.norm\.weight$"), 1.0),
    "AdaIN's instance-norm bias": (re.compile(r"\.norm[12]?\.norm\.bias$|adain[12]\.\d+\.norm\.bias$"), 0.0),
    "ALBERT's pooler": (re.compile(r"^bert\.pooler\."), 0.0),
}
_PASS_FORWARD = {"Add", "Cast", "Reshape"}  # between an integer operator and its rescaling Mul
_PASS_BACK = {"Reshape", "Cast", "Floor", "Div"}  # between a quantised bias and its float original


class ConversionError(ValueError):
    """The graph does not map onto the expected state dict (another export, another model)."""


class Graph:
    """An ONNX graph's initializers (as numpy, read once), producers and consumers."""

    def __init__(self, graph):
        from onnx import numpy_helper  # noqa: PLC0415  (onnx: the converter's tool, not the engine's)

        self.nodes = list(graph.node)
        self._protos = {t.name: t for t in graph.initializer}
        self._arrays: dict[str, np.ndarray] = {}
        self._to_array = numpy_helper.to_array
        self.producer = {out: n for n in self.nodes for out in n.output}
        self.consumers: dict[str, list] = {}
        for node in self.nodes:
            for name in node.input:
                self.consumers.setdefault(name, []).append(node)

    def is_initializer(self, name: str) -> bool:
        return name in self._protos

    def array(self, name: str) -> np.ndarray:
        if name not in self._arrays:
            self._arrays[name] = self._to_array(self._protos[name])
        return self._arrays[name]

    @property
    def initializer_names(self) -> list[str]:
        return list(self._protos)

    def only_consumer(self, name: str):
        users = self.consumers.get(name, [])
        return users[0] if len(users) == 1 else None

    def initializer_input(self, node) -> str | None:
        found = [i for i in node.input if self.is_initializer(i)]
        return found[0] if len(found) == 1 else None


def torch_name(onnx_name: str) -> str | None:
    """KModel's name for an initializer the export named after torch's parameter, else None."""
    for theirs, ours in PREFIXES:
        if onnx_name.startswith(theirs):
            return ours + onnx_name[len(theirs) :]
    return None


def scope_module(node_name: str) -> str:
    """KModel's module path from an exporter node scope: `/encoder/text_encoder/cnn.0/cnn.0.0/Conv`
    → `text_encoder.cnn.0.0` (a Sequential's child repeats its parent's path), a repeated call's
    suffix dropped (`query_3` → `query`)."""
    parts: list[str] = []
    for part in node_name.strip("/").split("/")[:-1]:
        part = re.sub(r"_\d+$", "", part)
        if parts and part.startswith(parts[-1] + "."):
            parts[-1] = part
        else:
            parts.append(part)
    if parts[:2] == ["decoder", "decoder"]:
        parts = parts[1:]
    elif parts and parts[0] == "encoder":
        parts = parts[1:] if len(parts) > 1 and parts[1] in ENCODER_MODULES else ["predictor", *parts[1:]]
    return ".".join(parts)


def _rescaling(graph: Graph, node) -> tuple[str, str | None, Any]:
    """(the weight's scale, the float bias added on the way or None, the rescaling Mul), traced
    from an integer operator's output to the Mul that turns it back to floats: Mul(output,
    Mul(the input's dynamic scale, the weight's scale)). A convolution adds its bias (quantised
    from the float one) before that Mul; a matrix product after it."""
    name, bias = node.output[0], None
    while True:
        user = graph.only_consumer(name)
        if user is None:
            raise ConversionError(f"{node.name}: its output is not rescaled by one Mul")
        if user.op_type == "Mul":
            other = next(i for i in user.input if i != name)
            scales = graph.producer.get(other)
            weight_scale = graph.initializer_input(scales) if scales is not None and scales.op_type == "Mul" else None
            if weight_scale is None:
                raise ConversionError(f"{node.name}: no weight scale behind {user.name}")
            return weight_scale, bias, user
        if user.op_type not in _PASS_FORWARD:
            raise ConversionError(f"{node.name}: unexpected {user.op_type} before its rescaling")
        if user.op_type == "Add" and bias is None:
            bias = _float_origin(graph, next(i for i in user.input if i != name))
        name = user.output[0]


def _float_origin(graph: Graph, name: str) -> str | None:
    """The float initializer a quantised bias was computed from (Div, Floor, Cast, Reshape)."""
    while not graph.is_initializer(name):
        node = graph.producer.get(name)
        if node is None or node.op_type not in _PASS_BACK:
            return None
        name = node.input[0]
    return name


def _bias_after(graph: Graph, name: str) -> str | None:
    """The bias initializer a float matrix product's output meets next (Add, or FastGelu's bias)."""
    user = graph.only_consumer(name)
    if user is not None and user.op_type in ("Add", "FastGelu"):
        return graph.initializer_input(user)
    return None


def _module(graph: Graph, node, bias: str | None) -> str:
    """The module an operator's weight belongs to: its bias's torch name, else its node scope."""
    if bias is not None:
        name = torch_name(bias)
        if name is not None and name.endswith(".bias"):
            return name[: -len(".bias")]
    return scope_module(node.name)


def _dequantized(q: np.ndarray, scale: np.ndarray, zero: np.ndarray, axis: int) -> np.ndarray:
    """(q - zero) * scale in float32, a per-channel scale or zero point along `axis`."""
    shape = [1] * q.ndim
    scale, zero = np.asarray(scale, np.float32), np.asarray(zero, np.int32)
    if scale.size > 1:
        shape[axis] = scale.size
        scale = scale.reshape(shape)
    if zero.size > 1:
        shape[axis] = zero.size
        zero = zero.reshape(shape)
    return ((q.astype(np.int32) - zero).astype(np.float32) * scale).astype(np.float32)


def _zero(graph: Graph, node, index: int) -> np.ndarray:
    name = node.input[index] if len(node.input) > index else ""
    return graph.array(name) if name else np.zeros((), np.int32)


def _per_direction(q: np.ndarray, scale: np.ndarray, zero: np.ndarray) -> np.ndarray:
    """A DynamicQuantizeLSTM matrix [dirs, X, 4H] dequantised: a scale and zero point per direction,
    or per direction and column."""
    scale = np.asarray(scale, np.float32).reshape(q.shape[0], 1, -1)
    zero = np.asarray(zero, np.int32)
    if zero.size > 1:
        zero = zero.reshape(q.shape[0], 1, -1)
    return ((q.astype(np.int32) - zero).astype(np.float32) * scale).astype(np.float32)


def _lstm(graph: Graph, node) -> dict[str, np.ndarray]:
    """torch's LSTM tensors from a DynamicQuantizeLSTM: W [dirs, in, 4H], R [dirs, H, 4H], B [dirs, 8H]."""
    w = _per_direction(graph.array(node.input[1]), graph.array(node.input[8]), _zero(graph, node, 9))
    r = _per_direction(graph.array(node.input[2]), graph.array(node.input[10]), _zero(graph, node, 11))
    b = graph.array(node.input[3]).astype(np.float32)
    hidden = r.shape[1]

    def gates(matrix: np.ndarray) -> np.ndarray:  # ONNX's (i, o, f, c) blocks → torch's (i, f, g, o)
        blocks = np.split(matrix, 4, axis=0)
        return np.ascontiguousarray(np.concatenate([blocks[k] for k in GATES], axis=0))

    out = {}
    for d, suffix in enumerate(("", "_reverse")[: w.shape[0]]):
        out[f"weight_ih_l0{suffix}"] = gates(w[d].T)
        out[f"weight_hh_l0{suffix}"] = gates(r[d].T)
        out[f"bias_ih_l0{suffix}"] = gates(b[d, : 4 * hidden])
        out[f"bias_hh_l0{suffix}"] = gates(b[d, 4 * hidden :])
    return out


def _weights(graph: Graph):
    """(module, weight as torch holds it, the initializer it came from) for each operator that
    reads a weight; a module called more than once (ALBERT's shared layer) comes once a call."""
    for node in graph.nodes:
        op, inputs = node.op_type, list(node.input)
        if op == "MatMulInteger" and graph.is_initializer(inputs[1]):
            scale, _, rescaled = _rescaling(graph, node)
            bias = _bias_after(graph, rescaled.output[0])
            w = _dequantized(graph.array(inputs[1]), graph.array(scale), _zero(graph, node, 3), 1)
            yield _module(graph, node, bias), {"weight": np.ascontiguousarray(w.T)}, inputs[1]
        elif op == "ConvInteger" and graph.is_initializer(inputs[1]):
            scale, bias, _ = _rescaling(graph, node)
            w = _dequantized(graph.array(inputs[1]), graph.array(scale), _zero(graph, node, 3), 0)
            yield _module(graph, node, bias), {"weight": w}, inputs[1]
        elif op == "Gather" and graph.is_initializer(inputs[0]) and graph.array(inputs[0]).ndim == 2:
            dq = graph.only_consumer(node.output[0])
            if dq is None or dq.op_type != "DequantizeLinear":
                continue
            w = _dequantized(graph.array(inputs[0]), graph.array(dq.input[1]), _zero(graph, dq, 2), 1)
            name = torch_name(inputs[0].removesuffix("_quantized"))
            yield (name or scope_module(node.name)).removesuffix(".weight"), {"weight": w}, inputs[0]
        elif op in ("Conv", "ConvTranspose") and graph.is_initializer(inputs[1]):
            bias = inputs[2] if len(inputs) > 2 and graph.is_initializer(inputs[2]) else None
            yield _module(graph, node, bias), {"weight": graph.array(inputs[1]).astype(np.float32)}, inputs[1]
        elif op == "MatMul" and graph.is_initializer(inputs[1]):
            w = graph.array(inputs[1]).astype(np.float32)
            yield (
                _module(graph, node, _bias_after(graph, node.output[0])),
                {"weight": np.ascontiguousarray(w.T)},
                inputs[1],
            )
        elif op == "DynamicQuantizeLSTM":
            yield scope_module(node.name), _lstm(graph, node), inputs[1]


def weight_norm(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """torch's (weight_v, weight_g) for `weight` (weight_norm's dim 0): the weight and its norm over
    every other axis. A channel quantised to all zeros (there are some: one scale for a whole
    kernel) gets a direction of ones and a norm of 0: `g * v / ‖v‖` is then 0, where 0 / 0 would
    make the decoder's audio NaN."""
    axes = tuple(range(1, weight.ndim))
    norm = np.sqrt(np.sum(weight.astype(np.float64) ** 2, axis=axes, keepdims=True)).astype(np.float32)
    dead = np.broadcast_to(norm == 0, weight.shape)
    return np.where(dead, np.float32(1), weight).astype(np.float32), norm


@dataclass
class Converted:
    state: dict[str, np.ndarray]  # KModel's `module.key` → its tensor
    defaulted: dict[str, list[str]] = field(default_factory=dict)  # DEFAULTED's reason → the keys given it
    unused: list[str] = field(default_factory=list)  # weights of the graph's own modules (its STFT's bases)


def state_dict(graph, expected: Mapping[str, tuple[int, ...]]) -> Converted:
    """Every tensor of `expected` (KModel's `module.key` → shape) from the ONNX `graph` (a
    GraphProto or `Graph`). Raises ConversionError when one is missing, comes from two places, or
    has another shape than expected."""
    graph = graph if isinstance(graph, Graph) else Graph(graph)
    result = Converted({})
    state = result.state
    source: dict[str, str] = {}  # key → the initializer it came from

    def put(key: str, value: np.ndarray, origin: str) -> None:
        if tuple(value.shape) != tuple(expected[key]):
            raise ConversionError(
                f"{key}: {tuple(value.shape)} in the graph ({origin}), {tuple(expected[key])} expected"
            )
        if key in state and (source[key] != origin or not np.array_equal(state[key], value)):
            raise ConversionError(f"{key} comes from both {source[key]} and {origin}")
        state[key], source[key] = value, origin

    for module, tensors, origin in _weights(graph):
        for name, value in tensors.items():
            if name == "weight" and f"{module}.weight_v" in expected:
                direction, norm = weight_norm(value)
                put(f"{module}.weight_v", direction, origin)
                put(f"{module}.weight_g", norm, origin)
            elif f"{module}.{name}" in expected:
                put(f"{module}.{name}", value, origin)
            elif origin not in result.unused:
                result.unused.append(origin)
    for name in graph.initializer_names:
        key = torch_name(name)
        if key is not None and key in expected and key not in state:
            put(key, graph.array(name).astype(np.float32), name)
    for key in sorted(set(expected) - set(state)):
        for reason, (pattern, value) in DEFAULTED.items():
            if pattern.search(key):
                state[key] = np.full(expected[key], value, np.float32)
                result.defaulted.setdefault(reason, []).append(key)
                break
    missing = sorted(set(expected) - set(state))
    if missing:
        more = f" (and {len(missing) - 8} more)" if len(missing) > 8 else ""
        raise ConversionError(f"not in the graph: {', '.join(missing[:8])}{more}")
    return result
