"""Activation memory per GPU, in bytes.

Two layouts:

* **megatron** (precisions bf16, bf16-fp32grad, fp32): Korthikanti et al. 2022,
  "Reducing Activation Recomputation in Large Transformer Models", §4 and
  Table 2.  Per layer, per micro-batch, with s sequence, b micro-batch,
  h hidden, a heads, t tensor-parallel degree (2-byte activations, dropout):

      no parallelism            sbh(34 + 5as/h)
      tensor parallel           sbh(10 + 24/t + 5as/(ht))
      tensor + sequence par.    sbh(34/t + 5as/(ht))
      tensor par. + selective   sbh(10 + 24/t)
      tensor + seq. + selective sbh(34/t)
      full recompute            2sbh   (the layer input only; /t with sequence parallel)

  Generalised here term by term so it also covers GQA (K, V of width
  g = kv_heads·head_dim), an MLP size f ≠ 4h, SwiGLU (three [s,b,f] tensors
  instead of two), no dropout, fp32 activations, and flash attention (no
  s² scores: FlashAttention, Dao et al. 2022, keeps only the [a,s,b]
  log-sum-exp, 4 bytes each).  With GPT-3's shape the terms add up to
  Table 2 exactly (tests/test_plan_memory.py).

* **torch-amp** (precision amp): a plain PyTorch module under
  torch.autocast(bf16) with fp32 parameters, the layout of
  `trainready.workload.model.GPT`.  Counted from the tensors autograd saves:
  LayerNorm runs in fp32 (autocast fp32 list) and saves its fp32 input
  (the residual stream, 4sbh) and mean/rstd (8sb); each Linear saves its
  bf16-cast input (2sbh); SDPA flash saves q, k, v (views of the qkv output,
  2sb(h+2g)), its output O (2sbh, also the proj input: O's memory layout is
  already [b,s,a,d]) and the log-sum-exp (4asb); GELU saves its input and
  fc2 its input (2sbf each); dropout saves a 1-byte mask (sbh each):
  per layer 2·4sbh + 2·8sb + 2·2sbh + 2sb(h+2g) + 2sbh + 2sbh + 4sbf + 4asb.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainready.plan.inputs import PlanInput
from trainready.plan.quantity import Quantity

KORTHIKANTI = "Korthikanti et al. 2022, Table 2 / §4"


@dataclass(frozen=True)
class LayerActs:
    stored: float  # bytes per layer per micro-batch kept until backward
    full: float  # bytes per layer per micro-batch without any recomputation (recompute working set)
    formula: str


def layer_megatron(inp: PlanInput) -> LayerActs:
    m, p, t = inp.model, inp.parallel, inp.training
    s, b, h, a, g, f = m.seq_len // p.cp, t.micro_batch, m.hidden, m.heads, m.kv_dim, m.ffn_size
    s_kv = m.seq_len  # keys a query attends to (all of them with context parallelism)
    e, tp = inp.precision.act, p.tp
    sp = tp if p.sp else 1  # sequence parallelism also splits the 'unsharded' terms by t
    mask = 1 if m.dropout else 0
    # LN inputs (2) + QKV input + MLP input, elements; the two residual-dropout masks, bytes.
    unsharded = 4 * s * b * h * e + 2 * s * b * h * mask
    mlp = (3 if m.gated_mlp else 2) * s * b * f
    # Q, K, V and the output-projection input, plus the MLP intermediates, all split by t.
    sharded = (2 * s * b * h + 2 * s * b * g + mlp) * e
    scores = a * s * s_kv * b * ((e + 1 + e) if m.dropout else e)  # softmax out, dropout mask, dropout out
    lse = 4 * a * s * b  # flash: fp32 log-sum-exp per query and head
    attn = lse if t.attention == "flash" else scores
    full = unsharded / sp + sharded / tp + attn / tp
    if t.recompute == "selective":  # core attention recomputed: no score tensors kept
        stored = unsharded / sp + sharded / tp + (lse / tp if t.attention == "flash" else 0)
    elif t.recompute == "full":
        stored = s * b * h * e / sp
    else:
        stored = full
    core = "4as·b (flash lse)" if t.attention == "flash" else ("5as²b" if m.dropout else "2as²b")
    formula = (
        f"[(4sbh·e + {2 * mask}sbh)/{'t' if p.sp else '1'} + (2sbh + 2sbg + {mlp // (s * b * f)}sbf)·e/t + {core}/t]"
        if t.recompute != "full" else "2sbh (/t with SP)"
    )
    return LayerActs(stored, full, formula)


def layer_torch_amp(inp: PlanInput) -> LayerActs:
    m, t = inp.model, inp.training
    s, b, h, a, g, f = m.seq_len, t.micro_batch, m.hidden, m.heads, m.kv_dim, m.ffn_size
    mask = 1 if m.dropout else 0
    mlp = (3 if m.gated_mlp else 2) * 2 * s * b * f
    attn_core = 4 * a * s * b if t.attention == "flash" else a * s * s * b * (5 if m.dropout else 2)
    full = (2 * 4 * s * b * h + 2 * 8 * s * b + 2 * 2 * s * b * h + 2 * s * b * (h + 2 * g)
            + 2 * s * b * h + 2 * mask * s * b * h + mlp + attn_core)
    if t.recompute == "full":  # torch.utils.checkpoint per block keeps the fp32 block input
        stored = 4 * s * b * h
    elif t.recompute == "selective":
        stored = full - attn_core + (4 * a * s * b if t.attention == "flash" else 0)
    else:
        stored = full
    formula = "8sbh + 16sb + 4sbh + 2sb(h+2g) + 2sbh + 2sbh(masks) + 4sbf + 4asb" if t.recompute != "full" else "4sbh"
    return LayerActs(stored, full, formula)


def activation_quantities(inp: PlanInput) -> list[Quantity]:
    """Stored activations of the busiest pipeline stage + the transient peak on top of them."""
    m, p, t = inp.model, inp.parallel, inp.training
    if not m.has_shape:
        return []
    amp = t.precision == "amp"
    layer = layer_torch_amp(inp) if amp else layer_megatron(inp)
    per_stage = m.layers // p.pp
    inflight = min(p.pp, inp.microbatches)  # 1F1B: the first stage holds p micro-batches (Korthikanti §4.2.3)
    src = "torch.autocast saved-tensor count (module docstring)" if amp else KORTHIKANTI
    out = [Quantity("activations.per_layer", "activations per layer, per micro-batch", layer.stored, "B",
                    layer.formula, src)]
    s, b, h, v = m.seq_len // p.cp, t.micro_batch, m.hidden, m.vocab
    tp = p.tp
    stored = layer.stored * per_stage * inflight
    out.append(Quantity("activations.layers", f"activations, {per_stage} layers × {inflight} micro-batch(es)",
                        stored, "B", "per_layer · L/p · min(p, m)", src + "; 1F1B schedule §4.2.3"))
    if amp:
        extra = (s * b * h * (1 if m.dropout else 0) + 2 * 8 * s * b + (8 * s if m.learned_pos else 0) + 4 * s * b * h + 8 * s * b
                 + 2 * s * b * h + 4 * s * b * v)
        ef = ("sbh (emb. dropout mask) + 16sb + 8s (token ids, targets, positions) + 4sbh + 8sb (ln_f) "
              "+ 2sbh (head input) + 4sbv (log_softmax out)")
        transient = max(8 * s * b * v, 2 * s * b * v + 6 * v * h)
        tf = "max(8sbv: loss grad + log_softmax grad at backward start, 2sbv + 6vh: head weight grad cast)"
        tsrc = "PyTorch cross_entropy = log_softmax + nll_loss, fp32 logits"
    else:
        emb = (s * b * h / (tp if p.sp else 1)) * inflight if m.dropout else 0
        last = 4 * s * b * h / tp * (1 + v / h) if p.pp == 1 else 0
        extra = emb + last
        ef = "sbh·p/t (embedding dropout masks) + [p = 1] 4sbh/t·(1 + v/h) (output layer, fp32 logits)"
        transient = layer.full if t.recompute == "full" else 0.0
        tf = "one layer recomputed in full during backward" if t.recompute == "full" else "0 (covered by the allowance)"
        tsrc = KORTHIKANTI + " §4.3 / §5"
    out.append(Quantity("activations.extra", "embedding / output layer activations", extra, "B", ef,
                        KORTHIKANTI + " §4.3" if not amp else src))
    out.append(Quantity("activations.transient", "transient on top (backward start)", transient, "B", tf, tsrc))
    return out
