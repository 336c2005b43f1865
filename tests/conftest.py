"""Shared test helpers."""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest

# No thread settings in the environment: the CLI runs, ranks and Slurm tasks that tests start run the program a
# user runs, in the user's environment (the ranks' threads and OpenMP wait policy are the launcher's own:
# ranks/launch.py, ranks/omp.py).  A test that needs other settings passes them to what it starts, saying why.

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src"


def _has_gpu() -> bool:
    try:
        import torch

        return bool(torch.cuda.is_available())
    except Exception:  # noqa: BLE001
        return False


HAS_GPU = _has_gpu()


def _share_the_cores() -> None:
    """This test process's own intra-op threads (not its environment: what it starts is unaffected): xdist's
    workers share the cores as a launch's ranks do, so each gets its share as a rank does (ranks/launch.py):
    one thread each for -n 2 or -n 4 on 2 cores.  With torch's default of one per core, 8 in-process modules
    (train_step, matmul, evidence, ...) at -n 2 took 60 CPU s instead of 48 (2-core x86 VM, other work on it),
    the threads waiting on one another's cores.  A serial run keeps torch's default."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        import torch

        from trainready.devices.world import usable_cores

        torch.set_num_threads(max(1, usable_cores() // workers))


_share_the_cores()


def _preload_resume_ranks() -> None:
    """This test process's own forkserver (started by the first in-process launch) also imports the resume ranks'
    module: one test process runs comm, collective and resume ranks in any order, where a CLI run knows its checks
    before its first launch (commands/node.py)."""
    from trainready.ranks.forkserver import RESUME_RANKS, mp_context

    mp_context((RESUME_RANKS,))


_preload_resume_ranks()

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist's workers start with COLUMNS=80 LINES=24 (execnet); a serial run has neither, so rich
    # output (and run_cli's COLUMNS=160 default) would differ between the two: keep the serial run's view.
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)
# For tests that assert what happens on a machine WITHOUT GPUs (CI's machine).
cpu_machine_only = pytest.mark.skipif(HAS_GPU, reason="asserts the behaviour of a machine without GPUs")


_zygote: Any = None  # this test process's Zygote, started by the first run_cli


def _cli_zygote() -> Any:
    """One interpreter per test process with torch and the CLI imported, that forks every run_cli command
    (trainready.selftest.zygote, as the self-test runs its commands): each command is still its own process with
    its own environment, files and exit status, running `python -m trainready ARGS`, but `import torch` (~1.8 CPU
    s on a 2-core x86 VM) is paid once per test process instead of once per command."""
    global _zygote
    if _zygote is None:
        from trainready.selftest.zygote import Zygote

        _zygote = Zygote({**os.environ, "PYTHONPATH": str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", "")}, REPO)
        atexit.register(_zygote.close)
    return _zygote


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run `python -m trainready ARGS` as its own process (the real CLI, real exit codes), forked from this test
    process's zygote; TRAINREADY_TEST_FRESH_CLI=1: a new interpreter for each instead."""
    e = dict(os.environ)
    e["PYTHONPATH"] = str(SRC) + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("COLUMNS", "160")
    if env:
        e.update(env)
    argv = [sys.executable, "-m", "trainready", *args]
    if os.environ.get("TRAINREADY_TEST_FRESH_CLI") == "1":
        return subprocess.run(argv, capture_output=True, text=True, env=e, timeout=timeout)
    with tempfile.TemporaryDirectory(prefix="run-cli-") as d:
        out, err = Path(d) / "out", Path(d) / "err"
        rc = _cli_zygote().run(list(args), e, Path.cwd(), out, err, timeout)
        if rc is None:
            raise subprocess.TimeoutExpired(argv, timeout, out.read_bytes(), err.read_bytes())
        return subprocess.CompletedProcess(argv, rc, out.read_text(errors="replace"), err.read_text(errors="replace"))


def undrain(*nodes: str) -> None:
    """`scontrol update state=resume` for each node (a node already in service: nothing to do), then the wait
    `cluster resume` does (fleet.settle, <= 30 s) until slurmctld has heard from them all: right after
    state=resume a node shows 'idle*' (not responding) for a moment, and the next test's run would rightly call
    it not tested."""
    from trainready.cluster.fleet import settle

    for n in nodes:
        subprocess.run(["scontrol", "update", f"nodename={n}", "state=resume"], capture_output=True, check=False)
    settle(nodes, lambda line: None)


SCRATCH = "trainready-*"  # what commands/common.workdir and spec init --measure create in TMPDIR


@pytest.fixture(scope="session", autouse=True)
def private_tmpdir(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """TMPDIR for the whole session, for this process and every CLI subprocess: a private folder under
    pytest's basetemp (which pytest rotates), emptied at the end, so a test run leaves nothing in the
    user's TMPDIR."""
    old_env, old_cached = os.environ.get("TMPDIR"), tempfile.tempdir
    d = tmp_path_factory.mktemp("TMPDIR", numbered=True)
    os.environ["TMPDIR"] = str(d)
    tempfile.tempdir = None  # gettempdir() re-reads TMPDIR
    yield d
    if old_env is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = old_env
    tempfile.tempdir = old_cached
    for p in d.iterdir():  # multiprocessing removes its own pymp-* folder at exit (it fails if it is gone)
        if not p.name.startswith("pymp-"):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() and not p.is_symlink() else p.unlink(missing_ok=True)


PACKAGE_TOOLS = ("apt-get", "apt", "aptitude")  # what would change the host's system packages
REFUSE = """#!/bin/sh
echo "trainready tests: refused '${0##*/} $*': the test suite installs no system packages" >&2
exit 100
"""


@pytest.fixture(scope="session", autouse=True)
def no_package_installs(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """For the whole session (this process and every subprocess), apt-get/apt/aptitude on PATH are stand-ins
    that refuse and exit 100: a test that tries to install a system package fails, naming the call,
    instead of changing the host."""
    d = tmp_path_factory.mktemp("no-package-installs")
    for name in PACKAGE_TOOLS:
        (d / name).write_text(REFUSE)
        (d / name).chmod(0o755)
    old = os.environ.get("PATH", "")
    os.environ["PATH"] = f"{d}{os.pathsep}{old}"
    yield d
    os.environ["PATH"] = old


@pytest.fixture(autouse=True)
def no_scratch_left_behind(private_tmpdir: Path, request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """A test that leaves a trainready scratch folder in TMPDIR errors at teardown, naming it (then it is removed)."""
    before = set(private_tmpdir.glob(SCRATCH))
    yield
    left = sorted(set(private_tmpdir.glob(SCRATCH)) - before)
    if left:
        kept = "; ".join(f"{p.name} ({', '.join(sorted(c.name for c in p.iterdir())) or 'empty'})" for p in left)
        for p in left:
            shutil.rmtree(p, ignore_errors=True)
        pytest.fail(f"{request.node.nodeid} left trainready scratch folders in TMPDIR: {kept}", pytrace=False)


@pytest.fixture
def cli():
    return run_cli


def trained_cpu(steps: int, batch: int = 4, seq: int = 64):  # type: ignore[no-untyped-def]
    """A CPU Trainer after `steps` optimizer steps on seeded random tokens [batch, seq] (vocab 512)."""
    import numpy as np
    import torch

    from trainready.workload.loop import TrainConfig, Trainer

    tr = Trainer(TrainConfig(steps=20), torch.device("cpu"), 1, 0)
    rs = np.random.RandomState(0)
    for _ in range(steps):
        x = rs.randint(0, 512, (batch, seq)).astype(np.int64)
        tr.step(x, x)
    return tr


def params(tr) -> dict:  # type: ignore[no-untyped-def, type-arg]
    """A detached copy of the model's state dict (name -> tensor)."""
    return {k: v.clone() for k, v in tr.model.state_dict().items()}


SLURM_SCRIPT = REPO / "scripts" / "local-slurm.sh"
BASH = shutil.which("bash") or "/bin/bash"
NO_INSTALL = {"LOCAL_SLURM_NO_INSTALL": "1"}  # scripts/local-slurm.sh: install no package, say what is missing


def local_slurm_script(action: str, *options: str, env: dict[str, str] | None = None,
                       timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`scripts/local-slurm.sh ACTION` as the tests run it: with package installs forbidden
    (LOCAL_SLURM_NO_INSTALL=1), so a test run never changes the host's packages; where slurm-wlm or
    munge is missing, `up` says so in one 'cannot start' line (exit 3)."""
    e = {**os.environ, **(env or {}), **NO_INSTALL}
    return subprocess.run([BASH, str(SLURM_SCRIPT), action, *options], capture_output=True, text=True, env=e,
                          timeout=timeout)


def _cluster_up(*options: str) -> bool:
    """`scripts/local-slurm.sh up OPTIONS`, skipped with the script's own one-line reason when it cannot start
    here (not root, slurm-wlm/munge not installed: the tests install no system packages, .ci/run installs them
    first); whether the cluster was up before."""
    cluster = options[options.index("--cluster"):options.index("--cluster") + 2] if "--cluster" in options else ()
    was_up = local_slurm_script("status", *cluster, timeout=60).returncode == 0
    p = local_slurm_script("up", *options)
    line = (p.stdout.strip() or p.stderr.strip() or f"exit {p.returncode}").splitlines()[-1]
    if p.returncode == 3:  # "local-slurm: cannot start: <what is missing>"
        pytest.skip(line)
    assert p.returncode == 0, f"scripts/local-slurm.sh up {' '.join(options)} failed: {(p.stdout + p.stderr)[-2000:]}"
    return was_up


def cluster_session(*cluster: str):  # type: ignore[no-untyped-def]
    """Generator behind the 3-node cluster fixtures: `scripts/local-slurm.sh up` (with `cluster`, e.g.
    "--cluster", "alt"); yields the 3 node names; taken down afterwards only if this session brought it up."""
    was_up = _cluster_up(*cluster)
    prefix = cluster[-1] if cluster else "node"
    yield [f"{prefix}1", f"{prefix}2", f"{prefix}3"]
    if not was_up:
        local_slurm_script("down", *cluster, timeout=120)


def own_cluster(name: str, *options: str, nodes: list[str] | None = None,
                after: Callable[[], object] | None = None):  # type: ignore[no-untyped-def]
    """Generator behind a module's fixture for a local cluster of its own (`scripts/local-slurm.sh up --cluster
    NAME OPTIONS`, own slurmctld and nodes): every Slurm command of the module reaches it through SLURM_CONF
    (slurm.conf(5)) while the module runs; yields `nodes` (default NAME1..NAME3); `after` (e.g. undrain the
    nodes) runs before the module's end; taken down only if this module brought it up."""
    was_up = _cluster_up("--cluster", name, *options)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURM_CONF", f"/etc/slurm-{name}/slurm.conf")
        yield nodes if nodes is not None else [f"{name}{k}" for k in (1, 2, 3)]
        if after is not None:
            after()
    if not was_up:
        local_slurm_script("down", "--cluster", name, timeout=120)


@pytest.fixture(scope="session")
def local_slurm():  # type: ignore[no-untyped-def]
    """The local 3-node Slurm cluster (scripts/local-slurm.sh: node1..node3), up for the session."""
    yield from cluster_session()


ALT = "alt"  # scripts/local-slurm.sh --cluster alt: a second 3-node cluster (own slurmctld, nodes alt1..alt3)


@pytest.fixture(scope="session")
def _alt_cluster():  # type: ignore[no-untyped-def]
    """The second local 3-node cluster, up for the session."""
    yield from cluster_session("--cluster", ALT)


@pytest.fixture
def alt_slurm(_alt_cluster, monkeypatch):  # type: ignore[no-untyped-def]
    """The second local cluster's nodes, with every Slurm command of this test (its own, the CLI runs it
    starts, their jobs) pointed at that cluster: SLURM_CONF (slurm.conf(5)) for this test only."""
    monkeypatch.setenv("SLURM_CONF", f"/etc/slurm-{ALT}/slurm.conf")
    return _alt_cluster


# Test modules that use the local Slurm cluster (the `local_slurm` fixture).  Under pytest-xdist (`-n N`, the
# README's test command) they run in ONE worker, one after the other: one cluster brought up once, and no
# test drains, plants or scancels nodes under another's jobs.  (xdist's own `--dist loadgroup` cannot do it
# with pytest >= 9: it tags node ids through a private attribute pytest no longer reads.)  Collection stops
# on a test of any other module that uses the fixture, so this list cannot silently fall behind.
SLURM_MODULES = ("test_cluster_cli.py", "test_cluster_e2e.py", "test_cluster_fleet_slurm.py")
# The same, for the second 3-node cluster (`alt_slurm`): a second chain in another worker, beside the first
# (most of a Slurm test's time is waiting on Slurm, ranks and deadlines, not computing).
ALT_MODULES = ("test_cluster_gate.py", "test_fleet_history.py", "test_report_html.py", "test_cluster_fingerprint.py")
# Modules with a local cluster of their own (scripts/local-slurm.sh --cluster NAME, its own slurmctld and
# nodes): one scope each, so they run beside the 3-node chains in another worker.
OWN_CLUSTER_MODULES = ("test_cluster_scale.py", "test_cluster_hostset.py", "test_cluster_site.py", "test_cluster_outage.py",
                       "test_image_distribute.py",
                       "test_cluster_pyxis.py", "test_cluster_sweep.py", "test_cluster_topology.py",
                       "test_cluster_accounting.py", "test_local_slurm_down.py", "test_cluster_fabric_pairs.py",
                       "test_accuracy_campaign.py")


def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """xdist's load-scope scheduler with one scope for every test of SLURM_MODULES, one per module of
    OWN_CLUSTER_MODULES and one per test elsewhere (the largest scope is handed out first, so the Slurm
    chain starts at once, the 64-node cluster next)."""
    from xdist.scheduler import LoadScopeScheduling

    class SlurmTogether(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0].rsplit("/", 1)[-1]
            if module in SLURM_MODULES:
                return "local-slurm"
            if module in ALT_MODULES:
                return "alt-slurm"
            return module if module in OWN_CLUSTER_MODULES else nodeid

    return SlurmTogether(config, log)


REAL_CLUSTER_MODULES = SLURM_MODULES + ALT_MODULES + OWN_CLUSTER_MODULES


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:  # the fast lane, `-m "not real_cluster"`, leaves out every module that starts a Slurm cluster
        if item.path.name in REAL_CLUSTER_MODULES:
            item.add_marker(pytest.mark.real_cluster)
    for fixture, modules, name in (("local_slurm", SLURM_MODULES, "SLURM_MODULES"), ("alt_slurm", ALT_MODULES, "ALT_MODULES")):
        stray = sorted({i.path.name for i in items if fixture in getattr(i, "fixturenames", ())} - set(modules))
        if stray:
            raise pytest.UsageError(f"{', '.join(stray)} use(s) the {fixture} fixture: add to {name} in "
                                    "tests/conftest.py (their tests must run in the xdist worker that owns the cluster)")
