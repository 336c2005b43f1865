"""The fabric check through the real CLI: on an HGX-like tree at TRAINREADY_SYSFS_ROOT a port Down FAILs (exit 1)
naming it, the healthy tree passes; the CPU default on a machine with no RDMA device is not applicable; a spec
with an unknown [fabric] key is refused in one line (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from fabric_tree import hgx_tree

pytestmark = pytest.mark.slow  # a CLI process per run


def _result(out: Path) -> dict:
    return json.loads(out.read_text())["results"][0]


def test_node_only_fabric_on_a_tree(tmp_path: Path) -> None:
    down = hgx_tree(tmp_path / "down", nics={3: {"state": "1: DOWN", "phys_state": "3: Disabled"}})
    p = run_cli("node", "--only", "fabric", "--json", str(tmp_path / "d.json"), env={"TRAINREADY_SYSFS_ROOT": str(down)})
    assert p.returncode == 1, p.stdout + p.stderr
    r = _result(tmp_path / "d.json")
    assert (r["status"], r["message"]) == ("fail", "NIC mlx5_3:1 is DOWN (Disabled), expected ACTIVE (LinkUp)")
    ok = hgx_tree(tmp_path / "ok")
    p = run_cli("node", "--only", "fabric", "--json", str(tmp_path / "o.json"), env={"TRAINREADY_SYSFS_ROOT": str(ok)})
    r = _result(tmp_path / "o.json")
    assert p.returncode == 0 and r["status"] == "pass", r["message"]
    assert r["duration_s"] < 1.0  # files only: 0.03 s measured on a 2-core VM (docs/fabric.md)


def test_no_rdma_on_the_cpu_default_is_not_applicable(tmp_path: Path) -> None:
    p = run_cli("node", "--only", "fabric", "--json", str(tmp_path / "n.json"),
                env={"TRAINREADY_SYSFS_ROOT": str(tmp_path / "empty")})
    r = _result(tmp_path / "n.json")
    assert p.returncode == 0 and r["status"] == "skip"
    assert r["message"].startswith(f"no RDMA device ({tmp_path / 'empty'}/class/infiniband absent)")


def test_an_unknown_fabric_key_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text('[fabric]\nnics = { mlx5_0 = 400.0 }\nnic_speed = 400\n')
    p = run_cli("node", "--only", "fabric", "--spec", str(spec))
    assert p.returncode == 2 and "Traceback" not in p.stderr
    assert p.stderr.strip().endswith("key 'fabric.nic_speed': unknown key (expected one of: counter_rise_max, fw_ver, "
                                     "gpudirect, link_layer, nics, nvlink_per_gpu, nvlink_version, nvswitch, rail_fraction, "
                                     "rails, services)"), p.stderr
    spec.write_text('[fabric]\nrail_fraction = 0.0\n')
    p = run_cli("node", "--only", "fabric", "--spec", str(spec))
    assert p.returncode == 2 and "Traceback" not in p.stderr and "fabric.rail_fraction" in p.stderr, p.stderr
    assert "expected 0 < x <= 1, got 0.0" in p.stderr, p.stderr


def test_spec_init_on_the_healthy_tree_holds_the_others_to_it(tmp_path: Path) -> None:
    from fabric_tree import HDR

    good = hgx_tree(tmp_path / "good")
    spec = tmp_path / "fleet.toml"
    p = run_cli("spec", "init", "-o", str(spec), env={"TRAINREADY_SYSFS_ROOT": str(good)})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "mlx5_7 = 400.0" in spec.read_text() and 'link_layer = "InfiniBand"' in spec.read_text()
    hdr = hgx_tree(tmp_path / "hdr", nics={i: {"rate": HDR} for i in range(8)})  # alike, all at HDR: the spec sees it
    p = run_cli("node", "--only", "fabric", "--spec", str(spec), "--json", str(tmp_path / "h.json"),
                env={"TRAINREADY_SYSFS_ROOT": str(hdr)})
    r = _result(tmp_path / "h.json")
    assert p.returncode == 1 and r["message"].startswith(
        "NIC mlx5_0:1 at 200 Gb/sec (4X HDR), expected 400 Gb/s (fabric.nics.mlx5_0); NIC mlx5_1:1 at 200"), r["message"]
    p = run_cli("node", "--only", "fabric", "--spec", str(spec), "--json", str(tmp_path / "g.json"),
                env={"TRAINREADY_SYSFS_ROOT": str(good)})
    assert p.returncode == 0 and _result(tmp_path / "g.json")["status"] == "pass"
