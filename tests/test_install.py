"""Installing trainready into an image changes nothing that is already installed.

A fresh venv (no system site packages) gets torch 2.13.0 and the OLDEST numpy, click, typer and rich that
pyproject.toml allows (README "Installing into a training image").  Then, offline, from a cached wheel dir:

1. planted: a copy of the source whose pyproject asks for rich >= 13.9 — pip's own resolver (``--dry-run
   --report``) would replace rich 13.0.0, and `changes` names it;
2. the real source: ``pip install`` it; the whole ``pip freeze`` before is still there after, byte for byte,
   and only trainready and its missing dependencies (nvidia-ml-py) were added; the CLI runs.

The wheel dir is ``.pytest_cache/d/install-wheels`` (downloaded once with ``pip download``, reused after;
the test skips, saying why, when it is missing and cannot be downloaded); the venv is removed afterwards.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[1]
TORCH = "torch==2.13.0"
CLICK_FLOOR = "8.0.0"  # typer 0.12.0 requires click >= 8.0.0 (trainready does not import click)
PLANTED_RICH = "13.9.4"
ADDED_OK = {"trainready", "nvidia-ml-py", "tomli"}  # what installing trainready may add (tomli: Python < 3.11)


def floors() -> dict[str, str]:
    """The lower bounds pyproject.toml declares for numpy, typer and rich (+ click, typer's)."""
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    out = {"click": CLICK_FLOOR}
    for d in deps:
        m = re.fullmatch(r"(numpy|typer|rich)>=([0-9.]+)", d.replace(" ", ""))
        if m:
            out[m.group(1)] = m.group(2)
    assert set(out) == {"numpy", "click", "typer", "rich"}, f"pyproject lower bounds changed: {deps}"
    return out


def _run(*cmd: str | Path, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout)
    if check:
        assert r.returncode == 0, f"{cmd}: exit {r.returncode}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
    return r


def _local_torch_dirs() -> list[str]:
    """find-links directories (pip config/env) that already hold a torch wheel: used as is, never copied."""
    dirs = os.environ.get("PIP_FIND_LINKS", "").split() + ["/opt/wheels"]
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d) and any(Path(d).glob("torch-*.whl"))]


@pytest.fixture(scope="session")
def wheel_cache(request: pytest.FixtureRequest) -> Path:
    cache = Path(request.config.cache.mkdir("install-wheels"))
    sets = [[TORCH, *(f"{n}=={v}" for n, v in floors().items()), "nvidia-ml-py>=12.535", "tomli>=2.0"],
            [f"rich=={PLANTED_RICH}"], ["setuptools>=68", "wheel"]]  # separate: the two richs conflict
    with open(cache / ".lock", "w") as lock:  # pytest-xdist: one worker fills the cache, the others wait for it
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _fill(cache, sets)


def _fill(cache: Path, sets: list[list[str]]) -> Path:
    stamp = cache / "requirements.txt"
    if stamp.exists() and stamp.read_text() == repr(sets):
        return cache
    for wanted in sets:
        r = _run(sys.executable, "-m", "pip", "download", "-q", "-d", cache, *wanted, timeout=1200, check=False)
        if r.returncode != 0:
            pytest.skip(f"no cached wheels in {cache} and `pip download {' '.join(wanted)}` failed: "
                        f"{r.stderr.strip()[-300:]}")
    if _local_torch_dirs():
        for w in cache.glob("torch-*.whl"):
            w.unlink()  # a local torch wheel exists: do not keep a second copy (~200 MB)
    stamp.write_text(repr(sets))
    return cache


def freeze(py: Path) -> list[str]:
    return sorted(_run(py, "-m", "pip", "freeze", "--all").stdout.splitlines())


def _name(line: str) -> str:
    return re.split(r"==| @ ", line, maxsplit=1)[0].strip().lower().replace("_", "-")


def changes(before: list[str], after: list[str]) -> list[str]:
    """Installed packages whose freeze line changed or vanished: 'rich==13.0.0 -> rich==13.9.4'."""
    now = {_name(x): x for x in after}
    return [f"{x} -> {now.get(_name(x), 'removed')}" for x in before if x not in after]


def dry_run_changes(py: Path, before: list[str], offline: list[str], src: Path, tmp: Path) -> list[str]:
    """What `pip install src` WOULD replace, from pip's own resolver (--dry-run --report), changing nothing."""
    report = tmp / "report.json"
    _run(py, "-m", "pip", "install", "-q", "--dry-run", "--report", report, *offline, src)
    would = {_name(f"{i['metadata']['name']}=={i['metadata']['version']}"): f"{i['metadata']['name']}=={i['metadata']['version']}"
             for i in json.loads(report.read_text())["install"]}
    return [f"{x} -> {would[_name(x)]}" for x in before if _name(x) in would]


def test_changes_names_an_upgrade_and_a_removal():
    before = ["numpy==1.24.0", "rich==13.0.0", "torch==2.13.0+cpu"]
    assert changes(before, ["numpy==1.24.0", "rich==13.9.4", "torch==2.13.0+cpu", "trainready==0.1.0"]) == [
        "rich==13.0.0 -> rich==13.9.4"]
    assert changes(before, ["numpy==1.24.0", "torch==2.13.0+cpu"]) == ["rich==13.0.0 -> removed"]
    assert changes(before, before + ["trainready==0.1.0"]) == []


def _copy_source(dest: Path, rich_floor: str | None = None) -> Path:
    shutil.copytree(REPO, dest, ignore=shutil.ignore_patterns(".git", ".venv", "venv", "build", "*.egg-info",
                                                             "__pycache__", "tests", ".pytest_cache", "benchmarks"))
    if rich_floor:
        pp = dest / "pyproject.toml"
        pp.write_text(re.sub(r'"rich>=[0-9.]+"', f'"rich>={rich_floor}"', pp.read_text()))
    return dest


@pytest.mark.slow
def test_pip_install_changes_no_installed_package(tmp_path: Path, wheel_cache: Path) -> None:
    try:
        venv = tmp_path / "venv"
        _run(sys.executable, "-m", "venv", venv)
        py = venv / "bin" / "python"
        offline = ["--no-index", "--find-links", str(wheel_cache)]
        for d in _local_torch_dirs():
            offline += ["--find-links", d]
        _run(py, "-m", "pip", "install", "-q", *offline, TORCH, *(f"{n}=={v}" for n, v in floors().items()))
        before = freeze(py)
        assert {"numpy", "click", "typer", "rich", "torch"} <= {_name(x) for x in before}

        planted = dry_run_changes(py, before, offline, _copy_source(tmp_path / "planted", PLANTED_RICH), tmp_path)
        assert planted == [f"rich=={floors()['rich']} -> rich=={PLANTED_RICH}"]  # the check sees a replacement
        assert freeze(py) == before  # and the dry run changed nothing

        src = _copy_source(tmp_path / "src")
        assert dry_run_changes(py, before, offline, src, tmp_path) == []
        log = _run(py, "-m", "pip", "install", *offline, src).stdout
        after = freeze(py)
        assert changes(before, after) == [], log[-3000:]
        assert {_name(x) for x in after} - {_name(x) for x in before} <= ADDED_OK
        assert "Uninstalling" not in log
        helptext = _run(venv / "bin" / "trainready", "--help").stdout
        assert "env" in helptext and "node" in helptext
        bad = _run(venv / "bin" / "trainready", "node", "--bogus", check=False)
        assert bad.returncode == 2 and "No such option" in bad.stderr and "Traceback" not in bad.stderr
    finally:
        shutil.rmtree(tmp_path, ignore_errors=True)  # ~1 GB of venv: never left under pytest's basetemp
