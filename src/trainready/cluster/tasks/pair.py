"""One task of a pair's Slurm step (`srun -N2 -w A,B ... trainready cluster pair-task`): the two nodes'
all_reduce bandwidth through the comm module (nccl-tests' busbw; NCCL on GPUs, gloo on CPU nodes).

Rank 0 writes RESULTS/pairs/round-R/A__B.json (a trainready.report/1 comm record); `cluster pairs` reads
its `comm_busbw_avg`.  Planted `cluster.slow=NODE`: that node's ranks sleep PAIR_SLOW_MS before every
collective (comm's slow_rank fault), so every pair holding it is slow; `cluster.slow_link=A+B` the same on each
node named (a slow leaf switch).
"""

from __future__ import annotations

from pathlib import Path
from typing import Mapping

# Per collective: a 1 MiB gloo all_reduce over loopback takes ~2-10 ms on a loaded 2-core host, so every pair
# holding the planted node drops >20x, far below the CPU floor (0.25 x reference) that load noise (~3x) stays above.
PAIR_SLOW_MS = 200.0
OPS = ["all_reduce"]


def pair_record(results: Path, rnd: int, a: str, b: str) -> Path:
    return results / "pairs" / f"round-{rnd}" / f"{a}__{b}.json"


def run_pair_task(results: Path, rnd: int, pair: str, spec_path: str | None, plants: Mapping[str, str]) -> int:
    from trainready.cluster.plants import faults as fl
    from trainready.cluster.tasks.collective import cross_node_options, sweep_to_record
    from trainready.cluster.tasks.layout import node_name
    from trainready.ranks.env import detect
    from trainready.errors import UsageError
    from trainready.spec import load_spec

    a, _, b = pair.partition(",")
    ext = detect()
    if ext is None or not b:
        raise UsageError("cluster pair-task: run by `trainready cluster pairs` as one srun step over two nodes")
    spec, source = load_spec(spec_path)
    nf = fl.for_node(plants, node_name())
    slow = nf.slow_factor is not None or nf.slow_link
    opts = cross_node_options(spec, ext.world_size, narrow=True,
                              faults={"slow_rank": ext.rank, "slow_ms": PAIR_SLOW_MS} if slow else None)
    context = {"spec_source": source, "launcher": ext.source, "pair": [a, b], "round": rnd,
               **({"planted": dict(plants)} if plants else {})}
    sweep_to_record(opts, ext, spec, source, str(pair_record(results, rnd, a, b)), context,
                    "trainready cluster pair-task")
    return 0
