"""What a checkpoint needs from the environment that loads it, described so two environments can be compared.

* the environment: torch, its CUDA, Python, NumPy, the device;
* the DCP metadata version the checkpoint's `.metadata` carries (torch.distributed.checkpoint
  writes `CURRENT_DCP_VERSION` into it; torch < 2.5 wrote none) and whether this torch can read it;
* every entry of the checkpoint: tensors with dtype and global shape, other (pickled) entries;
* the RNG state format: Python's state version and length, NumPy's generator kind and key count,
  the byte length of torch's CPU generator state and of each CUDA generator's.

`structure_rows` compares the checkpoint (as recorded by its saver and as this torch reads it)
with what this environment's model and optimizer expect, one row per difference.
"""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any, Mapping

import torch

ROW_KEYS = ("component", "saved", "here", "ok", "note")


def dcp_version_here() -> str:
    try:
        from torch.distributed.checkpoint.filesystem import CURRENT_DCP_VERSION

        return str(CURRENT_DCP_VERSION)
    except ImportError:  # torch < 2.5 wrote no version
        return "none"


def environment(device: str) -> dict[str, Any]:
    import numpy as np

    name = torch.cuda.get_device_name(0) if device.startswith("cuda") and torch.cuda.is_available() else platform.processor() or platform.machine()
    return {"torch": torch.__version__, "torch_cuda": torch.version.cuda or "none", "python": platform.python_version(),
            "numpy": np.__version__, "device": device, "device_name": name, "dcp_version": dcp_version_here()}


def rng_format(state: Mapping[str, Any]) -> dict[str, str]:
    """A captured RNG state (train.rng.capture) reduced to its format: one short string per generator."""
    out: dict[str, str] = {}
    try:
        py = state["python"]
        out["python"] = f"version {py[0]}, {len(py[1])} words"
    except (KeyError, TypeError, IndexError):
        out["python"] = "absent or malformed"
    try:
        npst = state["numpy"]
        out["numpy"] = f"{npst[0]}, {len(npst[1])} keys"
    except (KeyError, TypeError, IndexError):
        out["numpy"] = "absent or malformed"
    out["torch_cpu"] = _b64_len(state.get("torch_cpu"))
    for i, s in sorted((state.get("cuda") or {}).items()):
        out[f"cuda:{i}"] = _b64_len(s)
    return out


def _b64_len(s: Any) -> str:
    import base64
    import binascii

    try:
        return f"{len(base64.b64decode(s, validate=True))} bytes"
    except (TypeError, ValueError, binascii.Error):
        return "absent or malformed"


def rng_format_here(cuda_devices: list[int]) -> dict[str, str]:
    from trainready.workload import rng

    return rng_format(rng.capture(cuda_devices))


def entries_of(meta: Any) -> dict[str, dict[str, Any]]:
    """DCP Metadata → {key: {"dtype": "torch.float32", "shape": [..]}} for tensors, {"bytes": True} otherwise."""
    out: dict[str, dict[str, Any]] = {}
    for key, m in meta.state_dict_metadata.items():
        props = getattr(m, "properties", None)
        if props is not None and hasattr(m, "size"):
            out[key] = {"dtype": str(props.dtype), "shape": list(m.size)}
        else:
            out[key] = {"bytes": True}
    return out


def read_checkpoint_meta(step_dir: Path) -> tuple[str, dict[str, dict[str, Any]]]:
    """(DCP metadata version, entries) of a checkpoint directory as this torch reads them."""
    import torch.distributed.checkpoint as dcp

    meta = dcp.FileSystemReader(str(step_dir)).read_metadata()
    return str(getattr(meta, "version", None) or "none"), entries_of(meta)


def expected_entries(train: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The entries this environment's model + optimizer (built from the saver's train config) load."""
    from torch.distributed.checkpoint._nested_dict import flatten_state_dict  # DCP's own key scheme
    from torch.distributed.checkpoint.state_dict import get_state_dict

    from trainready.workload.loop import TrainConfig
    from trainready.workload.model import GPT

    cfg = TrainConfig(**{**dict(train), "mode": "ddp"})  # global shapes: the unsharded model
    model = GPT(cfg.model_config())
    optim = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), weight_decay=cfg.weight_decay)
    torch.optim.lr_scheduler.LambdaLR(optim, lambda s: 1.0)  # adds initial_lr to the param groups, as training does
    msd, osd = get_state_dict(model, optim)  # initialises AdamW's state, as a load does
    flat, _ = flatten_state_dict({"model": msd, "optim": osd})
    return {k: ({"dtype": str(v.dtype), "shape": list(v.shape)} if torch.is_tensor(v) else {"bytes": True})
            for k, v in flat.items()}


def row(component: str, saved: str, here: str, ok: bool, note: str = "") -> dict[str, Any]:
    return {"component": component, "saved": saved, "here": here, "ok": ok, "note": note}


def structure_rows(saved: Mapping[str, Any], read_version: str, read: Mapping[str, Any],
                   expected: Mapping[str, Any], rng_saved: Mapping[str, str], rng_here: Mapping[str, str]) -> list[dict[str, Any]]:
    """Every difference that stops this environment loading the checkpoint as saved (ok False), plus the
    DCP version row (a different version this torch reads is noted, not failed)."""
    rows = [row("DCP metadata version", str(saved.get("dcp_version")), f"{read_version} read; this torch writes "
                f"{dcp_version_here()}", True, "" if read_version == dcp_version_here() else "differs, read without error")]
    recorded = saved.get("entries") or {}
    for key in sorted(set(recorded) | set(read)):
        a, b = recorded.get(key), read.get(key)
        if a != b:
            rows.append(row(f"entry {key}", _desc(a), _desc(b), False, "this torch reads the checkpoint differently "
                            "from what its saver recorded"))
    for key in sorted(set(read) | set(expected)):
        a, b = read.get(key), expected.get(key)
        what = "tensor" if not (a or b or {}).get("bytes") else "entry"
        if a is None:
            rows.append(row(f"{what} {key}", "missing", _desc(b), False, f"missing {what}: this environment expects it"))
        elif b is None:
            rows.append(row(f"{what} {key}", _desc(a), "not expected", True, "extra in the checkpoint: ignored by the load"))
        elif a.get("dtype") != b.get("dtype"):
            rows.append(row(f"tensor {key}", _desc(a), _desc(b), False, "dtype differs"))
        elif a.get("shape") != b.get("shape"):
            rows.append(row(f"tensor {key}", _desc(a), _desc(b), False, "shape differs"))
    for g in sorted(set(rng_saved) | set(rng_here)):
        a, b = rng_saved.get(g, "absent"), rng_here.get(g, "absent")
        if a != b:
            rows.append(row(f"RNG state {g}", a, b, False, "RNG state format differs"))
    return rows


def _desc(e: Mapping[str, Any] | None) -> str:
    if e is None:
        return "absent"
    if e.get("bytes"):
        return "non-tensor entry"
    return f"{str(e.get('dtype')).replace('torch.', '')} {list(e.get('shape') or [])}"
