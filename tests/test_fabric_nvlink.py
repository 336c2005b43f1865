"""NVLink, the NVSwitch fabric, the services and GPUDirect through a stand-in for NVML and a /proc of the test's
own; one H100 in a VM (NVML Not Supported everywhere) is "not applicable", never a FAIL; the capture of a node
reads back as the node."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fabric_nvml import FabricNvml
from fabric_tree import hgx_tree
from trainready.fabric import services
from trainready.fabric.capture import capture
from trainready.fabric.facts import read_facts, snapshot
from trainready.fabric.judge.verdict import judge
from trainready.records import Status
from trainready.spec.fabric import FabricSpec
from trainready.spec.load import load_spec

B200 = load_spec("example:b200-reference")[0].fabric
H200 = load_spec("example:h200-8x")[0].fabric


def _facts(root: Path, nv: FabricNvml, units: tuple[str, ...] = ()):
    return read_facts(root, nv=nv, environ={}, proc=root / "proc", units=units)


def test_one_h100_in_a_vm_is_not_applicable_with_nvmls_answer(tmp_path: Path) -> None:
    vm = FabricNvml(count=1, nvlink=False, fabric=False)
    facts = _facts(tmp_path, vm)
    assert facts.gpus[0].not_applicable == "NVML: Not Supported" and facts.gpus[0].links == ()
    assert facts.gpus[0].fabric_reason == "NVML: Function Not Found"  # the legacy call, after V said Not Supported
    expects = judge(facts, H200, None)  # an HGX spec on it: the links it expects are missing
    assert expects.status is Status.FAIL
    assert expects.message.startswith("GPU 0: no NVLink (NVML: Not Supported), expected 18 active links")
    out = judge(facts, FabricSpec(), None)
    assert out.status is Status.SKIP
    assert "NVLink not applicable (NVML: Not Supported)" in out.message


def test_a_link_down_fails_naming_gpu_and_link(tmp_path: Path) -> None:
    root = hgx_tree(tmp_path)
    nv = FabricNvml()
    nv.down.add((3, 5))
    spec = dataclasses.replace(B200, services=(), gpudirect=False)
    out = judge(_facts(root, nv), spec, None)
    assert out.status is Status.FAIL
    assert out.message == "GPU 3: 17 of 18 NVLinks active (inactive: link 5), expected 18 (fabric.nvlink_per_gpu)"
    loose = judge(_facts(root, nv), FabricSpec(), None)  # no spec: against the node's other GPUs
    assert loose.message == "GPU 3: 17 NVLinks active (inactive: link 5), the node's other GPUs have 18"
    nv.down.clear()
    assert judge(_facts(root, nv), spec, None).status is Status.PASS


def test_nvlink_version_and_cliques(tmp_path: Path) -> None:
    root = hgx_tree(tmp_path)
    spec = dataclasses.replace(B200, services=(), gpudirect=False)
    h100 = judge(_facts(root, FabricNvml(version=4)), spec, None)
    assert h100.status is Status.FAIL and "GPU 0: link 0 v4, link 1 v4" in h100.message
    assert "expected NVLink 5 (fabric.nvlink_version)" in h100.message
    nv = FabricNvml()
    nv.clique = {4: 1, 5: 1, 6: 1, 7: 1}
    two = judge(_facts(root, nv), spec, None)
    assert two.status is Status.FAIL
    assert "GPUs in 2 NVLink cliques (clique 1: GPU 4, 5, 6, 7; clique 32767: GPU 0, 1, 2, 3)" in two.message


def test_a_counter_that_rose_warns_and_past_the_bound_fails(tmp_path: Path) -> None:
    root = hgx_tree(tmp_path)
    nv = FabricNvml()
    spec = dataclasses.replace(B200, services=(), gpudirect=False)
    start = snapshot(*(lambda f: (f.ports, f.gpus))(_facts(root, nv)))
    nv.errors[(2, 7, 0)] = 3  # GPU 2 link 7: 3 replays
    out = judge(_facts(root, nv), spec, start)
    assert out.status is Status.WARN
    assert out.message == "GPU 2 link 7: replay rose 0 → 3 (+3) (fabric.counter_rise_max 10 not passed)"
    nv.errors[(2, 7, 0)] = 11
    assert judge(_facts(root, nv), spec, start).message == (
        "GPU 2 link 7: replay rose 0 → 11 (+11), past fabric.counter_rise_max 10")
    (root / "class/infiniband/mlx5_1/ports/1/counters/link_downed").write_text("12\n")
    both = judge(_facts(root, nv), spec, start)
    assert "NIC mlx5_1:1: link_downed rose 0 → 12 (+12), past fabric.counter_rise_max 10" in both.message


def test_services_by_process_and_gpudirect(tmp_path: Path) -> None:
    proc = tmp_path / "proc"
    (proc / "812").mkdir(parents=True)
    (proc / "812/comm").write_text("bash\n")
    stopped = services.service_state("nvidia-fabricmanager", proc, use_systemd=False)
    assert (stopped.running, stopped.how) == (False, f"no process nv-fabricmanage in {proc}")
    assert services.service_state("nvidia-fabricmanager", proc, True, use_systemd=False).running is None
    (proc / "812/comm").write_text("nv-fabricmanage\n")  # the kernel keeps 15 characters of the name
    running = services.service_state("nvidia-fabricmanager", proc, use_systemd=False)
    assert (running.running, running.how) == (True, f"process nv-fabricmanage (pid 812) in {proc}")
    assert not services.gpudirect(proc, "6.8.0").ready
    (proc / "modules").write_text("nvidia_peermem 16384 0 - Live 0x0000000000000000\nnvidia 11 1 nvidia_peermem\n")
    assert services.gpudirect(proc, "6.8.0").peermem
    (proc / "modules").write_text("")
    (proc / "driver/nvidia").mkdir(parents=True)
    (proc / "driver/nvidia/version").write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n")
    assert services.gpudirect(proc, "6.8.0-45-generic").dmabuf and not services.gpudirect(proc, "5.4.0").dmabuf


def test_a_capture_reads_back_as_the_node(tmp_path: Path) -> None:
    root = hgx_tree(tmp_path / "node", nics={6: {"rate": "200 Gb/sec (4X HDR)"}})
    nv = FabricNvml()
    nv.down.add((1, 2))
    said = capture(tmp_path / "cap", root, nv=nv)
    assert said.endswith(f"8 GPU(s) and 2 service(s) in {tmp_path / 'cap' / 'node.json'}")
    live = _facts(root, nv)
    back = read_facts(replay=tmp_path / "cap", environ={})
    assert back.ports == live.ports and back.gpus == live.gpus and back.rails == live.rails
    out = judge(back, dataclasses.replace(B200, services=(), gpudirect=False), None)
    assert "NIC mlx5_6:1 at 200 Gb/sec (4X HDR), expected 400 Gb/s (fabric.nics.mlx5_6)" in out.message
    assert "GPU 1: 17 of 18 NVLinks active (inactive: link 2)" in out.message
