"""A stand-in for pynvml's NVLink and GPU-fabric calls (tests/fake_nvml.py's FakeNvml plus them), answering as an
HGX B200 board (18 NVLink 5 links per GPU to NVSwitches, every GPU registered with the fabric) or as one H100
passed into a VM: NVML Not Supported for every link's state, version and remote type and for the fabric
info, as the captured H100 record shows (tests/data/env_h100x1_captured.json: nvlink_links "unavailable: no
NVLink (NVML: Not Supported)"). Errors are pynvml's own exception classes."""

from __future__ import annotations

from typing import Any

import pynvml

from fabric_tree import gpu_pci
from fake_nvml import FakeNvml


def not_supported() -> Exception:
    return pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)


class FabricNvml(FakeNvml):
    NVML_NVLINK_MAX_LINKS = 18
    c_nvmlGpuFabricInfo_v3_t = pynvml.c_nvmlGpuFabricInfo_v3_t
    c_nvmlGpuFabricInfo_t = pynvml.c_nvmlGpuFabricInfo_t

    def __init__(self, count: int = 8, links: int = 18, version: int = 5, nvlink: bool = True,
                 fabric: bool = True) -> None:
        super().__init__(count)
        self.links, self.version, self.nvlink, self.fabric = links, version, nvlink, fabric
        self.down: set[tuple[int, int]] = set()  # (gpu, link) inactive
        self.errors: dict[tuple[int, int, int], int] = {}  # (gpu, link, counter) → count
        self.clique: dict[int, int] = {}

    def nvmlDeviceGetPciInfo(self, h: int) -> Any:
        return type("Pci", (), {"busId": "0000" + gpu_pci(h).upper()})

    def _link(self, h: int, link: int) -> None:
        if not self.nvlink:
            raise not_supported()
        if link >= self.links:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)

    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int:
        self._link(h, link)
        return 0 if (h, link) in self.down else 1

    def nvmlDeviceGetNvLinkVersion(self, h: int, link: int) -> int:
        self._link(h, link)
        return self.version

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, h: int, link: int) -> int:
        self._link(h, link)
        return 2  # NVML_NVLINK_DEVICE_TYPE_SWITCH

    def nvmlDeviceGetNvLinkErrorCounter(self, h: int, link: int, counter: int) -> int:
        self._link(h, link)
        return self.errors.get((h, link, counter), 0)

    def nvmlDeviceGetGpuFabricInfoV(self, h: int, ref: Any) -> int:
        if not self.fabric:
            raise not_supported()
        info = ref._obj  # ctypes.byref(struct), as pynvml passes it to the library
        info.state, info.status, info.cliqueId = 3, 0, self.clique.get(h, 0x7FFF)
        return 0

    def nvmlDeviceGetGpuFabricInfo(self, h: int, ref: Any) -> int:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)


class NoDriver:
    """pynvml on a machine without the NVIDIA driver: nvmlInit fails as it does there."""

    def nvmlInit(self) -> None:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
