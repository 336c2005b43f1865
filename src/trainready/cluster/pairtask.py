"""One task of a pair's Slurm step (`srun -N2 -w A,B ... trainready cluster pair-task`): the two nodes'
all_reduce bandwidth through the comm module (nccl-tests' busbw; NCCL on GPUs, gloo on CPU nodes).

Rank 0 writes RESULTS/pairs/round-R/A__B.json (a trainready.report/1 comm record); `cluster pairs` reads
its `comm_busbw_avg`.  Planted `cluster.slow=NODE`: that node's ranks sleep PAIR_SLOW_MS before every
collective (comm's slow_rank fault), so every pair holding it is slow.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Mapping

# Per collective: a 1 MiB gloo all_reduce over loopback takes ~2-10 ms on a loaded 2-core host, so every pair
# holding the planted node drops >20x, far below the CPU floor (0.25 x reference) that load noise (~3x) stays above.
PAIR_SLOW_MS = 200.0
OPS = ["all_reduce"]


def pair_record(results: Path, rnd: int, a: str, b: str) -> Path:
    return results / "pairs" / f"round-{rnd}" / f"{a}__{b}.json"


def run_pair_task(results: Path, rnd: int, pair: str, spec_path: str | None, plants: Mapping[str, str]) -> int:
    from trainready.cluster import faults as fl
    from trainready.cluster.cross import SIZES_CPU, SIZES_GPU
    from trainready.cluster.layout import node_name
    from trainready.comm.external import leave
    from trainready.comm.ops import size_steps
    from trainready.comm.run import CommOptions, build_report, sweep_external
    from trainready.commands.common import write_json_doc
    from trainready.dist.env import detect
    from trainready.errors import UsageError
    from trainready.records import Outcome
    from trainready.spec import load_spec
    from trainready.util.devices import cuda_count

    a, _, b = pair.partition(",")
    ext = detect()
    if ext is None or not b:
        raise UsageError("cluster pair-task: run by `trainready cluster pairs` as one srun step over two nodes")
    spec, source = load_spec(spec_path)
    backend = "nccl" if cuda_count() else "gloo"
    lo, hi = SIZES_GPU if backend == "nccl" else SIZES_CPU
    slow = fl.for_node(plants, node_name()).slow_factor is not None
    opts = CommOptions(ops=list(OPS), sizes=size_steps(max(lo, hi // 16), hi, 4), warmup=5 if backend == "nccl" else 2,
                       iters=20 if backend == "nccl" else 10, world_size=ext.world_size, backend=backend,
                       timeout_s=spec.comm.timeout_s, pair_iters=0, step_budget_s=None if backend == "nccl" else 0.5,
                       faults={"slow_rank": ext.rank, "slow_ms": PAIR_SLOW_MS} if slow else {})
    out = str(pair_record(results, rnd, a, b))
    context = {"spec_source": source, "launcher": ext.source, "pair": [a, b], "round": rnd,
               **({"planted": dict(plants)} if plants else {})}
    t0 = time.perf_counter()

    def report_failure(fail: Outcome) -> int:
        if ext.rank == 0:
            write_json_doc(build_report(opts, spec, source, None, fail, time.perf_counter() - t0, context).to_json(), out, None)
        else:
            sys.stderr.write(f"trainready cluster pair-task: FAIL: {fail.message}\n")
        return 1

    data, fail = sweep_external(opts, ext, report_failure)
    if fail is not None:
        leave(ext, report_failure(fail))
    if ext.rank == 0:
        write_json_doc(build_report(opts, spec, source, data, None, time.perf_counter() - t0, context).to_json(), out, None)
    return 0
