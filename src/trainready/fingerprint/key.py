"""The group key: what a device's fingerprint bits depend on besides its health.  Only devices with the same key
are compared bit for bit; a different key is configuration drift, never corruption.

GPU: model, SM count, compute capability, MIG mode, CUDA runtime, cuBLAS, torch, the battery's version and its
settings (cuBLAS documents bitwise-identical results for the same architecture, SM count and toolkit).  CPU:
model, the ISA torch dispatches to, BLAS, torch, the battery's version and its settings.  VBIOS, driver and ECC
mode are recorded beside the key as facts (`FACTS`), not in it: three H100 machines with two VBIOS versions gave
all 56 quick digests identical (docs/measurements.md); a fact that differs from its group's is drift on its own.
Identity (index, PCI bus, board serial) is recorded beside the key too, never in it.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import platform
from typing import Any, Mapping

from trainready.fingerprint.battery import VERSION

KEY_FIELDS_GPU = ("model", "sm_count", "compute_capability", "mig_mode", "cuda_runtime", "cublas", "torch",
                  "battery", "settings")
KEY_FIELDS_CPU = ("model", "cpu_capability", "blas", "torch", "battery", "settings")
FACTS = {"vbios": "VBIOS", "driver": "driver", "ecc_mode": "ECC mode"}  # recorded beside the key: field -> label
UNVERSIONED = "unversioned"  # the battery of a record written before the battery had a version


def key_id(key: Mapping[str, Any]) -> str:
    """A short name for a key: the first 12 hex digits of the SHA-256 of its canonical JSON."""
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:12]


def compute_key(key: Mapping[str, Any]) -> dict[str, Any]:
    """The fields that determine the bits: the key without the recorded facts (a record written before the facts
    left the key has them in it), and for a GPU without the host's intra-op threads (a GPU's bits do not depend on
    them: battery.settings_record leaves them out; an older record has them)."""
    out = {k: v for k, v in key.items() if k not in FACTS}
    if "sm_count" in out and isinstance(out.get("settings"), Mapping) and "intra_op_threads" in out["settings"]:
        out["settings"] = {k: v for k, v in out["settings"].items() if k != "intra_op_threads"}
    return out


def group_of(rec: Mapping[str, Any]) -> str:
    """The group a device's record is judged in: the id of its compute key (a record of a versioned battery
    carries it as `key_id`, its key holding no fact; an older record's is computed again)."""
    key = rec.get("key") or {}
    if "battery" in key and rec.get("key_id") and not any(f in key for f in FACTS):
        return str(rec["key_id"])
    return key_id(compute_key(key))


def battery_of(key: Mapping[str, Any]) -> str:
    """The battery version a key names ('unversioned' before the battery had one)."""
    return str(key.get("battery", UNVERSIONED))


def facts_of(rec: Mapping[str, Any]) -> dict[str, str]:
    """VBIOS, driver, ECC mode of a device's record (beside its key; in the key of an older record); a CPU rank
    has none."""
    key = rec.get("key") or {}
    return {f: str(rec.get(f, key.get(f))) for f in FACTS if f in rec or f in key}


def key_diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[str]:
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
    """(key, identity and facts) of CUDA device `index` in this process (after a GEMM ran, so cuBLAS is loaded)."""
    import torch

    p = torch.cuda.get_device_properties(index)
    try:  # NVML's bus id form, "00000000:1B:00.0" (CUDA's index need not be NVML's: CUDA_VISIBLE_DEVICES)
        pci = f"{p.pci_domain_id:08X}:{p.pci_bus_id:02X}:{p.pci_device_id:02X}.0"
    except AttributeError:
        pci = "unavailable"
    nv = _nvml(pci)
    key = {"model": p.name, "sm_count": p.multi_processor_count, "compute_capability": f"{p.major}.{p.minor}",
           "mig_mode": nv.get("mig_mode", "unavailable"), "cuda_runtime": str(torch.version.cuda),
           "cublas": _cublas_version(), "torch": torch.__version__, "battery": VERSION, "settings": settings}
    ident = {"index": str(index), "pci_bus_id": pci, "serial": nv.get("serial", "unavailable"),
             "uuid": nv.get("uuid", "unavailable"), **{f: nv.get(f, "unavailable") for f in FACTS}}
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
           "torch": torch.__version__, "battery": VERSION, "settings": settings}
    return key, {"index": str(rank), "pci_bus_id": "n/a", "serial": "n/a", "uuid": "n/a"}
