"""Which NCCL and cuDNN files torch actually runs, and what the image declares.

An image can declare one version and run another: on the lent H200 image the base
container sets ``NCCL_VERSION=2.28.3-1`` and ships a system cuDNN 9.14, while torch's
wheels bring and load NCCL 2.28.9 and cuDNN 9.19.  The version that matters is the one
the process loaded, so each is reported with the FILE it came from: the path mapped in
``/proc/self/maps`` (proc(5)) after torch has initialised the library.  Declared versions
come from the container's environment (``NCCL_VERSION``, ``CUDNN_VERSION``, set by
NVIDIA's CUDA base images) and from the system library's file name
(``/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Iterable, Mapping

# The main library file of each (not cuDNN's sub-libraries libcudnn_ops.so.9 etc.).
LIB_FILE = {"nccl": re.compile(r"^libnccl\.so(\.\d+)*$"), "cudnn": re.compile(r"^libcudnn\.so(\.\d+)*$")}
SONAME = {"nccl": "libnccl.so.2", "cudnn": "libcudnn.so.9"}
DECLARING_ENV = {"nccl": "NCCL_VERSION", "cudnn": "CUDNN_VERSION"}  # NVIDIA CUDA base images (Dockerfiles)
# Where a distribution/NVIDIA package puts system copies (Debian multiarch, RHEL, the CUDA toolkit).
SYSTEM_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib/sbsa-linux-gnu",
                   "/usr/lib64", "/usr/local/cuda/lib64", "/usr/local/lib")


def mapped_paths(maps_text: str) -> list[str]:
    """Unique file paths in a /proc/PID/maps text, in order (the 6th column; anonymous maps skipped)."""
    out: list[str] = []
    for line in maps_text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/"):
            path = parts[5].removesuffix(" (deleted)")
            if path not in out:
                out.append(path)
    return out


def loaded_file(name: str, paths: Iterable[str]) -> str | None:
    """The first mapped path whose file name is the library's main file."""
    return next((p for p in paths if LIB_FILE[name].match(os.path.basename(p))), None)


def self_maps() -> list[str]:
    try:
        return mapped_paths(Path("/proc/self/maps").read_text())
    except OSError:
        return []


def version_in_name(path: str) -> str | None:
    """'libnccl.so.2.28.3' → '2.28.3' (the real file behind the soname link); None when only a major."""
    m = re.search(r"\.so\.(\d+(?:\.\d+)+)$", os.path.basename(os.path.realpath(path)))
    return m.group(1) if m else None


def normalise(version: str) -> str:
    """Package revision and build parts dropped: '2.28.3-1' → '2.28.3', '9.14.0.64' → '9.14.0'."""
    v = version.strip().split("-", 1)[0].split("+", 1)[0]
    return ".".join(v.split(".")[:3])


def declared(name: str, env: Mapping[str, str], loaded: str | None,
             dirs: Iterable[str] = SYSTEM_LIB_DIRS) -> tuple[tuple[str, str], ...]:
    """(source, version) pairs the image declares for `name`: its environment variable and every system
    copy of the library that is not the loaded file."""
    out: list[tuple[str, str]] = []
    if env.get(DECLARING_ENV[name]):
        out.append((f"{DECLARING_ENV[name]} env", normalise(env[DECLARING_ENV[name]])))
    here = os.path.realpath(loaded) if loaded else None
    for d in dirs:
        p = os.path.join(d, SONAME[name])
        if os.path.exists(p) and os.path.realpath(p) != here:
            v = version_in_name(p)
            if v:
                out.append((f"system {os.path.realpath(p)}", normalise(v)))
    return tuple(out)


def disagreements(in_use: str, decl: Iterable[tuple[str, str]]) -> list[str]:
    """'NCCL_VERSION env says 2.28.3' for each declared version that is not the one in use."""
    return [f"{source} says {v}" for source, v in decl if normalise(v) != normalise(in_use)]
