"""Real parts for the image tests: the local OCI registry (scripts/local-registry.sh) and enroot built from
../shared/thirdparty by scripts/local-pyxis.sh, configured for plain HTTP from 127.0.0.1 (ENROOT_ALLOW_HTTP in
its enroot.conf).  Each is skipped with its script's own one-line reason where it cannot be had here."""

from __future__ import annotations

import contextlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

from conftest import BASH, REPO

REGISTRY_SCRIPT = REPO / "scripts" / "local-registry.sh"
THIRDPARTY = REPO.parent / "shared" / "thirdparty"
ENROOT_PREFIX = Path(os.environ.get("TRAINREADY_TEST_ENROOT", "/var/tmp/trainready-image-enroot"))


@dataclass(frozen=True)
class Registry:
    port: int
    refs: dict[str, str]  # small / other / big -> "trainready/NAME:v1@sha256:..."

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def pinned(self, name: str) -> str:
        """REGISTRY#IMAGE@DIGEST (no tag)."""
        repo_tag, digest = self.refs[name].split("@")
        return f"{self.host}#{repo_tag.split(':')[0]}@{digest}"

    @property
    def state(self) -> Path:
        return Path(f"/tmp/trainready-registry-{self.port}")

    def pid(self) -> int:
        return int((self.state / "registry.pid").read_text())


def registry_script(action: str, port: int, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([BASH, str(REGISTRY_SCRIPT), action, "--port", str(port), *extra], capture_output=True,
                          text=True, timeout=300)


def worker_port(base: int) -> int:
    """A port of this test process's own: pytest-xdist spreads one module's tests over its workers (gw0, gw1, ...),
    and a registry shared by two of them would be stopped under one by the other's test or its fixture's end."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    return base + 20 * (int(worker) if worker.isdigit() else 0)


@contextlib.contextmanager
def registry_up(base_port: int, big_mib: int = 0) -> Iterator[Registry]:
    """The local registry on this worker's own port for the `with` block (skipped with its 'cannot start' line),
    taken down after it however the block ends (a skip, a failure), unless it was up before: a test leaves the
    host as it found it."""
    port = worker_port(base_port)
    was_up = registry_script("status", port).returncode == 0
    try:
        p = registry_script("up", port, *(["--big", str(big_mib)] if big_mib else []))
        if p.returncode == 3:
            pytest.skip(p.stdout.strip().splitlines()[-1])
        assert p.returncode == 0, p.stdout + p.stderr
        yield Registry(port, {line.split("/", 1)[1].split(":", 1)[0]: line for line in p.stdout.split()})
    finally:
        if not was_up:
            registry_script("down", port)


def registry_session(base_port: int, big_mib: int = 0) -> Iterator[Registry]:
    """Generator behind a module's registry fixture (registry_up): down after, also when the generator is closed
    before its end (a fixture's skip between its yield and its teardown)."""
    with registry_up(base_port, big_mib) as reg:
        yield reg


def enroot_env() -> dict[str, str]:
    """enroot built from ../shared/thirdparty (reused while its sources are the same), its enroot.conf written with
    private paths under its prefix and ENROOT_ALLOW_HTTP (the same text from every test module); returns the
    environment (PATH) that runs it."""
    p = subprocess.run([BASH, str(REPO / "scripts" / "local-pyxis.sh"), "build", str(THIRDPARTY), str(ENROOT_PREFIX)],
                       capture_output=True, text=True, timeout=900)
    if p.returncode == 3:
        pytest.skip(p.stdout.strip().splitlines()[-1])
    assert p.returncode == 0, p.stdout + p.stderr
    state = ENROOT_PREFIX / "state"
    for sub in ("cache", "tmp", "config", "data", "runtime"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    conf = "".join(f"ENROOT_{k.upper()}_PATH {state / k}\n" for k in ("cache", "data", "runtime", "config"))
    conf += f"ENROOT_TEMP_PATH {state / 'tmp'}\nENROOT_ALLOW_HTTP yes\nENROOT_SQUASH_OPTIONS -noI -noD -noF -noX -no-duplicates\n"
    path = ENROOT_PREFIX / "etc" / "enroot" / "enroot.conf"
    if not path.is_file() or path.read_text() != conf:
        path.write_text(conf)
    return {"PATH": f"{ENROOT_PREFIX / 'bin'}{os.pathsep}{os.environ['PATH']}"}
