"""Which training code and which lock file: git commit (+ dirty flag) and sha256."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path
from typing import Any

from trainready.errors import UsageError
from trainready.manifest import unavailable


def _git(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, timeout=30)


def git_state(path: str | Path) -> dict[str, Any]:
    """{"path", "commit", "dirty"} of the git work tree at `path`. A missing path is a usage error."""
    p = Path(path).expanduser()
    if not p.exists():
        raise UsageError(f"--code {path}: no such file or directory (expected the training code's git checkout)")
    out: dict[str, Any] = {"path": str(p.resolve())}
    if shutil.which("git") is None:
        out["commit"] = out["dirty"] = unavailable("git not installed")
        return out
    try:
        head = _git(p, "rev-parse", "HEAD")
        if head.returncode != 0:
            why = head.stderr.strip().splitlines()[0] if head.stderr.strip() else f"git exit {head.returncode}"
            out["commit"] = out["dirty"] = unavailable(why)
            return out
        out["commit"] = head.stdout.strip()
        # --porcelain lists modified and untracked files; any line means the tree is not the commit.
        st = _git(p, "status", "--porcelain", "--untracked-files=normal")
        out["dirty"] = bool(st.stdout.strip()) if st.returncode == 0 else unavailable(st.stderr.strip())
    except (OSError, subprocess.TimeoutExpired) as exc:
        out["commit"] = out["dirty"] = unavailable(f"git: {exc}")
    return out


def file_sha256(path: str | Path, flag: str = "--lock") -> dict[str, Any]:
    p = Path(path).expanduser()
    if not p.is_file():
        raise UsageError(f"{flag} {path}: no such file (expected a lock file, e.g. uv.lock or requirements.txt)")
    h = hashlib.sha256()
    try:
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):  # 1 MiB chunks
                h.update(chunk)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot read ({exc.strerror})") from None
    return {"path": str(p.resolve()), "sha256": h.hexdigest(), "bytes": p.stat().st_size}


def collect(code_path: str | Path | None = None, lock_file: str | Path | None = None) -> dict[str, Any]:
    return {
        "code": git_state(code_path) if code_path else unavailable("no --code path given"),
        "lock": file_sha256(lock_file) if lock_file else unavailable("no --lock file given"),
    }
