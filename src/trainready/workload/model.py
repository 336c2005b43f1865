"""A small GPT-style decoder-only transformer (nanoGPT layout), the reference
workload shared by the train-step check, the resume protocol and the planner.

Shapes: tokens [B, T] int64 → logits [B, T, V] float.  Attention goes through
`torch.nn.functional.scaled_dot_product_attention` (is_causal=True) so the same
model exercises whichever SDPA backend the device selects.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int = 512  # tokens; the sample corpus writes ids < vocab_size
    seq_len: int = 64  # context length T
    n_layer: int = 2
    n_head: int = 4
    d_model: int = 64  # hidden size h
    d_ff: int = 256  # MLP inner size (4h, GPT-2)
    dropout: float = 0.1  # on, so that resume must restore the RNG to match
    bias: bool = True
    tie_embeddings: bool = False  # lm_head shares tok_emb's matrix (GPT-2's wte, Radford et al. 2019)

    def __post_init__(self) -> None:
        if self.d_model % self.n_head:
            raise ValueError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")


PRESETS: dict[str, ModelConfig] = {
    # ~0.2 M parameters: 100 fp32 steps take a few seconds on 2 CPU cores.
    "tiny": ModelConfig(),
    # ~20 M parameters: for a GPU, still seconds for 100 steps.
    "small": ModelConfig(vocab_size=8192, seq_len=256, n_layer=6, n_head=8, d_model=512, d_ff=2048),
}

# The shape a preset takes when the data needs a larger vocabulary than the preset's own.
# The cost of a step then grows with (sequences x seq_len) x vocab: the logits, their
# log-softmax and its backward (measured on 1 CPU thread, vocab 50,304, batch 8: ~360 ms
# per step at seq_len 64 whatever the hidden size, ~55 ms at seq_len 16 and ~36 ms at seq_len 8, hidden 16,
# vs ~20-27 ms for `tiny` at vocab 512).  So on the CPU preset the embedding is tied to
# the output head (GPT-2 ties them) and the rest shrinks: hidden 16, 2 heads, seq_len 8,
# which keeps a 50k-vocabulary run within 2x the sample corpus's wall time
# (benchmarks/resume_vocab.py).  On GPU (`small`) only the embedding is tied.
LARGE_VOCAB: dict[str, dict[str, int | bool]] = {
    "tiny": {"seq_len": 8, "n_head": 2, "d_model": 16, "d_ff": 64, "tie_embeddings": True},
    "small": {"tie_embeddings": True},
}


def preset_for_vocab(preset: str, vocab_size: int) -> ModelConfig:
    """Preset `preset` with `vocab_size` (0 = the preset's own); above the preset's vocab, its LARGE_VOCAB shape."""
    base = PRESETS[preset]
    if not vocab_size:
        return base
    if vocab_size <= base.vocab_size:
        return dataclasses.replace(base, vocab_size=vocab_size)
    return dataclasses.replace(base, vocab_size=vocab_size, **LARGE_VOCAB.get(preset, {}))  # type: ignore[arg-type]


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model, bias=cfg.bias)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model, bias=cfg.bias)
        self.dropout = cfg.dropout
        self.resid_drop = nn.Dropout(cfg.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        # [B, T, C] -> [B, H, T, C/H]
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(
            q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True
        )
        y = y.transpose(1, 2).contiguous().view(b, t, c)
        return self.resid_drop(self.proj(y))


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.attn = CausalSelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.d_model, cfg.d_ff, bias=cfg.bias),
            nn.GELU(),
            nn.Linear(cfg.d_ff, cfg.d_model, bias=cfg.bias),
            nn.Dropout(cfg.dropout),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos_emb = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model, bias=cfg.bias)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.apply(self._init)
        if cfg.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        # GPT-2 scaled init of residual projections: std 0.02/sqrt(2L) (Radford et al. 2019).
        for name, p in self.named_parameters():
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        b, t = idx.shape
        if t > self.cfg.seq_len:
            raise ValueError(f"sequence length {t} > model seq_len {self.cfg.seq_len}")
        pos = torch.arange(t, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(pos))
        for blk in self.blocks:
            x = blk(x)
        logits = self.lm_head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())
