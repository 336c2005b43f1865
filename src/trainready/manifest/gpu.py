"""GPU facts from NVML (nvidia-ml-py's `pynvml`), never from nvidia-smi text.

Each NVML query is guarded on its own: a query the GPU or driver does not
support gives ``"unavailable: <NVML's reason>"`` for that one field.  The typed
facts (`GpuFacts`, `NvmlFacts`) are what the `gpus` and `versions` checks judge;
their JSON form round-trips so facts captured on a real node can be replayed in
tests (tests/data/*.json).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Union

from trainready.manifest import is_unavailable, unavailable

# A fact is its value, or "unavailable: <reason>" (a str) when it could not be read.
IntFact = Union[int, str]
BoolFact = Union[bool, str]

# Clock event ("throttle") reason bits, from nvml.h (nvmlClocksEventReason* / nvmlClocksThrottleReason*).
THROTTLE_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


@dataclass(frozen=True)
class GpuFacts:
    """One GPU as NVML sees it. Memory in MiB (2**20 bytes), as nvidia-smi prints it."""

    index: int
    name: str
    uuid: str  # "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
    pci_bus_id: str = ""
    serial: str = unavailable("not read")  # the board's serial (nvmlDeviceGetSerial): a part swapped shows a new one
    memory_total_mib: IntFact = unavailable("not read")
    ecc_mode: str = unavailable("not read")  # current mode: "enabled" / "disabled"
    ecc_uncorrected_volatile: IntFact = unavailable("not read")  # since last driver load
    ecc_uncorrected_aggregate: IntFact = unavailable("not read")  # lifetime of the board
    remapped_rows_uncorrectable: IntFact = unavailable("not read")  # rows remapped for uncorrectable errors
    remap_pending: BoolFact = unavailable("not read")  # a remap waits for a GPU reset
    remap_failed: BoolFact = unavailable("not read")  # a remap failed: the board needs service
    persistence_mode: str = unavailable("not read")
    pcie_gen_current: IntFact = unavailable("not read")
    pcie_gen_max: IntFact = unavailable("not read")
    pcie_width_current: IntFact = unavailable("not read")  # lanes
    pcie_width_max: IntFact = unavailable("not read")
    nvlink_links: Union[list[str], str] = unavailable("not read")  # per link: "active" / "inactive"
    throttle_reasons: Union[list[str], str] = unavailable("not read")
    pcie_replays: IntFact = unavailable("not read")  # PCIe link-level replays (retransmissions), since driver load
    xids_this_boot: IntFact = unavailable("not read")  # XIDs the driver logged for this GPU since boot (/dev/kmsg)
    vbios: str = unavailable("not read")  # the board's VBIOS version (nvmlDeviceGetVbiosVersion): a vendor's RMA asks
    module_id: IntFact = unavailable("not read")  # its position on an HGX baseboard (nvmlDeviceGetModuleId): the slot

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @staticmethod
    def from_json(d: dict[str, Any]) -> "GpuFacts":
        known = {f.name for f in dataclasses.fields(GpuFacts)}
        return GpuFacts(**{k: v for k, v in d.items() if k in known})


@dataclass(frozen=True)
class NvmlFacts:
    """The node's NVML view. `error` is set (and `gpus` empty) when NVML is unusable."""

    error: str | None
    driver_version: str = unavailable("not read")  # e.g. "580.159.04"
    cuda_driver_version: str = unavailable("not read")  # the driver's CUDA ceiling, e.g. "13.0"
    gpus: tuple[GpuFacts, ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_json(self) -> dict[str, Any]:
        return {
            "error": self.error,
            "driver_version": self.driver_version,
            "cuda_driver_version": self.cuda_driver_version,
            "count": len(self.gpus),
            "gpus": [g.to_json() for g in self.gpus],
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> "NvmlFacts":
        return NvmlFacts(
            error=d.get("error"),
            driver_version=d.get("driver_version", unavailable("not recorded")),
            cuda_driver_version=d.get("cuda_driver_version", unavailable("not recorded")),
            gpus=tuple(GpuFacts.from_json(g) for g in d.get("gpus", [])),
        )


def cuda_version_str(v: int) -> str:
    """NVML/CUDA encode versions as 1000*major + 10*minor (cuda.h CUDA_VERSION): 13000 → "13.0"."""
    return f"{v // 1000}.{(v % 1000) // 10}"


def _s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def _nvml_reason(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "NVMLError_LibraryNotFound":
        return "no NVIDIA driver (libnvidia-ml.so.1 not found)"
    if name == "NVMLError_DriverNotLoaded":
        return "no NVIDIA driver loaded (kernel module absent)"
    if name == "NVMLError_NoPermission":
        return "NVML: no permission (is /dev/nvidiactl accessible in this container?)"
    return f"NVML: {str(exc).strip() or name}"


def _q(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - one unsupported query costs one field
        return unavailable(_nvml_reason(exc))


def _nvlinks(nv: Any, h: Any) -> Union[list[str], str]:
    states: list[str] = []
    for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            st = nv.nvmlDeviceGetNvLinkState(h, link)
        except Exception as exc:  # noqa: BLE001 - past the last link, or no NVLink at all
            if not states:
                return unavailable(f"no NVLink ({_nvml_reason(exc)})")
            break
        states.append("active" if st == 1 else "inactive")  # NVML_FEATURE_ENABLED == 1
    return states


def _throttle(nv: Any, h: Any) -> Union[list[str], str]:
    fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    mask = int(fn(h))
    names = [n for bit, n in THROTTLE_BITS.items() if mask & bit]
    rest = mask & ~sum(THROTTLE_BITS)
    return names + ([f"other_0x{rest:x}"] if rest else [])


def _gpu(nv: Any, i: int) -> GpuFacts:
    h = nv.nvmlDeviceGetHandleByIndex(i)
    remap = _q(lambda: nv.nvmlDeviceGetRemappedRows(h))  # (corrected, uncorrectable, pending, failure)
    ecc = _q(lambda: nv.nvmlDeviceGetEccMode(h))  # (current, pending)
    unc = nv.NVML_MEMORY_ERROR_TYPE_UNCORRECTED if hasattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED") else 1
    onoff = lambda v: "enabled" if int(v) == 1 else "disabled"  # noqa: E731 - NVML_FEATURE_ENABLED == 1
    tup = lambda t, k, f: t if is_unavailable(t) else f(t[k])  # noqa: E731
    return GpuFacts(
        index=i,
        name=_s(_q(lambda: nv.nvmlDeviceGetName(h))),
        uuid=_s(_q(lambda: nv.nvmlDeviceGetUUID(h))),
        pci_bus_id=_s(_q(lambda: nv.nvmlDeviceGetPciInfo(h).busId)),
        serial=_s(_q(lambda: nv.nvmlDeviceGetSerial(h))),
        memory_total_mib=_q(lambda: int(nv.nvmlDeviceGetMemoryInfo(h).total) // 2**20),
        ecc_mode=tup(ecc, 0, onoff),
        ecc_uncorrected_volatile=_q(lambda: int(nv.nvmlDeviceGetTotalEccErrors(h, unc, 0))),  # NVML_VOLATILE_ECC
        ecc_uncorrected_aggregate=_q(lambda: int(nv.nvmlDeviceGetTotalEccErrors(h, unc, 1))),  # NVML_AGGREGATE_ECC
        remapped_rows_uncorrectable=tup(remap, 1, int),
        remap_pending=tup(remap, 2, bool),
        remap_failed=tup(remap, 3, bool),
        persistence_mode=_q(lambda: onoff(nv.nvmlDeviceGetPersistenceMode(h))),
        pcie_gen_current=_q(lambda: int(nv.nvmlDeviceGetCurrPcieLinkGeneration(h))),
        pcie_gen_max=_q(lambda: int(nv.nvmlDeviceGetMaxPcieLinkGeneration(h))),
        pcie_width_current=_q(lambda: int(nv.nvmlDeviceGetCurrPcieLinkWidth(h))),
        pcie_width_max=_q(lambda: int(nv.nvmlDeviceGetMaxPcieLinkWidth(h))),
        nvlink_links=_q(lambda: _nvlinks(nv, h)),
        throttle_reasons=_q(lambda: _throttle(nv, h)),
        pcie_replays=_q(lambda: int(nv.nvmlDeviceGetPcieReplayCounter(h))),
        vbios=_s(_q(lambda: nv.nvmlDeviceGetVbiosVersion(h))),
        module_id=_q(lambda: int(nv.nvmlDeviceGetModuleId(h))),
    )


def with_xids(gpus: list[GpuFacts], read: Callable[[], Any]) -> list[GpuFacts]:
    """Each GPU with the XIDs the driver logged for it since boot (kmsg.read_xids: 'NVRM: Xid (PCI:0000:18:00)'
    names the GPU by its bus id, NVML as '00000000:18:00.0'); the log unreadable: why, on every GPU."""
    got = read()
    if isinstance(got, str):
        return [dataclasses.replace(g, xids_this_boot=unavailable(got)) for g in gpus]
    by_pci: dict[str, int] = {}
    for x in got[1]:
        by_pci[x.pci] = by_pci.get(x.pci, 0) + 1

    def short(bus: str) -> str:  # '00000000:18:00.0' -> '0000:18:00'
        domain, _, rest = bus.lower().partition(":")
        return f"{domain[-4:]}:{rest.split('.')[0]}"
    return [dataclasses.replace(g, xids_this_boot=by_pci.get(short(g.pci_bus_id), 0)) if g.pci_bus_id else g
            for g in gpus]


def _failed(reason: str) -> NvmlFacts:
    return NvmlFacts(error=reason, driver_version=reason, cuda_driver_version=reason)


def collect_nvml(nvml: Any = None, xids: Callable[[], Any] | None = None) -> NvmlFacts:
    """Read every GPU through NVML. `nvml` defaults to the real `pynvml` module; `xids` gives the kernel log's
    XIDs since boot as `kmsg.read_xids(-1)` does (default: read /dev/kmsg), for a caller that has read it."""
    if nvml is None:
        try:
            import pynvml as nvml  # type: ignore[no-redef]
        except ImportError:
            return _failed(unavailable("nvidia-ml-py (pynvml) not installed"))
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        return _failed(unavailable(_nvml_reason(exc)))
    try:
        try:
            count = int(nvml.nvmlDeviceGetCount())
        except Exception as exc:  # noqa: BLE001
            return _failed(unavailable(_nvml_reason(exc)))
        gpus = []
        for i in range(count):
            try:
                gpus.append(_gpu(nvml, i))
            except Exception as exc:  # noqa: BLE001 - the handle itself failed (GPU fell off the bus)
                gpus.append(GpuFacts(index=i, name=unavailable(_nvml_reason(exc)), uuid=unavailable("no handle")))
        from trainready.manifest.kmsg import read_xids

        gpus = with_xids(gpus, xids or (lambda: read_xids(-1)))
        return NvmlFacts(
            error=None,
            driver_version=_s(_q(nvml.nvmlSystemGetDriverVersion)),
            cuda_driver_version=_q(lambda: cuda_version_str(int(nvml.nvmlSystemGetCudaDriverVersion()))),
            gpus=tuple(gpus),
        )
    finally:
        _q(nvml.nvmlShutdown)
