"""The test suite cleans up after itself: TMPDIR is a private folder for the session, and a test that leaves
a trainready scratch folder there errors at teardown (tests/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import REPO

PLANT = "TRAINREADY_TEST_PLANT_SCRATCH_LEAK"


@pytest.mark.skipif(not os.environ.get(PLANT), reason="planted leak: run only by the test below")
def test_planted_leak() -> None:
    tempfile.mkdtemp(prefix="trainready-")  # what a node/resume run that kept its scratch folder leaves


@pytest.mark.slow
def test_a_leaked_scratch_folder_fails_its_test(tmp_path: Path) -> None:
    outer = tmp_path / "outer-tmp"
    outer.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), TMPDIR=str(outer), **{PLANT: "1"})
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--basetemp",
                        str(tmp_path / "base"), f"{Path(__file__).name}::test_planted_leak"],
                       cwd=REPO / "tests", env=env, capture_output=True, text=True, timeout=300)
    out = p.stdout + p.stderr
    assert p.returncode != 0, out
    assert "test_planted_leak left trainready scratch folders in TMPDIR: trainready-" in out and "(empty)" in out
    assert not list(outer.iterdir()), list(outer.iterdir())  # nothing reached the outer TMPDIR
    assert not list((tmp_path / "base").glob("TMPDIR*/trainready-*"))  # and the planted folder was removed


def test_tmpdir_is_private_for_the_session(private_tmpdir: Path) -> None:
    assert os.environ["TMPDIR"] == str(private_tmpdir) and tempfile.gettempdir() == str(private_tmpdir)
