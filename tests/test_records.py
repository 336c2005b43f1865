import json
import math

from trainready.records import CheckResult, Level, Metric, Report, Status, Threshold


def _result(status: Status) -> CheckResult:
    return CheckResult("x", "X", Level.QUICK, status, "m", "", (), 0.1)


def test_threshold_ops_and_nan():
    t = Threshold(">=", 10.0, "GB/s", "spec")
    assert not t.holds(9.99)
    assert t.holds(10.0)
    assert not t.holds(math.nan)  # a NaN figure never passes
    assert Threshold("<=", 1, "s", "x").holds(0.5) and not Threshold("<=", 1, "s", "x").holds(1.5)


def test_metric_labels_are_structured_and_sorted():
    m = Metric.of("busbw", 12.5, "GB/s", None, op="all_reduce", gpu=3)
    assert m.labels == (("gpu", "3"), ("op", "all_reduce"))
    assert m.to_json()["labels"] == {"gpu": "3", "op": "all_reduce"}


def test_report_status_and_exit_codes():
    assert Report("node", "h", "t", 0, "v", {}, (_result(Status.PASS), _result(Status.WARN))).exit_code == 0
    assert Report("node", "h", "t", 0, "v", {}, (_result(Status.PASS), _result(Status.SKIP))).status == Status.PASS
    nothing = Report("node", "h", "t", 0, "v", {}, (_result(Status.SKIP), _result(Status.SKIP)))
    assert nothing.status == Status.WARN and nothing.exit_code == 0
    assert Report("node", "h", "t", 0, "v", {}, ()).status == Status.WARN
    failing = Report("node", "h", "t", 0, "v", {}, (_result(Status.PASS), _result(Status.FAIL)))
    assert failing.exit_code == 1 and failing.status == Status.FAIL
    assert Report("node", "h", "t", 0, "v", {}, (_result(Status.ERROR),)).exit_code == 1


def test_json_is_strict_even_with_nan():
    m = Metric.of("x", math.nan, "1")
    r = CheckResult("x", "X", Level.QUICK, Status.FAIL, "m", "", (m,), 0.1, {"v": math.inf})
    text = json.dumps(Report("node", "h", "t", 0, "v", {}, (r,)).to_json(), allow_nan=False)
    doc = json.loads(text)
    assert doc["schema"] == "trainready.report/1"
    assert doc["results"][0]["metrics"][0]["value"] == "nan"


def test_records_never_carry_secrets(tmp_path, capsys):
    from trainready.commands.common import emit

    details = {"nccl_env": {"NCCL_IB_HCA": "mlx5_0", "NCCL_TOKEN": "plain-looking-value"},
               "note": "pulled with hf_abcdefghijklmnopqrstuvwx from https://user:hunter2@example.com/x"}
    r = CheckResult("comm", "C", Level.QUICK, Status.PASS, "m", "", (), 0.1, details)
    rep = Report("comm", "h", "t", 0, "v", {}, (r,))
    raw = json.dumps(rep.to_json())
    assert "hunter2" in raw and "hf_abcdefghij" in raw and "plain-looking-value" in raw  # the planted secrets are there
    emit(rep, "-", quiet=True)  # the record to stdout
    emit(rep, str(tmp_path / "r.json"), quiet=True)  # the record to a file
    for text in (capsys.readouterr().out, (tmp_path / "r.json").read_text()):
        assert "hunter2" not in text and "hf_abcdefghij" not in text and "plain-looking-value" not in text
        assert "mlx5_0" in text and "example.com" in text


def test_atomic_write_is_world_readable_and_leaves_no_temp(tmp_path):
    import os
    import stat

    from trainready.util.atomic import atomic_write_json

    p = atomic_write_json(tmp_path / "r.json", {"a": 1})
    assert stat.S_IMODE(os.stat(p).st_mode) & 0o044 == 0o044  # group/other can read (umask 022)
    assert [f.name for f in tmp_path.iterdir()] == ["r.json"]


def test_json_into_a_missing_directory_is_a_usage_error(cli, tmp_path):
    r = cli("node", "--only", "versions", "--json", str(tmp_path / "nope" / "r.json"))
    assert r.returncode == 2 and "does not exist" in r.stderr and not (tmp_path / "nope").exists()
