"""trainready inside an image that does not have it: staged onto the shared results path, run on the image's python.

An NGC PyTorch image has no trainready, and installing it would change the thing under test.  So `cluster run
--container-image` copies this trainready (its package folder) and the pure-Python packages it needs beyond torch
and numpy (typer, rich and what they need: the installed closure of trainready's requirements) into
RESULTS/.trainready/, which Pyxis mounts into every task at the same path (options.Container.srun_flags).  The
task runs `python3 RESULTS/.trainready/boot.py ...`: the image's own interpreter, torch and numpy; the staged
packages come AFTER the image's own on sys.path, so a package the image ships (typing_extensions, say) is the
image's.  Forkserver and spawned children (resume's fresh process C) inherit that sys.path (multiprocessing
passes its parent's to them).
"""

from __future__ import annotations

import hashlib
import re
import shutil
from importlib import metadata
from pathlib import Path

STAGE = ".trainready"  # under RESULTS
IMAGE_OWN = frozenset({"torch", "numpy"})  # judged as the image ships them: never staged
BOOT = '''"""Started by Pyxis inside the image (trainready cluster run --container-image): trainready from this folder
(sys.path[0], the script's own), its other packages from deps/ after the image's own, then the CLI."""
import os
import sys

sys.path.append(os.path.join(os.path.dirname(os.path.abspath(__file__)), "deps"))
if __name__ == "__main__":  # not in multiprocessing's children, which import this file as __mp_main__
    from trainready.entry import run_main

    run_main()
'''


def _name(req: str) -> str:
    return re.split(r"[\s;<>=!~\[(]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def _applies(req: str) -> bool:
    """A requirement this interpreter would install: no extra, its environment marker true where it can be read."""
    if ";" not in req:
        return True
    marker = req.split(";", 1)[1]
    if "extra" in marker:
        return False
    try:
        from packaging.markers import Marker

        return bool(Marker(marker).evaluate())
    except Exception:  # noqa: BLE001 - packaging absent or a marker it cannot read: take it
        return True


def closure(root: str = "trainready") -> list[metadata.Distribution]:
    """The installed distributions `root` needs (its requirements, theirs, ...), less the image's own."""
    seen: dict[str, metadata.Distribution] = {}
    todo = [r for r in metadata.requires(root) or [] if _applies(r)]
    while todo:
        name = _name(todo.pop())
        if name in seen or name in IMAGE_OWN:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue  # not installed here (a requirement for another Python): nothing to stage
        seen[name] = dist
        todo += [r for r in dist.requires or [] if _applies(r)]
    return list(seen.values())


def _tops(dist: metadata.Distribution) -> list[Path]:
    """The distribution's top-level modules and packages, as installed paths (no .dist-info, no scripts)."""
    tops = {Path(str(f)).parts[0] for f in dist.files or [] if not str(f).startswith("..")}
    base = Path(str(dist.locate_file("")))
    return [base / t for t in sorted(tops) if not t.endswith((".dist-info", ".egg-info")) and t != "__pycache__"]


def _key(pkg: Path, dists: list[metadata.Distribution]) -> str:
    h = hashlib.sha256()
    for f in sorted(pkg.rglob("*.py")):
        h.update(str(f.relative_to(pkg)).encode() + f.read_bytes())
    for d in dists:
        h.update(f"{d.metadata['Name']}=={d.version}".encode())
    return h.hexdigest()[:16]


def boot(results: Path) -> Path:
    """RESULTS/.trainready/boot.py, staged now unless this very trainready is already there."""
    import trainready

    pkg = Path(trainready.__file__).resolve().parent
    dists = closure()
    dest = results / STAGE
    key = _key(pkg, dists)
    if (dest / "KEY").is_file() and (dest / "KEY").read_text().strip() == key:
        return dest / "boot.py"
    tmp = results / f"{STAGE}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(pkg, tmp / "trainready", ignore=skip)
    for d in dists:
        for top in _tops(d):
            if top.is_dir():
                shutil.copytree(top, tmp / "deps" / top.name, ignore=skip, dirs_exist_ok=True)
            elif top.is_file():
                (tmp / "deps").mkdir(parents=True, exist_ok=True)
                shutil.copy2(top, tmp / "deps" / top.name)
    (tmp / "boot.py").write_text(BOOT)
    (tmp / "KEY").write_text(key + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest / "boot.py"
