"""Are we inside a container, which kind, and which image.

Evidence is reported as a list of hints (stamp files, cgroup paths, env vars)
rather than one guess, so a reader can judge an odd case.  The image digest
cannot be read from inside a container; it comes from `--image-digest` or the
env var TRAINREADY_IMAGE_DIGEST (set it in the image or the job script).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

from trainready.errors import UsageError
from trainready.probe import read_text

DIGEST_ENV = "TRAINREADY_IMAGE_DIGEST"
# An OCI digest (sha256:<64 hex>), optionally after a reference "repo[:tag]@".
_DIGEST = re.compile(r"^(?:[\w./:-]+@)?sha256:[0-9a-f]{64}$")
# cgroup path fragments written by container runtimes (/proc/1/cgroup).
_CGROUP_HINTS = ("docker", "kubepods", "containerd", "libpod", "lxc", "crio", "enroot", "pyxis")
# Env vars NGC images and runtimes set that identify the image (values are not secrets).
IMAGE_ENV = (
    "NVIDIA_PYTORCH_VERSION", "PYTORCH_BUILD_VERSION", "PYTORCH_VERSION", "CUDA_VERSION", "NCCL_VERSION",
    "CUDNN_VERSION", "NVIDIA_BUILD_ID", "NVIDIA_REQUIRE_CUDA", "container",
)


def check_digest(value: str, source: str) -> str:
    """Validate an image digest; `source` names where it came from for the error line."""
    v = value.strip()
    if not _DIGEST.match(v):
        raise UsageError(f"{source} '{value}': expected an image digest 'sha256:<64 hex digits>' (optionally 'repo@sha256:...')")
    return v


def image_digest(flag: str | None, env: Mapping[str, str]) -> tuple[str | None, str]:
    """(digest or None, where it came from). The flag wins over the env var."""
    if flag:
        return check_digest(flag, "--image-digest"), "--image-digest"
    if env.get(DIGEST_ENV):
        return check_digest(env[DIGEST_ENV], DIGEST_ENV), DIGEST_ENV
    return None, f"not given (pass --image-digest or set {DIGEST_ENV})"


def hints(root: Path = Path("/"), env: Mapping[str, str] | None = None) -> list[str]:
    env = os.environ if env is None else env
    found = []
    if (root / ".dockerenv").exists():
        found.append("/.dockerenv present (Docker)")
    if (root / "run/.containerenv").exists():
        found.append("/run/.containerenv present (Podman/CRI-O)")
    if (root / ".singularity.d").is_dir() or env.get("APPTAINER_CONTAINER") or env.get("SINGULARITY_CONTAINER"):
        found.append("Apptainer/Singularity")
    cg = read_text(root / "proc/1/cgroup") or ""
    for h in _CGROUP_HINTS:
        if h in cg:
            found.append(f"/proc/1/cgroup mentions '{h}'")
    if env.get("container"):
        found.append(f"env container={env['container']}")
    if any(k.startswith("ENROOT_") for k in env) or (root / "etc/enroot").is_dir():
        found.append("enroot environment (ENROOT_* or /etc/enroot)")
    if any(k.startswith("PYXIS_") for k in env):
        found.append("pyxis environment (PYXIS_*)")
    if env.get("KUBERNETES_SERVICE_HOST"):
        found.append("Kubernetes pod (KUBERNETES_SERVICE_HOST)")
    return found


def collect(image_digest_flag: str | None = None, root: Path = Path("/"), env: Mapping[str, str] | None = None) -> dict[str, Any]:
    env = os.environ if env is None else env
    h = hints(root, env)
    digest, source = image_digest(image_digest_flag, env)
    return {
        "inside": bool(h),
        "hints": h,
        "image_digest": digest,
        "image_digest_source": source,
        "image_env": {k: env[k] for k in IMAGE_ENV if k in env},
    }
