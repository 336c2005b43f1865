"""`trainready node --health-check`, passive: NVML and the kernel log only, no torch.  Each finding is shown on a
planted reading before a healthy one passes; counters are judged against the last reading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainready.cluster.health.passive import judge, run_passive
from trainready.manifest.gpuhealth import HealthReading, read_health, spare
from trainready.manifest.kmsg import Xid, parse_record, read_xids

SRC = Path(__file__).resolve().parents[1] / "src"
NO_SLURM = {"SLURM_CONF": "/nonexistent/slurm.conf", "SLURMD_NODENAME": "health-test-node"}


def _node(**kw) -> HealthReading:  # type: ignore[no-untyped-def]
    gpus = [spare(index=i, uuid=f"GPU-{i}", pci_bus_id=f"00000000:{0x18 + i:02x}:00.0", serial=f"S{i}")
            for i in range(4)]
    for i, changes in kw.pop("gpu", {}).items():
        gpus[i] = spare(**{**gpus[i].__dict__, **changes})
    return HealthReading(None, tuple(gpus), **kw)


def _state(r: HealthReading) -> dict:  # type: ignore[type-arg]
    return {"schema": "trainready.healthstate/1", "when": "2026-12-05T03:00:00+00:00", "reading": r.to_json()}


def test_each_finding_fails_then_a_healthy_reading_passes() -> None:
    bad = judge(_node(gpu={1: {"ecc_uncorrected_volatile": 2}, 2: {"remap_pending": True},
                           3: {"pcie_width_current": 8, "throttle_reasons": ["hw_power_brake_slowdown"]}},
                      xids=(Xid(7, "0000:19:00", 79, "GPU has fallen off the bus."),)), None, 4)["fail"]
    text = "\n".join(bad)
    assert "GPU 1 (00000000:19:00.0): 2 uncorrectable ECC" in text
    assert "GPU 2 (00000000:1a:00.0): a row remap is pending" in text
    assert "GPU 3 (00000000:1b:00.0): PCIe link x8, the link's maximum is x16" in text
    assert "clocks held down now: hw_power_brake_slowdown" in text
    assert "Xid 79 on 0000:19:00: GPU fallen off the bus" in text
    assert judge(_node(), None, 4)["fail"] == []


def test_a_lower_pcie_generation_at_idle_and_an_application_xid_are_not_failures() -> None:
    found = judge(_node(gpu={0: {"pcie_gen_current": 1}}, xids=(Xid(3, "0000:18:00", 13, "Graphics Exception"),)),
                  None, 4)
    assert found["fail"] == [] and found["warn"] == []
    assert any("Xid 13" in n for n in found["note"])


def test_counters_growing_since_the_last_reading_warn_naming_counter_and_date() -> None:
    last = _state(_node())
    found = judge(_node(gpu={2: {"ecc_uncorrected_aggregate": 3, "pcie_replays": 40}}), last, None)
    assert found["fail"] == []
    assert "GPU 2 (00000000:1a:00.0): ecc_uncorrected_aggregate grew 0 -> 3 since 2026-12-05T03:00" in found["warn"]
    assert any("pcie_replays grew 0 -> 40" in w for w in found["warn"])
    assert judge(_node(), last, None) == {"fail": [], "warn": [], "note": [], "unread": []}


def test_a_gpu_missing_since_the_last_reading_fails_and_a_swapped_part_is_named() -> None:
    last = _state(_node())
    fewer = HealthReading(None, _node().gpus[:3])
    assert judge(fewer, last, None)["fail"] == ["3 GPU(s) seen, 4 expected"]
    notes = judge(_node(gpu={0: {"serial": "NEW"}}), last, None)["note"]
    assert notes == ["GPU 0 (00000000:18:00.0): serial S0 -> NEW since 2026-12-05T03:00 (a part swapped)"]


def test_no_nvml_fails_only_where_gpus_are_expected() -> None:
    none = HealthReading("no NVIDIA driver (libnvidia-ml.so.1 not found)")
    assert judge(none, None, None)["fail"] == []
    assert judge(none, None, 8)["fail"] == ["NVML unusable: no NVIDIA driver (libnvidia-ml.so.1 not found)"]


def test_kmsg_records_parse_and_the_real_log_is_read_from_where_it_stopped() -> None:
    seq, xid = parse_record("4,2291,81392,-;NVRM: Xid (PCI:0000:3B:00): 79, pid=1234, name=python, GPU has fallen "
                            "off the bus.")
    assert seq == 2291 and xid == Xid(2291, "0000:3b:00", 79, "pid=1234, name=python, GPU has fallen off the bus.",
                                      81392)  # logged 81392 us after boot: the RMA folder's XID timeline
    assert parse_record("6,12,900,-;eth0: link up") == (12, None)
    got = read_xids(-1)
    if isinstance(got, str):
        pytest.skip(got)
    last, _ = got
    assert last >= 0
    again = read_xids(last)
    assert not isinstance(again, str) and again[0] >= last


def test_nvml_is_read_through_pynvml_with_each_query_guarded() -> None:
    from fake_nvml import FakeNvml

    r = read_health(-1, "", nv=FakeNvml(2, width=(16, 8)), kmsg="/nonexistent/kmsg")
    assert r.nvml_error is None and [g.serial for g in r.gpus] == ["SER0", "SER1"]
    assert r.gpus[1].pcie_width_current == 8 and r.gpus[0].pcie_replays == 0
    assert r.kmsg_error and "cannot read /nonexistent/kmsg" in r.kmsg_error
    assert "PCIe link x8" in judge(r, None, 2)["fail"][0]


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    e = {**os.environ, **NO_SLURM, "PYTHONPATH": str(SRC), **(env or {})}
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "trainready", "node", "--health-check", *args],
                          capture_output=True, text=True, env=e, timeout=120)


def test_the_command_imports_neither_torch_nor_the_cli_and_keeps_its_state(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    p = _cli("--health-state", str(state), "--json", str(tmp_path / "h.json"))
    assert p.returncode == 0, p.stdout + p.stderr
    imported = {line.split("|")[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert "torch" not in imported and "typer" not in imported and "trainready.cli" not in imported
    assert "health-test-node: OK" in p.stdout
    doc = json.loads(state.read_text())
    assert doc["schema"] == "trainready.healthstate/1" and doc["node"] == "health-test-node"
    assert json.loads((tmp_path / "h.json").read_text())["results"][0]["name"] == "health"


def test_planted_readings_fail_without_draining_and_bad_input_is_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_node(gpu={1: {"remap_failed": True}}).to_json()))
    p = _cli("--health-state", str(tmp_path / "s.json"), "--plant", f"health.reading={bad}")
    assert p.returncode == 3, p.stdout + p.stderr
    assert "FAIL: GPU 1 (00000000:19:00.0): a row remap failed" in p.stdout and "not drained" in p.stdout
    p = _cli("--health-state", str(tmp_path / "s.json"), "--plant", "health.readin=x")
    assert p.returncode == 2 and "health.reading" in p.stderr and "Traceback" not in p.stderr
    p = _cli("--spec", str(tmp_path / "missing.toml"))
    assert p.returncode == 2 and p.stderr.strip().endswith("(expected a TOML spec file)")


def test_a_gpu_spec_on_a_machine_without_gpus_fails_and_asks_slurm_to_drain(tmp_path: Path) -> None:
    said: list[str] = []
    os.environ.update(NO_SLURM)
    try:
        code = run_passive(8, str(tmp_path / "s.json"), {}, said.append)
    finally:
        for k in NO_SLURM:
            os.environ.pop(k, None)
    if not any("NVML unusable" in s for s in said):
        pytest.skip("this machine has GPUs")
    assert code == 1 and "could not drain" in said[-1]  # no Slurm here: it says so, one line


@pytest.mark.slow  # the FAIL asks Slurm to drain the node, which is not here: a minute of its retries
def test_the_fabric_in_the_passive_check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A port Down FAILs the passive check naming it; a counter that rose since the last reading WARNs; the
    healthy tree adds nothing. Files only: it stays well under a second."""
    import time

    from fabric_tree import hgx_tree, set_port

    root = hgx_tree(tmp_path / "sys", nics={3: {"state": "1: DOWN", "phys_state": "3: Disabled"}})
    monkeypatch.setenv("TRAINREADY_SYSFS_ROOT", str(root))
    for k, v in NO_SLURM.items():
        monkeypatch.setenv(k, v)
    from trainready.cluster.health import fabric as passive_fabric
    from trainready.spec.fabric import FabricSpec

    t0 = time.perf_counter()
    found: dict[str, list[str]] = {"fail": [], "warn": []}
    passive_fabric.judge(passive_fabric.read(), None, FabricSpec(), found)
    took = time.perf_counter() - t0  # the fabric's part alone (the drain below asks for Slurm, which is not here)
    assert found["fail"] == ["fabric: NIC mlx5_3:1 is DOWN (Disabled), expected ACTIVE (LinkUp)"] and took < 1.0, took
    said: list[str] = []
    state = str(tmp_path / "s.json")
    code = run_passive(None, state, {}, said.append)
    assert code == 1 and any("fabric: NIC mlx5_3:1 is DOWN (Disabled), expected ACTIVE (LinkUp)" in s for s in said), said
    set_port(root, "mlx5_3", state="4: ACTIVE", phys_state="5: LinkUp")
    said.clear()
    assert run_passive(None, state, {}, said.append) == 0, said
    assert not any("fabric" in s for s in said), said
    set_port(root, "mlx5_5", counters__symbol_error="4")
    said.clear()
    assert run_passive(None, state, {}, said.append) == 0
    assert any("WARN: fabric: NIC mlx5_5:1: symbol_error rose 0 → 4 (+4)" in s for s in said), said


@pytest.mark.slow  # the FAIL asks Slurm to drain the node, which is not here: a minute of its retries
def test_the_passive_check_holds_the_fabric_to_the_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every port trained to HDR alike: the spec-free rules (each port against the node's others) find nothing;
    with the [fabric] of a spec written from a healthy NDR server (`spec init`), the passive check FAILs naming
    the port and the spec's rate (`node --health-check --spec` hands it down)."""
    from fabric_nvml import FabricNvml
    from fabric_tree import HDR, hgx_tree
    from trainready.fabric.facts import read_facts
    from trainready.spec.init_fabric import fabric_spec

    good = read_facts(hgx_tree(tmp_path / "good"), nv=FabricNvml(), environ={}, proc=tmp_path / "proc")
    spec = fabric_spec({"fabric": good.to_json()}, [])
    hdr = hgx_tree(tmp_path / "sys", nics={i: {"rate": HDR} for i in range(8)})
    monkeypatch.setenv("TRAINREADY_SYSFS_ROOT", str(hdr))
    for k, v in NO_SLURM.items():
        monkeypatch.setenv(k, v)
    said: list[str] = []
    state = str(tmp_path / "s.json")
    assert run_passive(None, state, {}, said.append) == 0 and not any("fabric" in s for s in said), said
    said.clear()
    assert run_passive(None, state, {}, said.append, fabric_spec=spec) == 1
    assert any("fabric: NIC mlx5_0:1 at 200 Gb/sec (4X HDR), expected 400 Gb/s" in s for s in said), said
