"""Are we inside a container, which kind, and which image.

Evidence is reported as a list of hints (stamp files, cgroup paths, env vars)
rather than one guess, so a reader can judge an odd case.

The image digest, in order: `--image-digest`, the env var TRAINREADY_IMAGE_DIGEST
(set it in the image or the job script), then what the runtime itself exposes inside
the container.  Of the common runtimes only Podman does (/run/.containerenv, written
for privileged containers: `image=` names the image, by digest when it was run by
digest; `imageid=` is the local image ID, i.e. the config digest, which is NOT the
registry's manifest digest, and is recorded as such).  Docker (/.dockerenv is empty;
the hostname is the container ID), Kubernetes (the Downward API has no image field),
enroot/Pyxis and Apptainer expose no digest inside the container, and overlay lower
directories in /proc/self/mountinfo are local layer cache IDs, not digests: there the
digest is "unknown", never guessed.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

from trainready.errors import UsageError
from trainready.manifest import read_text

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


UNKNOWN_DIGEST = (f"unknown: the container runtime does not expose the image digest here "
                  f"(pass --image-digest or set {DIGEST_ENV})")
_HEX64 = re.compile(r"^(?:sha256:)?([0-9a-f]{64})$")
_BY_DIGEST = re.compile(r"@(sha256:[0-9a-f]{64})$")


def image_digest(flag: str | None, env: Mapping[str, str], root: Path | None = Path("/")) -> tuple[str | None, str]:
    """(digest or None, where it came from). The flag wins over the env var, which wins over what the
    runtime exposes under `root` (None: do not look)."""
    if flag:
        return check_digest(flag, "--image-digest"), "--image-digest"
    if env.get(DIGEST_ENV):
        return check_digest(env[DIGEST_ENV], DIGEST_ENV), DIGEST_ENV
    found = runtime_digest(root) if root is not None else None
    return found if found else (None, UNKNOWN_DIGEST)


def runtime_digest(root: Path) -> tuple[str, str] | None:
    """The digest the container runtime exposes inside the container (Podman's /run/.containerenv), with
    its source; None where it exposes none (see the module doc)."""
    text = read_text(root / "run/.containerenv")
    if not text:
        return None
    fields = dict(re.findall(r'^(\w+)="([^"]*)"\s*$', text, flags=re.M))
    m = _BY_DIGEST.search(fields.get("image", ""))
    if m:
        return m.group(1), "/run/.containerenv image= (Podman; the image was run by digest)"
    m = _HEX64.match(fields.get("imageid", ""))
    if m:
        return f"sha256:{m.group(1)}", ("/run/.containerenv imageid= (Podman's local image ID: the config "
                                        "digest, not the registry's manifest digest)")
    return None


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
    digest, source = image_digest(image_digest_flag, env, root)
    return {
        "inside": bool(h),
        "hints": h,
        "image_digest": digest,
        "image_digest_source": source,
        "image_env": {k: env[k] for k in IMAGE_ENV if k in env},
    }
