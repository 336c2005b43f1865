"""The PCIe host↔device copy check: the link-rate table, the verdict against the link's rate and the node's other
GPUs, a link trained below its maximum named, the skip on a CPU node, and its per-GPU figures in the fleet's
slow-node comparison.  The copies themselves need a GPU (benchmarks/pcie_copy.py, docs/host-settings.md)."""

from __future__ import annotations

import pytest

from conftest import HAS_GPU, cpu_machine_only
from trainready.suite.base import CheckContext
from trainready.checks.pcie import PcieCheck
from trainready.cluster.judge.verdict import NodeInput, decide
from trainready.hardware.pcie import GpuCopy, Link, judge, link_rate_gbps, read_link
from trainready.records import Status
from trainready.spec import load_spec
from trainready.spec.model import FleetSpec, NodeSpec

GEN5_X16 = Link(5, 16, 5, 16)


def test_link_rates_follow_the_pcie_spec_table():
    assert link_rate_gbps(5, 16) == pytest.approx(32 * 16 * 128 / 130 / 8)  # 63.0 GB/s
    assert link_rate_gbps(4, 16) == pytest.approx(31.5, abs=0.05)
    assert link_rate_gbps(3, 16) == pytest.approx(15.75, abs=0.01)
    assert link_rate_gbps(2, 8) == pytest.approx(4.0)  # 5 GT/s x 8 x 8b/10b / 8
    assert link_rate_gbps(6, 16) is None and link_rate_gbps(5, None) is None


def test_healthy_gpus_pass_with_figures_against_the_rate():
    figs = [GpuCopy(i, 55.0 + i * 0.1, 53.0, GEN5_X16) for i in range(4)]
    out = judge(figs, 0.6, 0.15)
    assert out.status == Status.PASS, out.message
    assert "links under load: Gen5 x16" in out.message
    frac = [m for m in out.metrics if m.name == "pcie_h2d_fraction_of_link"]
    assert len(frac) == 4 and frac[0].value == pytest.approx(55.0 / 63.0, abs=0.01)


def test_a_link_trained_down_is_named_and_slow_against_its_rate():
    figs = [GpuCopy(i, 55.0, 53.0, GEN5_X16) for i in range(3)] + [GpuCopy(3, 13.5, 13.2, Link(4, 8, 5, 16))]
    out = judge(figs, 0.6, 0.15)
    assert out.status == Status.FAIL
    assert "GPU 3 link at Gen4 x8 under load, below its Gen5 x16: trained down" in out.message
    assert "GPU 3 H2D 13.5 GB/s = 21% of its Gen5 x16 link's 63.0 GB/s < 60%" in out.message


def test_one_gpu_slower_than_its_neighbours_on_a_full_link():
    figs = [GpuCopy(i, 55.0, 53.0, GEN5_X16) for i in range(3)] + [GpuCopy(3, 42.0, 53.0, GEN5_X16)]
    out = judge(figs, 0.6, 0.15)
    assert out.status == Status.FAIL and "GPU 3 H2D 42.0 GB/s is 24% below GPU 0's 55.0" in out.message


def test_a_link_nvml_cannot_read_warns():
    out = judge([GpuCopy(0, 55.0, 53.0, Link(error="NVML: Not Supported"))], 0.6, 0.15)
    assert out.status == Status.WARN and "link not read for GPU 0: NVML: Not Supported" in out.message


def test_read_link_asks_nvml_each_field_on_its_own():
    class Nv:
        def nvmlDeviceGetCurrPcieLinkGeneration(self, h: object) -> int: return 4
        def nvmlDeviceGetCurrPcieLinkWidth(self, h: object) -> int: return 16
        def nvmlDeviceGetMaxPcieLinkGeneration(self, h: object) -> int: return 5
        def nvmlDeviceGetMaxPcieLinkWidth(self, h: object) -> int: raise RuntimeError("Not Supported")

    link = read_link(Nv(), object())
    assert (link.gen, link.width, link.gen_max, link.width_max) == (4, 16, 5, None)
    assert link.error == "nvmlDeviceGetMaxPcieLinkWidth: Not Supported" and not link.trained_down


@cpu_machine_only
def test_the_check_skips_on_a_cpu_node_with_its_reason(tmp_path):
    spec, _ = load_spec(None)
    r = PcieCheck().execute(CheckContext(spec, tmp_path))
    assert (r.status, r.message) == (Status.SKIP, "no GPU: the host↔device copy over PCIe is GPU-only")


@pytest.mark.skipif(not HAS_GPU, reason="the copies need a GPU")
def test_on_a_gpu_the_copies_are_measured_and_an_nvml_that_cannot_start_leaves_the_link_unread(tmp_path, monkeypatch):
    import pynvml

    spec, _ = load_spec(None)
    r = PcieCheck().execute(CheckContext(spec, tmp_path))
    assert r.status in (Status.PASS, Status.WARN) and "links under load" in r.message, r.message

    def refuse() -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    monkeypatch.setattr(pynvml, "nvmlInit", refuse)
    r = PcieCheck().execute(CheckContext(spec, tmp_path))  # the reason outlives the except block that bound it
    assert r.status is Status.WARN and "link not read for GPU 0: NVML: Driver Not Loaded" in r.message, r.message


def _record(node_gbps: list[float]) -> dict[str, object]:
    metrics = [{"name": "pcie_h2d", "value": v, "unit": "GB/s", "labels": {"gpu": str(i)}}
               for i, v in enumerate(node_gbps)]
    return {"versions": {}, "report": {"results": [{"name": "pcie", "status": "pass", "metrics": metrics}]},
            "manifest": {}}


def test_per_gpu_figures_join_the_fleet_slow_node_comparison():
    nodes = [NodeInput(f"n{k}", _record([55.0, 55.2, 54.9, 55.1])) for k in range(5)]
    nodes.append(NodeInput("n5", _record([55.0, 55.1, 27.4, 55.0])))
    v = decide(nodes, NodeSpec(fleet=FleetSpec()), [], [])
    by = {n.node: n for n in v.nodes}
    assert by["n5"].causes == ("slow pcie_h2d",) and "GPU 2" in by["n5"].reasons[0]
    assert all(by[f"n{k}"].accepted for k in range(5))


def test_a_copy_below_its_floor_is_a_timing_failure_and_a_trained_down_link_or_half_rate_copy_stands():
    """What a pcie FAIL rests on (suite/machine.py: on a busy machine a timing within its noise is not judged): a
    slow copy on a full link is timing; a link read trained down is an NVML fact; a copy below half its floor
    (a half-width link's figure) is beyond any host's noise."""
    from trainready.checks.pcie import noise_marks
    from trainready.records import BEYOND_NOISE, TIMING_ONLY

    slow = [GpuCopy(0, 55.0, 53.0, GEN5_X16), GpuCopy(1, 35.0, 53.0, GEN5_X16)]  # 56% of 63 against 60%
    assert noise_marks(slow, 0.6) == {TIMING_ONLY: True, BEYOND_NOISE: False}
    half = [GpuCopy(0, 55.0, 53.0, GEN5_X16), GpuCopy(1, 15.0, 14.0, GEN5_X16)]  # below half of 0.6 x 63
    assert noise_marks(half, 0.6) == {TIMING_ONLY: True, BEYOND_NOISE: True}
    down = [GpuCopy(0, 13.5, 13.2, Link(4, 8, 5, 16))]
    assert noise_marks(down, 0.6)[TIMING_ONLY] is False
