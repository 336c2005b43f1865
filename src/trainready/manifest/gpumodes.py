"""The GPUs' operating modes as host settings (manifest/hostset.py): persistence, ECC, MIG and compute mode, the
power limit and the application clocks, read through NVML (nvidia-ml-py), never from nvidia-smi's text.

A node has one value per key: the GPUs' common value when all agree ("enabled"), else each GPU's
("GPU 0: enabled; GPU 1: disabled"), so a node compares with the reference as text whatever its GPUs say.
"""

from __future__ import annotations

from typing import Any, Callable

from trainready.manifest import unavailable
from trainready.manifest.gpu import _nvml_reason, _q

# nvml.h nvmlComputeMode_t
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
NVML_CLOCK_SM, NVML_CLOCK_MEM = 1, 2  # nvml.h nvmlClockType_t


def _onoff(v: Any) -> str:
    return "enabled" if int(v) == 1 else "disabled"  # NVML_FEATURE_ENABLED / NVML_DEVICE_MIG_ENABLE == 1


# key → (NVML call it comes from, how to read one GPU's value from a handle)
READERS: dict[str, tuple[str, Callable[[Any, Any], Any]]] = {
    "gpu.persistence_mode": ("nvmlDeviceGetPersistenceMode", lambda nv, h: _onoff(nv.nvmlDeviceGetPersistenceMode(h))),
    "gpu.ecc_mode": ("nvmlDeviceGetEccMode (current)", lambda nv, h: _onoff(nv.nvmlDeviceGetEccMode(h)[0])),
    "gpu.mig_mode": ("nvmlDeviceGetMigMode (current)", lambda nv, h: _onoff(nv.nvmlDeviceGetMigMode(h)[0])),
    "gpu.compute_mode": ("nvmlDeviceGetComputeMode",
                         lambda nv, h: COMPUTE_MODES.get(int(nv.nvmlDeviceGetComputeMode(h)), "unknown")),
    # NVML gives milliwatts; the setting is in W
    "gpu.power_limit_w": ("nvmlDeviceGetPowerManagementLimit, W",
                          lambda nv, h: round(int(nv.nvmlDeviceGetPowerManagementLimit(h)) / 1000)),
    "gpu.app_clock_sm_mhz": ("nvmlDeviceGetApplicationsClock(NVML_CLOCK_SM), MHz",
                             lambda nv, h: int(nv.nvmlDeviceGetApplicationsClock(h, NVML_CLOCK_SM))),
    "gpu.app_clock_mem_mhz": ("nvmlDeviceGetApplicationsClock(NVML_CLOCK_MEM), MHz",
                              lambda nv, h: int(nv.nvmlDeviceGetApplicationsClock(h, NVML_CLOCK_MEM))),
}


def combine(per_gpu: list[Any]) -> Any:
    """One node value: the common value, else 'GPU i: value' for each GPU."""
    if per_gpu and all(v == per_gpu[0] for v in per_gpu):
        return per_gpu[0]
    return "; ".join(f"GPU {i}: {v}" for i, v in enumerate(per_gpu)) or unavailable("no GPU")


def _every(value: str) -> dict[str, dict[str, Any]]:
    return {k: {"value": value, "source": f"NVML {call}"} for k, (call, _) in READERS.items()}


def gpu_modes(nvml: Any = None) -> dict[str, dict[str, Any]]:
    """Every key of READERS for this node's GPUs; each 'unavailable: why' when NVML cannot say."""
    if nvml is None:
        try:
            import pynvml as nvml  # type: ignore[no-redef]
        except ImportError:
            return _every(unavailable("nvidia-ml-py (pynvml) not installed"))
    try:
        nvml.nvmlInit()
    except Exception as exc:  # noqa: BLE001 - no driver: every GPU setting says why
        return _every(unavailable(_nvml_reason(exc)))
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))]
        if not handles:
            return _every(unavailable("NVML sees no GPU"))
        return {key: {"value": combine([_q(lambda h=h: read(nvml, h)) for h in handles]), "source": f"NVML {call}"}
                for key, (call, read) in READERS.items()}
    except Exception as exc:  # noqa: BLE001
        return _every(unavailable(_nvml_reason(exc)))
    finally:
        _q(nvml.nvmlShutdown)
