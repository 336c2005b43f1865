"""`trainready plan` end to end (in-process through `trainready.cli.main`) and the layout search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainready.cli import main
from trainready.plan.inputs import Hardware, Parallel, PlanInput, Training, validate
from trainready.plan.memory import plan_memory
from trainready.plan.model import PRESETS
from trainready.plan.planner import gpu_figures
from trainready.plan.search import search


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["plan", *args])
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_seed_500b_json(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["--preset", "dense-500b", "--gpus", "5120", "--tp", "8", "--pp", "16", "--sp",
                       "--distributed-optimizer", "--global-batch", "2560", "--gpu", "H200", "--tokens", "10T",
                       "--json", "-"], capsys)
    doc = json.loads(out)
    assert rc == 0 and doc["schema"] == "trainready.plan/1" and doc["memory"]["verdict"] == "fits"
    full = next(q for q in doc["checkpoint"] if q["key"] == "checkpoint.full")
    assert full["unit"] == "B" and 6.9e12 < full["value"] < 7.1e12 and "Rajbhandari" in full["source"]
    assert doc["inputs"]["parallel"]["dp"] == 40


def test_explain_prints_formulas_and_sources(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["--preset", "gpt3-175b", "--tp", "8", "--pp", "8", "--dp", "1", "--sp", "--global-batch", "8",
                       "--attention", "classic", "--explain"], capsys)
    assert "Korthikanti" in out and "sbh(34 + 5as/h)" in out and "Rajbhandari" in out and "6·N·D" in out


def test_does_not_fit_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["--params", "7.5B", "--dp", "1", "--gpu", "H100"], capsys)
    assert rc == 1 and "DOES NOT FIT" in out
    rc, out, _ = _run(["--params", "7.5B", "--dp", "64", "--zero", "3", "--gpu", "H100"], capsys)
    assert rc == 0 and "FITS" in out


@pytest.mark.parametrize(
    "args, words",
    [
        (["--layers", "2", "--hidden", "100", "--heads", "3", "--vocab", "10", "--seq-len", "8"], "heads (3) must divide hidden (100)"),
        (["--preset", "llama2-7b", "--tp", "3"], "--tp 3 must divide the number of heads (32)"),
        (["--preset", "llama2-7b", "--tp", "8", "--pp", "2", "--gpus", "100"], "--gpus 100 is not a multiple"),
        (["--preset", "llama2-7b", "--hidden", "-4096"], "model.hidden = -4096"),
        (["--params", "-3B"], "--params '-3B'"),
        (["--preset", "gpt5"], "--preset 'gpt5': unknown"),
        (["--preset", "llama2-7b", "--precision", "fp8"], "--precision 'fp8'"),
        (["--preset", "llama2-7b", "--headroom", "2"], "--headroom 2: expected a fraction of GPU memory in [0, 1)"),
        (["--preset", "llama2-7b", "--headroom", "1"], "--headroom 1: expected a fraction"),
        (["--preset", "llama2-7b", "--fragmentation", "5"], "--fragmentation 5: expected a fraction of the allocated peak in [0, 1]"),
        (["--preset", "llama2-7b", "--gpus", "8", "--global-batch", "-8"], "--global-batch -8: expected an integer > 0"),
    ],
)
def test_impossible_inputs_one_line_exit_2(args: list[str], words: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _run(args, capsys)
    assert rc == 2
    assert words in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_bad_values_are_not_misdescribed(capsys: pytest.CaptureFixture[str]) -> None:
    # a negative global batch is not "not a multiple"; the edges of the allowed ranges are accepted
    rc, _, err = _run(["--preset", "llama2-7b", "--gpus", "8", "--global-batch", "-8"], capsys)
    assert rc == 2 and "not a multiple" not in err and "> 0" in err
    rc, _, _ = _run(["--preset", "llama2-7b", "--tp", "8", "--headroom", "0.99", "--fragmentation", "1"], capsys)
    assert rc in (0, 1)


def test_tp_across_nodes_warns(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run(["--preset", "llama2-7b", "--tp", "8", "--json", "-"], capsys)
    assert rc == 0 and json.loads(out)["warnings"] == [] and "cross nodes" not in err  # within a node: quiet
    rc, out, err = _run(["--preset", "llama2-7b", "--tp", "16", "--json", "-"], capsys)
    assert rc == 0 and "--tp 16 with 8 GPUs per node: tensor-parallel groups cross nodes" in err
    assert any("cross nodes" in w for w in json.loads(out)["warnings"])
    rc, out, _ = _run(["--preset", "llama2-7b", "--tp", "16"], capsys)
    assert "warning:" in out and "cross nodes" in out


def test_json_into_missing_directory_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no-such-dir" / "x.json"
    rc, out, err = _run(["--preset", "llama2-7b", "--tp", "8", "--json", str(missing)], capsys)
    assert rc == 2 and "does not exist" in err and str(missing.parent) in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not missing.parent.exists() and "trainready plan" not in out  # nothing created, nothing half-printed
    # not by accident: into an existing directory the same command writes the plan
    ok = tmp_path / "x.json"
    rc, _, _ = _run(["--preset", "llama2-7b", "--tp", "8", "--json", str(ok)], capsys)
    assert rc == 0 and json.loads(ok.read_text())["schema"] == "trainready.plan/1"


def test_plan_file_unknown_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "plan.toml"
    f.write_text('[model]\nparams = 7500000000\n[parallel]\ndp = 64\nzero = 2\n')
    rc, out, _ = _run(["--file", str(f), "--json", "-"], capsys)
    assert rc == 0 and round(sum(q["value"] for q in json.loads(out)["memory"]["items"]
                                 if q["key"] in ("memory.weights", "memory.grads", "memory.optimizer")) / 1e9, 1) == 16.6
    f.write_text("[parallel]\nzeros = 2\n")
    rc, _, err = _run(["--file", str(f)], capsys)
    assert rc == 2 and "parallel.zeros" in err and "unknown key" in err


def test_search_returns_only_layouts_that_fit(capsys: pytest.CaptureFixture[str]) -> None:
    inp = PlanInput(PRESETS["llama2-13b"], Parallel(gpus=8, sp=True), Training(global_batch=64, micro_batch=1),
                    Hardware(gpu="H100"))
    found = search(inp, limit=0)
    assert found
    # not by accident: plain data parallelism (16 B/param × 13 B = 208 GB) does not fit and is absent
    plain = validate(PlanInput(inp.model, Parallel(gpus=8), inp.training, inp.hardware))
    _, cap, _ = gpu_figures(plain)
    assert plan_memory(plain, cap).verdict == "does not fit"
    assert not any(c.tp == 1 and c.pp == 1 and c.zero == 0 for c in found)
    for c in found:
        cand = validate(PlanInput(inp.model, Parallel(tp=c.tp, pp=c.pp, cp=c.cp, dp=c.dp, zero=c.zero, sp=c.sp),
                                  Training(global_batch=64, micro_batch=c.micro_batch, recompute=c.recompute),
                                  inp.hardware))
        assert plan_memory(cand, cap).verdict != "does not fit"
    order = [(c.verdict != "fits", c.cost) for c in found]
    assert order == sorted(order)  # every layout that fits before any tight one, each group by cost
    # too small a GPU: nothing fits, and the CLI says so
    assert search(PlanInput(inp.model, inp.parallel, inp.training, Hardware(gpu_mem_gib=8, peak_tflops=100))) == []
    rc, out, _ = _run(["--preset", "llama2-13b", "--gpus", "8", "--global-batch", "64", "--tp", "2", "--sp", "--zero", "1",
                       "--search"], capsys)
    assert rc == 0 and "Layouts that fit" in out
