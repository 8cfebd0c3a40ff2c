"""all-MiniLM-L6-v2 on ONNX Runtime: the same BERT forward pass as synthesis.novelty's numpy encoder, as one graph.

    graph = minilm_graph(numpy_encoder)          # bytes of an ONNX model, built from the encoder's own weights
    session = onnxruntime.InferenceSession(graph, ...)

Why: the numpy encoder spends more time in its elementwise passes (softmax over every head, the erf GELU, the
layer norms, each a few trips through memory) than in its matrix products. ONNX Runtime runs the same arithmetic
with fused kernels (com.microsoft Attention, SkipLayerNormalization, BiasGelu): float32 throughout, the exact erf
GELU, so its vectors agree with the numpy ones to float32 rounding (synthesis/tests/test_novelty_onnx.py).

The graph is written here from the weights the numpy encoder already holds, in memory, at first use: nothing is
downloaded or exported, and neither torch nor the `onnx` package is needed. An ONNX model is a protobuf message;
the few message types a graph needs are written below by field number (onnx/onnx.proto3, opset 17 and the
com.microsoft domain).
"""

from __future__ import annotations

import struct

import numpy as np

from .minilm import MiniLMEncoder, mean_pool

OPSET = 17
IR_VERSION = 8
_FLOAT, _INT32, _INT64 = 1, 6, 7  # TensorProto.DataType
_ELEM = {np.dtype(np.float32): _FLOAT, np.dtype(np.int32): _INT32, np.dtype(np.int64): _INT64}
_ATTR_FLOAT, _ATTR_INT = 1, 2  # AttributeProto.AttributeType

# --- protobuf wire format (varints and length-delimited fields are all a graph needs) ------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s are ten-byte two's complement
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _int(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _bytes(field: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def _float(field: int, value: float) -> bytes:
    return _varint(field << 3 | 5) + struct.pack("<f", value)


def _tensor(name: str, array: np.ndarray) -> bytes:
    array = np.ascontiguousarray(array)
    dims = b"".join(_varint(d) for d in array.shape)
    return (
        (_bytes(1, dims) if array.ndim else b"")  # dims, packed
        + _int(2, _ELEM[array.dtype])
        + _bytes(8, name)
        + _bytes(9, array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())  # raw_data
    )


def _value_info(name: str, elem_type: int, dims: list[int | str]) -> bytes:
    shape = b"".join(_bytes(1, _bytes(2, d) if isinstance(d, str) else _int(1, d)) for d in dims)
    tensor_type = _int(1, elem_type) + _bytes(2, shape)
    return _bytes(1, name) + _bytes(2, _bytes(1, tensor_type))


def _attribute(name: str, value: int | float) -> bytes:
    if isinstance(value, float):
        return _bytes(1, name) + _float(2, value) + _int(20, _ATTR_FLOAT)
    return _bytes(1, name) + _int(3, value) + _int(20, _ATTR_INT)


class _Graph:
    def __init__(self):
        self.nodes: list[bytes] = []
        self.initializers: list[bytes] = []
        self._count = 0

    def const(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(_tensor(name, array))
        return name

    def op(self, op_type: str, inputs: list[str], domain: str = "", outputs: int = 1, **attributes) -> str | list:
        self._count += 1
        names = [f"{op_type.lower()}_{self._count}_{i}" for i in range(outputs)]
        node = b"".join(_bytes(1, i) for i in inputs) + b"".join(_bytes(2, o) for o in names)
        node += _bytes(3, f"n{self._count}") + _bytes(4, op_type)
        node += b"".join(_bytes(5, _attribute(k, v)) for k, v in attributes.items())
        if domain:
            node += _bytes(7, domain)
        self.nodes.append(node)
        return names[0] if outputs == 1 else names


# --- the graph -----------------------------------------------------------------------------------------------


def minilm_graph(encoder) -> bytes:
    """An ONNX model of `encoder`'s BERT (a synthesis.novelty.MiniLMEncoder, whose weights it reads).

    Inputs: input_ids int64 (batch, length), attention_mask int32 (batch, length), 1 for a token and 0 for padding.
    Output: last_hidden float32 (batch, length, hidden); pooling and normalisation stay with the caller."""
    g = _Graph()
    f32 = np.float32
    eps = float(encoder.eps)
    ids, mask = "input_ids", "attention_mask"
    # Embeddings: word + position (the first `length` rows) + token type 0, then a layer norm.
    words = g.op("Gather", [g.const("word_embeddings", encoder.word), ids])
    length = g.op("Shape", [ids], start=1, end=2)
    positions = g.op(
        "Slice",
        [
            g.const("position_embeddings", encoder.position),
            g.const("zero", np.array([0], np.int64)),
            length,
            g.const("axis0", np.array([0], np.int64)),
        ],
    )
    x = g.op("Add", [words, positions])
    x = g.op("Add", [x, g.const("token_type_0", encoder.token_type[0].astype(f32))])
    x = g.op(
        "LayerNormalization",
        [x, g.const("emb_ln_w", encoder.emb_norm[0].astype(f32)), g.const("emb_ln_b", encoder.emb_norm[1].astype(f32))],
        axis=-1,
        epsilon=eps,
    )
    for i, layer in enumerate(encoder.layers):

        def c(name, array, i=i):
            return g.const(f"l{i}_{name}", np.asarray(array, dtype=f32))

        # Q, K and V in one product; padded keys masked (2-D mask: 1 keeps a key, 0 drops it).
        attended = g.op(
            "Attention",
            [x, c("qkv_w", layer["qkv"][0]), c("qkv_b", layer["qkv"][1]), mask],
            domain="com.microsoft",
            num_heads=encoder.heads,
        )
        out = g.op("MatMul", [attended, c("out_w", layer["out"][0])])
        x = g.op(
            "SkipLayerNormalization",
            [out, x, c("ln1_w", layer["norm1"][0]), c("ln1_b", layer["norm1"][1]), c("out_b", layer["out"][1])],
            domain="com.microsoft",
            epsilon=eps,
        )
        up = g.op("MatMul", [x, c("up_w", layer["up"][0])])
        up = g.op("BiasGelu", [up, c("up_b", layer["up"][1])], domain="com.microsoft")  # erf GELU, as BERT's
        down = g.op("MatMul", [up, c("down_w", layer["down"][0])])
        x = g.op(
            "SkipLayerNormalization",
            [down, x, c("ln2_w", layer["norm2"][0]), c("ln2_b", layer["norm2"][1]), c("down_b", layer["down"][1])],
            domain="com.microsoft",
            epsilon=eps,
        )
    g.nodes.append(_bytes(1, x) + _bytes(2, "last_hidden") + _bytes(3, "output") + _bytes(4, "Identity"))

    graph = b"".join(_bytes(1, n) for n in g.nodes) + _bytes(2, "minilm")
    graph += b"".join(_bytes(5, t) for t in g.initializers)
    graph += _bytes(11, _value_info(ids, _INT64, ["batch", "length"]))
    graph += _bytes(11, _value_info(mask, _INT32, ["batch", "length"]))
    graph += _bytes(12, _value_info("last_hidden", _FLOAT, ["batch", "length", encoder.hidden]))
    opsets = _bytes(8, _bytes(1, "") + _int(2, OPSET)) + _bytes(8, _bytes(1, "com.microsoft") + _int(2, 1))
    return _int(1, IR_VERSION) + _bytes(2, "clawgym") + opsets + _bytes(7, graph)


# --- the encoder ---------------------------------------------------------------------------------------------


class OnnxMiniLMEncoder(MiniLMEncoder):
    """MiniLMEncoder (its tokenizer, batching by length and pooling) with the forward pass on ONNX Runtime."""

    def __init__(self, model_dir=None, *, threads: int = 0):
        import onnxruntime

        super().__init__(model_dir)
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads  # 0: ONNX Runtime's default, one per core
        options.inter_op_num_threads = 1  # the graph is a chain: nothing runs side by side
        # Threads that wait for work sleep instead of spinning: the encoder shares the machine with sandboxes,
        # model servers and other workers, and a spinning thread takes a core from them between two batches.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(minilm_graph(self), options, providers=["CPUExecutionProvider"])
        # The session holds its own copy of the weights; the numpy ones are no longer needed.
        self.word = self.position = self.token_type = None
        self.layers = []

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        (hidden,) = self.session.run(None, {"input_ids": ids, "attention_mask": mask.astype(np.int32)})
        return mean_pool(hidden, mask)
