"""Which local world to use: one rank per GPU with NCCL, else gloo on CPU.

A spec that expects GPUs (gpu.count > 0) never falls back to the CPU: `require_gpus` raises
`GpuUnusable` (the check FAILS) naming torch's reason, CUDA_VISIBLE_DEVICES and the driver."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from trainready.errors import GpuUnusable, UsageError

if TYPE_CHECKING:  # read, never imported at run time: util sits below spec (spec/ loads through util/strict.py)
    from trainready.spec.model import NodeSpec

CPU_DEFAULT_RANKS = 8  # an 8-GPU server (HGX H100/H200/B200), emulated by 8 gloo ranks
GLOO_RANKS_PER_CORE = 4  # each gloo rank is a process with torch loaded (~0.3 GB RSS); more than this many per
# core only measures the scheduler (200 ranks on 2 cores printed nothing for minutes)
GLOO_LIMIT_RULE = f"{GLOO_RANKS_PER_CORE} per CPU core, at least {CPU_DEFAULT_RANKS}"


def usable_cores() -> int:
    """CPU cores this process may run on: its affinity set (a 2-core container, a Slurm task or `taskset` on a
    64-core host has 2), else every core the OS reports (no affinity API: macOS)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def gloo_rank_limit() -> int:
    """Most gloo ranks a local run may start: max(8, 4 x the CPU cores this process may use)."""
    return max(CPU_DEFAULT_RANKS, GLOO_RANKS_PER_CORE * usable_cores())


@dataclass(frozen=True)
class CudaState:
    count: int  # GPUs torch (the CUDA runtime) can use in this process
    reason: str  # why none can be used: torch's own words ("" when count > 0)


def cuda_state() -> CudaState:
    """How many GPUs CUDA gives this process, and, when none, torch's reason (the exception text of
    `torch.cuda.init()`, which says e.g. "No CUDA GPUs are available" or which driver is too old)."""
    try:
        import torch
    except ImportError as exc:
        return CudaState(0, f"torch not importable ({exc})")
    if torch.version.cuda is None:
        return CudaState(0, f"torch {torch.__version__} is a CPU-only build (torch.version.cuda is None)")
    try:
        if torch.cuda.is_available() and torch.cuda.device_count() > 0:
            return CudaState(int(torch.cuda.device_count()), "")
        torch.cuda.init()  # only reached when CUDA is unusable: raises with the runtime's reason
        return CudaState(0, "torch.cuda.is_available() is False")
    except Exception as exc:  # noqa: BLE001 - the reason is the finding
        text = str(exc).strip().splitlines()
        return CudaState(0, f"torch.cuda.init() raised {type(exc).__name__}: {text[0] if text else ''}".rstrip(": "))


def cuda_count() -> int:
    return cuda_state().count


def _visibility() -> str:
    """CUDA_VISIBLE_DEVICES (and the container toolkit's NVIDIA_VISIBLE_DEVICES, when set), quoted."""
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    out = ["CUDA_VISIBLE_DEVICES unset" if cvd is None else
           f"CUDA_VISIBLE_DEVICES='{cvd}'" + (" hides every GPU" if not cvd.strip() else "")]
    nvd = os.environ.get("NVIDIA_VISIBLE_DEVICES")
    if nvd is not None:
        out.append(f"NVIDIA_VISIBLE_DEVICES='{nvd}'")
    return "; ".join(out)


def _driver() -> str:
    """The driver as NVML sees it: how many GPUs and which version, or why NVML cannot be read."""
    from trainready.manifest import why
    from trainready.manifest.gpu import collect_nvml

    nv = collect_nvml()
    if not nv.ok:
        return f"NVML: {why(str(nv.error))}"
    return f"NVML sees {len(nv.gpus)} GPU(s), driver {why(nv.driver_version)}"


def require_gpus(spec: NodeSpec) -> int:
    """Under a GPU spec (gpu.count > 0): the number of GPUs CUDA gives this process, or `GpuUnusable`
    naming why it gives fewer than the spec expects. CPU specs (gpu.count = 0) get `cuda_count()`."""
    want = spec.gpu.count
    state = cuda_state()
    if want <= 0 or state.count >= want:
        return state.count
    head = f"spec expects {want} GPU(s) (gpu.count = {want})"
    if state.count == 0:
        why_not = f"CUDA is unusable here: {state.reason}"
    else:
        why_not = f"CUDA shows only {state.count}"
    raise GpuUnusable(f"{head} but {why_not}; {_visibility()}; {_driver()}; not run on the CPU "
                      "(CPU fallback is for CPU specs only)")


def local_world(spec: NodeSpec, backend: str = "auto", world_size: int | None = None) -> tuple[int, str]:
    """(world_size, backend) for node-local collectives.

    A flag (`backend` other than "auto", `world_size`) wins over the spec's comm.backend /
    comm.world_size; "auto" means NCCL with one rank per visible GPU, else gloo with 8 ranks.
    The spec's world size applies only to the spec's own backend.
    """
    flag = backend != "auto"
    # A GPU spec without (enough) usable GPUs raises GpuUnusable: never a silent gloo fallback.
    # Only an explicit `--backend gloo` (the user's own choice, recorded) runs gloo under a GPU spec.
    gpus = cuda_count() if backend == "gloo" else require_gpus(spec)
    want = backend if flag else spec.comm.backend
    be = want if want != "auto" else ("nccl" if gpus else "gloo")
    if be == "nccl" and gpus == 0:
        where = "--backend nccl:" if flag else "spec comm.backend = 'nccl' but"
        raise UsageError(f"{where} no CUDA GPU is visible here")
    if world_size is not None:
        top = gpus if be == "nccl" else gloo_rank_limit()
        if not 1 <= world_size <= top:
            why = "one rank per visible GPU" if be == "nccl" else GLOO_LIMIT_RULE
            raise UsageError(f"--world-size {world_size}: expected 1..{top} for {be} ({why})")
        return world_size, be
    spec_be = spec.comm.backend if spec.comm.backend != "auto" else ("nccl" if gpus else "gloo")
    ws = spec.comm.world_size if be == spec_be else None
    if be == "nccl":
        return min(ws or gpus, gpus), "nccl"
    return ws or CPU_DEFAULT_RANKS, "gloo"


def gpu_only_skip(spec_gpus: int, what: str) -> str | None:
    """The skip reason of a GPU-only check: only on a CPU spec with no GPU visible (under a GPU spec a machine
    without usable GPUs fails instead, GpuUnusable); None where it runs."""
    return f"no GPU: {what}" if spec_gpus <= 0 and cuda_count() == 0 else None
