import dataclasses

import pytest
import torch

from trainready.checks import REGISTRY, CheckContext
from trainready.checks.throughput import GpuFigures, apply_planted, judge, measure_copy, measure_gemm
from trainready.hardware import lookup
from trainready.records import Status
from trainready.spec import default_spec, load_spec

H200 = lookup("NVIDIA H200")
SPEC = load_spec("example:h200-8x")[0].compute  # gemm >= 0.60, hbm >= 0.70, spread <= 0.10
NO_GPU = not torch.cuda.is_available()


def _node(gemm=(750.0,) * 8, copy=(4100.0,) * 8, name="NVIDIA H200"):
    return [GpuFigures(i, name, g, c) for i, (g, c) in enumerate(zip(gemm, copy))]


def test_healthy_h200_node_passes():
    out = judge(_node(), H200, SPEC)
    assert out.status == Status.PASS, out.message
    assert "8 GPU(s)" in out.message and "of H200 peak" in out.message
    frac = [m for m in out.metrics if m.name == "gemm_bf16_fraction_of_peak"]
    assert len(frac) == 8 and frac[0].value == pytest.approx(750 / 989.4) and all(m.ok for m in frac)
    assert {m.label_dict["gpu"] for m in frac} == {str(i) for i in range(8)}


def test_slow_gpu_fails_and_is_named():
    gemm = [750.0] * 8
    gemm[3] = 400.0  # 40 % of peak
    out = judge(_node(gemm=gemm), H200, SPEC)
    assert out.status == Status.FAIL
    assert "GPU 3 gemm_bf16 400 = 40% of H200 peak 989 < 60%" in out.message
    assert "GPU 3 gemm_bf16 400 is 47% below GPU 0" in out.message


def test_slow_hbm_fails():
    copy = [4100.0] * 8
    copy[6] = 3000.0  # 62.5 % of 4800
    out = judge(_node(copy=copy), H200, SPEC)
    assert out.status == Status.FAIL and "GPU 6 hbm_copy 3000 = 62% of H200 peak 4800 < 70%" in out.message


def test_spread_alone_fails():
    # every GPU above 60 % of peak (593 TFLOP/s), but one 19 % behind the best
    gemm = [800.0] * 7 + [650.0]
    out = judge(_node(gemm=gemm), H200, SPEC)
    assert out.status == Status.FAIL and "GPU 7 gemm_bf16 650 is 19% below GPU 0 (spread_max 10%)" in out.message
    spread = next(m for m in out.metrics if m.name == "gemm_bf16_spread")
    assert spread.label_dict == {"best_gpu": "0", "worst_gpu": "7"} and not spread.ok


def test_unknown_gpu_warns_without_ratio():
    out = judge(_node(name="NVIDIA Mystery 9000"), None, SPEC)
    assert out.status == Status.WARN
    assert "unknown GPU 'NVIDIA Mystery 9000': no table peak, so no ratio" in out.message
    assert not [m for m in out.metrics if "fraction" in m.name]


def test_unknown_gpu_still_judged_on_floors_and_spread():
    spec = dataclasses.replace(SPEC, gemm_tflops_min=800.0)
    out = judge(_node(), None, spec)
    assert out.status == Status.FAIL and "GPU 0 gemm_bf16 750 TFLOP/s < floor 800 (compute.gemm_tflops_min)" in out.message


def test_planted_slow_gpu_fails_naming_it():
    figures = _node()
    assert judge(figures, H200, SPEC).status == Status.PASS
    slowed = apply_planted(figures, "0")
    assert slowed[0].gemm_tflops == 375.0 and slowed[1] == figures[1]
    out = judge(slowed, H200, SPEC)
    assert out.status == Status.FAIL and out.message.startswith("GPU 0 gemm_bf16 375")


def test_single_gpu_has_no_spread_metric():
    out = judge(_node(gemm=(750.0,), copy=(4100.0,)), H200, SPEC)
    assert out.status == Status.PASS and not [m for m in out.metrics if m.name.endswith("_spread")]


@pytest.mark.skipif(not NO_GPU, reason="tests the CPU skip")
def test_skips_on_cpu(tmp_path):
    r = REGISTRY["throughput"]().execute(CheckContext(default_spec(), tmp_path, {}))
    assert r.status == Status.SKIP and r.message == "no GPU: throughput probes are GPU-only"


@pytest.mark.skipif(NO_GPU, reason="needs a GPU")
def test_probes_measure_something_on_gpu():
    assert measure_gemm("cuda:0", n=2048, iters=5) > 1.0
    assert measure_copy("cuda:0", nbytes=1 << 26, iters=5) > 10.0


class _Scripted(REGISTRY["throughput"]):  # type: ignore[misc, valid-type]
    """The throughput check with its GPU probe replaced by figures given in order (the judging is the real one):
    a GPU probe cannot run on a CPU machine, and the re-measurement is what is tested here."""

    def __init__(self, *runs: list[GpuFigures]) -> None:
        self.runs = list(runs)

    def _measure(self, ctx):  # type: ignore[no-untyped-def]
        return self.runs.pop(0)


def test_a_figure_below_its_floor_once_is_measured_again_and_passes(tmp_path):
    spec = load_spec("example:h200-8x")[0]
    slow_once = [dataclasses.replace(f, gemm_tflops=300.0) if f.gpu == 3 else f for f in _node()]
    check = _Scripted(slow_once, _node())
    out = check.run(CheckContext(spec=spec, workdir=tmp_path))
    assert out.status == Status.PASS and "not a fault" in out.message and "GPU 3 gemm_bf16 300" in out.message
    assert check.runs == []  # measured twice


def test_a_gpu_slow_in_both_runs_fails_with_both_figures(tmp_path):
    spec = load_spec("example:h200-8x")[0]
    slow = [dataclasses.replace(f, gemm_tflops=300.0) if f.gpu == 3 else f for f in _node()]
    out = _Scripted(slow, slow).run(CheckContext(spec=spec, workdir=tmp_path))
    assert out.status == Status.FAIL and out.message.count("GPU 3 gemm_bf16 300 = 30%") == 2 and "failed it too" in out.message
    healthy = _Scripted(_node())
    assert healthy.run(CheckContext(spec=spec, workdir=tmp_path)).status == Status.PASS and healthy.runs == []
