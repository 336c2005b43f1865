"""The fabric check's self-test cases (selftest/cases.py builds them into `Case`s): each plants one fault on a
replayed healthy HGX B200 server ({fabric_node}, selftest/fabricfiles.py) judged against the spec `spec init`
wrote from it ({spec_fabric}); the control run replays the same server with no fault and must pass."""

from __future__ import annotations


def _argv(*plants: str, node: str = "{fabric_node}") -> tuple[str, ...]:
    out = ["node", "--spec", "{spec_fabric}", "--only", "fabric", "--plant", f"fabric.replay={node}"]
    for p in plants:
        out += ["--plant", p]
    return tuple(out)


# (name, fault in words, argv, the check, the detector's line, judge_only)
ROWS: tuple[tuple[str, str, tuple[str, ...], str, str, bool], ...] = (
    ("fabric.replay", "a captured HGX B200 server whose compute NIC mlx5_4 trained to HDR 200 (the fault in the "
     "captured sysfs files themselves, as a site would send it)", _argv(node="{fabric_node_hdr}"), "fabric",
     r"NIC mlx5_4:1 at 200 Gb/sec \(4X HDR\), expected 400 Gb/s \(fabric\.nics\.mlx5_4\)", False),
    ("fabric.port_down", "compute NIC mlx5_3's port is Down (a cable or transceiver out)",
     _argv("fabric.port_down=mlx5_3"), "fabric", r"NIC mlx5_3:1 is DOWN \(Disabled\), expected ACTIVE", False),
    ("fabric.half_rate", "compute NIC mlx5_5's port trained to half its rate (NDR 400 → 200)",
     _argv("fabric.half_rate=mlx5_5"), "fabric",
     r"NIC mlx5_5:1 at 200 Gb/sec .*expected 400 Gb/s \(fabric\.nics\.mlx5_5\)", False),
    ("fabric.hca_missing", "NCCL_IB_HCA names seven of the eight compute NICs (mlx5_6 left out)",
     _argv("fabric.hca_missing=mlx5_6"), "fabric",
     r"NCCL_IB_HCA=\S+ leaves out compute NIC mlx5_6:1: NCCL will use 7 of 8", False),
    ("fabric.nvlink_down", "NVLink 5 of GPU 3 is inactive (17 of 18 active)", _argv("fabric.nvlink_down=3:5"),
     "fabric", r"GPU 3: 17 of 18 NVLinks active \(inactive: link 5\), expected 18 \(fabric\.nvlink_per_gpu\)", False),
    ("fabric.service_down", "Fabric Manager is not running on an NVSwitch server",
     _argv("fabric.service_down=nvidia-fabricmanager"), "fabric",
     r"nvidia-fabricmanager not running \(planted: not running\), the spec requires it", False),
    ("fabric.counter_rise", "compute NIC mlx5_1's symbol_error count rises past the bound during the run",
     _argv("fabric.counter_rise=mlx5_1"), "fabric",
     r"NIC mlx5_1:1: symbol_error rose \d+ → \d+ \(\+11\), past fabric\.counter_rise_max 10", True),
    ("fabric.counter_rise_nvlink", "GPU 2's NVLink 7 replay count rises past the bound during the run",
     _argv("fabric.counter_rise=2:7"), "fabric",
     r"GPU 2 link 7: replay rose \d+ → \d+ \(\+11\), past fabric\.counter_rise_max 10", True),
)
