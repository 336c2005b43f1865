"""`trainready cluster`: the exact Slurm and Pyxis command lines it builds, Slurm's formats it reads, and its
usage errors (one line, exit 2, before anything is submitted)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from trainready.cluster import steps as run
from trainready.cluster.repair import ledger
from trainready.cluster.control import slurm, watch
from trainready.cluster.options import Container, FleetOptions, parse_mounts, time_seconds
from trainready.errors import UsageError
from trainready.records import Level

RES = Path("/lustre/acc/2026-12-03")


def test_pyxis_flags_and_the_batch_script_are_exact():
    c = Container("nvcr.io#nvidia/pytorch:25.01-py3", ("/lustre/data:/data:ro",))
    assert c.srun_flags(RES) == ["--container-image=nvcr.io#nvidia/pytorch:25.01-py3",
                                 "--container-mounts=/lustre/data:/data:ro,/lustre/acc/2026-12-03:/lustre/acc/2026-12-03",
                                 "--no-container-mount-home"]
    opts = FleetOptions(results=RES, count=640, partition="gpu", spec="example:h200-8x", level=Level.STANDARD,
                        time_limit="45:00", concurrency=64, container=c)
    script = run.batch_script(opts, gpus=8).splitlines()
    assert "IMAGE='nvcr.io#nvidia/pytorch:25.01-py3'" in script  # the registry reference, unchanged ('#' quoted)
    assert script[-1] == (
        "exec srun --ntasks=1 --nodes=1 --gpus-per-node=8 --cpus-per-task=\"$SLURM_CPUS_ON_NODE\" "
        "--container-image=\"$IMAGE\" "
        "--container-mounts=/lustre/data:/data:ro,/lustre/acc/2026-12-03:/lustre/acc/2026-12-03 "
        "--no-container-mount-home python3 /lustre/acc/2026-12-03/.trainready/boot.py cluster node-task "
        "--results /lustre/acc/2026-12-03 --level standard --spec example:h200-8x "
        "--image 'nvcr.io#nvidia/pytorch:25.01-py3'")  # the image's own python3 runs trainready staged on --results
    plain = FleetOptions(results=RES, level=Level.QUICK)
    assert run.task_command(plain)[:3] == [sys.executable, "-m", "trainready"]  # no image: this interpreter
    # no image: the batch step itself runs it (no srun step: two slurmctld calls fewer per node)
    assert run.batch_script(plain).splitlines()[-1] == f"exec {sys.executable} -m trainready cluster node-task " \
        "--results /lustre/acc/2026-12-03 --level quick"


def test_sbatch_and_srun_command_lines():
    assert slurm.sbatch_argv("/r/job/accept.sbatch", 640, 64, "45:00", "/r/logs/accept_%A_%a.out", "gpu",
                             gpus=8) == [
        "sbatch", "--parsable", "--hold", "--array=0-639%64", "--nodes=1", "--ntasks=1", "--exclusive", "--mem=0",
        "--time=45:00", "--job-name=trainready-accept", "--output=/r/logs/accept_%A_%a.out", "--gpus-per-node=8",
        "--partition=gpu", "/r/job/accept.sbatch"]
    assert slurm.sbatch_argv("s", 3, 64, "5:00", "o", None)[3] == "--array=0-2%3"  # %K never above N
    assert "--licenses" not in " ".join(slurm.sbatch_argv("s", 3, 64, "5:00", "o", "sweep"))
    assert slurm.sbatch_argv("s", 3, 64, "5:00", "o", "sweep", licenses="trainready_sweep:1")[-2:] == [
        "--licenses=trainready_sweep:1", "s"]  # every task holds it while it runs (the sweep's site-wide cap)
    argv = slurm.srun_argv("gpu[001-640]", 640, "45:00", "gpu", ["--container-image=img"], ["trainready", "x"],
                           tasks_per_node=8, gpus=8)
    assert argv == ["srun", "--nodes=640", "--ntasks-per-node=8", "--nodelist=gpu[001-640]", "--time=45:00",
                    "--job-name=trainready-cross", "--kill-on-bad-exit=0", "--no-kill", "--gpus-per-node=8", "--partition=gpu",
                    "--container-image=img", "trainready", "x"]


def test_slurm_formats_read():
    assert [time_seconds(t) for t in ("5", "0:30", "1:00:00", "2-3", "1-0:10", "1-0:0:5")] == \
        [300, 30, 3600, 2 * 86400 + 3 * 3600, 86400 + 600, 86400 + 5]
    with pytest.raises(UsageError, match="--time 'soon'"):
        time_seconds("soon")
    assert slurm._seconds("1-02:03:04") == 93784.0 and slurm._seconds("") == 0.0
    with pytest.raises(UsageError, match="SRC"):
        parse_mounts(["/a:/b:ro:extra"])


def test_no_result_reasons_say_what_slurm_said():
    killed = slurm.TaskState(1, "13", "FAILED", "137:0", "node2", "NonZeroExitCode")
    assert run.no_result_reason(killed, "") == \
        ("no result: killed by signal", "task 13 FAILED (exit code 137 = killed by signal 9); NonZeroExitCode")
    batch = slurm.TaskState(1, "14", "FAILED", "0:9", "node2", "NonZeroExitCode")  # the batch step's process itself
    assert run.no_result_reason(batch, "")[1] == "task 14 FAILED (exit code 0, killed by signal 9); NonZeroExitCode"
    done = slurm.TaskState(0, "12", "COMPLETED", "0:0", "node1", "None")
    assert "wrote no record" in run.no_result_reason(done, "no record at /r/nodes/node2.json")[1]
    assert "never started" in run.never_started(None)
    pending = slurm.TaskState(0, "5", "PENDING", "", "", "Resources")
    assert "never started (PENDING; Resources)" in run.never_started(pending)
    assert run.never_started(killed) == "" and run.never_started(done) == ""  # they ran: tested
    out = watch._at_deadline({0: pending, 1: slurm.TaskState(1, "6", "RUNNING", "", "node2", "None")},
                           {0: slurm.TaskState(0, "5", "CANCELLED", "", "", ""),
                            1: slurm.TaskState(1, "6", "CANCELLED", "", "node2", "")})
    assert out[0].state == "PENDING" and out[1].state == watch.OVERTIME


def test_drain_reason_has_the_prefix_and_a_bounded_length():
    r = ledger.reason_text(["check matmul: FAIL: " + "x" * 500, "drift: torch"], "run", "hardware")
    assert r.startswith("trainready:run/hw ") and ": check matmul" in r and r.endswith("(+1 more)")
    assert len(r) <= ledger.REASON_MAX
    assert slurm.NodeInfo("n", "drained", "h", "trainready: slow").ours
    assert not slurm.NodeInfo("n", "drained", "h", "admin: fan").ours


def _opts(**kw):  # type: ignore[no-untyped-def]
    from trainready.commands.cluster.options import FleetArgs

    base = dict(results="/tmp/x", level=Level.QUICK, time_limit="5:00")
    return FleetArgs(**{**base, **kw}).build()


@pytest.mark.parametrize("kw, words", [
    (dict(nodes=2, nodelist="node[1-2]"), "--nodes and --nodelist"),
    (dict(time_limit="soon"), "--time 'soon'"),
    (dict(plant=("cluster.slow=node3:fast",)), "cluster.slow=node3:fast"),
    (dict(plant=("cluster.slw=node3",)), "did you mean cluster.slow"),
    (dict(mounts=("/a:/b",)), "needs --container-image"),
    (dict(results="/no/such/dir/r"), "does not exist"),
    (dict(spec="/no/such.toml"), "/no/such.toml"),
])
def test_usage_errors_before_anything_is_submitted(kw, words):
    with pytest.raises(UsageError, match=words.replace("[", r"\[").replace("(", r"\(")):
        _opts(**kw)
    assert _opts(nodes=3).count == 3  # the same call, valid


def test_usage_error_through_the_cli_is_one_line_exit_2():
    p = run_cli("cluster", "run", "-N", "2", "-w", "node[1-2]", "--results", "/tmp/x")
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1 and "--nodes and --nodelist" in p.stderr


SUBMITTING = ("run", "resume", "pairs", "rollout")  # the cluster commands that submit Slurm jobs


def _cluster_params() -> dict[str, dict[str, str]]:
    """command -> {option flag: its help}, as click sees them (the real --help)."""
    import typer

    from trainready.cli import app

    group = typer.main.get_command(app).commands["cluster"]  # type: ignore[attr-defined]
    return {name: {p.opts[0]: p.help or "" for p in group.commands[name].params if p.opts[0].startswith("--")}
            for name in SUBMITTING}


def test_cluster_options_are_declared_once_with_one_help_text():
    params = _cluster_params()
    job = {"--results", "--partition", "--spec", "--time", "--container-image", "--container-mounts",
           "--container-mount-home", "--plant"}
    for name, opts in params.items():
        assert not job - set(opts), f"cluster {name} lacks {sorted(job - set(opts))}"
    helps: dict[str, set[str]] = {}
    for opts in params.values():
        for flag, text in opts.items():
            helps.setdefault(flag, set()).add(text)
    drifted = {flag: texts for flag, texts in helps.items() if len(texts) > 1}
    assert not drifted, drifted
    assert "example:local-slurm" in params["run"]["--spec"]  # the spec the local examples use


@pytest.fixture()
def slurm_tripwire(tmp_path):  # type: ignore[no-untyped-def]
    """PATH with every Slurm client first in line, each leaving a mark if called: 'not asked' is observed."""
    bin_dir, mark = tmp_path / "bin", tmp_path / "slurm-was-asked"
    bin_dir.mkdir()
    for tool in ("sinfo", "squeue", "sbatch", "srun", "scontrol", "sacct", "scancel"):
        (bin_dir / tool).write_text(f"#!/bin/sh\necho \"$0 $*\" >> {mark}\nexit 1\n")
        (bin_dir / tool).chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, mark


def _read_only_dir(path: Path) -> bool:
    """`path` made unwritable even for root (chattr +i on ext4), or by mode for another user; False: cannot."""
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        return True
    return shutil.which("chattr") is not None and subprocess.run(["chattr", "+i", str(path)],
                                                                  capture_output=True).returncode == 0


@pytest.mark.parametrize("where", ["read-only", "/proc/acc", "/sys/acc", "a-file"])
def test_unwritable_results_is_one_line_exit_2_before_slurm_is_asked(where, tmp_path, slurm_tripwire):
    env, mark = slurm_tripwire
    ro = tmp_path / "ro"
    if where == "read-only" and not _read_only_dir(ro):
        pytest.skip("cannot make a read-only directory here (no chattr, or not ext-like)")
    results = {"read-only": str(ro / "acc"), "a-file": str(Path(env["PATH"].split(os.pathsep)[0]) / "sinfo")}.get(
        where, where)
    try:
        for cmd in (["run", "-N", "3"], ["resume"], ["pairs", "-N", "2"], ["rollout", "-N", "3"]):
            p = run_cli("cluster", *cmd, "--results", results, "--spec", "example:local-slurm", env=env, timeout=120)
            lines = p.stderr.strip().splitlines()
            assert p.returncode == 2 and len(lines) == 1, (cmd, p.returncode, p.stderr)
            assert f"--results {results}" in lines[0] and "internal error" not in lines[0], lines[0]
            assert not mark.exists(), mark.read_text()  # Slurm was not asked anything
    finally:
        if where == "read-only" and os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(ro)], check=True)


def test_task_states_parse_scontrol_and_fall_back_to_sacct(monkeypatch):
    line = ("JobId=115 ArrayJobId=114 ArrayTaskId=1 ArrayTaskThrottle=3 JobName=trainready-accept JobState=FAILED "
            "Reason=NonZeroExitCode Dependency=(null) ExitCode=137:0 RunTime=00:00:34 NodeList=node2 BatchHost=node2")
    monkeypatch.setattr(slurm, "call", lambda argv, timeout=0: line + "\n")
    assert slurm.task_states("114") == {1: slurm.TaskState(1, "115", "FAILED", "137:0", "node2", "NonZeroExitCode", 34.0)}

    asked, jobcomp = [], "jobcomp/filetxt"

    def gone(argv, timeout=0):  # the record aged out of slurmctld; no slurmdbd; the job-completion log answers
        asked.append(argv[0])
        if argv[:3] == ["scontrol", "show", "config"]:  # what the cluster keeps (scontrol show config)
            return f"AccountingStorageType   = accounting_storage/none\nJobCompType             = {jobcomp}\n"
        if argv[:2] == ["scontrol", "--local"] or "-c" not in argv:
            raise slurm.SlurmError("gone")
        assert argv[argv.index("-j") + 1] == "114,115"
        return "115|FAILED|137:0|node2\n114|COMPLETED|0:0|node3\n"

    monkeypatch.setattr(slurm, "call", gone)
    monkeypatch.setattr(slurm, "_CONFIG", {})
    got = slurm.task_states("114", {1: "115", 2: "114"})
    assert got[1].state == "FAILED" and got[1].exit_code == "137:0" and got[2].state == "COMPLETED"
    # a cluster with neither accounting nor a job-completion log: sacct is never asked, and no error
    asked.clear()
    jobcomp = "jobcomp/none"
    monkeypatch.setattr(slurm, "_CONFIG", {})
    assert slurm.task_states("114", {1: "115", 2: "114"}) == {} and "sacct" not in asked


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("su"), reason="needs root to run the script as another user")
def test_local_slurm_says_why_it_cannot_start():
    from conftest import SLURM_SCRIPT

    p = subprocess.run(["su", "nobody", "-s", "/bin/bash", "-c", f"bash {SLURM_SCRIPT} up"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 3 and p.stdout.strip() == (
        "local-slurm: cannot start: needs root (to install slurm-wlm/munge and run slurmd); run as root or in CI")
