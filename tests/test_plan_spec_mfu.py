"""`trainready plan --spec` (GPU from a node spec) and `--mfu-from` (measured MFU from a node report)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainready.cli import main
from trainready.records import SCHEMA_VERSION, CheckResult, Level, Metric, Report, Status

GIB = 2**30
BASE = ["--preset", "llama3-8b", "--gpus", "8", "--zero", "3", "--recompute", "full", "--tokens", "1T"]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["plan", *args])
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def _doc(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    rc, out, err = _run([*args, "--json", "-"], capsys)
    assert rc == 0, err
    return json.loads(out)


def _item(doc: dict, section: str, key: str) -> float:
    items = doc[section]["items"] if section == "memory" else doc[section]
    return next(q["value"] for q in items if q["key"] == key)


def _one_line_error(rc: int, err: str, *words: str) -> None:
    assert rc == 2 and err.startswith("trainready: error: ") and err.strip().count("\n") == 0, err
    for w in words:
        assert w in err, (w, err)


def test_spec_gpu_is_the_h200(capsys: pytest.CaptureFixture[str]) -> None:
    default = _doc(BASE, capsys)
    spec = _doc([*BASE, "--spec", "example:h200-8x"], capsys)
    h100, h200 = _item(default, "memory", "memory.capacity"), _item(spec, "memory", "memory.capacity")
    assert default["gpu"] == "H100" and h100 == 81559 * 2**20  # the default GPU differs: H100 SXM, NVML total
    assert spec["gpu"] == "H200" and h200 == 143771 * 2**20  # the spec's H200, NVML total
    assert any("from spec example:h200-8x" in s and "'H200'" in s for s in spec["sources"])
    assert spec["inputs"]["parallel"]["gpus_per_node"] == 8
    # flags still override the spec
    over = _doc([*BASE, "--spec", "example:h200-8x", "--gpu", "B200"], capsys)
    assert over["gpu"] == "B200" and _item(over, "memory", "memory.capacity") == 183359 * 2**20
    mem = _doc([*BASE, "--spec", "example:h200-8x", "--gpu-mem-gib", "100"], capsys)
    assert _item(mem, "memory", "memory.capacity") == 100 * GIB


def test_spec_human_output_names_its_source(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run([*BASE, "--spec", "example:h200-8x"], capsys)
    assert rc == 0 and "GPU from spec example:h200-8x: gpu.model 'H200'" in out and "140.4 GiB" in out


def test_spec_without_gpu_or_unknown_gpu_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run([*BASE, "--spec", "example:cpu-default"], capsys)
    _one_line_error(rc, err, "--spec example:cpu-default", "names no GPU")
    odd = tmp_path / "mi.toml"
    odd.write_text('[gpu]\ncount = 8\nmodel = "MI300X"\n')
    rc, _, err = _run([*BASE, "--spec", str(odd)], capsys)
    _one_line_error(rc, err, "'MI300X'", "not in the hardware table", "--gpu-mem-gib and --peak-tflops")
    doc = _doc([*BASE, "--spec", str(odd), "--gpu-mem-gib", "192", "--peak-tflops", "1307"], capsys)
    assert _item(doc, "memory", "memory.capacity") == 192 * GIB


def _report(metrics: tuple[Metric, ...], details: dict | None = None) -> dict:
    res = CheckResult("train_step", "Training steps learn", Level.QUICK, Status.PASS, "ok", "", metrics, 1.0,
                      details or {})
    return Report("node", "gpu-host", "2025-01-01T00:00:00Z", 1.0, "test", {}, (res,)).to_json()


def _mfu(value: float, gpu: int) -> Metric:
    return Metric.of("train_mfu", value, "1", None, model="small", params=27_000_000, gpu=gpu,
                     gpu_model="NVIDIA H200", peak_tflops=989.4)


def test_measured_mfu_scales_the_time(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "node.json"
    path.write_text(json.dumps(_report((_mfu(0.19, 0), _mfu(0.20, 1), _mfu(0.25, 2)))))  # median 0.20
    assumed = _doc([*BASE, "--mfu", "0.4"], capsys)
    measured = _doc([*BASE, "--mfu-from", str(path)], capsys)
    t_a, t_m = _item(assumed, "compute", "compute.time"), _item(measured, "compute", "compute.time")
    assert t_m != pytest.approx(t_a)  # the measured MFU does change the figure ...
    assert t_m / t_a == pytest.approx(0.4 / 0.20, rel=1e-12)  # ... by exactly assumed / measured
    gh_ratio = _item(measured, "compute", "compute.gpu_hours") / _item(assumed, "compute", "compute.gpu_hours")
    assert gh_ratio == pytest.approx(2.0, rel=1e-12)
    assert assumed["mfu"] == {"value": 0.4, "kind": "assumed"} and measured["mfu"] == {"value": 0.2, "kind": "measured"}
    line = next(s for s in measured["sources"] if "measured MFU" in s)
    assert "reference model 'small'" in line and "27,000,000 params" in line and "NVIDIA H200" in line
    assert "median of 3 GPUs" in line and "lower MFU than a large one" in line
    rc, out, _ = _run([*BASE, "--mfu-from", str(path)], capsys)
    assert rc == 0 and "at measured MFU 20%" in out


def test_bad_mfu_files_exit_2_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_report((_mfu(0.2, 0),))))
    assert _doc([*BASE, "--mfu-from", str(good)], capsys)["mfu"]["kind"] == "measured"  # the valid file is read
    rc, _, err = _run([*BASE, "--mfu-from", str(good), "--mfu", "0.3"], capsys)
    _one_line_error(rc, err, "--mfu and --mfu-from")
    rc, _, err = _run([*BASE, "--mfu-from", str(tmp_path / "missing.json")], capsys)
    _one_line_error(rc, err, "missing.json", "no such file", "trainready node")
    (tmp_path / "text.json").write_text("not json {")
    rc, _, err = _run([*BASE, "--mfu-from", str(tmp_path / "text.json")], capsys)
    _one_line_error(rc, err, "text.json", "not JSON")
    (tmp_path / "plan.json").write_text(json.dumps({"schema": "trainready.plan/1"}))
    rc, _, err = _run([*BASE, "--mfu-from", str(tmp_path / "plan.json")], capsys)
    _one_line_error(rc, err, "plan.json", "'trainready.plan/1'", SCHEMA_VERSION)
    cpu = _report((Metric.of("train_tokens_per_s", 2000.0, "tokens/s", None, model="tiny", device="cpu"),),
                  {"throughput": {"mfu": "no MFU on a CPU: the peak table lists GPUs only"}})
    (tmp_path / "cpu.json").write_text(json.dumps(cpu))
    rc, _, err = _run([*BASE, "--mfu-from", str(tmp_path / "cpu.json")], capsys)
    _one_line_error(rc, err, "cpu.json", "no 'train_mfu' metric", "no MFU on a CPU")
    (tmp_path / "big.json").write_text(json.dumps(_report((_mfu(1.5, 0),))))
    rc, _, err = _run([*BASE, "--mfu-from", str(tmp_path / "big.json")], capsys)
    _one_line_error(rc, err, "big.json", "expected fractions in (0, 1]")
    doc = _report((_mfu(0.2, 0),))
    doc["results"][0]["metrics"] = 5  # a hand-edited record
    (tmp_path / "m5.json").write_text(json.dumps(doc))
    rc, _, err = _run([*BASE, "--mfu-from", str(tmp_path / "m5.json")], capsys)
    _one_line_error(rc, err, "m5.json", "metrics is int, expected a list")
    doc = _report((_mfu(0.2, 0),))
    doc["results"][0]["metrics"][0]["value"] = True
    (tmp_path / "true.json").write_text(json.dumps(doc))
    rc, _, err = _run([*BASE, "--mfu-from", str(tmp_path / "true.json")], capsys)
    _one_line_error(rc, err, "true.json", "expected fractions in (0, 1]")
    doc = _report((_mfu(0.2, 0),))
    doc["results"][0]["metrics"][0]["labels"] = ["x"]
    (tmp_path / "lab.json").write_text(json.dumps(doc))
    assert _doc([*BASE, "--mfu-from", str(tmp_path / "lab.json")], capsys)["mfu"]["kind"] == "measured"
