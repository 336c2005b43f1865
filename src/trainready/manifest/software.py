"""Software facts: Python, torch and its CUDA/cuDNN/NCCL, triton, key packages,
and a hash of the whole installed package set (two nodes with the same hash run
the same Python packages)."""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import platform
import sys
from dataclasses import dataclass
from typing import Any

from trainready.manifest import guarded, is_unavailable, unavailable

# Packages whose versions matter for LLM pretraining, reported when installed.
KEY_PACKAGES = (
    "torch", "triton", "numpy", "megatron-core", "transformer-engine", "apex", "flash-attn", "deepspeed", "transformers", "accelerate", "nvidia-nccl-cu12",
    "nvidia-nccl-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-cu13", "nvidia-ml-py", "trainready",
)


def cudnn_version_str(v: int) -> str:
    """torch.backends.cudnn.version(): cuDNN >= 9 encodes 10000*major + 100*minor + patch
    (cudnn_version.h CUDNN_VERSION), cuDNN <= 8 encodes 1000*major + 100*minor + patch."""
    if v >= 90000:
        return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}"
    return f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"


def nccl_version_str(v: Any) -> str:
    """torch.cuda.nccl.version() is a tuple (2, 27, 5) in torch >= 1.12 (an int 2708 before:
    NCCL_VERSION_CODE = 10000*major + 100*minor + patch for NCCL >= 2.9)."""
    if isinstance(v, tuple):
        return ".".join(str(x) for x in v[:3]) + (f"-{v[3]}" if len(v) > 3 and v[3] else "")
    v = int(v)
    return f"{v // 10000}.{(v % 10000) // 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{(v % 1000) // 100}.{v % 100}"


Declared = tuple[tuple[str, str], ...]  # (source, version): what the image says, e.g. ("NCCL_VERSION env", "2.28.3")


@dataclass(frozen=True)
class Versions:
    """The version chain the `versions` check judges. str values may be "unavailable: ...".

    cudnn/nccl are the versions of the libraries torch LOADED (runtime cudnnGetVersion/ncclGetVersion);
    *_path the file each was loaded from ("" when the record predates the field); *_declared what the
    image declares (probe.libraries)."""

    python: str
    torch: str
    torch_cuda: str  # torch.version.cuda: the CUDA toolkit torch was built for
    cudnn: str
    nccl: str
    cudnn_path: str = ""
    nccl_path: str = ""
    cudnn_declared: Declared = ()
    nccl_declared: Declared = ()

    def to_json(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        for k in ("cudnn_declared", "nccl_declared"):
            d[k] = {source: v for source, v in d[k]}
        return d

    @staticmethod
    def from_json(d: dict[str, Any]) -> "Versions":
        base = {k: str(d[k]) for k in ("python", "torch", "torch_cuda", "cudnn", "nccl")}
        paths = {k: str(d.get(k, "")) for k in ("cudnn_path", "nccl_path")}
        decl = {k: tuple((str(s), str(v)) for s, v in dict(d.get(k) or {}).items()) for k in ("cudnn_declared", "nccl_declared")}
        return Versions(**base, **paths, **decl)  # type: ignore[arg-type]


def collect_versions() -> Versions:
    py = platform.python_version()
    try:
        import torch
    except ImportError as exc:
        u = unavailable(f"torch not importable: {exc}")
        return Versions(py, u, u, u, u)
    cpu_only = torch.version.cuda is None
    cuda = unavailable(f"torch {torch.__version__} is a CPU-only build") if cpu_only else str(torch.version.cuda)

    def cudnn() -> str:
        v = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        return cudnn_version_str(int(v)) if v else unavailable("torch has no cuDNN (torch.backends.cudnn.is_available() is False)")

    def nccl() -> str:
        if cpu_only or not hasattr(torch._C, "_nccl_version"):
            return unavailable(f"torch {torch.__version__} was built without NCCL")
        return nccl_version_str(torch.cuda.nccl.version())

    cudnn_v, nccl_v = str(guarded(cudnn)), str(guarded(nccl))  # both calls load the library first
    return Versions(py, str(torch.__version__), cuda, cudnn_v, nccl_v, *_loaded_from(cudnn_v, nccl_v))


def _loaded_from(cudnn_v: str, nccl_v: str) -> tuple[str, str, Declared, Declared]:
    """(cudnn_path, nccl_path, cudnn_declared, nccl_declared) of this process (probe.libraries)."""
    import os

    from trainready.manifest import libraries

    maps = libraries.self_maps()
    out: dict[str, tuple[str, Declared]] = {}
    for name, v in (("cudnn", cudnn_v), ("nccl", nccl_v)):
        if is_unavailable(v):
            out[name] = (unavailable(f"no {name} in this torch"), ())
            continue
        f = libraries.loaded_file(name, maps)
        torch_cuda = next((p for p in maps if "libtorch_cuda" in p), None)
        why_not = "/proc/self/maps not readable" if not maps else f"no lib{name}.so mapped in /proc/self/maps" + (
            f" (linked statically into {torch_cuda}?)" if torch_cuda else "")
        path = f or unavailable(why_not)
        out[name] = (path, libraries.declared(name, os.environ, f))
    return out["cudnn"][0], out["nccl"][0], out["cudnn"][1], out["nccl"][1]


def _dist_version(name: str) -> str:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return unavailable(f"{name} not installed")


def package_set() -> tuple[dict[str, str], str, int]:
    """({name: version} of KEY_PACKAGES present, sha256 of every 'name==version' sorted, count)."""
    pairs = set()
    for d in md.distributions():
        name = (d.metadata.get("Name") or "").strip()
        if name:
            pairs.add(f"{name.lower().replace('_', '-')}=={d.version}")
    digest = hashlib.sha256("\n".join(sorted(pairs)).encode()).hexdigest()
    found = {}
    for p in KEY_PACKAGES:
        try:
            found[p] = md.version(p)
        except md.PackageNotFoundError:
            continue
    return found, f"sha256:{digest}", len(pairs)


def _library_fields(name: str, version: str, path: str, declared: Declared) -> dict[str, Any]:
    """name, name_path, name_declared and, when the image declares another version than the one loaded,
    name_warning: 'NCCL_VERSION env says 2.28.3, torch loads 2.28.9'."""
    from trainready.manifest.libraries import disagreements

    out: dict[str, Any] = {name: version, f"{name}_path": path, f"{name}_declared": dict(declared)}
    off = [] if is_unavailable(version) else disagreements(version, declared)
    if off:
        out[f"{name}_warning"] = f"{', '.join(off)}, torch loads {version}"
    return out


def collect() -> dict[str, Any]:
    v = collect_versions()
    out: dict[str, Any] = {
        "python": v.python,
        "python_executable": sys.executable,
        "python_implementation": platform.python_implementation(),
        "torch": v.torch,
        "torch_cuda": v.torch_cuda,
        "torch_git": guarded(lambda: str(__import__("torch").version.git_version)),
        **_library_fields("cudnn", v.cudnn, v.cudnn_path, v.cudnn_declared),
        **_library_fields("nccl", v.nccl, v.nccl_path, v.nccl_declared),
        "triton": _dist_version("triton"),
    }
    pk = guarded(package_set)
    if isinstance(pk, str):
        out["packages"] = out["package_set_sha256"] = pk
    else:
        out["packages"], out["package_set_sha256"], out["package_count"] = pk
    return out
