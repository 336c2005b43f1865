"""Host settings alike on every node: the probe (fake /proc/sys and /sys trees, a fake NVML), the [host] spec
(match keys, pins), `spec init`'s pins, the known-bad rules with their sources, the fleet comparison against the
reference node (a difference planted into one node's record, marked as planted), a pin every node misses as a
fleet-wide cause, and the clock line's direction."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from trainready.checks.host import judge as judge_node
from trainready.cluster.judge import guard
from trainready.cluster.judge.verdict import NodeInput, decide
from trainready.cluster.tasks.clock import direction
from trainready.errors import ConfigError
from trainready.hostsettings import drift as hostdrift
from trainready.hostsettings import pins as hostpins
from trainready.hostsettings.rules import NCCL_MEMORY_DOC, known_bad
from trainready.manifest import hostset
from trainready.manifest.gpumodes import gpu_modes
from trainready.records import Status
from trainready.spec import load_spec
from trainready.spec.init import derive
from trainready.spec.model import HostSpec, NodeSpec

PLANTED = "planted by this test: the local cluster's nodes share one kernel, so their sysctls cannot differ"


def fake_tree(root: Path, rmem: str = "212992", ib: bool = False) -> tuple[Path, Path]:
    proc, sys = root / "proc_sys", root / "sys"
    for key, text in (("net/core/rmem_max", rmem), ("net/core/wmem_max", "212992"),
                      ("net/ipv4/tcp_rmem", "4096\t131072  6291456"), ("kernel/numa_balancing", "1")):
        (proc / key).parent.mkdir(parents=True, exist_ok=True)
        (proc / key).write_text(text + "\n")
    thp = sys / "kernel/mm/transparent_hugepage"
    thp.mkdir(parents=True)
    (thp / "enabled").write_text("always [madvise] never\n")
    for cpu, gov in (("cpu0", "performance"), ("cpu1", "performance"), ("cpu2", "powersave")):
        (sys / "devices/system/cpu" / cpu / "cpufreq").mkdir(parents=True)
        (sys / "devices/system/cpu" / cpu / "cpufreq/scaling_governor").write_text(gov + "\n")
    if ib:
        port = sys / "class/infiniband/mlx5_0/ports/1"
        port.mkdir(parents=True)
        for name, text in (("state", "4: ACTIVE"), ("phys_state", "5: LinkUp"), ("rate", "400 Gb/sec (4X NDR)"),
                           ("link_layer", "InfiniBand")):
            (port / name).write_text(text + "\n")
        (sys / "class/infiniband/mlx5_0/device/net/ib0").mkdir(parents=True)
        (sys / "class/infiniband/mlx5_0/device/net/ib0/mtu").write_text("4092\n")
    return proc, sys


class FakeNvml:
    """Two GPUs; GPU 1's persistence mode is off and it has no application clocks."""

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: return 2
    def nvmlDeviceGetHandleByIndex(self, i: int) -> int: return i
    def nvmlDeviceGetPersistenceMode(self, h: int) -> int: return 1 - h
    def nvmlDeviceGetEccMode(self, h: int) -> tuple[int, int]: return (1, 1)
    def nvmlDeviceGetMigMode(self, h: int) -> tuple[int, int]: return (0, 0)
    def nvmlDeviceGetComputeMode(self, h: int) -> int: return 0
    def nvmlDeviceGetPowerManagementLimit(self, h: int) -> int: return 700000  # mW

    def nvmlDeviceGetApplicationsClock(self, h: int, clock: int) -> int:
        if h == 1:
            raise RuntimeError("Not Supported")
        return 1980 if clock == 1 else 3201


def test_probe_reads_each_setting_with_its_source_and_says_why_when_it_cannot(tmp_path):
    proc, sys = fake_tree(tmp_path, ib=True)
    s = hostset.collect(proc, sys, tmp_path, nvml=FakeNvml())
    assert s["net.core.rmem_max"] == {"value": 212992, "source": str(proc / "net/core/rmem_max")}
    assert s["net.ipv4.tcp_rmem"]["value"] == "4096 131072 6291456"
    assert s["net.ipv4.tcp_wmem"]["value"].startswith("unavailable: ") and "tcp_wmem" in s["net.ipv4.tcp_wmem"]["source"]
    assert s["thp.enabled"]["value"] == "madvise" and s["thp.defrag"]["value"].startswith("unavailable: ")
    assert s["cpu.governor"]["value"] == "performance x2, powersave x1"
    assert s["ulimit.memlock"]["source"].startswith("getrlimit(RLIMIT_MEMLOCK)")
    assert isinstance(s["shm.size_gib"]["value"], float)
    assert s["ib.mlx5_0/1.state"]["value"] == "ACTIVE" and s["ib.mlx5_0/1.mtu"]["value"] == 4092
    assert s["gpu.power_limit_w"] == {"value": 700, "source": "NVML nvmlDeviceGetPowerManagementLimit, W"}
    assert s["gpu.persistence_mode"]["value"] == "GPU 0: enabled; GPU 1: disabled"
    assert s["gpu.app_clock_sm_mhz"]["value"].startswith("GPU 0: 1980; GPU 1: unavailable: NVML: Not Supported")


def test_without_nvml_every_gpu_setting_says_why():
    class NoDriver:
        def nvmlInit(self) -> None:
            raise type("NVMLError_LibraryNotFound", (Exception,), {})()

    modes = gpu_modes(NoDriver())
    assert {m["value"] for m in modes.values()} == {"unavailable: no NVIDIA driver (libnvidia-ml.so.1 not found)"}


def test_spec_host_section_is_loaded_strictly(tmp_path):
    good = tmp_path / "good.toml"
    good.write_text('[host]\nmatch = ["ib.*", "net.core.*"]\npins = { "ulimit.memlock" = "unlimited", '
                    '"shm.size_gib" = ">= 1", "net.core.rmem_max" = 16777216 }\n')
    spec, _ = load_spec(good)
    assert [p.describe() for p in hostpins.pins(spec)] == [
        "ulimit.memlock == unlimited", "shm.size_gib >= 1", "net.core.rmem_max == 16777216"]
    for body, key in (('[host]\npins = { "net.core.rmem_mx" = ">= 1" }\n', "host.pins.net.core.rmem_mx"),
                      ('[host]\npins = { "cpu.governor" = ">= fast" }\n', "host.pins.cpu.governor"),
                      ('[host]\nmatch = ["thp.enable"]\n', "host.match[0]")):
        bad = tmp_path / "bad.toml"
        bad.write_text(body)
        with pytest.raises(ConfigError) as e:
            load_spec(bad)
        assert e.value.key == key, str(e.value)
        assert "did you mean 'net.core.rmem_max'" in str(e.value) or not key.endswith("rmem_mx")


def test_pins_compare_numbers_unlimited_and_text():
    p = hostpins.parse("ulimit.memlock", "unlimited")
    assert p.holds("unlimited") and not p.holds("8192")
    ge = hostpins.parse("net.core.rmem_max", ">= 16777216")
    assert ge.holds("16777216") and ge.holds("unlimited") and not ge.holds("212992") and not ge.holds("unavailable: x")
    assert hostpins.parse("cpu.governor", "performance").holds("performance")
    assert hostpins.parse("cpu.governor", "!= powersave").holds("performance")


def _settings(**over: object) -> dict[str, dict[str, object]]:
    base: dict[str, object] = {"net.core.rmem_max": 4194304, "ulimit.memlock": 8192, "shm.size_gib": 23.5,
                               "thp.enabled": "madvise", "gpu.persistence_mode": "unavailable: no NVIDIA driver",
                               "ulimit.nofile": 20000}
    base.update({k.replace("__", "."): v for k, v in over.items()})
    return {k: {"value": v, "source": "test"} for k, v in base.items()}


def test_known_bad_values_are_named_with_their_public_source():
    ib = {"ib.mlx5_0/1.state": "ACTIVE", "ulimit.memlock": "8192", "shm.size_gib": "0.0625",
          "gpu.persistence_mode": "enabled"}
    bad = {b.key: b for b in known_bad(ib)}
    assert bad["ulimit.memlock"].fatal and "not unlimited" in bad["ulimit.memlock"].text
    assert bad["ulimit.memlock"].source == NCCL_MEMORY_DOC and "memlock=-1" in NCCL_MEMORY_DOC
    assert bad["shm.size_gib"].fatal and "NCCL" in bad["shm.size_gib"].text and "--shm-size=1g" in bad["shm.size_gib"].source
    cpu = {"ulimit.memlock": "8192", "shm.size_gib": "0.0625", "gpu.persistence_mode": "unavailable: no driver"}
    assert [(b.key, b.fatal) for b in known_bad(cpu)] == [("shm.size_gib", False)]  # no RDMA: memlock not judged
    out = judge_node(_settings(ulimit__memlock=8192, **{"ib.mlx5_0/1.state": "ACTIVE"}), [])
    assert out.status == Status.FAIL and "not unlimited" in out.message and "NCCL User Guide" in out.message


def test_node_check_judges_the_spec_pins():
    out = judge_node(_settings(), [hostpins.parse("ulimit.memlock", "unlimited")])
    assert out.status == Status.FAIL and "ulimit.memlock 8192 misses the spec pin == unlimited" in out.message
    assert judge_node(_settings(), []).status == Status.PASS


def record(settings: dict[str, dict[str, object]]) -> dict[str, object]:
    return {"schema": "trainready.fleetnode/1", "versions": {}, "report": {"results": []},
            "manifest": {"host_settings": settings}}


def test_a_difference_is_named_per_node_against_the_reference():
    """node2's rmem_max is planted into its record (marked as planted in the setting's source)."""
    nodes = {n: record(_settings()) for n in ("node1", "node2", "node3")}
    planted = copy.deepcopy(nodes["node2"])
    planted["manifest"]["host_settings"]["net.core.rmem_max"] = {"value": 212992, "source": PLANTED}  # type: ignore[index]
    planted["manifest"]["host_settings"]["ulimit.nofile"] = {"value": 1024, "source": PLANTED}  # type: ignore[index]
    nodes["node2"] = planted
    v = decide([NodeInput(n, r) for n, r in nodes.items()], NodeSpec(), [], [], reference="node1")
    by = {n.node: n for n in v.nodes}
    assert by["node2"].reasons == ("host: net.core.rmem_max 4194304 (node1) ≠ 212992",)
    assert by["node2"].causes == ("host net.core.rmem_max",)
    assert by["node2"].warnings == ("host (not judged): ulimit.nofile 20000 (node1) ≠ 1024",)
    assert by["node1"].accepted and by["node3"].accepted
    assert {c.name: c.status for c in v.cross}["cluster.host"] == Status.FAIL and v.exit_code == 1


def test_a_pin_every_node_misses_is_fleet_wide_and_nothing_is_drained():
    spec = NodeSpec(host=HostSpec(pins={"ulimit.memlock": "unlimited", "shm.size_gib": ">= 32"}))
    nodes = [NodeInput(n, record(_settings(shm__size_gib=64.0 if n != "node3" else 16.0)))
             for n in ("node1", "node2", "node3")]
    v = decide(nodes, spec, [], [])
    by = {n.node: n for n in v.nodes}
    assert by["node1"].accepted and by["node2"].accepted  # memlock 8192 everywhere: not any node's fault
    assert by["node3"].causes == ("host pin shm.size_gib",)
    assert by["node3"].reasons == ("host: shm.size_gib 16.0 misses the pin >= 32",)
    fleet = {c.name: c for c in v.cross}[hostdrift.FLEET_PINS]
    assert fleet.status == Status.FAIL and "every node (3) misses ulimit.memlock == unlimited" in fleet.message
    assert v.fleet_failures == [fleet] and v.exit_code == 1
    plan = guard.plan(v, guard.parse_max_drain("10%"))
    assert plan.drain == ("node3",)  # only the node that alone misses its pin
    everyone = decide(nodes, NodeSpec(host=HostSpec(pins={"ulimit.memlock": "unlimited"})), [], [])
    assert everyone.rejected == [] and guard.plan(everyone, guard.parse_max_drain("10%")).drain == ()


def test_spec_init_pins_the_reference_values_of_the_keys_that_must_match():
    manifest = {"host_settings": _settings(cpu__governor="unavailable: no cpufreq driver")}
    d = derive(manifest)
    assert d.spec.host.pins == {"net.core.rmem_max": "4194304", "ulimit.memlock": "8192", "thp.enabled": "madvise"}
    assert any("cpu.governor" in n and "gpu.persistence_mode" in n for n in d.notes)
    assert "shm.size_gib" not in d.spec.host.pins  # shown, not matched: /dev/shm follows the RAM's size


def test_the_clock_line_names_the_direction():
    assert direction(-2.0) == "2.000 s ahead of the submitting host"  # θ = host − node < 0: the node reads later
    assert direction(0.25) == "0.250 s behind the submitting host"
    assert direction(0.0001) == "in step with the submitting host"
    from trainready.cluster.tasks.crosschecks import clock

    res, found = clock({"node2": {"clock": {"offset_s": -2.0, "rtt_s": 0.0004, "daemons": ["chronyd"]}}},
                       NodeSpec().fleet)
    assert [f.text for f in found] == ["clock 2.000 s ahead of the submitting host (± 0.000 s; limit 1 s)"]
