"""Drift: each node's versions against the reference node's, as a readable per-node diff.

The versions a fleet must have identical on every node: GPU driver, CUDA (torch's build),
torch, NCCL, cuDNN, the container image digest, the hash of the installed package set, kernel and OS.
A fact a node could not read ("unavailable: ...") is compared as text like any other: a node that cannot
say its NCCL version where the reference can is drift too.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

# key → (section, field) in a trainready.env/1 manifest (manifest/build.py)
FIELDS: dict[str, tuple[str, ...]] = {
    "driver": ("gpu", "nvml", "driver_version"),
    "cuda": ("software", "torch_cuda"),
    "torch": ("software", "torch"),
    "nccl": ("software", "nccl"),
    "cudnn": ("software", "cudnn"),
    "image_digest": ("container", "image_digest"),
    "image_sha256": ("container", "image_sha256"),  # the squashfs the node ran (cluster/control/image.py)
    "slurmd": ("launcher", "slurmd"),
    "pyxis": ("launcher", "pyxis"),
    "enroot": ("launcher", "enroot"),
    "packages_sha256": ("software", "package_set_sha256"),
    "kernel": ("host", "kernel"),
    "os": ("host", "os_version"),
}


def versions(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The drift-relevant facts of one manifest, each as text ('' when its section is missing)."""
    out: dict[str, str] = {}
    for key, path in FIELDS.items():
        cur: Any = manifest
        for part in path:
            cur = cur.get(part) if isinstance(cur, Mapping) else None
        out[key] = "" if cur is None else str(cur)
    return out


def diff(reference: Mapping[str, str], node: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(key, reference value, node value) for every key that differs, in FIELDS order."""
    return [(k, reference.get(k, ""), node.get(k, "")) for k in FIELDS if reference.get(k, "") != node.get(k, "")]


def describe(rows: Sequence[tuple[str, str, str]], ref_name: str) -> str:
    """'torch 2.13.0+cpu (node1) ≠ 0.0.0+planted; kernel ...' for people."""
    return "; ".join(f"{k} {a or '(none)'} ({ref_name}) ≠ {b or '(none)'}" for k, a, b in rows)


def spec_reference(software: Any) -> dict[str, str]:
    """The pins a spec makes (software.torch/cuda/nccl/cudnn/image_digest) as a partial reference: only
    pinned keys are compared, by prefix (as the versions check does)."""
    pins = {"torch": software.torch, "cuda": software.cuda, "nccl": software.nccl, "cudnn": software.cudnn,
            "image_digest": software.image_digest, "image_sha256": getattr(software, "image_sha256", None),
            "slurmd": getattr(software, "slurm", None), "pyxis": getattr(software, "pyxis", None),
            "enroot": getattr(software, "enroot", None)}
    return {k: v for k, v in pins.items() if v}


def diff_pins(pins: Mapping[str, str], node: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """Like `diff`, against spec pins: a node value must start with the pinned prefix."""
    return [(k, v, node.get(k, "")) for k, v in pins.items() if not node.get(k, "").startswith(v)]
