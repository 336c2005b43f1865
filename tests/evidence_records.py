"""Real CPU run records (node + comm + resume) for the evidence tests, made once per session.

Lean on purpose: node runs the quick checks (gpus, versions, matmul), comm sweeps two ops over
1K..256K on 4 gloo ranks, resume runs 10 steps with the checkpoint at 5.  Each run also writes its
--junit and --prometheus files, as a user would ask for them.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli

RUNS = {
    "node": ("node", "--only", "gpus,versions,matmul"),
    "comm": ("comm", "--ops", "all_reduce,all_gather", "-b", "1K", "-e", "256K", "-f", "4", "-w", "1", "-n", "2",
             "--world-size", "4", "--quiet"),
    "resume": ("resume", "--steps", "10", "--checkpoint-step", "5", "--batch-size", "2"),
}
_CACHE: dict[str, Path] = {}


class Ran:
    def __init__(self, returncode: int, stdout: str, stderr: str) -> None:
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


def run_main(*args: str) -> Ran:
    """The real CLI entry point (cli.main), in this process: a subprocess costs a torch import per call."""
    import contextlib
    import io

    from trainready.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as ex:
        main(list(args))
    return Ran(int(ex.value.code or 0), out.getvalue(), err.getvalue())


def make_records(factory: pytest.TempPathFactory) -> Path:
    """DIR with {node,comm,resume}.json/.xml/.prom; made on first use, shared by every test module."""
    if "dir" in _CACHE:
        return _CACHE["dir"]
    out = factory.mktemp("evidence-records")
    for name, argv in RUNS.items():
        p = run_cli(*argv, "--json", str(out / f"{name}.json"), "--junit", str(out / f"{name}.xml"),
                    "--prometheus", str(out / f"{name}.prom"), timeout=600)
        assert p.returncode in (0, 1), f"{name}: exit {p.returncode}\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}"
        assert (out / f"{name}.json").is_file()
    _CACHE["dir"] = out
    return out


@pytest.fixture(scope="session")
def cpu_records(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_records(tmp_path_factory)
