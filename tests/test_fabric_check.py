"""The fabric check's judgment on sysfs trees written from the kernel ABI (ConnectX-7 values) and NVML through a
stand-in: each planted fault FAILs in one line naming the NIC, GPU or link and what was expected, shown before
the healthy tree passes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from fabric_nvml import FabricNvml, NoDriver
from fabric_tree import HDR, Nic, hgx_tree
from trainready.fabric.facts import read_facts, snapshot
from trainready.fabric.judge.verdict import judge
from trainready.records import Status
from trainready.spec.fabric import FabricSpec
from trainready.spec.init_fabric import fabric_spec


def _judge(root: Path, env: dict[str, str] | None = None, spec: FabricSpec = FabricSpec(), nv=None):
    facts = read_facts(root, nv=nv or NoDriver(), environ=env or {}, proc=root / "proc")
    return judge(facts, spec, snapshot(facts.ports, facts.gpus))


def test_one_port_down_fails_naming_it(tmp_path: Path) -> None:
    out = _judge(hgx_tree(tmp_path, nics={3: {"state": "1: DOWN", "phys_state": "3: Disabled"}}))
    assert out.status is Status.FAIL
    assert out.message == "NIC mlx5_3:1 is DOWN (Disabled), expected ACTIVE (LinkUp)"


def test_a_port_at_hdr_among_ndr_fails(tmp_path: Path) -> None:
    out = _judge(hgx_tree(tmp_path, nics={5: {"rate": HDR}}))
    assert out.status is Status.FAIL
    assert out.message == "NIC mlx5_5:1 at 200 Gb/sec (4X HDR), expected 400 Gb/s (the node's fastest compute port)"


def test_nccl_ib_hca_naming_two_of_eight_fails(tmp_path: Path) -> None:
    out = _judge(hgx_tree(tmp_path), {"NCCL_IB_HCA": "=mlx5_0,mlx5_1"})
    assert out.status is Status.FAIL
    assert out.message.startswith("NCCL_IB_HCA==mlx5_0,mlx5_1 leaves out compute NIC mlx5_2:1, mlx5_3:1,")
    assert "NCCL will use 2 of 8" in out.message and "\n" not in out.message


def test_nccl_ib_hca_naming_a_nic_that_does_not_exist_fails(tmp_path: Path) -> None:
    out = _judge(hgx_tree(tmp_path), {"NCCL_IB_HCA": "mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7,mlx5_9"})
    assert out.status is Status.FAIL
    assert out.message.startswith("NCCL_IB_HCA=mlx5_0,") and ": mlx5_9 names no RDMA device here" in out.message


def test_rdma_off_and_a_socket_interface_that_is_not_up(tmp_path: Path) -> None:
    root = hgx_tree(tmp_path)
    assert "NCCL_IB_DISABLE=1 with 8 active RDMA port(s)" in _judge(root, {"NCCL_IB_DISABLE": "1"}).message
    assert "NCCL_NET=Socket with 8" in _judge(root, {"NCCL_NET": "Socket"}).message
    out = _judge(root, {"NCCL_SOCKET_IFNAME": "=eth9"})
    assert out.status is Status.FAIL and "NCCL_SOCKET_IFNAME==eth9 names no interface that is up" in out.message
    assert _judge(root, {"NCCL_SOCKET_IFNAME": "ibp", "NCCL_IB_DISABLE": "0"}).status is Status.PASS


def test_the_healthy_tree_passes_with_nvlink_not_applicable_on_a_cpu_node(tmp_path: Path) -> None:
    out = _judge(hgx_tree(tmp_path))
    assert out.status is Status.PASS, out.message
    assert "8 of 8 compute port(s) Active (400 Gb/sec (4X NDR))" in out.message
    assert "NVLink not applicable: no GPU read (NVML: " in out.message
    assert _judge(hgx_tree(tmp_path), {"NCCL_IB_HCA": "mlx5"}).status is Status.PASS  # a prefix names all eight
    assert _judge(hgx_tree(tmp_path), {"NCCL_IB_HCA": "^mlx5_9"}).status is Status.WARN  # excludes nothing here


def test_no_rdma_and_no_gpu_is_not_applicable(tmp_path: Path) -> None:
    out = _judge(tmp_path)
    assert out.status is Status.SKIP
    assert out.message.startswith(f"no RDMA device ({tmp_path}/class/infiniband absent); no GPU (NVML: ")
    fails = _judge(tmp_path, spec=FabricSpec(nics={"mlx5_0": 400.0}))  # a spec that expects a NIC is not skipped
    assert fails.status is Status.FAIL and "NIC mlx5_0 absent: the spec's compute NICs are mlx5_0" in fails.message


def test_a_spec_from_the_healthy_tree_holds_the_others_to_it(tmp_path: Path) -> None:
    good = read_facts(hgx_tree(tmp_path / "good"), nv=FabricNvml(), environ={}, proc=tmp_path / "proc")
    notes: list[str] = []
    spec = fabric_spec({"fabric": good.to_json()}, notes)
    assert spec.nics == {f"mlx5_{i}": 400.0 for i in range(8)} and notes == []
    assert (spec.link_layer, spec.fw_ver, spec.nvlink_per_gpu, spec.nvlink_version, spec.nvswitch) == (
        "InfiniBand", "28.39.1002", 18, 5, True)
    assert spec.rails == {str(i): f"mlx5_{i}" for i in range(8)}
    # one fewer NIC (the storage NIC beside it is not a compute NIC, not judged)
    root = hgx_tree(tmp_path / "seven", n_nics=7, extra=[Nic("mlx5_8", 7, link_layer="Ethernet", roce_v2=True)])
    out = _judge(root, spec=dataclasses.replace(spec, nvlink_per_gpu=None, nvswitch=False, rails={}))
    assert out.status is Status.FAIL
    assert out.message == ("NIC mlx5_7 absent: the spec's compute NICs are mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, "
                           "mlx5_5, mlx5_6, mlx5_7 (fabric.nics); class/infiniband has mlx5_0, mlx5_1, mlx5_2, mlx5_3, "
                           "mlx5_4, mlx5_5, mlx5_6, mlx5_8")
    all_hdr = hgx_tree(tmp_path / "hdr", nics={i: {"rate": HDR} for i in range(8)})  # alike, but not the spec's
    out = _judge(all_hdr, spec=dataclasses.replace(spec, nvlink_per_gpu=None, nvswitch=False, rails={}))
    assert out.status is Status.FAIL and out.message.startswith(
        "NIC mlx5_0:1 at 200 Gb/sec (4X HDR), expected 400 Gb/s (fabric.nics.mlx5_0)")
    fw = hgx_tree(tmp_path / "fw", nics={2: {"fw_ver": "28.38.1000"}})
    out = _judge(fw, spec=dataclasses.replace(spec, nvlink_per_gpu=None, nvswitch=False, rails={}))
    assert out.message == "NIC mlx5_2 firmware 28.38.1000, expected 28.39.1002 (fabric.fw_ver)"
    healthy = _judge(tmp_path / "good", spec=spec, nv=FabricNvml())
    assert healthy.status is Status.PASS, healthy.message


def test_rails_held_to_the_spec(tmp_path: Path) -> None:
    spec = FabricSpec(rails={str(i): f"mlx5_{i}" for i in range(8)})
    swapped = hgx_tree(tmp_path / "swap", nics={2: {"device": "mlx5_2x"}})  # the NIC of switch 2 named otherwise
    out = _judge(swapped, spec=spec, nv=FabricNvml())
    assert out.status is Status.FAIL
    assert "GPU 2 (0000:3b:00.0): nearest NIC mlx5_2x (0000:3c:00.0, via switch), expected mlx5_2 (fabric.rails.2)" in out.message
    assert _judge(hgx_tree(tmp_path / "ok"), spec=spec, nv=FabricNvml()).status is Status.PASS


@pytest.mark.parametrize("value", ["^=mlx5_1", "=mlx5_1:1", "mlx5_1:2"])
def test_nccl_name_lists_parse_as_nccl_does(value: str) -> None:
    from trainready.fabric.nccl import parse

    hca = parse(value)
    if value.startswith("^"):
        assert (hca.exclude, hca.exact) == (True, True) and not hca.selects("mlx5_1", 1) and hca.selects("mlx5_10", 1)
    elif value.startswith("="):
        assert hca.selects("mlx5_1", 1) and not hca.selects("mlx5_10", 1) and not hca.selects("mlx5_1", 2)
    else:
        assert not hca.selects("mlx5_1", 1) and hca.selects("mlx5_1", 2) and hca.selects("mlx5_12", 2)
