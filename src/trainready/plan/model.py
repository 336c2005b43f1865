"""Model shapes for the planner: exact parameter counts and named presets.

A `ModelSpec` is either *count-only* (``params`` set, no shape: model-state
memory, checkpoint size and 6·N·D compute work, activations cannot be computed)
or a full *shape* (layers, hidden, heads, ...), from which the parameter count
is derived exactly, tensor by tensor (see `param_breakdown`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from trainready.errors import UsageError
from trainready.util.strict import doc_field

NORMS = ("layernorm", "rmsnorm")


@dataclass(frozen=True)
class ModelSpec:
    name: str = doc_field("custom", "Label shown in the report.")
    params: int = doc_field(0, "Parameter count for a count-only model (0 = derive it from the shape).")
    layers: int = doc_field(0, "Transformer layers L.")
    hidden: int = doc_field(0, "Hidden size h.")
    heads: int = doc_field(0, "Attention heads a.")
    kv_heads: int = doc_field(0, "Key/value heads (GQA); 0 = same as heads (MHA).")
    ffn: int = doc_field(0, "MLP inner size f; 0 = 4h.")
    vocab: int = doc_field(0, "Vocabulary size V.")
    seq_len: int = doc_field(0, "Training sequence length s (tokens).")
    gated_mlp: bool = doc_field(False, "SwiGLU-style MLP with three h×f matrices (Llama) instead of two (GPT).")
    bias: bool = doc_field(True, "Linear layers and LayerNorms carry biases (GPT-2/3); false for Llama.")
    norm: str = doc_field("layernorm", "layernorm (weight [+ bias]) or rmsnorm (weight only).")
    learned_pos: bool = doc_field(True, "Learned position embedding [s, h] (GPT); false for RoPE (Llama).")
    tied_embeddings: bool = doc_field(False, "Output projection shares the input embedding matrix.")
    dropout: bool = doc_field(True, "Dropout on (stores 1-byte masks, Korthikanti et al. 2022 §4.1).")
    fused_qkv: bool = doc_field(True, "Q, K, V in one matrix (and a SwiGLU's gate + up in one), as Megatron-LM and "
                                      "nanoGPT; false: separate tensors (Hugging Face Llama). Only changes the "
                                      "number of parameter tensors (AdamW 'step' counters).")

    @property
    def has_shape(self) -> bool:
        return self.layers > 0

    @property
    def kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def ffn_size(self) -> int:
        return self.ffn or 4 * self.hidden

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """g = kv_heads · head_dim: width of K and of V (= h for MHA)."""
        return self.kv * self.head_dim

    def validate(self) -> "ModelSpec":
        for k in ("params", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq_len"):
            if getattr(self, k) < 0:
                raise UsageError(f"model.{k} = {getattr(self, k)}: expected a number >= 0")
        if self.norm not in NORMS:
            raise UsageError(f"model.norm = '{self.norm}': expected one of {', '.join(NORMS)}")
        if not self.has_shape:
            if self.params <= 0:
                raise UsageError("model: give --preset NAME (--list-presets), --params N, or a shape (--layers, "
                                 "--hidden, --heads, --vocab, --seq-len)")
            return self
        for k in ("hidden", "heads", "vocab", "seq_len"):
            if getattr(self, k) <= 0:
                raise UsageError(f"model.{k} = {getattr(self, k)}: a shaped model needs {k} > 0")
        if self.hidden % self.heads:
            raise UsageError(f"model: heads ({self.heads}) must divide hidden ({self.hidden})")
        if self.heads % self.kv:
            raise UsageError(f"model: kv_heads ({self.kv}) must divide heads ({self.heads})")
        if self.params and self.params != self.shape_params():
            raise UsageError(
                f"model: params = {self.params} disagrees with the shape ({self.shape_params()}); give one or the other"
            )
        return self

    def norm_params(self) -> int:
        return 2 * self.hidden if (self.norm == "layernorm" and self.bias) else self.hidden

    def layer_params(self) -> int:
        """One transformer layer: attention (q, k, v, o) + MLP + two norms, biases if any."""
        h, g, f = self.hidden, self.kv_dim, self.ffn_size
        attn = h * h + 2 * h * g + h * h  # W_q [h,h], W_k and W_v [h,g], W_o [h,h]
        mats = 3 if self.gated_mlp else 2
        mlp = mats * h * f
        biases = (h + 2 * g + h + (mats - 1) * f + h) if self.bias else 0
        return attn + mlp + biases + 2 * self.norm_params()

    def matmul_layer_params(self) -> int:
        """Weights of a layer's matrix multiplies (what autocast copies to bf16)."""
        h, g, f = self.hidden, self.kv_dim, self.ffn_size
        return 2 * h * h + 2 * h * g + (3 if self.gated_mlp else 2) * h * f

    def layer_tensors(self) -> int:
        """Parameter tensors of one layer: 2 norms, attention (qkv [+ k, v] + o) and MLP matrices, biases."""
        norm = 2 if (self.norm == "layernorm" and self.bias) else 1  # weight [+ bias]
        attn = (1 if self.fused_qkv else 3) + 1
        mlp = (2 if (self.gated_mlp and not self.fused_qkv) else 1) + 1
        return 2 * norm + (attn + mlp) * (2 if self.bias else 1)

    def stage_tensors(self, pp: int) -> int:
        """Parameter tensors of the stage `stage_params` picks (each TP rank holds a shard of every one)."""
        if not self.has_shape:
            return 0
        final_norm = 2 if (self.norm == "layernorm" and self.bias) else 1
        head = 0 if self.tied_embeddings else 1
        every = self.layers * self.layer_tensors()
        if pp == 1:
            return 1 + (1 if self.learned_pos else 0) + every + final_norm + head
        per = (self.layers // pp) * self.layer_tensors()
        b = self.param_breakdown()
        per_p = (self.layers // pp) * self.layer_params()
        first = (b["embedding"] + b["position"] + per_p, 1 + (1 if self.learned_pos else 0) + per)
        last = (per_p + b["final_norm"] + (b["output"] or b["embedding"]), per + final_norm + 1)
        return max(first, last)[1]

    def param_breakdown(self) -> dict[str, int]:
        """Exact counts per part: embedding, position, layers, final norm, output head."""
        if not self.has_shape:
            return {"total (given)": self.params}
        h, v = self.hidden, self.vocab
        return {
            "embedding": v * h,
            "position": self.seq_len * h if self.learned_pos else 0,
            "layers": self.layers * self.layer_params(),
            "final_norm": self.norm_params(),
            "output": 0 if self.tied_embeddings else v * h,
        }

    def shape_params(self) -> int:
        return sum(self.param_breakdown().values())

    @property
    def total_params(self) -> int:
        return self.shape_params() if self.has_shape else self.params

    def stage_params(self, pp: int) -> int:
        """Parameters of the largest pipeline stage (first: embeddings; last: norm + head).

        With pp > 1 and tied embeddings Megatron keeps a copy of the embedding on
        the last stage too (Shoeybi et al. 2019, §3), so it is counted there.
        """
        if not self.has_shape:
            return -(-self.params // pp)
        b = self.param_breakdown()
        if pp == 1:
            return sum(b.values())
        per = (self.layers // pp) * self.layer_params()
        first = b["embedding"] + b["position"] + per
        last = per + b["final_norm"] + (b["output"] or b["embedding"])
        return max(first, last)


def from_reference(cfg: object, name: str = "reference") -> ModelSpec:
    """The shape of `trainready.workload.model.GPT(cfg)` (nanoGPT layout, GELU MLP, head tied or not)."""
    return ModelSpec(
        name=name, layers=cfg.n_layer, hidden=cfg.d_model, heads=cfg.n_head, ffn=cfg.d_ff,  # type: ignore[attr-defined]
        vocab=cfg.vocab_size, seq_len=cfg.seq_len, bias=cfg.bias, norm="layernorm",  # type: ignore[attr-defined]
        learned_pos=True, tied_embeddings=bool(getattr(cfg, "tie_embeddings", False)), dropout=cfg.dropout > 0,  # type: ignore[attr-defined]
    )


def _llama(name: str, layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int, seq: int) -> ModelSpec:
    return ModelSpec(
        name=name, layers=layers, hidden=hidden, heads=heads, kv_heads=kv, ffn=ffn, vocab=vocab, seq_len=seq,
        gated_mlp=True, bias=False, norm="rmsnorm", learned_pos=False, tied_embeddings=False, dropout=False,
    )


# Shapes from the papers / released configs (config.json of each model card).
PRESETS: dict[str, ModelSpec] = {
    # Brown et al. 2020, Table 2.1: 96 layers, d_model 12288, 96 heads, context 2048; GPT-2 BPE vocab 50257.
    "gpt3-175b": ModelSpec("gpt3-175b", 0, 96, 12288, 96, 0, 0, 50257, 2048, tied_embeddings=True),
    # Touvron et al. 2023 (Llama 2), Table 1 + HF config.json.
    "llama2-7b": _llama("llama2-7b", 32, 4096, 32, 32, 11008, 32000, 4096),
    "llama2-13b": _llama("llama2-13b", 40, 5120, 40, 40, 13824, 32000, 4096),
    "llama2-70b": _llama("llama2-70b", 80, 8192, 64, 8, 28672, 32000, 4096),
    # Llama 3 herd paper (Grattafiori et al. 2024), Table 3 + HF config.json.
    "llama3-8b": _llama("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
    "llama3-70b": _llama("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
    "llama3-405b": _llama("llama3-405b", 126, 16384, 128, 8, 53248, 128256, 8192),
    # A 500B dense model known by its count only: this Llama-style shape is an assumption
    # (96 layers × ~5.16 B + embeddings ≈ 500.5 B).
    "dense-500b": _llama("dense-500b", 96, 20480, 160, 8, 69632, 128256, 8192),
    # Rajbhandari et al. 2020 (ZeRO), §1/Figure 1: a 7.5 B model, count only.
    "zero-7.5b": ModelSpec("zero-7.5b", params=7_500_000_000),
}


def preset(name: str) -> ModelSpec:
    key = name.lower()
    if key.startswith("reference-"):
        from trainready.workload.model import PRESETS as REF

        sub = key.split("-", 1)[1]
        if sub in REF:
            return from_reference(REF[sub], key)
    if key not in PRESETS:
        known = ", ".join(list(PRESETS) + ["reference-tiny", "reference-small"])
        raise UsageError(f"--preset '{name}': unknown (expected one of: {known})")
    return PRESETS[key]


def override(base: ModelSpec, **changes: object) -> ModelSpec:
    """`base` with the non-None `changes` applied (CLI flags over a preset)."""
    return replace(base, **{k: v for k, v in changes.items() if v is not None})
