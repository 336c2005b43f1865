"""A stand-in for pynvml with the calls the passive health check makes (`manifest/gpuhealth.py`), for machines
without an NVIDIA driver: each GPU answers as a healthy H100 would, apart from what a test sets."""

from __future__ import annotations

from typing import Any


class FakeNvml:
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
    NVML_NVLINK_MAX_LINKS = 2

    def __init__(self, count: int, width: tuple[int, ...] = ()) -> None:
        self.count, self.width = count, width or (16,) * count

    def nvmlInit(self) -> None: ...
    def nvmlShutdown(self) -> None: ...
    def nvmlDeviceGetCount(self) -> int: return self.count
    def nvmlSystemGetDriverVersion(self) -> str: return "580.159.04"
    def nvmlSystemGetCudaDriverVersion(self) -> int: return 13000
    def nvmlDeviceGetHandleByIndex(self, i: int) -> int: return i
    def nvmlDeviceGetName(self, h: int) -> str: return "NVIDIA H100 80GB HBM3"
    def nvmlDeviceGetUUID(self, h: int) -> str: return f"GPU-{h}"
    def nvmlDeviceGetSerial(self, h: int) -> str: return f"SER{h}"
    def nvmlDeviceGetVbiosVersion(self, h: int) -> str: return "96.00.99.00.01"
    def nvmlDeviceGetModuleId(self, h: int) -> int: return h + 1
    def nvmlDeviceGetPcieReplayCounter(self, h: int) -> int: return 0
    def nvmlDeviceGetPciInfo(self, h: int) -> Any: return type("Pci", (), {"busId": f"00000000:{0x18 + h:02x}:00.0"})
    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any: return type("Mem", (), {"total": 80 * 2**30})
    def nvmlDeviceGetRemappedRows(self, h: int) -> tuple[int, int, int, int]: return (0, 0, 0, 0)
    def nvmlDeviceGetEccMode(self, h: int) -> tuple[int, int]: return (1, 1)
    def nvmlDeviceGetTotalEccErrors(self, h: int, kind: int, counter: int) -> int: return 0
    def nvmlDeviceGetPersistenceMode(self, h: int) -> int: return 1
    def nvmlDeviceGetCurrPcieLinkGeneration(self, h: int) -> int: return 5
    def nvmlDeviceGetMaxPcieLinkGeneration(self, h: int) -> int: return 5
    def nvmlDeviceGetCurrPcieLinkWidth(self, h: int) -> int: return self.width[h]
    def nvmlDeviceGetMaxPcieLinkWidth(self, h: int) -> int: return 16
    def nvmlDeviceGetNvLinkState(self, h: int, link: int) -> int: return 1
    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int: return 0x1
