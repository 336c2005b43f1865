"""Run one function on every local device at the same time (one thread each).

Per-GPU checks use this so an 8-GPU node takes as long as one GPU.  CUDA work
releases the GIL, and each thread selects its device first (the CUDA current
device is per host thread), so the GPUs really do run concurrently.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Generic, TypeVar

if TYPE_CHECKING:
    from trainready.spec.model import NodeSpec

T = TypeVar("T")


@dataclass(frozen=True)
class DeviceRun(Generic[T]):
    device: str  # "cpu" or "cuda:i"
    value: T | None
    error: str | None  # one line, when the function raised

    @property
    def label(self) -> dict[str, str]:
        """Metric labels: gpu=i on a GPU, device=cpu otherwise."""
        if self.device.startswith("cuda"):
            return {"gpu": self.device.split(":", 1)[1]}
        return {"device": self.device}

    @property
    def where(self) -> str:
        """Human name for messages: 'GPU 3' or 'cpu'."""
        return f"GPU {self.device.split(':', 1)[1]}" if self.device.startswith("cuda") else self.device


def local_devices(spec: NodeSpec | None = None) -> list[str]:
    """Every visible CUDA device, else ["cpu"]; under a GPU spec (gpu.count > 0) never ["cpu"]:
    `GpuUnusable` (the check fails) names why CUDA gives fewer GPUs than the spec expects."""
    from trainready.devices.world import cuda_count, require_gpus

    n = require_gpus(spec) if spec is not None else cuda_count()
    return [f"cuda:{i}" for i in range(n)] if n else ["cpu"]


def on_each_device(fn: Callable[[str], T], devices: list[str] | None = None) -> list[DeviceRun[T]]:
    """Call fn(device) on every device concurrently; results in device order.

    An exception in one device's call is recorded for that device (one line),
    not raised, so one bad GPU does not hide the others.
    """
    import torch

    devs = devices if devices is not None else local_devices()
    out: list[DeviceRun[T] | None] = [None] * len(devs)

    def work(i: int, dev: str) -> None:
        try:
            if dev.startswith("cuda"):
                torch.cuda.set_device(torch.device(dev))
            out[i] = DeviceRun(dev, fn(dev), None)
        except Exception as exc:  # noqa: BLE001 - reported per device
            text = str(exc).strip().splitlines()
            out[i] = DeviceRun(dev, None, f"{type(exc).__name__}: {text[0] if text else ''}")

    if len(devs) == 1:
        work(0, devs[0])
    else:
        threads = [threading.Thread(target=work, args=(i, d), name=f"dev-{d}", daemon=True) for i, d in enumerate(devs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return [r for r in out if r is not None]
