"""The launcher's place in the version chain: slurmctld, each node's slurmd, Pyxis and enroot, and whether the
Pyxis plugin was built for the Slurm that runs.

Pyxis's own rule (its README): since Slurm 21.08 pyxis must be compiled against the Slurm release deployed;
Slurm refuses a plugin built against another release's spank.h ('Incompatible plugin version').  The release a
plugin was built for is its `plugin_version` symbol (SLURM_VERSION_NUMBER of the spank.h it was compiled with,
0xMMmmuu), read here from the .so that the cluster's plugstack.conf names.
"""

from __future__ import annotations

import re
import struct
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainready.cluster.control import slurm
from trainready.errors import SlurmError

# pyxis's README: "Since Slurm 21.08, pyxis must be compiled against the release of Slurm that is going to be
# deployed on the cluster. Compiling against spank.h from a different Slurm release will cause Slurm to prevent
# pyxis from loading with error `Incompatible plugin version`."
PYXIS_RULE = ("pyxis must be compiled against the Slurm release deployed on the cluster (pyxis README: since "
              "Slurm 21.08, a pyxis built with another release's spank.h is refused, 'Incompatible plugin version')")


@lru_cache(maxsize=1)
def config() -> dict[str, str]:
    """`scontrol show config` as KEY → value (slurmctld's answer: SLURM_VERSION is the controller's)."""
    try:
        text = slurm.call(["scontrol", "show", "config"])
    except SlurmError:
        return {}
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^(\w+)\s+=\s(.*)$", text, re.M)}


def pyxis_plugin(plugstack: str | None) -> Path | None:
    """The spank_pyxis.so a plugstack.conf loads (its `required`/`optional` line), if any."""
    try:
        text = Path(plugstack or "").read_text() if plugstack else ""
    except OSError:
        return None
    m = re.search(r"^\s*(?:required|optional)\s+(\S*spank_pyxis\.so)\b", text, re.M)
    return Path(m.group(1)) if m else None


def built_for(so: Path) -> str | None:
    """'22.05.8' from a SPANK plugin's plugin_version (ELF64: the symbol's address → its file offset)."""
    try:
        nm = subprocess.run(["nm", "-D", str(so)], capture_output=True, text=True, timeout=30).stdout
        addr = int(re.search(r"^([0-9a-f]+) R plugin_version\b", nm, re.M).group(1), 16)  # type: ignore[union-attr]
        data = so.read_bytes()
    except (OSError, AttributeError, subprocess.SubprocessError):
        return None
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, _, off, vaddr, _, filesz = struct.unpack_from("<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 1 and vaddr <= addr < vaddr + filesz:  # PT_LOAD holding the symbol
            v, = struct.unpack_from("<I", data, off + addr - vaddr)
            return f"{v >> 16 & 0xff:02d}.{v >> 8 & 0xff:02d}.{v & 0xff}"
    return None


def chain(records: Sequence[Mapping[str, Any] | None]) -> dict[str, Any]:
    """The fleet record's launcher section: the controller's Slurm, each node's slurmd/pyxis/enroot (from its
    record), and the Pyxis plugin's path, the Slurm it was built for, and Pyxis's rule where they differ."""
    cfg = config()
    ctld = cfg.get("SLURM_VERSION")
    nodes = {str(r.get("node")): dict((r.get("manifest") or {}).get("launcher") or {}) for r in records if r}
    so = pyxis_plugin(cfg.get("PlugStackConfig"))
    out: dict[str, Any] = {"slurmctld": ctld, "nodes": nodes, "pyxis_plugin": str(so) if so else None,
                           "pyxis_built_for": built_for(so) if so else None, "pyxis_mismatch": None}
    running = {v.get("slurmd") for v in nodes.values() if v.get("slurmd")} | ({ctld} if ctld else set())
    bf = out["pyxis_built_for"]
    if bf and any(r.split(".")[:2] != bf.split(".")[:2] for r in running):
        out["pyxis_mismatch"] = (f"pyxis {so} was built for Slurm {bf} while Slurm {', '.join(sorted(running))} "
                                 f"runs: {PYXIS_RULE}")
    return out


def preflight() -> None:
    """Before a container run is submitted: a Pyxis plugin built for another Slurm release than the controller's is
    one line naming both and Pyxis's rule (exit 2); Slurm itself would refuse it in sbatch, 'Incompatible plugin
    version', without saying why."""
    cfg = config()
    so = pyxis_plugin(cfg.get("PlugStackConfig"))
    bf, ctld = (built_for(so), cfg.get("SLURM_VERSION")) if so else (None, None)
    if bf and ctld and bf.split(".")[:2] != ctld.split(".")[:2]:
        raise SlurmError(f"pyxis {so} was built for Slurm {bf} while Slurm {ctld} runs: {PYXIS_RULE}")
