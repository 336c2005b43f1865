"""Fleet aggregation of fingerprints: 640 nodes x 8 GPUs of synthetic records (the battery's 56 entries, 64 chunk
digests each, one group key, each node's records read back from JSON), three GPUs planted with one differing chunk, one node with a drifted key (cuBLAS) and one with another driver (a recorded fact); the
aggregation (`fingerprint/fleet.py` `aggregate`) timed, against the 1 s budget, side by side with building the
records.

    PYTHONPATH=src python3 benchmarks/fingerprint_fleet.py [--nodes 640 --gpus 8 --rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import sys
import time

from trainready.fingerprint.fleet import aggregate
from trainready.fingerprint.key import key_id

BUDGET_S = 1.0
OPS = [f"{k}-{d}" for k, d in [("gemm", "fp64"), ("gemm", "fp32"), ("gemm", "tf32"), ("gemm", "bf16"),
       ("gemm", "fp16"), ("gemm", "fp8"), ("exp", "fp32"), ("exp", "bf16"), ("softmax", "fp32"),
       ("softmax", "bf16"), ("layernorm", "fp32"), ("layernorm", "bf16"), ("sdpa", "bf16"), ("sum", "fp32")]]
PATTERNS = ("random-7", "ones", "walking-bits", "large-exp")


def _hex(s: str, n: int) -> str:
    return hashlib.sha256(s.encode()).hexdigest()[:n]


def healthy_entries() -> list[dict]:
    out = []
    for op in OPS:
        for p in PATTERNS:
            eid = f"{op}/{p}"
            chunks = "".join(_hex(f"{eid}#{c}", 8) for c in range(64))
            out.append({"id": eid, "op": op.split("-")[1] + " " + op.split("-")[0], "shape": "8192x8192x8192",
                        "pattern": p, "digest": _hex(chunks, 64), "chunks": chunks, "ratio": 0.3,
                        "repeat_mismatches": 0, "repeat_chunk": None})
    return out


def fleet(nodes: int, gpus: int) -> dict[str, list[dict]]:
    key = {"model": "NVIDIA H100 80GB HBM3", "sm_count": 132, "cublas": "13.1.0", "battery": 1}
    base = healthy_entries()
    out = {}
    for n in range(nodes):
        out[f"node{n:03d}"] = [{"rank": g, "device": f"cuda:{g}", "index": str(g), "serial": f"1651{n:04d}{g:02d}",
                                "key": key, "key_id": key_id(key), "entries": base, "vbios": "96.00.CF.00.01",
                                "driver": "580.159.04", "ecc_mode": "enabled"} for g in range(gpus)]
    for n, g, c in ((17, 3, 12), (300, 0, 0), (611, 7, 63)):  # a deviating GPU: one chunk differs
        rec = out[f"node{n:03d}"][g] = copy.deepcopy(out[f"node{n:03d}"][g])
        e = rec["entries"][13]
        e["chunks"] = e["chunks"][:8 * c] + "deadbeef" + e["chunks"][8 * c + 8:]
        e["digest"] = _hex(e["chunks"], 64)
    drift = dict(key, cublas="13.0.2")  # another cuBLAS: another group key (a driver is a recorded fact)
    for rec in out["node042"]:
        rec["key"], rec["key_id"] = drift, key_id(drift)
    out["node043"] = [dict(r, driver="575.57.08") for r in out["node043"]]  # another driver: a recorded fact
    # each node's records as its own JSON document read back: distinct objects per GPU, as a fleet run reads them
    return {n: json.loads(json.dumps(v)) for n, v in out.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=640)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    t0 = time.perf_counter()
    recs = fleet(a.nodes, a.gpus)
    build = time.perf_counter() - t0
    times = []
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        res = aggregate(recs)
        times.append(time.perf_counter() - t0)
    best, worst = min(times), max(times)
    print(f"{a.nodes} nodes x {a.gpus} GPUs x {len(OPS) * len(PATTERNS)} entries: aggregate {best:.3f}-{worst:.3f} s "
          f"over {a.rounds} rounds (building the records {build:.3f} s); worst / budget {BUDGET_S:g} s = "
          f"{worst / BUDGET_S:.2f}")
    print(f"rejected: {res.drains}; drift: {sorted(res.drift)}; fleet-wide: {len(res.fleet_wide)}")
    for line in res.lines()[:4]:
        print("  " + line)
    return 0 if worst <= BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
