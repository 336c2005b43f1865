"""The [fabric] section of a spec: the server's fabric as the reference server has it (docs/fabric.md).

Inside the server: NVLink per GPU and the NVSwitch fabric with the services that manage it (NVIDIA Fabric
Manager; on Blackwell also the NVLink Subnet Manager). Towards the other servers: the compute NICs (RDMA
devices), each port Active at its rate, NCCL told to use them all, and each GPU's rail (its nearest NIC by
PCIe path). Empty, nothing is expected: the node's RDMA ports are judged against each other and against
NCCL's environment, NVLink where NVML shows it, and a node with neither is "not applicable".
"""

from __future__ import annotations

from dataclasses import dataclass

from trainready.errors import ConfigError
from trainready.util.strict import doc_field

LINK_LAYERS = ("", "InfiniBand", "Ethernet")


@dataclass(frozen=True)
class FabricSpec:
    nics: dict[str, float] = doc_field(
        default_factory=dict,
        doc="The compute NICs (RDMA devices as /sys/class/infiniband names them) → the rate every port of each must "
        "run at, Gb/s (the number before 'Gb/sec' in the port's `rate`: 400 for '400 Gb/sec (4X NDR)', 200 for HDR). "
        "Each must be present, Active/LinkUp at that rate and used by NCCL. Empty = the node's RDMA ports are the "
        "compute NICs and the fastest of them sets the rate.",
    )
    link_layer: str = doc_field(
        "", "The compute ports' link layer: 'InfiniBand', or 'Ethernet' for RoCE v2 (then each port's network "
        "interface must be up with a RoCE v2 GID). '' = not judged.",
    )
    fw_ver: str = doc_field(
        "", "Firmware version prefix every compute NIC must run (`fw_ver`, e.g. '28.39.1002'). '' = not judged; "
        "NICs of one node that differ are named either way.",
    )
    nvlink_per_gpu: int | None = doc_field(
        None, "Active NVLinks each GPU must have (18 on H100/H200 SXM and B200; 0 = a server without NVLink: PCIe "
        "cards, one GPU in a VM). Omitted = not judged: a GPU with fewer active links than the node's others is "
        "still named.",
    )
    nvlink_version: int | None = doc_field(
        None, "NVLink generation every active link must report (4 on H100/H200, 5 on B200). Omitted = not judged.",
    )
    nvswitch: bool = doc_field(
        False, "The GPUs reach each other through NVSwitches: every active link must reach an NVSwitch and every GPU "
        "be registered with the fabric (NVML fabric state completed, status success) in one clique.",
    )
    services: tuple[str, ...] = doc_field(
        (), "systemd units that must be active (or, without systemd, their process running): "
        "'nvidia-fabricmanager' on NVSwitch systems, 'nvlsm' (NVLink Subnet Manager) on Blackwell.",
    )
    rails: dict[str, str] = doc_field(
        default_factory=dict,
        doc="GPU index → the NIC nearest to it by PCIe path (under the same PCIe switch), as on the reference "
        "server: a GPU whose nearest NIC differs (a NIC enumerated or cabled differently) is named. Empty = recorded, "
        "not judged.",
    )
    gpudirect: bool = doc_field(
        False, "GPUDirect RDMA must be ready: the nvidia_peermem module loaded, or the DMA-BUF path (Linux >= 5.12 "
        "and the open GPU kernel modules). False = said, not judged.",
    )
    rail_fraction: float = doc_field(
        0.8, "Floor of each rail's NIC-to-NIC bandwidth between two servers (perftest's ib_write_bw BW average, "
        "`cluster pairs --fabric` and `cluster run`'s cross-node step) as a fraction of the port's rate: the "
        "acceptance documents' 'every pair of nodes at >= 80% of the expected bandwidth'.",
    )
    counter_rise_max: int = doc_field(
        10, "Largest rise of one error counter (an NVLink's replay, recovery or CRC count; an RDMA port's IBA "
        "PortCounters: symbol_error, link_downed, ...) between the run's start and the check, above which the check "
        "FAILs; any rise up to it WARNs naming the GPU and link or the NIC. 10: a healthy link's counters stay at 0 "
        "over a run of minutes, so one stray event warns and a link erroring continually fails.",
    )


def validate(spec: object, path: str) -> None:
    """Values that load as the right type but cannot be meant: ConfigError naming file + key."""
    f: FabricSpec = getattr(spec, "fabric")
    for name, rate in f.nics.items():
        if not name.strip() or rate <= 0:
            raise ConfigError(path, f"fabric.nics.{name}", f"expected a device name and a rate in Gb/s > 0, got {rate}")
    checks = [
        ("link_layer", f.link_layer in LINK_LAYERS, f"one of 'InfiniBand', 'Ethernet' (or omit it), got '{f.link_layer}'"),
        ("nvlink_per_gpu", f.nvlink_per_gpu is None or f.nvlink_per_gpu >= 0, "an integer >= 0"),
        ("nvlink_version", f.nvlink_version is None or f.nvlink_version >= 1, "an NVLink generation >= 1"),
        ("counter_rise_max", f.counter_rise_max >= 0, "an integer >= 0"),
        ("rail_fraction", 0 < f.rail_fraction <= 1, f"0 < x <= 1, got {f.rail_fraction}"),
        ("services", all(s.strip() for s in f.services), "systemd unit names such as 'nvidia-fabricmanager'"),
    ]
    for key, ok, expected in checks:
        if not ok:
            raise ConfigError(path, f"fabric.{key}", f"expected {expected}")
    for gpu, nic in f.rails.items():
        if not gpu.isdigit():
            raise ConfigError(path, f"fabric.rails.{gpu}", "expected a GPU index (0, 1, ...) as the key")
        if f.nics and nic not in f.nics:
            raise ConfigError(path, f"fabric.rails.{gpu}", f"expected one of fabric.nics, got '{nic}'")
