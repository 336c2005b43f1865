"""NVLink and the NVSwitch fabric per GPU, through NVML (nvidia-ml-py's pynvml), each query guarded on its own.

Per link (nvmlDeviceGetNvLinkState / Version / RemoteDeviceType / ErrorCounter): active or not, the NVLink
generation (4 on H100/H200, 5 on B200), what it reaches (an NVSwitch or a GPU), and the link-level error
counters (nvmlNvLinkErrorCounter_t: replay, recovery, CRC flit, CRC data). Per GPU the fabric's view
(nvmlDeviceGetGpuFabricInfoV, else nvmlDeviceGetGpuFabricInfo: state, status, clique id, cluster UUID), which
NVSwitch systems fill once Fabric Manager (and on Blackwell the NVLink Subnet Manager) registered the GPU.

Where the GPU has no NVLink (a PCIe card, one H100 passed into a VM) NVML answers Not Supported for every
link's state: that answer is kept as the GPU's `not_applicable`, never an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# nvmlNvLinkErrorCounter_t (nvml.h): the link-level retries and CRC errors, read per link.
NVLINK_COUNTERS: dict[str, int] = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}
REMOTE = {0: "GPU", 1: "IBM NPU", 2: "NVSwitch", 0xFF: "unknown"}  # nvmlNvLinkDeviceType_t
FABRIC_STATE = {0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}  # nvmlGpuFabricState_t
MAX_LINKS = 18  # NVML_NVLINK_MAX_LINKS on drivers before Rubin; newer bindings say 36 (read from nv when there)


@dataclass(frozen=True)
class NvLink:
    """One NVLink of one GPU."""

    link: int
    """The link's index on its GPU, from 0."""
    active: bool
    """NVML_FEATURE_ENABLED for nvmlDeviceGetNvLinkState."""
    version: int | None
    """The NVLink generation (nvmlDeviceGetNvLinkVersion), None when NVML does not say."""
    remote: str | None
    """What the link reaches: NVSwitch, GPU, unknown (nvmlDeviceGetNvLinkRemoteDeviceType)."""
    counters: dict[str, int] = field(default_factory=dict)
    """NVLINK_COUNTERS name → count, those NVML gave."""


@dataclass(frozen=True)
class GpuFabric:
    """One GPU's NVLinks and its registration with the NVSwitch fabric."""

    index: int
    """The GPU's NVML index."""
    pci: str
    """Its PCI address as sysfs writes it (0000:1b:00.0)."""
    links: tuple[NvLink, ...]
    """Every link NVML answered for."""
    not_applicable: str | None
    """NVML's answer when no link answered (e.g. 'NVML: Not Supported'): this GPU has no NVLink."""
    fabric_state: str | None
    """The fabric's state for this GPU (completed, in progress, not started, not supported); None: not read."""
    fabric_status: str | None
    """The fabric's status once completed: 'success' or NVML's return code."""
    clique: int | None
    """The NVLink clique (GPUs reachable over one NVLink domain) the fabric put the GPU in."""
    cluster_uuid: str | None
    """The NVLink domain's cluster UUID (all zero on a single HGX board)."""
    fabric_reason: str | None
    """Why there is no fabric info (NVML's answer: Not Supported, Function Not Found)."""

    @property
    def active(self) -> int:
        return sum(1 for lk in self.links if lk.active)


def reason(exc: BaseException) -> str:
    """NVML's answer in words: 'NVML: Not Supported'."""
    return f"NVML: {str(exc).strip() or type(exc).__name__}"


def _links(nv: Any, h: Any) -> tuple[list[NvLink], str | None]:
    out: list[NvLink] = []
    for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", MAX_LINKS))):
        try:
            active = int(nv.nvmlDeviceGetNvLinkState(h, link)) == 1
        except Exception as exc:  # noqa: BLE001 - no NVLink at all (link 0), or past the GPU's last link
            return out, None if out else reason(exc)
        out.append(NvLink(link, active, _maybe(lambda: int(nv.nvmlDeviceGetNvLinkVersion(h, link))),
                          _maybe(lambda: REMOTE.get(int(nv.nvmlDeviceGetNvLinkRemoteDeviceType(h, link)), "unknown")),
                          link_counters(nv, h, link) if active else {}))
    return out, None


def link_counters(nv: Any, h: Any, link: int) -> dict[str, int]:
    """NVLINK_COUNTERS of one link, those NVML gives."""
    out = {}
    for name, code in NVLINK_COUNTERS.items():
        v = _maybe(lambda: int(nv.nvmlDeviceGetNvLinkErrorCounter(h, link, code)))
        if v is not None:
            out[name] = v
    return out


def _maybe(fn: Any) -> Any:
    try:
        return fn()
    except Exception:  # noqa: BLE001 - one unsupported query costs one value
        return None


def _fabric(nv: Any, h: Any) -> tuple[str | None, str | None, int | None, str | None, str | None]:
    """(state, status, clique, cluster uuid, why not) from the versioned call, else the legacy one."""
    import ctypes

    tries = [("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfo_v3_t"),
             ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t")]
    why = "NVML: no GPU fabric query in this nvidia-ml-py"
    for fn, struct in tries:
        if not hasattr(nv, fn) or not hasattr(nv, struct):
            continue
        info = getattr(nv, struct)()
        try:
            getattr(nv, fn)(h, ctypes.byref(info) if isinstance(info, ctypes.Structure) else info)
        except Exception as exc:  # noqa: BLE001 - Not Supported (no NVSwitch), Function Not Found (old driver)
            why = reason(exc)
            continue
        status = int(info.status)
        uuid = bytes(info.clusterUuid).hex()
        return (FABRIC_STATE.get(int(info.state), f"state {int(info.state)}"),
                "success" if status == 0 else f"NVML return {status}", int(info.cliqueId),
                f"{uuid[:8]}-{uuid[8:12]}-{uuid[12:16]}-{uuid[16:20]}-{uuid[20:]}", None)
    return None, None, None, None, why


def read_gpu(nv: Any, index: int) -> GpuFabric:
    from trainready.fabric.pci import normalize

    h = nv.nvmlDeviceGetHandleByIndex(index)
    pci = _maybe(lambda: nv.nvmlDeviceGetPciInfo(h).busId)
    pci = normalize(pci.decode() if isinstance(pci, bytes) else pci) if pci else ""
    links, na = _links(nv, h)
    state, status, clique, uuid, why = _fabric(nv, h)
    return GpuFabric(index, pci, tuple(links), na, state, status, clique, uuid, why)


def read_gpus(nv: Any = None) -> list[GpuFabric] | str:
    """Every GPU NVML sees, or why none could be read ('NVML: ...'). `nv` is pynvml or a stand-in; NVML is
    initialised and shut down here."""
    if nv is None:
        try:
            import pynvml as nv  # type: ignore[no-redef]
        except ImportError:
            return "nvidia-ml-py not installed"
    try:
        nv.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no driver: a CPU node
        return reason(exc)
    try:
        return [read_gpu(nv, i) for i in range(int(nv.nvmlDeviceGetCount()))]
    finally:
        _maybe(nv.nvmlShutdown)
