"""The image under test on every node (Pyxis + enroot): which file each node ran, and the launcher's versions.

The production path: the source image is pinned by digest, the imported artifact (a squashfs) gets its own
checksum, and every node runs one and the same file.  The batch script (run.batch_script) computes, on the node
and outside the container, the sha256 of the squashfs that node hands to Pyxis and the slurmd version, and passes
them into the container's environment with Pyxis's version (the string in the plugin that plugstack.conf loads)
and enroot's (`enroot version`); the task inside reads them and records them.
A registry reference (nvcr.io#..., docker://...) is passed to Pyxis unchanged: Pyxis imports it on each node into a
squashfs it deletes again, so no checksum can be read (import it once with `enroot import` and give the .sqsh).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from trainready.cluster.control.launcher import PYXIS_RULE, config, pyxis_plugin
from trainready.errors import UsageError

SHA_VAR = "TRAINREADY_IMAGE_SHA256"  # set by the batch script: the squashfs's sha256 on this node ('' = none)
FILE_VAR = "TRAINREADY_IMAGE_FILE"  # the path the node handed to Pyxis
SLURMD_VAR = "TRAINREADY_SLURMD_VERSION"  # `slurmd -V` on the node: 'slurm 22.05.8'
PYXIS_VAR, ENROOT_VAR = "TRAINREADY_PYXIS_VERSION", "TRAINREADY_ENROOT_VERSION"  # read on the node (prelude)
CTLD_VAR = "TRAINREADY_SLURMCTLD_VERSION"  # slurmctld's SLURM_VERSION (scontrol show config) at submission
RECORD_VAR = "TRAINREADY_IMAGE_RECORD"  # the image record's facts as JSON (trainready image import), or unset
PLANT = "cluster.image"  # --plant cluster.image=NODE:PATH: that node is given another squashfs (a test run)


def digest(image: str | None) -> str | None:
    """The digest a reference pins ('...@sha256:HEX'), else None."""
    m = re.search(r"@(sha256:[0-9a-f]{64})$", image or "")
    return m.group(1) if m else None


def planted_images(faults: Mapping[str, str]) -> list[tuple[str, str]]:
    """cluster.image=NODE:PATH[,NODE:PATH...] → [(NODE, PATH)]; a bad value is one usage line."""
    value = faults.get("cluster.image")
    out: list[tuple[str, str]] = []
    for item in value.split(",") if value is not None else []:
        node, _, path = item.partition(":")
        if not node.strip() or not path.strip():
            raise UsageError(f"--plant {PLANT}={value}: expected NODE:PATH[,NODE:PATH...] (the squashfs each "
                             "NODE is given instead)")
        out.append((node.strip(), path.strip()))
    return out


def prelude(image: str, plants: Mapping[str, str], record: Mapping[str, Any] | None = None) -> str:
    """Batch-script lines, run on the node before the container step: IMAGE (the planted one on a planted node),
    its sha256 when it is a readable file, and the slurmd version, exported into the step's environment."""
    ctld = config().get("SLURM_VERSION", "")  # slurmctld's, asked once at submission
    lines = [f"IMAGE={shlex.quote(image)}", f"export {CTLD_VAR}={shlex.quote(ctld)}"]
    if record:  # the image record's facts, into the node record (image/fleet.py)
        lines.append(f"export {RECORD_VAR}={shlex.quote(json.dumps(dict(record), sort_keys=True))}")
    for node, path in planted_images(plants):
        lines.append(f'[ "$SLURMD_NODENAME" = {shlex.quote(node)} ] && IMAGE={shlex.quote(path)}  # planted')
    lines += [
        f'export {FILE_VAR}="$IMAGE" {SHA_VAR}=',
        f'[ -f "$IMAGE" ] && [ -r "$IMAGE" ] && {SHA_VAR}=$(sha256sum "$IMAGE" | cut -d" " -f1)',
        f'export {SLURMD_VAR}="$( (slurmd -V || /usr/sbin/slurmd -V) 2>/dev/null)"',
    ]
    so = pyxis_plugin(config().get("PlugStackConfig"))
    if so is not None:  # pyxis's version string in its plugin; enroot on the PATH, or beside pyxis's prefix
        q, enr = shlex.quote(str(so)), shlex.quote(str(so.parents[2] / "bin" / "enroot"))
        lines += [f"export {PYXIS_VAR}=$(grep -aom1 'pyxis: version v[0-9][0-9.]*' {q} | sed 's/.* v//')",
                  f"export {ENROOT_VAR}=$( (enroot version || {enr} version || /usr/bin/enroot version) 2>/dev/null)"]
    return "\n".join(lines) + "\n"


def node_facts(image: str | None, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The container section of a node record, read inside the container: the reference as given, its digest
    where the reference pins one, the sha256 of the file this node ran, and the interpreter and torch judged."""
    e = os.environ if env is None else env
    torch_file = None
    try:
        import torch

        torch_file = os.path.dirname(torch.__file__)
    except Exception:  # noqa: BLE001 - the torch checks say why
        pass
    return {"image": image, "digest": digest(image), "file": e.get(FILE_VAR) or None,
            "image_sha256": (f"sha256:{e[SHA_VAR]}" if e.get(SHA_VAR) else None),
            "python": sys.executable, "torch_path": torch_file,
            "image_record": json.loads(e[RECORD_VAR]) if e.get(RECORD_VAR) else None}


def launcher(env: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """slurmctld, slurmd, Pyxis and enroot versions as the node task sees them (None outside a Pyxis container)."""
    e = os.environ if env is None else env
    slurmd = (e.get(SLURMD_VAR) or "").split()
    return {"slurmctld": e.get(CTLD_VAR) or None, "slurmd": slurmd[-1] if slurmd else None, "pyxis": e.get(PYXIS_VAR) or None,
            "enroot": e.get(ENROOT_VAR) or None}


def annotate(manifest: dict[str, Any], image: str | None) -> dict[str, Any]:
    """Into this node's manifest: the launcher's versions (manifest['launcher']) and, in a container, the image
    checksum (manifest['container']['image_sha256']), so the version chain (manifest/drift.py) compares them
    across nodes and against a spec's pins; returns the record's container section (None-valued outside one)."""
    manifest["launcher"] = launcher()
    facts = node_facts(image) if image else {}
    if image:
        cont = manifest.setdefault("container", {})
        if isinstance(cont, dict):
            cont["image_sha256"] = facts["image_sha256"]
    return facts


@dataclass(frozen=True)
class ContainerFault:
    """A task that left no record because its container never ran, in Pyxis's and enroot's own words."""

    cause: str
    """The cause key: the same on every node it hits, so a cause shared by the fleet is seen as one (judge/guard.py)."""
    text: str
    """Pyxis's and enroot's lines from the task's log, joined."""
    not_tested: bool
    """True: the node was never tested (the image file was not there for it, or Slurm refused Pyxis)."""


_PYXIS = re.compile(r"pyxis:\s+(.*\S)")
_SAYS_WHY = re.compile(r"ERROR|fail|not |n't |cannot|[Ii]nvalid|denied|does not exist")  # not unsquashfs's counts
_UNREADABLE = ("No such file or directory", "Permission denied")


def log_fault(results: Path, index: int) -> ContainerFault | None:
    """What Pyxis/enroot said in array task `index`'s newest log (RESULTS/logs/accept_JOB_INDEX.out), if anything."""
    logs = sorted((results / "logs").glob(f"accept_*_{index}.out"), key=lambda p: p.stat().st_mtime)
    if not logs:
        return None
    text = logs[-1].read_text(errors="replace")
    if "Incompatible plugin version" in text:
        line = next(ln.strip() for ln in text.splitlines() if "Incompatible plugin version" in ln)
        return ContainerFault("pyxis: built for another Slurm", f"{line}: {PYXIS_RULE}", True)
    said = [m.group(1) for m in map(_PYXIS.search, text.splitlines()) if m]
    said = [s for s in said if _SAYS_WHY.search(s) and not s.startswith(("child ", "printing enroot log"))][:4]
    if not said:
        return None
    words = "; ".join(dict.fromkeys(said))
    enroot = [s for s in said if s.startswith("[ERROR]")]
    if any(u in s for s in enroot for u in _UNREADABLE):
        return ContainerFault("image not readable on the node", f"the image could not be read here: {words}", True)
    return ContainerFault("container did not start", f"its container did not start: {words}", False)
