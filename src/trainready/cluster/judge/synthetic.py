"""Synthetic node records of a GPU fleet, for benchmarks/fleet_aggregate.py and the verdict's tests.

Figures: H200 dense BF16 GEMM ~ 750 TFLOP/s and HBM copy ~ 4000 GB/s per GPU with healthy spread
`noise` (relative σ, Gaussian; 0.01 by default: the H200 node measured 741-777 TFLOP/s over its 8 GPUs and
repeated runs, docs/measured-h200.md, a range of ±2.4% ≈ ±2.5σ at σ = 1%); a planted slow GPU runs at
its factor of that.  Every record has the shape cluster/tasks/node.py writes.
"""

from __future__ import annotations

import random
from typing import Any

from trainready.cluster.judge.verdict import NodeInput
from trainready.cluster.tasks.layout import NODE_SCHEMA

GEMM_TFLOPS = 750.0
HBM_GBPS = 4000.0
VERSIONS = {"driver": "580.95.05", "cuda": "13.0", "torch": "2.9.0", "nccl": "2.27.7", "cudnn": "91300",
            "image_digest": "sha256:" + "ab" * 32, "packages_sha256": "sha256:" + "cd" * 32,
            "kernel": "6.8.0-60-generic", "os": "Ubuntu 24.04"}


def node_record(name: str, gpus: int, rng: random.Random, noise: float, slow: dict[int, float]) -> dict[str, Any]:
    metrics = []
    for g in range(gpus):
        f = slow.get(g, 1.0)
        for metric, base, unit in (("gemm_bf16", GEMM_TFLOPS, "TFLOP/s"), ("hbm_copy", HBM_GBPS, "GB/s")):
            value = base * f * (1 + rng.gauss(0, noise))
            metrics.append({"name": metric, "value": value, "unit": unit, "labels": {"gpu": str(g), "model": "H200"},
                            "threshold": None})
    results = [{"name": "throughput", "status": "pass", "message": "", "metrics": metrics},
               {"name": "matmul", "status": "pass", "message": "", "metrics": []}]
    return {"schema": NODE_SCHEMA, "node": name, "versions": dict(VERSIONS), "report": {"results": results}}


def fleet(nodes: int, gpus: int, seed: int = 0, noise: float = 0.01,
          slow: dict[str, dict[int, float]] | None = None) -> list[NodeInput]:
    """`nodes` synthetic records named gpu0001..; slow = {node: {gpu: factor}}."""
    rng = random.Random(seed)
    slow = slow or {}
    out = []
    for i in range(nodes):
        name = f"gpu{i + 1:04d}"
        out.append(NodeInput(name, node_record(name, gpus, rng, noise, slow.get(name, {})), "",
                             f"/results/nodes/{name}.json"))
    return out
