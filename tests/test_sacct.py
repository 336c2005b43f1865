"""sacct's output parsed (cluster/repair/jobs.py), on output captured from a real slurmdbd: `scripts/local-slurm.sh up
--cluster acct --accounting` (Slurm 22.05, MariaDB 10.11), jobs of root and of `nobody`, one named with a '|'."""

from __future__ import annotations

from pathlib import Path

from trainready.cluster.repair import jobs as sacct

DATA = Path(__file__).parent / "data"


def test_parse_captured_parsable2():
    # captured with: sacct -a -X -N acct1 -S now-1hour -E now --parsable2 --noheader --format=<sacct.FIELDS>
    text = (DATA / "sacct_parsable2_acct1.txt").read_text()
    naive = [line.split("|") for line in text.splitlines()]
    assert len(naive[1]) != len(sacct.FIELDS)  # the job named 'train|llama-7b': a plain split shifts its fields
    jobs = sacct.parse(text)
    assert [j.job_id for j in jobs] == ["1", "2", "3", "5", "6"]
    assert jobs[1].name == "train|llama-7b" and jobs[1].user == "root" and jobs[1].state == "COMPLETED"
    assert jobs[2].state == "FAILED" and jobs[2].exit_code == "3:0"
    assert jobs[4].user == "nobody" and jobs[4].account == "" and jobs[4].nodes == "acct1"
    assert jobs[3].name.startswith(sacct.OWN_PREFIX)  # trainready's own: job_impact leaves it out


def test_impact_line_and_not_known():
    jobs = tuple(sacct.parse((DATA / "sacct_parsable2_acct1.txt").read_text()))
    imp = sacct.JobImpact("acct1", "2026-12-06T23:00:00", "2026-12-06T23:30:00", True, jobs[:2])
    assert "2 job(s) of 1 user(s) ran on it" in imp.line() and "2 (root, train|llama-7b, COMPLETED)" in imp.line()
    off = sacct.JobImpact("n1", "a", "b", False, (), sacct.NOT_KNOWN)
    assert off.line() == "n1: job impact: not known (no accounting)"
    assert off.to_json()["known"] is False
    # sacct's own words on a cluster without slurmdbd (captured, Slurm 22.05): what job_impact recognises
    assert sacct.DISABLED in (DATA / "sacct_disabled.txt").read_text()


def test_the_rma_folders_job_impact_is_sacct_s_answer(tmp_path: Path, monkeypatch):
    """accounting.job_impact (the RMA folder's) runs the one sacct query through a stand-in sacct on PATH (the
    captured lines): trainready's own job left out; sacct's 'accounting storage is disabled' is 'not known (no
    accounting)'; a failure time that is no ISO 8601 is said."""
    import stat

    from trainready.cluster.repair import jobs as accounting

    d = tmp_path / "bin"
    d.mkdir()
    (d / "sacct").write_text(f"#!/bin/sh\necho \"$*\" > {tmp_path / 'asked'}\ncat {DATA / 'sacct_parsable2_acct1.txt'}\n")
    (d / "scontrol").write_text("#!/bin/sh\necho 'PrivateData = none'\n")
    for f in d.iterdir():
        f.chmod(f.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{d}:/bin:/usr/bin")
    imp = accounting.for_node(tmp_path, "acct1", "2026-12-06T23:59:00Z")
    assert imp.known and imp.jobs and not any(j.name.startswith("trainready-") for j in imp.jobs), imp
    asked = (tmp_path / "asked").read_text().split()
    assert asked[:4] == ["-a", "-X", "-N", "acct1"]
    assert asked[asked.index("-S") + 1] == "2026-11-29T23:59:00"  # no pass under RESULTS: the 7 days before, UTC
    (d / "sacct").write_text(f"#!/bin/sh\ncat {DATA / 'sacct_disabled.txt'} >&2\nexit 1\n")
    off = accounting.for_node(tmp_path, "acct1", "2026-12-06T23:59:00Z")
    assert not off.known and off.why == accounting.NOT_KNOWN
    assert "not ISO 8601" in accounting.for_node(tmp_path, "acct1", "yesterday").why
