"""Wall time of `trainready resume` on a GPT-2-sized vocabulary vs the sample corpus, side by side.

The model's vocabulary is sized from the data (largest id read, rounded up to 64); above the
preset's vocabulary the CPU preset ties its embedding to the output head and shrinks the rest
(workload/model.py LARGE_VOCAB).  Target: the 50k-vocabulary run takes <= 2x the sample corpus's
wall time.  Both runs alternate (sample, gpt2, sample, gpt2, ...) in one process tree so load
from other work hits both alike; medians are compared.

    PYTHONPATH=src python3 benchmarks/resume_vocab.py              # CPU, 1 rank, 100+50+50 steps
    PYTHONPATH=src python3 benchmarks/resume_vocab.py --rounds 3 --steps 40
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 2.0  # gpt2-vocab wall / sample wall


def run(args: list[str], work: Path) -> tuple[float, dict]:
    out = work / f"r-{time.monotonic_ns()}.json"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    t0 = time.perf_counter()
    res = subprocess.run([sys.executable, "-m", "trainready", "resume", "--cpu", "--json", str(out), *args],
                         capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        raise SystemExit(f"resume exited {res.returncode}: {res.stderr.strip()[-500:]}")
    return wall, json.loads(out.read_text())["results"][0]["details"]["model"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=100)
    a = ap.parse_args()
    from trainready.data.corpus import write_sample_corpus

    steps = ["--steps", str(a.steps), "--checkpoint-step", str(a.steps // 2)]
    with tempfile.TemporaryDirectory(prefix="resume-vocab-") as tmp:
        work = Path(tmp)
        gpt2 = write_sample_corpus(work / "gpt2", vocab_size=50257, name="gpt2")  # ids up to 50,256
        walls: dict[str, list[float]] = {"sample": [], "gpt2": []}
        models: dict[str, dict] = {}
        for i in range(a.rounds):
            for name, extra in (("sample", []), ("gpt2", ["--data", str(gpt2)])):
                wall, models[name] = run([*steps, "--dir", str(work / f"{name}-{i}"), *extra], work)
                walls[name].append(wall)
                print(f"  round {i}: {name:<6} {wall:6.1f} s", flush=True)
    med = {k: statistics.median(v) for k, v in walls.items()}
    for name, m in models.items():
        print(f"{name:<6} median {med[name]:6.1f} s  model: {m['params']:,} params, vocab {m['vocab_size']} "
              f"({m['vocab_from']}), {m['layers']} layers, hidden {m['hidden']}, seq_len {m['seq_len']}, "
              f"tied {m['tied_embeddings']}")
    ratio = med["gpt2"] / med["sample"]
    print(f"ratio gpt2-vocab / sample wall = {ratio:.2f} ({'meets' if ratio <= TARGET else 'ABOVE'} the <= {TARGET} target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
