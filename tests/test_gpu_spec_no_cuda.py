"""A GPU spec never passes on the CPU.

Under a spec with gpu.count > 0, every compute, collective and resume check runs on those GPUs with
NCCL or FAILS naming why CUDA is unusable (torch's own reason, CUDA_VISIBLE_DEVICES, the driver as
NVML sees it); it never falls back to the CPU/gloo and never skips.  On today's main before this
change, `node --spec example:h200-8x --only matmul,allreduce` printed PASS (fp32/bf16 on cpu, gloo
over 8 ranks) and exited 0 on a machine without GPUs.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import cpu_machine_only
# trainready.checks registers every check module; suite.base's REGISTRY alone holds only those imported so far
from trainready.checks import REGISTRY, CheckContext
from trainready.records import Report, Status
from trainready.spec import load_spec

HIDDEN = {"CUDA_VISIBLE_DEVICES": ""}  # hides every GPU from CUDA, on any machine (the H200 included)


def _results(stdout: str) -> dict[str, dict]:  # type: ignore[type-arg]
    return {r["name"]: r for r in json.loads(stdout)["results"]}


def test_gpu_spec_with_cuda_hidden_fails_matmul_and_allreduce_with_the_reason(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("node", "--spec", "example:h200-8x", "--only", "matmul,allreduce", "--json", "-", env=HIDDEN)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    res = _results(r.stdout)
    for name in ("matmul", "allreduce"):
        assert res[name]["status"] == "fail", res[name]
        msg = res[name]["message"]
        assert "gpu.count = 8" in msg and "CUDA_VISIBLE_DEVICES=''" in msg, msg
        assert "NVML" in msg or "driver" in msg, msg  # the driver's state is named too
        assert "cpu" not in msg.split(":")[0] and "gloo" not in msg, msg  # nothing ran on the CPU


@cpu_machine_only
def test_issue_command_on_a_cpu_machine_exits_1_naming_why(cli) -> None:  # type: ignore[no-untyped-def]
    r = cli("node", "--spec", "example:h200-8x", "--only", "matmul,allreduce", "--json", "-")
    assert r.returncode == 1, r.stdout[-2000:]
    for res in _results(r.stdout).values():
        assert res["status"] == "fail", res
        assert "CUDA is unusable" in res["message"] and "CUDA_VISIBLE_DEVICES" in res["message"], res["message"]


@cpu_machine_only
@pytest.mark.parametrize("name", ["train_step", "throughput", "comm", "resume"])
def test_every_compute_collective_and_resume_check_fails_not_skips(name: str, tmp_path: Path) -> None:
    spec, _ = load_spec("example:h200-8x")
    res = REGISTRY[name]().execute(CheckContext(spec, tmp_path))
    assert res.status == Status.FAIL, (res.status, res.message)
    assert "gpu.count = 8" in res.message and "CUDA is unusable" in res.message, res.message


@cpu_machine_only
def test_cpu_spec_still_runs_on_the_cpu(tmp_path: Path) -> None:
    spec, _ = load_spec(None)
    assert REGISTRY["throughput"]().execute(CheckContext(spec, tmp_path)).status == Status.SKIP
    assert REGISTRY["matmul"]().execute(CheckContext(spec, tmp_path)).status == Status.PASS


def test_all_skipped_is_a_failure_under_a_gpu_spec_and_a_warning_otherwise() -> None:
    from trainready.records import CheckResult, Level

    skipped = (CheckResult("throughput", "t", Level.STANDARD, Status.SKIP, "no GPU", "", (), 0.0),)
    gpu = Report("node", "h", "t", 0.0, "v", {"gpu": {"count": 8}}, skipped)
    cpu = Report("node", "h", "t", 0.0, "v", {"gpu": {"count": 0}}, skipped)
    assert gpu.status == Status.FAIL and gpu.exit_code == 1
    assert cpu.status == Status.WARN and cpu.exit_code == 0
