"""The test suite leaves the host's system packages alone: the browser tests use a Chromium already
installed (else skip, saying why), the Slurm fixture runs scripts/local-slurm.sh with installs forbidden,
and apt-get/apt/aptitude refuse for the whole session (tests/conftest.py)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import BASH, PACKAGE_TOOLS, REPO, SLURM_SCRIPT, local_slurm_script

RECORD = """#!/bin/sh
echo "${{0##*/}} $*" >> "{log}"
exit 1
"""


def _bare_path(tmp: Path) -> tuple[Path, Path]:
    """A PATH folder with no Slurm, no munge, no Chromium: `id` says root, `hostname` is the real one, and
    apt-get only writes its arguments to a log (and fails).  (folder, log)"""
    bin_, log = tmp / "bin", tmp / "apt-calls.log"
    bin_.mkdir()
    (bin_ / "apt-get").write_text(RECORD.format(log=log))
    (bin_ / "id").write_text("#!/bin/sh\necho 0\n")
    for f in ("apt-get", "id"):
        (bin_ / f).chmod(0o755)
    (bin_ / "hostname").symlink_to(shutil.which("hostname") or "/bin/hostname")
    return bin_, log


def test_local_slurm_up_installs_nothing_for_the_tests(tmp_path: Path) -> None:
    bin_, log = _bare_path(tmp_path)
    env = {**os.environ, "PATH": str(bin_)}
    env.pop("LOCAL_SLURM_NO_INSTALL", None)
    # The script as a person runs it: Slurm missing, so it goes to apt-get (the recorder sees it; its failure
    # stops the script there) ...
    p = subprocess.run([BASH, str(SLURM_SCRIPT), "up"], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 3 and log.read_text() == "apt-get update -qq\n", (p.stdout, p.stderr)
    log.unlink()
    # ... and as the tests' fixture runs it: one line naming what is missing, exit 3 (the tests skip), no apt-get.
    p = local_slurm_script("up", env={"PATH": str(bin_)}, timeout=60)
    assert p.returncode == 3, (p.stdout, p.stderr)
    assert p.stdout.strip().splitlines() == [
        "local-slurm: cannot start: missing slurmctld slurmd sbatch munged and LOCAL_SLURM_NO_INSTALL=1 "
        "(installs nothing): apt-get install slurm-wlm munge first"]
    assert not log.exists(), log.read_text()


def test_chromium_is_never_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_report_html import _chromium

    bin_, log = _bare_path(tmp_path)
    monkeypatch.setenv("PATH", str(bin_))
    with pytest.raises(pytest.skip.Exception) as skipped:
        _chromium()
    reason = str(skipped.value)
    assert "\n" not in reason and "install no system packages" in reason and "apt-get install chromium" in reason
    assert not log.exists(), log.read_text()  # no apt-get call, not even a failed one


def test_package_tools_refuse_for_the_whole_session(no_package_installs: Path) -> None:
    for name in PACKAGE_TOOLS:
        assert shutil.which(name) == str(no_package_installs / name)  # resolved to the stand-in before running it
    p = subprocess.run(["apt-get", "install", "--simulate", "-y", "chromium"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 100
    assert p.stderr.strip() == ("trainready tests: refused 'apt-get install --simulate -y chromium': the test "
                                "suite installs no system packages")


def test_ci_installs_what_the_readme_names_then_runs_its_test_command() -> None:
    readme, ci = (REPO / "README.md").read_text(), (REPO / ".ci" / "run").read_text()
    commands = re.findall(r"```sh\n(.*?)\n\s*```", readme.split("## Two commands", 1)[1], re.S)
    assert ci.rstrip().splitlines()[-1] == commands[1].strip()  # exactly the README's test command, last
    installs = re.findall(r"need\+=\((\w[\w-]*)\)", ci)
    assert sorted(installs) == ["chromium", "munge", "slurm-wlm"], installs  # what CI opts in to, before it
    # and the Pyxis build's and test image's packages (local-slurm.sh up --pyxis, scripts/test-image.sh)
    pyxis = re.search(r"for p in ([\w -]+); do", ci)
    assert pyxis is not None and {"libslurm-dev", "debootstrap", "squashfs-tools"} <= set(pyxis.group(1).split())
    assert {"slurmdbd", "mariadb-server"} <= set(pyxis.group(1).split())  # the accounting cluster's (--accounting)
    assert "`apt-get install chromium slurm-wlm munge`" in readme and "never installs or upgrades a system" in readme
