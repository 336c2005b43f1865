"""`trainready comm` as one rank of an external launcher: two real processes with torchrun's env
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), gloo, a short --timeout.  A planted hang or death must
end in a FAIL record on rank 0 (exit 1) naming the silent peer, never in an internal error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trainready.ranks.launch import free_port

SRC = str(Path(__file__).resolve().parents[1] / "src")
WAIT_S = 90.0  # whole two-rank run incl. two torch imports on a loaded 2-core machine; the sweep itself is seconds


def run_pair(tmp_path: Path, *args: str) -> tuple[list[int], list[str], dict[str, Any] | None]:
    """Start ranks 0 and 1 like torchrun would; (exit codes, outputs, rank 0's --json record or None)."""
    port = free_port()
    out = tmp_path / "comm.json"
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "PYTHONPATH": SRC, "RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank),
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        cmd = [sys.executable, "-m", "trainready", "comm", "--backend", "gloo", "-b", "1K", "-e", "4K", "-w", "0",
               "-n", "1", "--timeout", "12", "-q", "--json", str(tmp_path / f"comm{rank}.json" if rank else out), *args]
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    texts = []
    try:
        for p in procs:
            texts.append(p.communicate(timeout=WAIT_S)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert not (tmp_path / "comm1.json").exists()  # only rank 0 writes the record
    rec = json.loads(out.read_text()) if out.exists() else None
    return [p.returncode for p in procs], texts, rec


@pytest.mark.slow
def test_healthy_pair_passes(tmp_path: Path) -> None:
    codes, texts, rec = run_pair(tmp_path)
    assert codes == [0, 0], texts
    assert rec is not None and rec["context"]["launcher"] == "torchrun"
    by = {r["name"]: r for r in rec["results"]}
    assert all(r["status"] in ("pass", "warn") for n, r in by.items() if n != "comm.pairs"), rec["results"]
    assert by["comm.pairs"]["status"] == "skip"  # 2 ranks make one pair: nothing to compare it with
    assert {"comm.all_reduce", "comm.pairs"} <= set(by)


@pytest.mark.slow
def test_planted_hang_names_the_silent_peer(tmp_path: Path) -> None:
    codes, texts, rec = run_pair(tmp_path, "--plant", "comm.hang_rank=1")
    assert "internal error" not in texts[0] and "Traceback" not in texts[0], texts[0]
    assert rec is not None, texts[0]  # rank 0 alive → a FAIL record, always
    (res,) = rec["results"]
    assert res["status"] == "fail" and codes[0] == 3, texts  # planted: exit 3 (records.PLANTED_EXIT)
    d = res["details"]
    assert d["rank"] == 0 and d["stage"].startswith("all_reduce float 1024 B")  # this rank, op and size
    assert d["behind"] == [1] and d["absent"] == [] and d["stages"]["1"][2] == "joined"
    assert "rank 1 on" in res["message"] and "still at 'joined'" in res["message"]
    assert "no progress for" in res["message"]
    # the hung rank's own watchdog ends it too, naming itself
    assert codes[1] == 3 and "rank 1 (this rank)" in texts[1], texts[1]


@pytest.mark.slow
def test_planted_death_is_a_fail_record_naming_the_peer(tmp_path: Path) -> None:
    codes, texts, rec = run_pair(tmp_path, "--plant", "comm.die_rank=1", "--plant", "comm.fault_step=1")
    assert codes[1] == 17  # the planted exit code of the dead rank
    assert rec is not None, texts[0]
    (res,) = rec["results"]
    assert res["status"] == "fail" and codes[0] == 3, texts[0]
    assert "internal error" not in texts[0]
    d = res["details"]
    assert d["stage"] == "all_reduce float 4096 B" and d["behind"] == [1], d  # died before its step 2
    assert "RuntimeError" in d["error"] and "rank 1 on" in res["message"]
