"""`collect()`: the whole manifest as one JSON-able dict (schema trainready.env/1).

Sections: host, gpu (NVML + torch's view), software, container, code,
infiniband, host_settings (manifest/hostset.py), env.  A section whose probe fails unexpectedly becomes
``"unavailable: <reason>"``; bad user input (--code, --lock, --image-digest)
raises `UsageError` before anything is collected.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any, Callable

from trainready import __version__
from trainready.manifest import container, envvars, host, hostset, ib, software
from trainready.manifest import code as code_probe
from trainready.manifest import guarded
from trainready.manifest.gpu import collect_nvml
from trainready.manifest.torch_gpus import collect_torch

SCHEMA = "trainready.env/1"


def _section(fn: Callable[[], Any], name: str) -> Any:
    return guarded(fn, f"{name} probe failed")


def gpu_section() -> dict[str, Any]:
    nv = collect_nvml()
    tv = collect_torch()
    return {"nvml": nv.to_json(), "torch": tv.to_json()}


def _fabric() -> dict[str, Any]:
    from trainready.fabric.facts import read_facts
    from trainready.fabric.services import PROCESSES

    return read_facts(units=tuple(PROCESSES), in_container=bool(container.hints())).to_json()


def collect(
    code_path: str | Path | None = None,
    lock_file: str | Path | None = None,
    image_digest: str | None = None,
    ib_root: Path | None = None,
) -> dict[str, Any]:
    # User input first: a bad path or digest is a usage error (exit 2), not a manifest field.
    code = code_probe.collect(code_path, lock_file)
    cont = container.collect(image_digest)
    manifest = {
        "schema": SCHEMA,
        "tool_version": __version__,
        "collected_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "host": _section(host.collect, "host"),
        "gpu": _section(gpu_section, "gpu"),
        "software": _section(software.collect, "software"),
        "container": cont,
        "code": code,
        "infiniband": _section(lambda: ib.ports(ib_root), "infiniband"),
        # settings that must be alike on every node (sysctl, limits, /dev/shm, THP, governor, GPU modes, IB)
        "host_settings": _section(hostset.collect, "host settings"),
        # RDMA ports, NVLink and the NVSwitch fabric, services, rails, NCCL's network variables (fabric/facts.py)
        "fabric": _section(_fabric, "fabric"),
        "env": _section(lambda: envvars.capture(os.environ), "env"),
    }
    # Belt and braces: token-shaped strings anywhere (a path, an image env var) are redacted too.
    return envvars.scrub(manifest)
