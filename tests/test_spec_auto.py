"""The automatic spec: the GPUs NVML sees, judged against their model's datasheet peaks over NCCL; the CPU
default where NVML sees none.  And `node --health-check` imports only its three checks."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from trainready.spec.load import load_spec

from evidence_records import run_main

import trainready.spec.auto as auto
from trainready.spec.auto import Seen, gpu_spec


def test_gpu_spec_judges_the_gpus_seen_against_their_table_peaks() -> None:
    one, eight = gpu_spec(Seen(("NVIDIA H200",))), gpu_spec(Seen(("NVIDIA H200",) * 8))
    assert (one.gpu.count, eight.gpu.count) == (1, 8)  # the count NVML reports, not a fixed 8
    assert one.gpu.model == "H200" and one.comm.backend == "nccl" and one.comm.world_size == 0
    assert one.gpu.memory_gib_min is not None and 138 <= one.gpu.memory_gib_min < 143771 / 1024
    assert (one.resume.ranks, eight.resume.ranks) == (1, 8)
    assert one.compute.gemm_min_fraction == 0.60 and one.comm.expected_busbw_gbps == {}
    unknown = gpu_spec(Seen(("NVIDIA Future GPU",)))
    assert unknown.gpu.model == "NVIDIA Future GPU" and unknown.gpu.memory_gib_min is None


def test_auto_is_the_cpu_default_without_gpus_and_the_gpu_spec_with(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(auto, "nvml_seen", lambda: Seen((), "no NVIDIA driver"))
    spec, source = load_spec("auto")
    assert spec.name == "cpu-default" and spec.gpu.count == 0 and "no GPU seen by NVML" in source
    monkeypatch.setattr(auto, "nvml_seen", lambda: Seen(("NVIDIA H200",)))
    spec, source = load_spec("auto")
    assert spec.name == "auto" and spec.gpu.count == 1 and "judging the 1x H200 NVML sees" in source


def test_spec_show_auto_prints_what_node_uses_here() -> None:
    p = run_main("spec", "show", "auto")
    assert p.returncode == 0, p.stderr
    first = p.stdout.splitlines()[0]
    assert first.startswith("# auto: ")
    assert 'name = "cpu-default"' in p.stdout if "no GPU seen" in first else 'name = "auto"' in p.stdout


HEALTH_MODULES = ("import sys; from trainready.cluster.health.active import run_health; run_health(None, {}, print); "
                  "print('MODULES', ' '.join(sorted(sys.modules)))")


@pytest.mark.slow
def test_health_check_imports_neither_the_checkpoint_stack_nor_every_check() -> None:
    p = subprocess.run([sys.executable, "-c", HEALTH_MODULES], capture_output=True, text=True,
                       env={**os.environ, "SLURMD_NODENAME": "health-import-test"})
    line = next((x for x in p.stdout.splitlines() if x.startswith("MODULES ")), "")
    mods = set(line.split()[1:])
    assert "trainready.checks.matmul" in mods and "torch" in mods, p.stderr  # the mismatch first: it ran
    assert "torch.distributed.checkpoint" not in mods and "sympy" not in mods
    assert "trainready.checks.resume" not in mods and "trainready.checks.registry_all" not in mods
