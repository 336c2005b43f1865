"""The formulas behind `trainready plan`, with their sources (`--explain`)."""

from __future__ import annotations

from trainready.plan.planner import MEGATRON_RULE, ZERO_RULE

FORMULAS: tuple[tuple[str, str, str], ...] = (
    ("Model states per GPU (ZeRO)",
     "stage 0: (w+g+K)Ψ · stage 1: (w+g)Ψ + KΨ/N_d · stage 2: wΨ + (g+K)Ψ/N_d · stage 3: (w+g+K)Ψ/N_d",
     "Rajbhandari et al. 2020, ZeRO, §5.1 and Figure 1 (7.5 B on 64 GPUs: 120 / 31.4 / 16.6 / 1.9 GB)"),
    ("Bytes per parameter",
     "bf16: w=2, g=2, K=12 (FP32 master 4 + Adam m 4 + v 4) = 16 — used by default; "
     "bf16-fp32grad: 2 + 4 + 12 = 18; fp32/amp: 4 + 4 + 8 = 16 (+2 per Linear param for autocast copies)",
     "ZeRO §3.1 and DeepSpeed docs (16); Megatron-LM docs/distrib_optimizer.md (18)"),
    ("Distributed optimizer (Megatron)",
     "bf16 params + bf16 grads 4 + 16/d (fp32 master 4 + m 4 + v 4 + fp32 main-grad shard 4, over d); "
     "bf16 + fp32 grads 6 + 12/d; fp32 8 + 8/d",
     "Megatron-LM docs/source/api-guide/dist_optimizer.md (bytes-per-parameter table)"),
    ("AdamW step counters",
     "4 B × parameter tensors of the stage (one 0-dim fp32 'step' per tensor)",
     "torch.optim.AdamW state; on the CPU unless capturable/fused"),
    ("Ψ per GPU",
     "parameters of the largest pipeline stage (first: + embedding; last: + final norm + head) / t",
     "Shoeybi et al. 2019 (Megatron-LM) §3; Narayanan et al. 2021 §2"),
    ("Activations per layer",
     "no parallelism sbh(34 + 5as/h); TP sbh(10 + 24/t + 5as/(ht)); TP+SP sbh(34/t + 5as/(ht)); "
     "TP+selective sbh(10 + 24/t); TP+SP+selective sbh(34/t); full recompute 2sbh",
     "Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer Models, Table 2"),
    ("Flash attention",
     "drops the 5as²b score/softmax/dropout term; keeps a 4-byte log-sum-exp per query and head (4asb)",
     "Dao et al. 2022, FlashAttention, §3.1 (recomputes attention in the backward pass)"),
    ("Pipeline in-flight micro-batches",
     "first stage of 1F1B holds min(p, m) micro-batches of L/p layers ≈ L layers' worth",
     "Korthikanti et al. 2022 §4.2.3; Narayanan et al. 2021 §2.2.1"),
    ("Embedding/output activations",
     "sbhp/t (embedding dropout masks) + 4sbh/t·(1 + v/h) (output layer incl. fp32 logits, when p = 1)",
     "Korthikanti et al. 2022 §4.3"),
    ("Allowance",
     "fragmentation · allocated peak + runtime GiB (CUDA context, NCCL, cuBLAS); defaults 10 % + 2 GiB",
     "our assumption — override with --fragmentation / --runtime-gib"),
    ("Checkpoint",
     "full = N·14 B (bf16 2 + master 4 + m 4 + v 4), fp32/amp N·12; write = size / bandwidth; "
     "lost share = write / (interval + write)",
     "ZeRO §3.1 (K = 12): 500 B parameters → 7.0 TB"),
    ("Compute",
     "model FLOPs 6·N·D and, with attention, (6N + 12·L·h·s)·D; time = C / (G · peak · MFU) with C the "
     "attention-inclusive total (6·N·D for a count-only model); full recompute: 8·N·D hardware",
     "Kaplan et al. 2020 §2.1; Chowdhery et al. 2022 (PaLM) Appendix B; Narayanan et al. 2021 §3.5"),
    ("Layout ranking (--search, and the layout chosen when none is given)",
     "cost = (1 + recompute extra) · (1 + (p−1)/m) · (1 + 0.02(t−1) + 0.02(cp−1) + 0.5·[ZeRO-3]), "
     "m = global/(b·d) — a relative heuristic (1 = no recompute, bubble or extra traffic), not a prediction",
     "bubble: Narayanan et al. 2021 §2.2.1; ZeRO-3 1.5× traffic: Rajbhandari et al. 2020 §7.2.2; "
     "0.02 per TP/CP rank: our assumption"),
    ("Framework (advice)",
     "≤ 13 B parameters → sharded data parallelism (ZeRO-2/3, FSDP); larger → TP within a server, PP across "
     "servers, DP (distributed optimizer / ZeRO-1) over the rest",
     f"{ZERO_RULE}; {MEGATRON_RULE}"),
)
