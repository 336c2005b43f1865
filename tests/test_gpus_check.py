"""The `gpus` check: judged on facts captured from an 8x H200 node (tests/data) and
on this machine's real NVML/torch view (no driver here)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from conftest import cpu_machine_only
from trainready.checks import CheckContext
from trainready.checks.gpus import GpusCheck, judge_gpus
from trainready.manifest import facts as facts_mod
from trainready.manifest.facts import NodeFacts
from trainready.manifest.gpu import GpuFacts, NvmlFacts, collect_nvml
from trainready.records import Status
from trainready.spec import load_spec

DATA = Path(__file__).parent / "data"
H200 = DATA / "facts_h200x8.json"


@pytest.fixture
def h200() -> NodeFacts:
    return facts_mod.load(H200)


@pytest.fixture
def spec8():
    return load_spec("example:h200-8x")[0]


def with_gpu(f: NodeFacts, i: int, **changes: object) -> NodeFacts:
    gpus = list(f.nvml.gpus)
    gpus[i] = dataclasses.replace(gpus[i], **changes)
    return dataclasses.replace(f, nvml=dataclasses.replace(f.nvml, gpus=tuple(gpus)))


def test_captured_h200_passes(h200, spec8):
    out = judge_gpus(spec8.gpu, h200)
    assert out.status == Status.PASS, out.message
    assert "8 × NVIDIA H200 (143771 MiB)" in out.message and "same 8 UUIDs" in out.message


@pytest.mark.parametrize(
    "changes, expect",
    [
        ({"ecc_uncorrected_volatile": 2}, "GPU 3 (GPU-"),
        ({"remap_pending": True}, "row remap pending"),
        ({"remap_failed": True}, "row remap failed"),
        ({"name": "NVIDIA H100 80GB HBM3"}, "expected model 'H200'"),
        ({"memory_total_mib": 81559}, "79.6 GiB < 139.0 GiB"),
    ],
)
def test_planted_unhealthy_gpu_fails(h200, spec8, changes, expect):
    assert judge_gpus(spec8.gpu, h200).status == Status.PASS  # the baseline passes: the fault alone fails it
    out = judge_gpus(spec8.gpu, with_gpu(h200, 3, **changes))
    assert out.status == Status.FAIL and expect in out.message, out.message
    assert out.remedy


def test_lifetime_ecc_only_warns(h200, spec8):
    out = judge_gpus(spec8.gpu, with_gpu(h200, 1, ecc_uncorrected_aggregate=1))
    assert out.status == Status.WARN and "lifetime" in out.message


def test_torch_uuid_mismatch_fails(h200, spec8):
    devs = list(h200.torch.devices)
    devs[6] = dataclasses.replace(devs[6], uuid="00000000-1111-2222-3333-444444444444")
    out = judge_gpus(spec8.gpu, dataclasses.replace(h200, torch=dataclasses.replace(h200.torch, devices=tuple(devs))))
    assert out.status == Status.FAIL
    assert "torch sees GPU(s) NVML does not: 00000000-1111" in out.message
    assert "CUDA_VISIBLE_DEVICES is unset" in out.message  # and NVML's GPU 6 is missing from torch's view


def test_cuda_visible_devices_subset_passes_but_unset_subset_fails(h200, spec8):
    two = dataclasses.replace(h200.torch, devices=h200.torch.devices[:2])
    out = judge_gpus(spec8.gpu, dataclasses.replace(h200, torch=two))
    assert out.status == Status.FAIL and "does not see NVML's GPU" in out.message
    two_cvd = dataclasses.replace(two, cuda_visible_devices="0,1")
    out = judge_gpus(spec8.gpu, dataclasses.replace(h200, torch=two_cvd))
    assert out.status == Status.PASS and "torch sees 2 of them" in out.message


def test_cpu_only_torch_on_gpu_node_fails(h200, spec8):
    cpu = dataclasses.replace(h200.torch, available=False, reason="unavailable: torch 2.13.0+cpu is a CPU-only build", devices=())
    out = judge_gpus(spec8.gpu, dataclasses.replace(h200, torch=cpu))
    assert out.status == Status.FAIL and "CPU-only build" in out.message and "CUDA build of torch" in out.remedy


@cpu_machine_only
def test_cpu_node_skips_with_reason(tmp_path):
    spec, _ = load_spec(None)
    r = GpusCheck().execute(CheckContext(spec, tmp_path))
    assert r.status == Status.SKIP and "no GPU expected" in r.message and "no NVIDIA driver" in r.message


@cpu_machine_only
def test_spec_expecting_8_gpus_on_this_machine_fails(tmp_path, spec8):
    r = GpusCheck().execute(CheckContext(spec8, tmp_path))
    assert r.status == Status.FAIL and r.message.startswith("expected 8 × H200, found none"), r.message


def test_facts_round_trip(h200):
    assert NodeFacts.from_json(json.loads(json.dumps(h200.to_json()))) == h200


@cpu_machine_only
def test_real_nvml_without_driver_says_why():
    nv = collect_nvml()
    assert not nv.ok and nv.gpus == () and "no NVIDIA driver" in str(nv.error)


class _FakeNvml:
    """NVML does not run on this machine (no driver); this stands in for one GPU whose
    driver does not support the row-remapper query, to prove the per-field guard."""

    NVML_NVLINK_MAX_LINKS = 4

    class NVMLError_NotSupported(Exception):
        def __str__(self) -> str:
            return "Not Supported"

    def __getattr__(self, name: str):
        table = {
            "nvmlInit": lambda: None, "nvmlShutdown": lambda: None, "nvmlDeviceGetCount": lambda: 1,
            "nvmlSystemGetDriverVersion": lambda: b"580.159.04", "nvmlSystemGetCudaDriverVersion": lambda: 13000,
            "nvmlDeviceGetHandleByIndex": lambda i: i, "nvmlDeviceGetName": lambda h: "NVIDIA H200",
            "nvmlDeviceGetUUID": lambda h: "GPU-aaaa", "nvmlDeviceGetEccMode": lambda h: (1, 1),
            "nvmlDeviceGetTotalEccErrors": lambda h, t, c: 0, "nvmlDeviceGetNvLinkState": self._link,
            "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0x1 | 0x4,
        }
        if name in table:
            return table[name]
        if not name.startswith("nvml"):
            raise AttributeError(name)  # a constant pynvml would have; the code falls back to nvml.h's value

        def unsupported(*args: object) -> None:
            raise self.NVMLError_NotSupported()

        return unsupported

    def _link(self, h: int, link: int) -> int:
        if link >= 2:
            raise self.NVMLError_NotSupported()
        return 1


def test_one_unsupported_nvml_query_costs_one_field():
    nv = collect_nvml(_FakeNvml())
    assert nv.ok and nv.driver_version == "580.159.04" and nv.cuda_driver_version == "13.0"
    g: GpuFacts = nv.gpus[0]
    assert g.name == "NVIDIA H200" and g.ecc_mode == "enabled" and g.ecc_uncorrected_volatile == 0
    assert g.remap_pending == "unavailable: NVML: Not Supported"
    assert g.nvlink_links == ["active", "active"] and g.throttle_reasons == ["gpu_idle", "sw_power_cap"]
    assert isinstance(NvmlFacts.from_json(nv.to_json()).gpus[0], GpuFacts)


def test_cli_replays_captured_facts_and_planted_fault(cli, tmp_path, h200):
    ok = cli("node", "--only", "gpus", "--spec", "example:h200-8x", "--plant", f"gpus.facts={H200}")
    assert ok.returncode == 3, ok.stdout + ok.stderr  # replayed facts: a planted run, exit 3
    assert "verdict: WARN" in ok.stdout
    bad = with_gpu(h200, 2, remap_pending=True)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad.to_json()))
    r = cli("node", "--only", "gpus", "--spec", "example:h200-8x", "--plant", f"gpus.facts={path}", "--json", "-")
    assert r.returncode == 3
    res = json.loads(r.stdout)["results"][0]
    assert res["status"] == "fail" and "GPU 2" in res["message"] and "row remap pending" in res["message"]


def test_unreadable_health_is_not_called_healthy(h200, spec8):
    ok = judge_gpus(spec8.gpu, h200)
    assert ok.status == Status.PASS and "healthy" in ok.message
    blind = with_gpu(h200, 5, ecc_uncorrected_volatile="unavailable: NVML: Not Supported",
                     remap_pending="unavailable: NVML: Not Supported")
    out = judge_gpus(spec8.gpu, blind)
    assert out.status == Status.WARN and "healthy (" not in out.message
    assert "GPU 5" in out.message and "cannot read uncorrected ECC count" in out.message
