"""The RMA folder of a drained node (cluster/repair/rma/): RESULTS/rma/NODE/ after a drain, `bundle --rma NODE` on demand.

Built from a real H100 node's captured record (tests/data: NVML's serial, PCI bus, driver) with one check failed
in it, a drain in the ledger and a sweep history; the XID timeline from /dev/kmsg records as the kernel writes
them.  The vendor tools (nvidia-bug-report.sh, dcgmi) do not exist on a machine without an NVIDIA driver: their
"present" path runs tiny stand-ins a test writes on PATH, as said where they are used."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from conftest import run_cli
from trainready.cluster.repair import ledger
from trainready.cluster.repair import reasons
from trainready.cluster.repair import rma
from trainready.cluster.repair.rma import evidence, folder, tools
from trainready.cluster.sweep import trend
from trainready.hardware.xids import CATALOGUE, XIDS, explain
from trainready.manifest.kmsg import parse_record

DATA = Path(__file__).parent / "data"
NODE = "gpu017"
SECRET = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"  # a GitHub token's shape: redacted in every bundle


@pytest.fixture(autouse=True)
def no_accounting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cluster configuration of the test's own without slurmdbd (slurm.conf(5): no AccountingStorageType), so
    the real `sacct` answers "Slurm accounting storage is disabled" from it alone, whether or not one of the
    suite's local clusters is up at the moment (without any slurm.conf, sacct fails on a DNS SRV lookup)."""
    if shutil.which("sacct") is None:
        pytest.skip("sacct is not installed (slurm-wlm: .ci/run installs it)")
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=rma\nSlurmctldHost=localhost\nNodeName={NODE} CPUs=1\nPartitionName=p Nodes={NODE}\n")
    monkeypatch.setenv("SLURM_CONF", str(conf))


def _results(tmp: Path) -> Path:
    """RESULTS with the node's failing record, its drain in the ledger and two sweeps in its history."""
    env = json.loads((DATA / "env_h100x1_captured.json").read_text())
    rep = json.loads((DATA / "node_h100x1_captured.json").read_text())
    for r in rep["results"]:
        if r["name"] == "matmul":
            r["status"], r["message"] = "fail", f"3 of 4096 elements off (token {SECRET})"
    res = tmp / "results"
    (res / "runs" / "20261206T030000Z-run" / "nodes").mkdir(parents=True)
    rec = res / "runs" / "20261206T030000Z-run" / "nodes" / f"{NODE}.json"
    rec.write_text(json.dumps({"schema": "trainready.fleetnode/1", "node": NODE, "report": rep, "manifest": env}))
    why = ["check matmul: FAIL: 3 of 4096 elements off"]
    ledger.append(res, {"action": "drain", "node": NODE, "why": why, "record": str(rec),
                        "slurm_reason": ledger.reason_text(why, "run", "hardware"), **ledger.whole("run", "hardware", why)})
    serial = "1651424062740"
    (res / "sweep").mkdir()  # the sweep's state beside its trend: the pass the coverage (and the window) reads
    (res / "sweep" / "state.json").write_text(json.dumps({"schema": "trainready.sweepstate/1", "nodes": {
        NODE: {"last_pass": "2026-12-05T03:00:00+00:00", "strikes": 1, "runs": []}}}))
    trend.save(res, NODE, [{"when": "2026-12-05T03:00:00+00:00", "verdict": "pass", "figures": {},
                            "counters": {serial: {"pcie_replays": 0, "xids_this_boot": 0}}, "trend": []},
                           {"when": "2026-12-06T03:00:00+00:00", "verdict": "fail", "figures": {}, "why": why[0],
                            "counters": {serial: {"pcie_replays": 40, "xids_this_boot": 2}},
                            "trend": [f"{serial} pcie_replays grew 0 -> 40"]}])
    return res


def test_a_drained_node_gets_its_folder_with_identity_failure_history_and_checksums(tmp_path: Path) -> None:
    res = _results(tmp_path)
    assert not folder.folder(res, NODE).exists()  # nothing before the drain's hook runs
    said: list[str] = []
    out = rma.after_drain(res, NODE, None, said.append)
    assert out == folder.folder(res, NODE) and said == [f"{NODE}: RMA evidence in {out} (INDEX.md)"]
    index = (out / "INDEX.md").read_text()
    assert index.startswith(f"# RMA evidence: node {NODE}")
    for fact in ("1651424062740", "00000000:00:06.0", "580.159.04", "NVIDIA H100 80GB HBM3",  # serial, bus, driver
                 "| matmul | fail | hardware |", "class **hardware**", "Last pass: 2026-12-05T03:00:00+00:00",
                 f"srun -w {NODE} -N 1 --exclusive --time=30:00 trainready node --only matmul",
                 "pcie_replays grew 0 -> 40", "jobs on the node from 2026-12-05T03:00:00+00:00 to ",
                 ": not known (no accounting)", "Evidence: the record of the run that drained it: "
                 "runs/20261206T030000Z-run, written 20",
                 f"srun --reservation=rma-{NODE} -w {NODE}", f"trainready bundle --rma {NODE} --results {res}"):
        assert fact in index, fact
    assert "| 0 | NVIDIA H100 80GB HBM3 | 1651424062740 | 00000000:00:06.0 | not recorded | not recorded |" in index
    facts = json.loads((out / "facts.json").read_text())
    assert facts["reason"]["class"] == "hardware" and facts["reason"]["source"] == "run"
    assert [t["outcome"] for t in json.loads((out / "tools.json").read_text())] == ["not run here", "not run here"]
    assert "not read: the kernel log is gpu017's own" in json.loads((out / "xids.json").read_text())["not_read"]
    every = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert SECRET not in every and "3 of 4096 elements off" in every  # redacted as every bundle
    assert run_cli("bundle", "--verify", str(out)).returncode == 0
    (out / "facts.json").write_text((out / "facts.json").read_text().replace("1651424062740", "1651424062741"))
    p = run_cli("bundle", "--verify", str(out))
    assert p.returncode == 1 and "changed: facts.json" in p.stderr


def test_a_second_drain_keeps_the_earlier_folder(tmp_path: Path) -> None:
    res = _results(tmp_path)
    first = rma.after_drain(res, NODE, None, lambda _s: None)
    assert first is not None
    os.utime(first, (1765000000, 1765000000))  # 2025-12-06T05:46:40Z
    rma.after_drain(res, NODE, None, lambda _s: None)
    assert sorted(p.name for p in (res / "rma").iterdir()) == [NODE, f"{NODE}.20251206T054640Z"]


def test_the_xid_timeline_names_each_xid_with_nvidias_meaning() -> None:
    assert {13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120} <= set(XIDS)
    assert CATALOGUE == "https://docs.nvidia.com/deploy/xid-errors/"
    assert explain(999).meaning.startswith("not in trainready's table: see https://docs.nvidia.com/deploy/xid-errors/")
    lines = ["4,2291,81392000,-;NVRM: Xid (PCI:0000:3B:00): 79, pid=1234, name=python, GPU has fallen off the bus.",
             "4,2288,80000000,-;NVRM: Xid (PCI:0000:3B:00): 13, pid=1234, Graphics Exception: ESR 0x50",
             "6,2290,81000000,-;eth0: link up"]
    xids = [x for _, x in map(parse_record, lines) if x is not None]
    got = evidence.xid_timeline(xids, boot_epoch=1765000000.0)
    assert [(x["seq"], x["xid"], x["hardware"]) for x in got] == [(2288, 13, False), (2291, 79, True)]
    assert got[1]["when"] == "2025-12-06T05:48:01+00:00" and got[1]["since_boot_s"] == 81.392  # boot + 81.4 s
    assert got[1]["meaning"].startswith("GPU has fallen off the bus") and "reboot the node" in got[1]["action"]
    assert got[0]["action"].startswith("the program's own fault")


def _stand_in(folder_: Path, name: str, body: str) -> None:
    p = folder_ / name
    p.write_text("#!/bin/sh\n" + body + "\n")
    p.chmod(p.stat().st_mode | stat.S_IXUSR)


def test_on_the_node_absent_tools_are_said_and_present_ones_run_under_their_limit(tmp_path: Path,
                                                                                monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The tools' present path runs stand-ins written here (this machine has no NVIDIA driver, so the real
    nvidia-bug-report.sh and dcgmi cannot run): a bug report that writes its .gz (with a token in it), and a
    dcgmi that outlives its time limit."""
    res = _results(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    runs = tools.collect(tmp_path / "t0", 5, 5)
    assert [(t.outcome, t.said) for t in runs] == [
        ("absent", "nvidia-bug-report.sh: absent (not on PATH): nothing collected"),
        ("absent", "dcgmi: absent (not on PATH): nothing collected")]
    fake = tmp_path / "bin"
    fake.mkdir()
    _stand_in(fake, "nvidia-bug-report.sh", f'echo "driver log; token {SECRET}" | /bin/gzip > "$2.gz"')
    _stand_in(fake, "dcgmi", 'echo \'{"partial": true}\'; exec /bin/sleep 30')
    monkeypatch.setenv("PATH", str(fake))
    out = rma.on_demand(res, NODE, tmp_path / "rma-here", ["trainready", "bundle", "--rma", NODE], True, 20, 1.5)
    ran = {t["name"]: t for t in json.loads((out / "tools.json").read_text())}
    assert ran["nvidia-bug-report"]["outcome"] == "ran" and ran["nvidia-bug-report"]["exit_code"] == 0
    assert ran["dcgm-diag"]["outcome"] == "timed out" and ran["dcgm-diag"]["seconds"] < 10
    report = gzip.decompress((out / "tools/bug-report/nvidia-bug-report.log.gz").read_bytes()).decode()
    assert report.startswith("driver log; token ") and SECRET not in report
    assert json.loads((out / "tools/dcgm/dcgmi-diag-r3.json").read_text()) == {"partial": True}
    index = (out / "INDEX.md").read_text()
    assert "dcgmi: timed out after 2 s" in index and "nvidia-bug-report.sh: ran in" in index
    assert run_cli("bundle", "--verify", str(out)).returncode == 0


def test_bundle_rma_on_the_command_line(tmp_path: Path) -> None:
    res = _results(tmp_path)
    p = run_cli("bundle", "--rma", NODE)
    assert p.returncode == 2 and "--rma NODE and --results RESULTS go together" in p.stderr
    p = run_cli("bundle", "--rma", NODE, "--results", str(tmp_path / "nowhere"))
    assert p.returncode == 2 and "no such folder" in p.stderr and "Traceback" not in p.stderr
    p = run_cli("bundle", "--rma", NODE, "--results", str(res))
    assert p.returncode == 0, p.stderr
    assert f"from the records (this is not {NODE}" in " ".join(p.stderr.split())
    assert (res / "rma" / NODE / "INDEX.md").is_file()
    assert reasons.parse(json.loads((res / "rma" / NODE / "facts.json").read_text())["reason"]["text"]).klass == "hardware"


def _second_run_without_a_record(tmp: Path) -> Path:
    """Run 1 accepted the node (its record and fleet.json, finished 2026-12-05 03:00 UTC); run 2 drained it with no
    record of its own (its task left none)."""
    env = json.loads((DATA / "env_h100x1_captured.json").read_text())
    rep = json.loads((DATA / "node_h100x1_captured.json").read_text())
    res = tmp / "results"
    one = res / "runs" / "20261205T020000Z-run"
    (one / "nodes").mkdir(parents=True)
    (one / "nodes" / f"{NODE}.json").write_text(json.dumps({"schema": "trainready.fleetnode/1", "node": NODE,
                                                            "report": rep, "manifest": env}))
    (one / "fleet.json").write_text(json.dumps({"schema": "trainready.fleet/1", "planted": {},
        "context": {"finished": "2026-12-05T03:00:00+00:00"}, "nodes": [{"node": NODE, "verdict": "accept"}]}))
    why = ["no result: its task ended (FAILED, exit 1:0) without writing its record"]
    ledger.append(res, {"action": "drain", "node": NODE, "why": why, "record": "",
                        "slurm_reason": ledger.reason_text(why, "run", "software"), **ledger.whole("run", "software", why)})
    return res


def test_a_node_drained_without_a_record_names_the_older_record_and_the_last_pass(tmp_path: Path) -> None:
    res = _second_run_without_a_record(tmp_path)
    out = rma.after_drain(res, NODE, None, lambda _s: None)
    assert out is not None
    index = (out / "INDEX.md").read_text()
    assert "Last pass: none recorded" not in index
    assert "Last pass: 2026-12-05T03:00:00+00:00" in index  # run 1's accept: the fleet record's window start
    assert ("Evidence: the run that drained it left no record of the node (no result: its task ended (FAILED, "
            "exit 1:0) without writing its record); the GPU table is from an EARLIER record, "
            "runs/20261205T020000Z-run, written ") in index
    assert "No failed check in the record" not in index
    assert "No record of the node from the run that drained it; the drain's reasons: no result:" in index


def test_the_folder_says_the_runs_job_impact_without_names(tmp_path: Path) -> None:
    """The drain hands over the fleet record's own answer (one source): the folder lists its job ids and states;
    users and job names stay in the fleet record."""
    from trainready.cluster.repair import jobs as sacct

    res = _second_run_without_a_record(tmp_path)
    jobs = tuple(j for j in sacct.parse((DATA / "sacct_parsable2_acct1.txt").read_text())
                 if not j.name.startswith(sacct.OWN_PREFIX))
    imp = sacct.JobImpact(NODE, "2026-12-05T03:00:00+00:00", "2026-12-06T03:00:00+00:00", True, jobs)
    out = rma.after_drain(res, NODE, None, lambda _s: None, jobs=imp)
    assert out is not None
    facts = json.loads((out / "facts.json").read_text())
    assert facts["jobs"] == imp.vendor_json() and facts["jobs"]["since"] == "2026-12-05T03:00:00+00:00"
    index = (out / "INDEX.md").read_text()
    assert "4 job(s) of 2 user(s): 1 (COMPLETED), 2 (COMPLETED), 3 (FAILED), 6 (COMPLETED)" in index
    every = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    for word in ("pretrain-70b", "llama-7b", "eval-job", "nobody"):
        assert word not in every, word
