"""The site's enroot, run as it is (its enroot.conf, credentials and ENROOT_* paths): its version, its effective
configuration (read by enroot's own configuration code), `enroot digest` and `enroot import`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from trainready.errors import ImageError, UsageError

CONFIG_KEYS = ("ENROOT_ALLOW_HTTP", "ENROOT_CONFIG_PATH", "ENROOT_SQUASH_OPTIONS", "ENROOT_CACHE_PATH")
# enroot's configuration section, between these markers in the `enroot` script: run as is, it loads the site's
# enroot.conf, its drop-ins and the environment the way enroot does, and exports the result
_BEGIN, _END = "# ---- BEGIN CONFIG ----", "# ----- END CONFIG -----"


@dataclass(frozen=True)
class Enroot:
    path: str
    version: str
    config: Mapping[str, str]
    """The effective values of CONFIG_KEYS ('' where unset, or set to a false value, as enroot treats it)."""

    @property
    def allow_http(self) -> bool:
        return bool(self.config.get("ENROOT_ALLOW_HTTP"))


def find() -> Enroot:
    """The enroot on PATH, or one usage line."""
    path = shutil.which("enroot")
    if path is None:
        raise UsageError("enroot: not found on PATH (install enroot, github.com/NVIDIA/enroot; its bin/ on PATH)")
    p = subprocess.run([path, "version"], capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        raise UsageError(f"{path} version: {last_words(p.stderr or p.stdout)}")
    return Enroot(path, p.stdout.strip(), effective_config(path))


def effective_config(path: str) -> dict[str, str]:
    """CONFIG_KEYS as enroot sees them, by running the configuration section of its own script."""
    text = Path(path).read_text(errors="replace")
    if _BEGIN not in text or _END not in text:
        return {k: os.environ.get(k, "") for k in CONFIG_KEYS}
    section = text[text.index(_BEGIN): text.index(_END)]
    script = section + "\n" + "".join(f'printf "%s\\0" "${{{k}-}}"\n' for k in CONFIG_KEYS)
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
    values = p.stdout.split("\0")
    return {k: (values[i] if i < len(values) else "") for i, k in enumerate(CONFIG_KEYS)}


def last_words(text: str) -> str:
    """enroot's own error lines ('[ERROR] ...', curl's and mksquashfs's), joined; else its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    said = [ln for ln in lines if ln.startswith(("[ERROR]", "curl:", "FATAL", "Write failed", "mksquashfs:"))
            or "No space left" in ln or "error" in ln.lower()]
    return "; ".join(dict.fromkeys(said[-3:] or lines[-1:])) or "no output"


def digest(e: Enroot, uri: str) -> str:
    """`enroot digest URI`: the registry's digest of the manifest a tag names."""
    p = subprocess.run([e.path, "digest", uri], capture_output=True, text=True, timeout=300)
    out = p.stdout.strip().splitlines()
    if p.returncode != 0 or not out or not out[-1].startswith("sha256:"):
        raise ImageError(f"enroot digest {uri}: {last_words(p.stderr or p.stdout)}")
    return out[-1].strip()


def run_import(e: Enroot, uri: str, out: Path, epoch: int, extra: Mapping[str, str]) -> None:
    """`enroot import -o OUT URI` with SOURCE_DATE_EPOCH (same image, same bytes) and `extra` in its environment
    (ENROOT_CACHE_PATH: enroot's environment overrides its enroot.conf), in its own process group so an
    interruption stops all of it; a failure is one ImageError in enroot's words (OUT removed)."""
    env = dict(os.environ, SOURCE_DATE_EPOCH=str(epoch), **extra)
    proc = subprocess.Popen([e.path, "import", "-o", str(out), uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    try:
        _, err = proc.communicate()
    except BaseException:
        stop(proc)
        out.unlink(missing_ok=True)
        raise
    if proc.returncode != 0:
        out.unlink(missing_ok=True)
        raise ImageError(f"enroot import {uri} failed (exit {proc.returncode}): {last_words(err)}")


def stop(proc: subprocess.Popen[str]) -> None:
    """SIGTERM to enroot's process group (its EXIT trap removes its temporary folder), SIGKILL after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
            proc.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
