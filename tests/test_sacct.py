"""sacct's output parsed (cluster/sacct.py), on output captured from a real slurmdbd: `scripts/local-slurm.sh up
--cluster acct --accounting` (Slurm 22.05, MariaDB 10.11), jobs of root and of `nobody`, one named with a '|'."""

from __future__ import annotations

from pathlib import Path

from trainready.cluster import sacct

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
    assert off.line() == "n1: jobs since its last pass: not known (no accounting)"
    assert off.to_json()["known"] is False
    # sacct's own words on a cluster without slurmdbd (captured, Slurm 22.05): what job_impact recognises
    assert sacct.DISABLED in (DATA / "sacct_disabled.txt").read_text()


def test_the_rma_folders_job_impact_is_sacct_s_answer(monkeypatch):
    """accounting.job_impact (the RMA folder's) runs the one sacct query: the captured jobs listed, trainready's
    own left out; sacct's 'accounting storage is disabled' is 'not known (no accounting)'."""
    from trainready.cluster import accounting
    from trainready.cluster.control import slurm
    from trainready.errors import SlurmError

    asked: list[list[str]] = []

    def answer(argv, timeout=0, stdin=None):
        asked.append(list(argv))
        return (DATA / "sacct_parsable2_acct1.txt").read_text()

    monkeypatch.setattr(slurm, "call", answer)
    imp = accounting.job_impact("acct1", "2026-12-06T23:00:00+00:00", "2026-12-06T23:59:00Z")
    assert imp.known and imp.jobs and not any("trainready-" in j for j in imp.jobs), imp
    assert asked[0][:5] == ["sacct", "-a", "-X", "-N", "acct1"]

    def disabled(argv, timeout=0, stdin=None):
        raise SlurmError((DATA / "sacct_disabled.txt").read_text().strip())

    monkeypatch.setattr(slurm, "call", disabled)
    off = accounting.job_impact("acct1", "", "2026-12-06T23:59:00Z")
    assert not off.known and off.text() == accounting.NOT_KNOWN
    assert "not ISO 8601" in accounting.job_impact("acct1", "", "yesterday").text()
