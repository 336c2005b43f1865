"""The self-test's zygote (selftest/zygote.py): every command a fork with its own exit status, output files,
environment and working directory, several at once; one that runs past its limit is killed with its process
group; the forks do not share random state."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest

from conftest import SRC
from trainready.selftest.zygote import Zygote


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):  # type: ignore[no-untyped-def]
    mods = tmp_path_factory.mktemp("zygote-modules")  # on the server's path: a module that prints two draws
    (mods / "zygote_draw.py").write_text("import random\nimport numpy\nprint(random.random(), numpy.random.rand())\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(SRC), str(mods)))}
    z = Zygote(env, tmp_path_factory.mktemp("zygote"))
    yield z
    z.close()


def run(z: Zygote, tmp: Path, name: str, argv: list[str], env: dict[str, str] | None = None,
        timeout_s: float = 120.0, module: str = "trainready") -> tuple[int | None, str, str]:
    out, err = tmp / f"{name}.out", tmp / f"{name}.err"
    rc = z.run(argv, {**os.environ, "PYTHONPATH": str(SRC), **(env or {})}, tmp, out, err, timeout_s, module)
    return rc, out.read_text(), err.read_text()


@pytest.mark.slow
def test_each_fork_has_its_own_exit_code_output_cwd_and_environment(zygote, tmp_path) -> None:  # type: ignore[no-untyped-def]
    got: dict[str, tuple[int | None, str, str]] = {}
    spec = tmp_path / "bad.toml"
    spec.write_text("[gpu]\ncount = 'eight'\n")
    jobs = {"list": ["node", "--list"], "bad": ["node", "--spec", str(spec)],
            "rec": ["node", "--only", "versions", "--json", "rec.json"]}
    threads = [threading.Thread(target=lambda k=k, a=a: got.__setitem__(k, run(zygote, tmp_path, k, a)))
               for k, a in jobs.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got["bad"][0] == 2 and "gpu.count" in got["bad"][2] and "Traceback" not in got["bad"][2]
    assert got["list"][0] == 0 and "allreduce" in got["list"][1] and got["list"][2] == ""
    assert got["rec"][0] == 0 and json.loads((tmp_path / "rec.json").read_text())["results"]  # in its own cwd
    rc, out, _ = run(zygote, tmp_path, "home", ["spec", "show", "example:cpu-default"], env={"NO_COLOR": "1"})
    assert rc == 0 and "\x1b[" not in out


@pytest.mark.slow
def test_a_fork_past_its_limit_is_killed_with_its_group(zygote, tmp_path) -> None:  # type: ignore[no-untyped-def]
    argv = ["cluster", "node-task", "--results", str(tmp_path), "--plant", "cluster.hang=zy1"]
    pids: list[int] = []
    real = zygote._wait

    def spy(rid: str, key: str, timeout_s: float | None):  # type: ignore[no-untyped-def]
        v = real(rid, key, timeout_s)
        if key == "pid" and v is not None:
            pids.append(v)
        return v

    zygote._wait = spy  # type: ignore[method-assign]
    try:
        rc, _, _ = run(zygote, tmp_path, "hang", argv, env={"SLURMD_NODENAME": "zy1"}, timeout_s=8.0)
    finally:
        zygote._wait = real  # type: ignore[method-assign]
    assert rc is None and len(pids) == 1
    assert (tmp_path / "nodes" / "zy1.progress.json").is_file()  # it did run, then hung in its planted stop
    with pytest.raises(ProcessLookupError):
        os.killpg(pids[0], 0)  # no process of its group is left


@pytest.mark.slow
def test_forks_draw_different_random_numbers(zygote, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Without re-seeding, every fork would inherit the server's generator state: the same numpy draws (Python's
    `random`, from which the cross-node step draws MASTER_PORT, re-seeds itself at fork).  Two forks of a module
    that prints one draw of each must differ (the numpy draws were equal before the zygote re-seeded numpy)."""
    draws = []
    for k in range(2):
        rc, out, err = run(zygote, tmp_path, f"draw{k}", [], module="zygote_draw")
        assert rc == 0, err
        draws.append(out.split())
    assert len(draws[0]) == 2 and draws[0][0] != draws[1][0] and draws[0][1] != draws[1][1]
