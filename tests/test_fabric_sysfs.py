"""The RDMA port reader (fabric/sysfs.py) on sysfs trees written from the kernel ABI with ConnectX-7 values."""

from __future__ import annotations

from pathlib import Path

from fabric_tree import HDR, Nic, hgx_tree, nic_pci, set_port
from trainready.fabric import sysfs
from trainready.fabric.root import ENV, sysfs_root
from trainready.manifest import ib

DATA = Path(__file__).parent / "data"


def test_a_down_port_and_a_half_rate_port_read_as_such(tmp_path: Path) -> None:
    root = hgx_tree(tmp_path, nics={3: {"state": "1: DOWN", "phys_state": "3: Disabled"}, 5: {"rate": HDR}})
    ports = {p.device: p for p in sysfs.read_ports(root)}
    assert (ports["mlx5_3"].state, ports["mlx5_3"].phys_state) == ("DOWN", "Disabled")
    assert ports["mlx5_5"].rate_gbps == 200.0 and ports["mlx5_5"].rate == "200 Gb/sec (4X HDR)"
    assert sorted(ports) == [f"mlx5_{i}" for i in range(8)]
    p0 = ports["mlx5_0"]
    assert (p0.state, p0.phys_state, p0.rate_gbps, p0.link_layer) == ("ACTIVE", "LinkUp", 400.0, "InfiniBand")
    assert (p0.fw_ver, p0.board_id, p0.pci, p0.name) == ("28.39.1002", "MT_0000000838", nic_pci(0), "mlx5_0:1")
    assert p0.netdev == "ibp27s0" and p0.netdev_state == "up" and p0.roce_v2_gids is None
    assert p0.counters == dict.fromkeys(sysfs.ERROR_COUNTERS, 0)


def test_counters_and_roce(tmp_path: Path) -> None:
    root = hgx_tree(tmp_path, n_nics=1, extra=[Nic("mlx5_8", 1, link_layer="Ethernet", roce_v2=True),
                                               Nic("mlx5_9", 2, link_layer="Ethernet")])
    set_port(root, "mlx5_0", counters__symbol_error="17")
    ports = {p.device: p for p in sysfs.read_ports(root)}
    assert ports["mlx5_0"].counters["symbol_error"] == 17
    assert ports["mlx5_8"].roce_v2_gids == 1 and ports["mlx5_9"].roce_v2_gids == 0


def test_the_root_follows_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert sysfs_root() == Path("/sys")
    assert sysfs.read_ports(tmp_path) == [] and not sysfs.rdma_present(tmp_path)
    hgx_tree(tmp_path, n_nics=2)
    monkeypatch.setenv(ENV, str(tmp_path))
    assert [p.device for p in sysfs.read_ports()] == ["mlx5_0", "mlx5_1"] and sysfs.rdma_present()
    assert [p["device"] for p in ib.ports()] == ["mlx5_0", "mlx5_1"]  # the manifest reads through the same reader


def test_the_manifest_reader_on_the_kept_tree() -> None:
    ports = ib.ports(DATA / "sysfs_ib")
    assert [(p["device"], p["state"], p["rate"]) for p in ports] == [
        ("mlx5_0", "ACTIVE", "400 Gb/sec (4X NDR)"), ("mlx5_1", "DOWN", "10 Gb/sec (4X SDR)")]
    assert ib.ports(DATA / "absent").startswith("unavailable: ")
