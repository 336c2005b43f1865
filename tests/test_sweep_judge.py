"""The sweep's verdicts without Slurm: unknown is never a failure, strikes before a drain, the drain bound over a
window, the pick of idle nodes under the cap, and the command line's refusals and scrontab line."""

from __future__ import annotations

import datetime as dt

from trainready.cluster.control.slurm import NodeInfo
from trainready.cluster.judge.guard import parse_max_drain
from trainready.cluster.judge.verdict import NodeVerdict
from trainready.cluster.sweep import judge, select

T = dt.datetime(2026, 12, 5, 3, 0, tzinfo=dt.timezone.utc)


def _doc() -> dict:  # type: ignore[type-arg]
    return {"schema": "trainready.sweepstate/1", "nodes": {}, "drains": []}


def test_only_a_failed_check_fails_everything_else_is_unknown() -> None:
    failed = NodeVerdict("n1", False, ("check matmul: FAIL",), (), "r", {}, ("check matmul",))
    died = NodeVerdict("n2", False, ("no result: task 7 FAILED",), (), "r", {"state": "FAILED"}, ("no result: FAILED",))
    busy = NodeVerdict("n3", False, (), (), "r", {}, (), "its task 9 never started")
    preempted = NodeVerdict("n4", False, ("no result",), (), "r", {"state": "PREEMPTED"}, ("no result: PREEMPTED",))
    assert judge.outcome(failed, {}).verdict == "fail"
    assert judge.outcome(died, {}) == judge.Outcome("n2", "unknown", "no result: task 7 FAILED")
    assert judge.outcome(busy, {}).verdict == "unknown"
    assert judge.outcome(preempted, {"n4": "preempted by job 12 after 40 s"}).text == "preempted by job 12 after 40 s"


def test_a_failure_is_a_warning_until_the_strikes_and_a_pass_or_unknown_keeps_count() -> None:
    doc = _doc()
    fail = judge.Outcome("n1", "fail", "check matmul: FAIL")
    assert judge.strike(doc, fail, 2, T).action == "warn"
    assert judge.strike(doc, judge.Outcome("n1", "unknown", "preempted"), 2, T).action == ""
    second = judge.strike(doc, fail, 2, T)
    assert (second.action, second.strikes) == ("drain", 2)
    judge.strike(doc, judge.Outcome("n1", "pass", ""), 2, T)
    assert doc["nodes"]["n1"]["strikes"] == 0 and doc["nodes"]["n1"]["last_pass"].startswith("2026-12-05")
    assert judge.strike(doc, fail, 2, T).action == "warn"


def test_past_max_drain_in_the_window_nothing_more_is_drained_and_it_says_why() -> None:
    doc = _doc()
    doc["drains"] = [{"node": "old", "when": (T - dt.timedelta(hours=2)).isoformat()},
                     {"node": "older", "when": (T - dt.timedelta(days=3)).isoformat()}]  # outside the 24 h window
    drain, hold, loud = judge.bound(doc, ["a", "b", "c"], parse_max_drain("3"), 640, 86400, T)
    assert drain == ["a", "b"] and hold == ["c"]
    assert loud.startswith("DRAINING STOPPED: 4 node(s)") and "fleet-wide cause" in loud and "c" in loud
    assert judge.bound(doc, ["a"], parse_max_drain("10%"), 640, 86400, T) == (["a"], [], "")


def test_only_idle_nodes_least_recently_swept_first_within_the_cap() -> None:
    info = {n: NodeInfo(n, s, n, r) for n, s, r in (("a", "idle", ""), ("b", "mixed", ""), ("c", "drained", "psu"),
                                                     ("d", "idle", ""), ("e", "idle*", ""), ("f", "idle", ""))}
    doc = _doc()
    doc["nodes"] = {"a": {"last_swept": "2026-12-04T01:00:00+00:00", "last_pass": "2026-12-04T01:00:00+00:00"},
                    "d": {"last_swept": "2026-12-01T01:00:00+00:00"}}
    p = select.pick(info, doc, select.cap(len(info), 2, None), None, T)
    assert p.nodes == ("f", "d")  # never swept first, then the oldest; "a" waits for the next sweep
    assert p.left["b"].startswith("busy") and p.left["c"] == "drained (psu)" and p.left["e"] == "not idle (idle*)"
    assert "past the cap of 2" in p.left["a"]
    skipped = select.pick(info, doc, 6, 86400 * 2, T)
    assert "a" not in skipped.nodes and "within --skip-passed-within" in skipped.left["a"]
    assert select.cap(640, None, 0.1) == 64 and select.cap(5, None, 0.01) == 1


def test_bad_options_are_one_line_exit_2_and_scrontab_prints_the_line(cli, tmp_path) -> None:  # type: ignore
    base = ("cluster", "sweep", "--results", str(tmp_path))
    for extra, words in ((("--max-fraction", "1.5"), "--max-fraction 1.5: expected a fraction in (0, 1]"),
                         (("--skip-passed-within", "soon"), "--skip-passed-within 'soon': expected a time"),
                         (("--strikes", "0"), "--strikes 0: expected at least 1"),
                         (("--scrontab", "weekly"), "--scrontab 'weekly': expected a cron schedule")):
        p = cli(*base, *extra)
        assert p.returncode == 2 and words in p.stderr and "Traceback" not in p.stderr, p.stderr
    p = cli(*base, "-p", "sweep", "--level", "quick", "--scrontab", "0 3 * * *")
    assert p.returncode == 0, p.stderr
    head, entry = p.stdout.strip().splitlines()
    assert head.startswith("#SCRON ") and entry.startswith("0 3 * * * ")
    assert "cluster sweep --results" in entry and "--scrontab" not in entry and "--level quick" in entry


def test_a_nodes_trend_is_drawn_over_time_in_the_html_report(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from trainready.cluster.sweep import trend

    runs = []
    for k in range(5):
        now = {"when": f"2026-12-0{k + 1}T03:00:00+00:00", "verdict": "pass", "run": f"r{k}",
               "figures": {"gemm_bf16@GPU-a": 700.0 * 0.95 ** k, "gemm_bf16@GPU-b": 705.0}, "counters": {},
               "gpus": ["GPU-a", "GPU-b"]}
        now["trend"] = trend.judge(now, runs, 0.10, 5)
        runs.append(now)
    assert runs[4]["trend"] and runs[4]["trend"][0].startswith("gemm_bf16@GPU-a: 570.2 TFLOP/s is 12% below")
    trend.save(tmp_path, "gpu017", runs)
    out = tmp_path / "r.html"
    p = cli("report", str(trend.path(tmp_path, "gpu017")), "--html", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    page = out.read_text()
    assert "sweeptrend on gpu017" in page and "<svg" in page and "gemm_bf16 over the sweeps" in page
    assert "Trend WARNs: 2026-12-05T03:00: gemm_bf16@GPU-a" in page


def test_pcie_replays_and_xids_growing_between_sweeps_warn_before_a_steady_count_passes() -> None:
    """The counters a sweep keeps per GPU include PCIe replays and the XIDs the driver logged since boot (the
    manifest's NVML facts and /dev/kmsg); one that grew since the last sweep is a WARN naming both readings."""
    from trainready.cluster.sweep import trend

    def record(replays: int, xids: int) -> dict:  # type: ignore[type-arg]
        gpu = {"index": 0, "uuid": "GPU-a", "ecc_uncorrected_aggregate": 0, "remapped_rows_uncorrectable": 0,
               "pcie_replays": replays, "xids_this_boot": xids}
        return {"manifest": {"gpu": {"nvml": {"gpus": [gpu]}}}}

    first = trend.entry("2026-12-01T03:00:00+00:00", "pass", record(7, 0), "r0")
    assert first["counters"] == {"GPU-a": {"ecc_uncorrected_aggregate": 0, "remapped_rows_uncorrectable": 0,
                                           "pcie_replays": 7, "xids_this_boot": 0}}
    grown = trend.entry("2026-12-02T03:00:00+00:00", "pass", record(40, 2), "r1")
    warns = trend.judge(grown, [first], 0.10, 5)
    assert warns == ["GPU-a pcie_replays grew 7 -> 40 between the sweeps of 2026-12-01T03:00 and 2026-12-02T03:00",
                     "GPU-a xids_this_boot grew 0 -> 2 between the sweeps of 2026-12-01T03:00 and 2026-12-02T03:00"]
    steady = trend.entry("2026-12-03T03:00:00+00:00", "pass", record(40, 2), "r2")
    assert trend.judge(steady, [first, grown], 0.10, 5) == []


def test_xids_are_counted_per_gpu_by_bus_id_and_an_unreadable_log_says_why() -> None:
    from trainready.manifest.gpu import GpuFacts, with_xids
    from trainready.manifest.kmsg import parse_record

    gpus = [GpuFacts(index=0, name="H100", uuid="GPU-a", pci_bus_id="00000000:18:00.0"),
            GpuFacts(index=1, name="H100", uuid="GPU-b", pci_bus_id="00000000:2A:00.0")]
    lines = ["3,812,100,-;NVRM: Xid (PCI:0000:2a:00): 79, pid=1, GPU has fallen off the bus.",
             "3,813,101,-;NVRM: Xid (PCI:0000:2a:00): 48, pid=1, DBE (double bit error) ECC error.",
             "6,814,102,-;eth0: link up"]
    xids = [x for _, x in map(parse_record, lines) if x is not None]
    got = with_xids(gpus, lambda: (814, xids))
    assert [g.xids_this_boot for g in got] == [0, 2]
    none = with_xids(gpus, lambda: "cannot read /dev/kmsg: Permission denied")
    assert [g.xids_this_boot for g in none] == ["unavailable: cannot read /dev/kmsg: Permission denied"] * 2


def test_history_is_keyed_by_board_serial_a_swap_is_said_and_uuid_keyed_entries_read_on() -> None:
    """A GPU's figures and counters are kept under its board serial (NVML); a board swapped in repair (a new
    serial on the node) is said; an entry written with UUID keys only (no serials read) is read under the
    serials, so it neither looks like a swap nor loses the node's past."""
    from trainready.cluster.sweep import trend

    def record(serial: str, uuid: str, tflops: float, ecc: int = 0) -> dict:  # type: ignore[type-arg]
        gpu = {"index": 0, "uuid": uuid, "serial": serial, "ecc_uncorrected_aggregate": ecc}
        res = {"metrics": [{"name": "gemm_bf16", "value": tflops, "labels": {"gpu": "0"}}]}
        return {"manifest": {"gpu": {"nvml": {"gpus": [gpu]}}}, "report": {"results": [res]}}

    now = trend.entry("2026-12-04T03:00:00+00:00", "pass", record("1650123", "GPU-a", 600.0, ecc=3), "r3")
    assert now["gpus"] == ["1650123"] and set(now["figures"]) == {"gemm_bf16@1650123"}, now
    swapped = trend.entry("2026-12-05T03:00:00+00:00", "pass", record("1650999", "GPU-z", 700.0), "r4")
    said = trend.judge(swapped, [now], 0.10, 5)
    assert said == ["GPU(s) changed since 2026-12-04T03:00: 1650123 -> 1650999 (a part swapped in repair?)"], said
    old = [{"when": f"2026-12-0{k + 1}T03:00:00+00:00", "verdict": "pass", "run": f"r{k}", "gpus": ["GPU-a"],
            "figures": {"gemm_bf16@GPU-a": 700.0}, "counters": {"GPU-a": {"ecc_uncorrected_aggregate": 1}}}
           for k in range(3)]
    said = trend.judge(now, old, 0.10, 5)
    assert len(said) == 2 and said[0].startswith("gemm_bf16@1650123: 600 TFLOP/s is 14% below"), said
    assert said[1].startswith("1650123 ecc_uncorrected_aggregate grew 1 -> 3"), said
    unread = trend.entry("2026-12-04T03:00:00+00:00", "pass", record("unavailable: NVML: Not Supported", "GPU-a", 700.0), "r")
    assert unread["gpus"] == ["GPU-a"] and trend.judge(unread, old, 0.10, 5) == []


def test_the_sweep_lock_never_follows_a_symbolic_link(cli, tmp_path) -> None:  # type: ignore[no-untyped-def]
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    (tmp_path / "sweep").mkdir()
    (tmp_path / "sweep" / "lock").symlink_to(victim)
    p = cli("cluster", "sweep", "--results", str(tmp_path))
    assert p.returncode == 2 and "Traceback" not in p.stderr and "internal error" not in p.stderr, p.stderr
    assert f"{tmp_path}/sweep/lock: a symbolic link: refused, never followed" in p.stderr, p.stderr
    assert victim.read_text() == "keep\n"


def test_a_file_system_without_flock_is_one_line_naming_the_mount_option(tmp_path, monkeypatch) -> None:  # type: ignore
    """Lustre mounted without `flock` answers flock(2) with ENOSYS; no such mount can be made here, so flock is
    made to answer as Lustre does (the only stand-in in this module)."""
    import errno
    import fcntl

    import pytest

    from trainready.cluster.sweep import state
    from trainready.errors import UsageError

    def lustre(fd: int, op: int) -> None:
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(fcntl, "flock", lustre)
    with pytest.raises(UsageError, match=r"sweep/lock: its file system cannot lock \(flock\(2\): Function not "
                                         r"implemented\); .*Lustre: -o flock"):
        state.lock(tmp_path)
