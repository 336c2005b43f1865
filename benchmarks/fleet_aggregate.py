"""Fleet verdict over 640 nodes x 8 GPUs of synthetic node records: time against the 2 s target, and the
verdict's accuracy (a 10%-slow GPU caught, no healthy GPU flagged) over several seeds.

    PYTHONPATH=src python benchmarks/fleet_aggregate.py [--nodes 640] [--gpus 8] [--seeds 5]

The records are made and written as RESULTS/nodes/NODE.json first (not timed); the timed part is what
`trainready cluster run` does after its tasks end: read every node record, robust statistics per metric,
drift, per-node verdicts, and the fleet.json document.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import tempfile
import time
from pathlib import Path

from trainready.cluster.judge import synthetic
from trainready.cluster.judge.verdict import decide
from trainready.cluster.tasks.layout import NODE_SCHEMA, node_record, read_json
from trainready.spec import load_spec

TARGET_S = 2.0  # target: verdicts for 640 nodes x 8 GPUs in <= 2 s on a 2-core x86 VM


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=640)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--seeds", type=int, default=5)
    a = ap.parse_args()
    spec = load_spec("example:h200-8x")[0]
    worst, caught, false_flags = 0.0, 0, 0
    for seed in range(a.seeds):
        slow_node = f"gpu{(seed * 97) % a.nodes + 1:04d}"
        made = synthetic.fleet(a.nodes, a.gpus, seed=seed, slow={slow_node: {seed % a.gpus: 0.90}})
        root = Path(tempfile.mkdtemp(prefix="fleet-bench-"))
        for ni in made:
            node_record(root, ni.node).parent.mkdir(parents=True, exist_ok=True)
            node_record(root, ni.node).write_text(json.dumps(ni.record))
        t0 = time.perf_counter()
        inputs = [dataclasses.replace(ni, record=read_json(node_record(root, ni.node), NODE_SCHEMA)[0]) for ni in made]
        v = decide(inputs, spec, [], [])
        json.dumps(v.to_json())
        worst = max(worst, time.perf_counter() - t0)
        caught += slow_node in v.rejected
        false_flags += len([n for n in v.rejected if n != slow_node])
        healthy = decide(synthetic.fleet(a.nodes, a.gpus, seed=1000 + seed), spec, [], [])
        false_flags += len(healthy.rejected)
    print(f"fleet verdict: {a.nodes} nodes x {a.gpus} GPUs ({a.nodes * a.gpus * 2} throughput figures)")
    print(f"  slowest of {a.seeds} runs: {worst:.3f} s   target {TARGET_S:.1f} s   ratio {worst / TARGET_S:.2f} "
          f"({'meets' if worst <= TARGET_S else 'MISSES'} the target)")
    print(f"  10%-slow GPU caught: {caught}/{a.seeds}   healthy nodes flagged: {false_flags} "
          f"(over {2 * a.seeds} fleets, synthetic spread sigma 1%)")


if __name__ == "__main__":
    main()
