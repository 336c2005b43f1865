"""A pair's step that failed: srun's own `srun: error:` lines say whether slurmctld did not answer, never its
tasks' output (cluster/control/outage.py `srun_silent`, cluster/pairs/search.py).  Through a stand-in `srun` on
PATH that writes what a real step writes: a gloo rank's 'Connection reset by peer' and srun's exit line (a dead
link: the pair has no result, judged as such), or srun's own 'Unable to contact slurm controller' (the pair is
run again once the controller answers)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from trainready.cluster.control import outage
from trainready.cluster.options import FleetOptions
from trainready.cluster.pairs import search
from trainready.cluster.pairs.pairing import PairingOptions

GLOO = ("[E ProcessGroupGloo.cpp:144] Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/"
        "pair.cc:144] Connection reset by peer\nsrun: error: n2: task 1: Exited with exit code 1\n")
SILENT = "srun: error: Unable to contact slurm controller (connect failure)\n"


def _srun(d: Path, text: str) -> None:
    (d / "srun").write_text(f"#!/bin/sh\ncat <<'EOT'\n{text}EOT\nexit 1\n")
    (d / "srun").chmod(0o755 | stat.S_IXUSR)


@pytest.mark.parametrize("log, unsent", [(GLOO, False), (SILENT, True)])
def test_only_sruns_own_lines_say_the_controller_is_silent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           log: str, unsent: bool):
    d = tmp_path / "bin"
    d.mkdir()
    _srun(d, log)
    monkeypatch.setenv("PATH", f"{d}:/bin:/usr/bin")
    opts = search.PairsOptions(FleetOptions(results=tmp_path, spec="example:local-slurm", time_limit="1:00"),
                               PairingOptions())
    out, again = search.run_steps(opts, {}, 1, [("n1", "n2")], lambda _s: None)
    assert again == ([("n1", "n2")] if unsent else [])
    assert (("n1", "n2") in out) is not unsent
    assert (outage.srun_silent(log) is not None) is unsent
    assert outage.silent("srun", GLOO) is not None  # the whole log's words: what read a dead link as a silent controller
