"""trainready comm beside NVIDIA nccl-tests, same machine, same call, same sizes.

For each op (all_reduce, all_gather, reduce_scatter): run nccl-tests'
``<op>_perf -b MIN -e MAX -f 2 -g NGPUS`` (single process, one thread, no MPI)
and ``trainready comm`` over the same sizes, then print busbw per size from both
and their ratio (target >= 0.95 at S >= 64 MB).  The column compared is the
placement trainready uses for the op (``details[...]['placement']``: all_reduce
is in-place, all_gather/reduce_scatter write a separate output: out-of-place).
With one GPU busbw is 0 by definition (factor (n-1)/n), so algbw is compared.

nccl-tests is NOT part of this repository: build it yourself from NVIDIA's
repository and pass its build directory (its outputs are parsed with
`trainready.comm.table.parse`, tested on captured real outputs).

    python3 benchmarks/comm_vs_nccl_tests.py --nccl-tests /path/nccl-tests/build -b 1M -e 8G [--out DIR]

Keep NCCL_NVLS_ENABLE=0 where NVLink multicast must stay off: both sides inherit the environment.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from trainready.comm.table import parse  # noqa: E402

OPS = ("all_reduce", "all_gather", "reduce_scatter")
TARGET = 0.95
TARGET_FROM = 64 * 2**20  # bytes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nccl-tests", required=True, type=Path, help="nccl-tests build directory (has all_reduce_perf)")
    ap.add_argument("-b", "--min-bytes", default="1M")
    ap.add_argument("-e", "--max-bytes", default="8G")
    ap.add_argument("-g", "--gpus", type=int, default=0, help="GPUs (default: all visible)")
    ap.add_argument("-n", "--iters", type=int, default=20)
    ap.add_argument("-w", "--warmup", type=int, default=5)
    ap.add_argument("--ops", default=",".join(OPS))
    ap.add_argument("--out", type=Path, default=None, help="save raw outputs here")
    a = ap.parse_args()
    import torch

    if not torch.cuda.is_available():
        print("comm_vs_nccl_tests: needs CUDA GPUs; none here (nothing measured)")
        return 0
    n = a.gpus or torch.cuda.device_count()
    ops = [o for o in a.ops.split(",") if o]
    out = a.out or Path(tempfile.mkdtemp(prefix="comm-vs-nccl-"))
    out.mkdir(parents=True, exist_ok=True)
    nccl = {}
    for op in ops:
        exe = a.nccl_tests / f"{op}_perf"
        cmd = [str(exe), "-b", a.min_bytes, "-e", a.max_bytes, "-f", "2", "-g", str(n),
               "-n", str(a.iters), "-w", str(a.warmup), "-c", "1"]
        p = subprocess.run(cmd, capture_output=True, text=True)
        (out / f"nccl_{op}.txt").write_text(p.stdout + p.stderr)
        if p.returncode:
            print(f"{exe} failed (rc {p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
            return 1
        nccl[op] = parse(p.stdout)
    js = out / "trainready_comm.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    cmd = [sys.executable, "-m", "trainready", "comm", "--ops", ",".join(ops), "-b", a.min_bytes, "-e", a.max_bytes,
           "-f", "2", "-n", str(a.iters), "-w", str(a.warmup), "--world-size", str(n), "--json", str(js)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    (out / "trainready_comm.txt").write_text(p.stdout + p.stderr)
    if not js.exists():
        print(f"trainready comm wrote no record (rc {p.returncode}): {p.stderr.strip()[-300:]}")
        return 1
    ours = {r["details"]["op"]: r["details"] for r in json.loads(js.read_text())["results"] if "op" in r.get("details", {})}
    key = "busbw" if n > 1 else "algbw"
    print(f"{n} GPU(s); comparing {key} (GB/s); target ratio >= {TARGET} at S >= {TARGET_FROM >> 20} MiB")
    worst = float("inf")
    for op in ops:
        det = ours.get(op)
        if det is None:
            print(f"{op}: trainready reported nothing")
            worst = 0.0
            continue
        group = det["placement"]
        if n == 1 and group == "in-place" and op == "all_reduce":
            # One rank, in place: NCCL moves no data (nccl-tests prints ~0.4 us and
            # absurd algbw), so there is nothing to compare but host launch overhead.
            print(f"\n{op} (in-place): a no-op on one rank; not compared")
            continue
        theirs = {r.size: r.groups.get(group) for r in nccl[op].rows}
        print(f"\n{op} ({group})\n{'size':>12} {'nccl-tests':>11} {'trainready':>11} {'ratio':>7}")
        for row in det["rows"]:
            m = theirs.get(row["size"])
            if m is None:
                continue
            ref = m.busbw if key == "busbw" else m.algbw
            mine = row[f"{key}_gbps"]
            ratio = mine / ref if ref > 0 else float("nan")
            if row["size"] >= TARGET_FROM and ref > 0:
                worst = min(worst, ratio)
            print(f"{row['size']:>12} {ref:>11.2f} {mine:>11.2f} {ratio:>7.3f}")
    verdict = "OK" if worst >= TARGET else "BELOW TARGET"
    print(f"\nworst ratio at S >= {TARGET_FROM >> 20} MiB: {worst:.3f}  ({verdict}); raw outputs in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
