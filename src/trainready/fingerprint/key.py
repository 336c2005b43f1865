"""The group key: what a device's fingerprint depends on besides its health.  Only devices with the same key are
compared bit for bit; a different key is configuration drift, never corruption.

GPU: model, SM count, compute capability, MIG mode, ECC mode, VBIOS, driver, CUDA runtime, cuBLAS, torch, the
settings.  CPU: model, the ISA torch dispatches to, BLAS, torch, the settings.  Identity (index, PCI bus, board
serial) is recorded beside the key, never in it.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import platform
from typing import Any

KEY_FIELDS_GPU = ("model", "sm_count", "compute_capability", "mig_mode", "ecc_mode", "vbios", "driver",
                  "cuda_runtime", "cublas", "torch", "settings")
KEY_FIELDS_CPU = ("model", "cpu_capability", "blas", "torch", "settings")


def key_id(key: dict[str, Any]) -> str:
    """A short name for a key: the first 12 hex digits of the SHA-256 of its canonical JSON."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def key_diff(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """'field: A vs B' for each field that differs (settings field by field)."""
    out = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += [f"{k}.{d}" for d in key_diff(va, vb)]
        elif va != vb:
            out.append(f"{k}: {va} vs {vb}")
    return out


def _cublas_version() -> str:
    """The cuBLAS this process loaded (cublasGetProperty MAJOR/MINOR/PATCH of the library in /proc/self/maps)."""
    try:
        with open("/proc/self/maps") as f:
            paths = sorted({ln.split()[-1] for ln in f if "libcublas.so" in ln})
        lib = ctypes.CDLL(paths[0])
        v = []
        for prop in (0, 1, 2):
            x = ctypes.c_int()
            lib.cublasGetProperty(prop, ctypes.byref(x))
            v.append(x.value)
        return ".".join(map(str, v))
    except Exception as exc:  # noqa: BLE001 - recorded as the reason
        return f"unavailable ({type(exc).__name__})"


def _nvml(pci: str) -> dict[str, str]:
    """MIG mode, ECC mode, VBIOS, driver, serial, UUID of the GPU at PCI bus id `pci` (NVML)."""
    try:
        import pynvml as nv

        nv.nvmlInit()
    except Exception as exc:  # noqa: BLE001
        return {"nvml": f"unavailable ({type(exc).__name__})"}
    try:
        h = nv.nvmlDeviceGetHandleByPciBusId(pci)
    except Exception as exc:  # noqa: BLE001
        return {"nvml": f"no GPU at {pci} ({type(exc).__name__})"}

    def q(fn: Any, *a: Any) -> str:
        try:
            v = fn(*a)
            return v.decode() if isinstance(v, bytes) else str(v)
        except Exception as exc:  # noqa: BLE001
            return f"unavailable ({type(exc).__name__})"

    mig = q(lambda: "enabled" if nv.nvmlDeviceGetMigMode(h)[0] else "disabled")
    ecc = q(lambda: "enabled" if nv.nvmlDeviceGetEccMode(h)[0] else "disabled")
    return {"mig_mode": mig, "ecc_mode": ecc, "vbios": q(nv.nvmlDeviceGetVbiosVersion, h),
            "driver": q(nv.nvmlSystemGetDriverVersion), "serial": q(nv.nvmlDeviceGetSerial, h),
            "uuid": q(nv.nvmlDeviceGetUUID, h)}


def gpu_key(index: int, settings: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(key, identity) of CUDA device `index` in this process (after a GEMM ran, so cuBLAS is loaded)."""
    import torch

    p = torch.cuda.get_device_properties(index)
    try:  # NVML's bus id form, "00000000:1B:00.0" (CUDA's index need not be NVML's: CUDA_VISIBLE_DEVICES)
        pci = f"{p.pci_domain_id:08X}:{p.pci_bus_id:02X}:{p.pci_device_id:02X}.0"
    except AttributeError:
        pci = "unavailable"
    nv = _nvml(pci)
    key = {"model": p.name, "sm_count": p.multi_processor_count, "compute_capability": f"{p.major}.{p.minor}",
           "mig_mode": nv.get("mig_mode", "unavailable"), "ecc_mode": nv.get("ecc_mode", "unavailable"),
           "vbios": nv.get("vbios", "unavailable"), "driver": nv.get("driver", "unavailable"),
           "cuda_runtime": str(torch.version.cuda), "cublas": _cublas_version(), "torch": torch.__version__,
           "settings": settings}
    ident = {"index": str(index), "pci_bus_id": pci, "serial": nv.get("serial", "unavailable"),
             "uuid": nv.get("uuid", "unavailable")}
    return key, ident


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return ln.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cpu_key(rank: int, settings: dict[str, str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(key, identity) of a CPU rank: the CPU model, torch's dispatch ISA, its BLAS, torch, the settings."""
    import torch

    blas = next((ln.strip(" -") for ln in torch.__config__.show().splitlines() if "Math Kernel" in ln
                 or "OpenBLAS" in ln), "unknown")
    key = {"model": _cpu_model(), "cpu_capability": torch.backends.cpu.get_cpu_capability(), "blas": blas,
           "torch": torch.__version__, "settings": settings}
    return key, {"index": str(rank), "pci_bus_id": "n/a", "serial": "n/a", "uuid": "n/a"}
