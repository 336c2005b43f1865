"""Judging on facts CAPTURED from the lent 1×H200 machine (NVML + torch, 2026-12-02),
not written by hand: tests/data/facts_h200x1_captured.json, env_h200x1_captured.json."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from trainready.checks.gpus import judge_gpus
from trainready.manifest import facts as facts_mod
from trainready.records import Status
from trainready.spec import load_spec
from trainready.spec.init import spec_from_machine
from trainready.spec.model import GpuSpec

DATA = Path(__file__).parent / "data"


def test_captured_facts_mismatch_then_match():
    f = facts_mod.load(DATA / "facts_h200x1_captured.json")
    eight = judge_gpus(load_spec("example:h200-8x")[0].gpu, f)
    assert eight.status == Status.FAIL and "8" in eight.message  # the real machine has 1 GPU
    one = judge_gpus(GpuSpec(count=1, model="H200", memory_gib_min=139.0, driver_branch="580"), f)
    assert one.status == Status.PASS, one.message
    g = f.nvml.gpus[0]
    assert g.name == "NVIDIA H200" and g.uuid.startswith("GPU-") and f.nvml.driver_version.startswith("580.")


def test_captured_uuid_swap_fails():
    f = facts_mod.load(DATA / "facts_h200x1_captured.json")
    t = f.torch.devices[0]
    other = dataclasses.replace(t, uuid="00000000-0000-0000-0000-000000000000")
    bad = dataclasses.replace(f, torch=dataclasses.replace(f.torch, devices=(other,)))
    out = judge_gpus(GpuSpec(count=1, model="H200"), bad)
    assert out.status == Status.FAIL


def test_spec_init_from_captured_manifest():
    manifest = json.loads((DATA / "env_h200x1_captured.json").read_text())
    spec = spec_from_machine(manifest)
    assert (spec.gpu.count, spec.gpu.model, spec.gpu.driver_branch) == (1, "H200", "580")
    assert spec.software.torch == "2.11.0" and spec.software.cuda == "13.0" and spec.software.nccl == "2.28.9"
