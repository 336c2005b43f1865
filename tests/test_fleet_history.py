"""Fleet evidence is kept: every `cluster run` and `cluster resume` into one --results keeps its own folder
(RESULTS/runs/ID/), RESULTS/fleet.json is the latest with the earlier runs in its history, and a resumed node
is judged against the run that rejected it (its reference, its other nodes' figures), on the local 3-node
Slurm cluster (scripts/local-slurm.sh)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli, undrain

pytestmark = pytest.mark.slow

SPEC = "example:local-slurm"
CHECKS = "versions,matmul,train_step"  # matmul: where cluster.fail plants; train_step: a throughput figure


def _cluster(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli("cluster", *args, "--spec", SPEC, "--only", CHECKS, "--time", "5:00", "--no-collective", timeout=600)


def _doc(path: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(path.read_text(encoding="utf-8"))


def test_two_runs_and_a_resume_keep_every_verdict(alt_slurm, tmp_path):
    res = tmp_path / "acc"
    try:
        first = _cluster("run", "-N", "3", "--results", str(res), "--reference", "alt1", "--drain",
                         "--plant", "cluster.fail=alt2")
        assert first.returncode == 3, first.stderr[-2000:]  # planted: records.PLANTED_EXIT
        run1 = Path(_doc(res / "fleet.json")["run"])
        second = _cluster("run", "-w", "alt1,alt3", "--results", str(res))
        assert second.returncode == 0, second.stderr[-2000:]
        again = _cluster("resume", "alt2", "--results", str(res))
        assert again.returncode == 0, again.stderr[-2000:]
    finally:
        undrain("alt2")
    latest = _doc(res / "fleet.json")
    assert latest["context"]["kind"] == "resume" and [n["node"] for n in latest["nodes"]] == ["alt2"]
    history = latest["history"]
    assert [h["kind"] for h in history] == ["run", "run"], history  # newest first: the second run, then the first
    rejected = history[1]
    assert rejected["verdict"] == "reject" and rejected["rejected"] == ["alt2"] and rejected["record"] == str(
        run1 / "fleet.json")
    kept = _doc(run1 / "fleet.json")  # the first run's REJECT, still on disk as it was written
    alt2 = next(n for n in kept["nodes"] if n["node"] == "alt2")
    assert not alt2["accepted"] and any(r.startswith("check") and "FAIL" in r for r in alt2["reasons"])
    assert _doc(Path(alt2["record"]))["node"] == "alt2" and Path(alt2["record"]).parent.parent == run1
    assert (run1 / "logs" / "cross.out").is_file() and Path(history[0]["record"]).parent != run1
    # judged against the first run: its reference and its other nodes' figures, not a "fleet majority" of one
    assert latest["summary"]["reference"] == "alt1" and latest["context"]["baseline"] == str(run1 / "fleet.json")
    stats = {s["metric"]: s for s in latest["stats"]}
    assert stats["train_tokens_per_s"]["n"] >= 3 and stats["train_tokens_per_s"]["judged"], stats
