"""What the burn-in reads from each GPU through NVML (nvidia-ml-py's `pynvml`), each query guarded on its own.

`sample` is the >= 1 Hz reading (temperatures, SM clock, power, clock-event reasons); `counters` the error
counters read before and after the load; `Xids` the critical-XID events NVML delivers while it runs.  A query
the GPU or driver does not support gives "not available: <NVML's reason>" for that one value.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from trainready.fabric.nvlink import NVLINK_COUNTERS  # nvmlNvLinkErrorCounter_t, one table with the fabric check
from trainready.manifest.gpu import _nvml_reason

NA = "not available: "
# nvml.h constants, in case an older nvidia-ml-py lacks a name (values from nvml.h, driver 580).
MEMORY_TEMP_FIELD = 82  # NVML_FI_DEV_MEMORY_TEMP: HBM temperature, °C
XID_CRITICAL = 0x8  # nvmlEventTypeXidCriticalError


def na(exc: BaseException | str) -> str:
    """The value written where NVML cannot give one: 'not available: why'."""
    return NA + (exc if isinstance(exc, str) else _nvml_reason(exc))


def guard(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - one unsupported query costs one value
        return na(exc)


def open_nvml(world: int, nv: Any = None) -> tuple[Any, list[Any]] | str:
    """(pynvml, one handle per local rank's GPU), or why not ('not available: ...').  The ranks' GPUs are
    CUDA's 0..world-1 in this process's CUDA_VISIBLE_DEVICES (indices or UUIDs) and NVML's own order otherwise."""
    if nv is None:
        try:
            import pynvml as nv  # type: ignore[no-redef]
        except ImportError:
            return na("nvidia-ml-py (pynvml) is not installed")
    try:
        nv.nvmlInit()
        visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        handles = []
        for i in range(world):
            key = visible[i] if i < len(visible) else str(i)
            h = nv.nvmlDeviceGetHandleByUUID(key) if key.startswith(("GPU-", "MIG-")) else \
                nv.nvmlDeviceGetHandleByIndex(int(key))
            handles.append(h)
        return nv, handles
    except Exception as exc:  # noqa: BLE001 - no driver, no permission, a GPU off the bus
        return na(exc)


def _reasons(nv: Any, h: Any) -> int:
    fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    return int(fn(h))


def _mem_temp(nv: Any, h: Any) -> Any:
    field = getattr(nv, "NVML_FI_DEV_MEMORY_TEMP", MEMORY_TEMP_FIELD)
    v = nv.nvmlDeviceGetFieldValues(h, [field])[0]
    if int(getattr(v, "nvmlReturn", 0)) != 0:
        return na(f"NVML field {field}: return code {v.nvmlReturn}")
    return int(getattr(v.value, "uiVal", getattr(v.value, "ullVal", 0)))


def sample(nv: Any, h: Any) -> dict[str, Any]:
    """One reading: temp_c (GPU), mem_temp_c (HBM), sm_mhz, power_w, reasons (clock-event bit mask)."""
    temp_gpu = getattr(nv, "NVML_TEMPERATURE_GPU", 0)
    clock_sm = getattr(nv, "NVML_CLOCK_SM", 1)
    return {"temp_c": guard(lambda: int(nv.nvmlDeviceGetTemperature(h, temp_gpu))),
            "mem_temp_c": guard(lambda: _mem_temp(nv, h)),
            "sm_mhz": guard(lambda: int(nv.nvmlDeviceGetClockInfo(h, clock_sm))),
            "power_w": guard(lambda: round(nv.nvmlDeviceGetPowerUsage(h) / 1e3, 1)),  # mW → W
            "reasons": guard(lambda: _reasons(nv, h))}


def _ecc(nv: Any, h: Any, kind: str) -> Any:
    t = getattr(nv, f"NVML_MEMORY_ERROR_TYPE_{kind.upper()}", 0 if kind == "corrected" else 1)
    return guard(lambda: int(nv.nvmlDeviceGetTotalEccErrors(h, t, getattr(nv, "NVML_VOLATILE_ECC", 0))))


def _remap(nv: Any, h: Any) -> dict[str, Any]:
    r = guard(lambda: nv.nvmlDeviceGetRemappedRows(h))  # (correctable, uncorrectable, pending, failure)
    names = ("remapped_rows_correctable", "remapped_rows_uncorrectable", "remap_pending", "remap_failed")
    return {n: (r if isinstance(r, str) else int(r[i])) for i, n in enumerate(names)}


def _retired(nv: Any, h: Any) -> dict[str, Any]:
    single = getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0)
    double = getattr(nv, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
    return {"retired_pages_single_bit": guard(lambda: len(nv.nvmlDeviceGetRetiredPages(h, single))),
            "retired_pages_double_bit": guard(lambda: len(nv.nvmlDeviceGetRetiredPages(h, double))),
            "retired_pages_pending": guard(lambda: int(nv.nvmlDeviceGetRetiredPagesPendingStatus(h)))}


def _nvlink(nv: Any, h: Any) -> dict[str, Any]:
    """Per active link: CRC (flit, data), replay and recovery counts; one 'nvlink' entry when there is none."""
    out: dict[str, Any] = {}
    for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))):
        try:
            active = int(nv.nvmlDeviceGetNvLinkState(h, link)) == 1  # NVML_FEATURE_ENABLED
        except Exception as exc:  # noqa: BLE001 - no NVLink here, or past the last link
            if link == 0:
                return {"nvlink": na(exc)}
            break
        for name, code in NVLINK_COUNTERS.items():
            if active:
                out[f"nvlink{link}_{name}"] = guard(lambda: int(nv.nvmlDeviceGetNvLinkErrorCounter(h, link, code)))
    return out or {"nvlink": na("no active NVLink link")}


def _violation(nv: Any, h: Any, policy: str, code: int) -> Any:
    c = getattr(nv, f"NVML_PERF_POLICY_{policy.upper()}", code)
    return guard(lambda: round(nv.nvmlDeviceGetViolationStatus(h, c).violationTime / 1e9, 3))  # ns → s


def counters(nv: Any, h: Any) -> dict[str, Any]:
    """Every error counter the burn-in compares before and after, or 'not available: why' for each."""
    return {"ecc_corrected": _ecc(nv, h, "corrected"), "ecc_uncorrected": _ecc(nv, h, "uncorrected"),
            **_remap(nv, h), **_retired(nv, h),
            "pcie_replay": guard(lambda: int(nv.nvmlDeviceGetPcieReplayCounter(h))),
            **_nvlink(nv, h),
            "power_violation_s": _violation(nv, h, "power", 0), "thermal_violation_s": _violation(nv, h, "thermal", 1),
            "energy_j": guard(lambda: round(nv.nvmlDeviceGetTotalEnergyConsumption(h) / 1e3, 1))}  # mJ → J


def limits(nv: Any, h: Any) -> dict[str, Any]:
    """The GPU's own limits, recorded beside the spec's: slowdown and shutdown temperatures, power limit."""
    th = {"slowdown_c": getattr(nv, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1),
          "shutdown_c": getattr(nv, "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN", 0),
          "mem_max_c": getattr(nv, "NVML_TEMPERATURE_THRESHOLD_MEM_MAX", 2)}
    out: dict[str, Any] = {k: guard(lambda c=c: int(nv.nvmlDeviceGetTemperatureThreshold(h, c))) for k, c in th.items()}
    out["power_limit_w"] = guard(lambda: round(nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1e3, 1))
    out["name"] = guard(lambda: str(nv.nvmlDeviceGetName(h)))
    return out


class Xids:
    """Critical-XID events on the burn-in's GPUs (NVML's event API), polled by the sampler."""

    def __init__(self, nv: Any, handles: list[Any]) -> None:
        self.nv, self.status, self.set = nv, {}, None
        index = {}
        try:
            self.set = nv.nvmlEventSetCreate()
        except Exception as exc:  # noqa: BLE001
            self.status = {i: na(exc) for i in range(len(handles))}
            return
        for i, h in enumerate(handles):
            kind = getattr(nv, "nvmlEventTypeXidCriticalError", XID_CRITICAL)
            try:
                nv.nvmlDeviceRegisterEvents(h, kind, self.set)
                self.status[i] = "registered"
                index[guard(lambda h=h: int(nv.nvmlDeviceGetIndex(h)))] = i
            except Exception as exc:  # noqa: BLE001 - e.g. not supported in a VM
                self.status[i] = na(exc)
        self.index = index

    def poll(self) -> list[tuple[int, int]]:
        """(rank's GPU, XID) of every event waiting now; never blocks more than 1 ms."""
        out: list[tuple[int, int]] = []
        while self.set is not None and len(out) < 1000:
            try:
                data = self.nv.nvmlEventSetWait_v2(self.set, 1)
            except Exception:  # noqa: BLE001 - NVMLError_Timeout: nothing waiting
                break
            gpu = self.index.get(guard(lambda: int(self.nv.nvmlDeviceGetIndex(data.device))), -1)
            out.append((gpu, int(data.eventData)))
        return out
