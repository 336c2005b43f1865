"""The job impact's query at its edges (cluster/repair/jobs.py), through stand-in `sacct`, `scontrol` and `sacctmgr`
commands on PATH that answer as Slurm 22.05 did on `scripts/local-slurm.sh up --cluster acct --accounting`
(tests/data: a healthy slurmdbd's lines; sacct's words with slurmdbd stopped).  The stand-ins record their argv
and the TZ and SLURM_TIME_FORMAT they ran under: the window sacct is given, its zone, and how often it is asked.
The same on the real cluster with slurmdbd stopped mid-run: tests/test_cluster_accounting.py."""

from __future__ import annotations

import datetime as dt
import json
import os
import stat
import time
from pathlib import Path

import pytest

from trainready.cluster.repair import jobs as sacct
from trainready.cluster.control import outage, slurm

DATA = Path(__file__).parent / "data"
UTC = dt.timezone.utc
SINCE = dt.datetime(2026, 12, 6, 23, 0, tzinfo=UTC)
UNTIL = dt.datetime(2026, 12, 6, 23, 59, tzinfo=UTC)


def _stand_in(folder: Path, name: str, body: str) -> None:
    p = folder / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH of stand-ins only (plus /bin for the shell's own tools), and a login node in UTC+8."""
    d = tmp_path / "bin"
    d.mkdir()
    monkeypatch.setenv("PATH", f"{d}:/bin:/usr/bin")
    monkeypatch.setenv("TZ", "Asia/Shanghai")
    time.tzset()
    monkeypatch.setattr(slurm, "_CONFIG", {})
    yield d
    monkeypatch.delenv("TZ")
    time.tzset()


def _sacct_answers(d: Path, log: Path, out: Path, rc: int = 0, err: Path | None = None) -> None:
    _stand_in(d, "sacct", f'echo "$TZ|$SLURM_TIME_FORMAT|$*" >> {log}\n'
                          f'cat {out}\n' + (f'cat {err} >&2\n' if err else "") + f'exit {rc}')


def test_sacct_is_asked_in_utc_and_every_time_is_kept_with_its_zone(bin_dir: Path, tmp_path: Path):
    log = tmp_path / "asked"
    _sacct_answers(bin_dir, log, DATA / "sacct_parsable2_acct1.txt")
    _stand_in(bin_dir, "scontrol", 'echo "PrivateData             = none"')
    imp = sacct.impacts(["acct1"], {"acct1": SINCE}, UNTIL)["acct1"]
    tz, fmt, args = log.read_text().splitlines()[0].split("|", 2)
    words = args.split()
    # the window as sacct reads it: the UTC moments, not the login node's local 07:00 next day
    assert words[words.index("-S") + 1] != "2026-12-07T07:00:00"
    assert (words[words.index("-S") + 1], words[words.index("-E") + 1]) == ("2026-12-06T23:00:00", "2026-12-06T23:59:00")
    assert (tz, fmt) == ("UTC", "standard")
    assert (imp.since, imp.until) == ("2026-12-06T23:00:00+00:00", "2026-12-06T23:59:00+00:00")
    assert imp.known and [j.job_id for j in imp.jobs] == ["1", "2", "3", "6"]  # 5 is trainready's own
    assert imp.jobs[0].start == "2026-12-06T23:28:55+00:00" and imp.jobs[0].end == "2026-12-06T23:28:56+00:00"
    assert imp.partial == "" and "MAY BE PARTIAL" not in imp.line()


def test_a_silent_slurmdbd_is_not_known_at_once_and_asked_once(bin_dir: Path, tmp_path: Path):
    """sacct's 'Problem talking to the database: Connection refused' (captured with slurmdbd stopped) holds the
    words of a silent slurmctld, but sacct asks slurmdbd: no wait for the controller, one call for every node."""
    log, empty = tmp_path / "asked", tmp_path / "empty"
    empty.write_text("")
    _sacct_answers(bin_dir, log, empty, rc=1, err=DATA / "sacct_dbd_down.txt")
    said: list[str] = []
    t0 = time.monotonic()
    with outage.patient(outage.Patience(bound_s=3.0, say=said.append)):
        got = sacct.impacts(["acct1", "acct2", "acct3"], {}, UNTIL)
    assert time.monotonic() - t0 < 2.0, said
    assert said == []  # no "slurmctld not answering" line
    assert len(log.read_text().splitlines()) == 1
    for n in ("acct1", "acct2", "acct3"):
        assert not got[n].known and got[n].why.startswith("not known (slurmdbd not answering: "), got[n]
        assert got[n].line().startswith(f"{n}: job impact: not known (slurmdbd not answering")
    assert got["acct2"].since == "2026-11-29T23:59:00+00:00"  # the fallback window, in UTC


def test_private_data_jobs_says_the_list_may_be_partial(bin_dir: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch):
    """Under PrivateData=jobs sacct -a run by a plain user lists that user's jobs only (slurm.conf(5)); the stand-in
    sacct does the same.  The suite runs as root, whom PrivateData never limits: the caller is made `alice`."""
    import getpass

    mine = tmp_path / "mine"
    mine.write_text("")  # alice ran nothing on acct1
    _sacct_answers(bin_dir, tmp_path / "asked", mine)
    _stand_in(bin_dir, "scontrol", 'echo "PrivateData             = jobs,usage"; echo "SlurmUser               = slurm(64030)"')
    _stand_in(bin_dir, "sacctmgr", 'echo "None"')
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(getpass, "getuser", lambda: "alice")
    imp = sacct.impacts(["acct1"], {"acct1": SINCE}, UNTIL)["acct1"]
    assert imp.known and imp.jobs == ()
    assert imp.partial.startswith("PrivateData=jobs and alice is no Slurm operator (AdminLevel None)")
    assert "MAY BE PARTIAL: PrivateData=jobs" in imp.line() and imp.to_json()["partial"] == imp.partial
    assert "may be partial" in imp.vendor_text()
    _stand_in(bin_dir, "sacctmgr", 'echo "Operator"')  # an operator sees every user's jobs
    monkeypatch.setattr(slurm, "_CONFIG", {})
    assert sacct.impacts(["acct1"], {"acct1": SINCE}, UNTIL)["acct1"].partial == ""


def test_the_vendors_view_has_no_user_nor_job_name(bin_dir: Path, tmp_path: Path):
    _sacct_answers(bin_dir, tmp_path / "asked", DATA / "sacct_parsable2_acct1.txt")
    _stand_in(bin_dir, "scontrol", 'echo "PrivateData             = none"')
    imp = sacct.impacts(["acct1"], {"acct1": SINCE}, UNTIL)["acct1"]
    assert "nobody" in imp.line() and "pretrain-70b" in imp.line()  # the fleet record's: whose jobs, named
    shown = json.dumps(imp.vendor_json()) + imp.vendor_text()
    for word in ("nobody", "root", "pretrain-70b", "llama-7b", "eval-job"):
        assert word not in shown, word
    assert imp.vendor_text() == "4 job(s) of 2 user(s): 1 (COMPLETED), 2 (COMPLETED), 3 (FAILED), 6 (COMPLETED)"
