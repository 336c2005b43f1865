"""Capture and restore every random-number generator a training step draws from.

Python `random`, NumPy's legacy global generator, the torch CPU generator and
the generator of every visible CUDA device.  The captured form is plain JSON
(lists, ints, base64 strings) so that it goes into the per-rank train-state
file of a checkpoint and can be compared field by field.
"""

from __future__ import annotations

import base64
import random
from typing import Any, Collection, Sequence

import numpy as np
import torch


def _b64(t: torch.Tensor) -> str:
    return base64.b64encode(t.cpu().numpy().tobytes()).decode("ascii")


def _unb64(s: str) -> torch.Tensor:
    raw = np.frombuffer(base64.b64decode(s), dtype=np.uint8).copy()
    return torch.from_numpy(raw)


def capture(cuda_devices: Sequence[int] | None = None) -> dict[str, Any]:
    """The state of every generator, JSON-able. Keys: python, numpy, torch_cpu, cuda {index: state}.

    `cuda_devices`: the devices this process draws from (a rank: its own GPU; a CPU
    run: none); None = every visible device.  A rank touching all 8 GPUs' generators
    would create a CUDA context on each of them.
    """
    py_version, py_state, py_gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": [py_version, list(py_state), py_gauss],
        "numpy": [kind, [int(k) for k in keys], int(pos), int(has_gauss), float(cached)],
        "torch_cpu": _b64(torch.get_rng_state()),
        "cuda": {},
    }
    if torch.cuda.is_available():
        devices = range(torch.cuda.device_count()) if cuda_devices is None else cuda_devices
        state["cuda"] = {str(i): _b64(torch.cuda.get_rng_state(i)) for i in devices}
    return state


def restore(state: dict[str, Any], skip: Collection[str] = ()) -> None:
    """Put every generator back; a CUDA device count that differs is an error.

    `skip`: generator names ("python", "numpy", "torch_cpu", "cuda") left as they are:
    planted faults only (tests show the resume check names a generator not restored).
    """
    if "python" not in skip:
        py_version, py_state, py_gauss = state["python"]
        random.setstate((py_version, tuple(py_state), py_gauss))
    if "numpy" not in skip:
        kind, keys, pos, has_gauss, cached = state["numpy"]
        np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    if "torch_cpu" not in skip:
        torch.set_rng_state(_unb64(state["torch_cpu"]))
    cuda = state.get("cuda", {}) if "cuda" not in skip else {}
    if cuda:
        have = torch.cuda.device_count() if torch.cuda.is_available() else 0
        missing = [i for i in cuda if int(i) >= have]
        if missing:
            raise ValueError(f"checkpoint holds the RNG state of CUDA device {missing[0]}, this process sees {have} device(s)")
        for i, s in cuda.items():
            torch.cuda.set_rng_state(_unb64(s), int(i))


def generators(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Every generator named in either capture: python, numpy, torch_cpu, cuda:I..."""
    cuda = sorted(set(a.get("cuda", {})) | set(b.get("cuda", {})), key=int)
    return ["python", "numpy", "torch_cpu", *(f"cuda:{i}" for i in cuda)]


def differing(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Names of the generators whose states differ between two captures (e.g. ['torch_cpu', 'cuda:0'])."""
    out = [k for k in ("python", "numpy", "torch_cpu") if a.get(k) != b.get(k)]
    ca, cb = a.get("cuda", {}), b.get("cuda", {})
    out.extend(f"cuda:{i}" for i in sorted(set(ca) | set(cb)) if ca.get(i) != cb.get(i))
    return out


def seed_all(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and every CUDA device)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds every CUDA device
