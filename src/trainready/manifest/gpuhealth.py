"""What the passive health check reads from a node: NVML and the kernel log only, no CUDA context.

Per GPU: the facts of `manifest/gpu.py` (`GpuFacts`: ECC, row remapping, PCIe link and replays, clock-event
reasons, name, UUID, board serial); per node: the XIDs the driver logged since the last reading
(`manifest/kmsg.py`).  The JSON form is the `reading` of `trainready.healthstate/1`
(cluster/health/passive.py) and what `--plant health.reading=PATH` replays.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from trainready.manifest.gpu import GpuFacts, collect_nvml
from trainready.manifest.kmsg import Xid, boot_id, read_xids

COUNTERS = ("ecc_uncorrected_aggregate", "remapped_rows_uncorrectable", "pcie_replays")  # judged by their growth


@dataclass(frozen=True)
class HealthReading:
    """One passive reading of this node."""

    nvml_error: str | None  # NVML unusable: why (and no GPUs)
    gpus: tuple[GpuFacts, ...] = ()
    xids: tuple[Xid, ...] = ()  # logged since the last reading
    kmsg_error: str | None = None  # the kernel log could not be read: why
    kmsg_seq: int = -1  # the last kernel record read
    boot_id: str = ""
    driver_version: str = ""

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "HealthReading":
        gpus = tuple(GpuFacts.from_json(g) for g in d.get("gpus", []))
        xids = tuple(Xid(**x) for x in d.get("xids", []))
        return HealthReading(d.get("nvml_error"), gpus, xids, d.get("kmsg_error"), int(d.get("kmsg_seq", -1)),
                             str(d.get("boot_id", "")), str(d.get("driver_version", "")))


def read_health(after_seq: int, last_boot: str, nv: Any = None, kmsg: str | None = None) -> HealthReading:
    """Read NVML and the kernel log (XIDs after record `after_seq` of boot `last_boot`)."""
    if nv is None:
        try:
            import pynvml as nv  # type: ignore[no-redef]
        except ImportError:
            nv = None
    boot = boot_id()
    logged = read_xids(-1, *(() if kmsg is None else (kmsg,)))  # read once: since boot for each GPU's count
    facts = collect_nvml(nv, lambda: logged) if nv is not None else None
    after = after_seq if boot == last_boot else -1
    if isinstance(logged, str):
        kmsg_error, seq, xids = logged, -1, []
    else:  # and since the last reading for the node
        kmsg_error, seq, xids = None, max(after, logged[0]), [x for x in logged[1] if x.seq > after]
    if facts is None or not facts.ok:
        why = "nvidia-ml-py (pynvml) not installed" if facts is None else str(facts.error)
        return HealthReading(why.removeprefix("unavailable: "), (), tuple(xids), kmsg_error, seq, boot)
    return HealthReading(None, facts.gpus, tuple(xids), kmsg_error, seq, boot, str(facts.driver_version))


def spare(**kw: Any) -> GpuFacts:
    """A healthy GPU's reading (tests and the self-test's replay files build on it)."""
    base: dict[str, Any] = dict(index=0, name="NVIDIA H100 80GB HBM3", uuid="GPU-0", serial="1650000000000",
                                pci_bus_id="00000000:18:00.0", ecc_uncorrected_volatile=0, ecc_uncorrected_aggregate=0,
                                remapped_rows_uncorrectable=0, remap_pending=False, remap_failed=False,
                                pcie_gen_current=5, pcie_gen_max=5, pcie_width_current=16, pcie_width_max=16,
                                pcie_replays=0, throttle_reasons=["gpu_idle"])
    return GpuFacts(**{**base, **kw})


__all__ = ["COUNTERS", "HealthReading", "read_health", "spare"]
