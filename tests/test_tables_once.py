"""Each default and each GPU table is written once: the comm sweep's per-backend defaults live in
comm/defaults.py, GPU peaks and memory in hardware/gpus.py; every other module reads them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO, cpu_machine_only

PKG = REPO / "src" / "trainready"
SWEEP_KEYS = {"warmup", "iters", "pair_iters", "pair_bytes", "step_budget_s", "loops", "eff_loops", "eff_min_loop_s"}
GPU_KEYS = {"A100", "H100", "H200", "B200", "GB200", "H800", "L40S"}


def _trees() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(), str(p))) for p in sorted(PKG.rglob("*.py"))]


def _numbers(node: ast.AST) -> list[float]:
    """Every non-zero number written in `node` (0 means 'off', not a default)."""
    return [c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and type(c.value) in (int, float)
            and c.value != 0]


def _sweep_literals(tree: ast.Module) -> list[str]:
    """keyword=number of sweep settings in CommOptions(...) calls, and number tables of those keys."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "CommOptions":
            out += [f"{k.arg}={_numbers(k.value)}" for k in node.keywords if k.arg in SWEEP_KEYS and _numbers(k.value)]
        if isinstance(node, ast.Dict):
            keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            if {"warmup", "iters"} <= keys and _numbers(node):  # a defaults table, not a record
                out.append(f"table {sorted(keys)}")
    return out


@pytest.mark.slow
def test_sweep_defaults_are_written_only_in_the_table() -> None:
    found = {str(p.relative_to(PKG)): lits for p, t in _trees()
             if p.name != "defaults.py" and (lits := _sweep_literals(t))}
    # main 3148e0e: commands/comm.py (GPU_/CPU_DEFAULTS), checks/comm.py and cluster/tasks/collective.py
    # (warmup=5 if gpu else 1 / 2) each wrote their own
    assert found == {}, found


@pytest.mark.slow
def test_one_gpu_table() -> None:
    tables = [f"{p.relative_to(PKG)}:{node.lineno}" for p, tree in _trees() for node in ast.walk(tree)
              if isinstance(node, ast.Dict)
              and len({k.value for k in node.keys if isinstance(k, ast.Constant)} & GPU_KEYS) >= 2]
    # main 3148e0e: plan/gpus.py:25, a second table (H100 989.0 against hardware/gpus.py's 989.4)
    assert tables == [], tables


@pytest.mark.parametrize("name", ["H100", "NVIDIA H100 80GB HBM3", "NVIDIA H200", "A100-SXM4-80GB", "B200"])
def test_the_planner_reads_the_hardware_table(name: str) -> None:
    from trainready.hardware.gpus import lookup as hw_lookup, memory_gib_per_gpu
    from trainready.plan.gpus import lookup

    row, info = hw_lookup(name), lookup(name)
    assert row is not None
    assert (info.name, info.bf16_tflops, info.memory_gib) == (row.key, row.bf16_tflops, memory_gib_per_gpu(name))


def test_h100_peak_is_the_whitepaper_figure() -> None:
    from trainready.plan.gpus import lookup

    # 528 tensor cores x 1,024 FLOP/clk x 1.83 GHz (NVIDIA H100 Tensor Core GPU Architecture whitepaper)
    assert lookup("H100").bf16_tflops == pytest.approx(528 * 1024 * 1.83e9 / 1e12, abs=0.05) == 989.4


@cpu_machine_only  # asserts the CPU default (8 gloo ranks, gloo's sweep table)
def test_every_use_of_the_sweep_reads_the_table() -> None:
    from trainready.cluster.tasks.collective import cross_node_options
    from trainready.comm.defaults import SWEEP_DEFAULTS
    from trainready.spec import load_spec

    spec, _ = load_spec(None)
    d = SWEEP_DEFAULTS["gloo"]  # no GPU here: the cross-node sweep runs gloo
    o = cross_node_options(spec, 4)
    assert (o.warmup, o.iters, o.step_budget_s, o.pair_iters) == (d.warmup, d.iters, d.step_budget_s, 0)
    assert o.sizes == d.cross_sizes.steps() and o.sizes[0] == 1024 and o.sizes[-1] == 1 << 20
    narrow = cross_node_options(spec, 4, narrow=True).sizes
    assert narrow[0] == d.cross_sizes.max_bytes // 16 and narrow[-1] == d.cross_sizes.max_bytes
    # the node check's deliberate differences are named fields, not the shared ones
    assert (d.check_warmup, d.check_iters, d.check_loops) != (d.warmup, d.iters, 1)
