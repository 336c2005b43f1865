"""`trainready plan` without a layout: it searches and plans the best layout that fits, and says so;
`--search` lists every degree it varied and explains its cost; the JSON says what the text says."""

from __future__ import annotations

import json
import re

import pytest

from trainready.cli import main

BIG = ["--preset", "dense-500b", "--gpus", "5120", "--gpu", "B200"]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(["plan", *args])
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def _json(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, str]:
    rc, out, err = _run([*args, "--json", "-"], capsys)
    return rc, json.loads(out), err


def test_without_degrees_the_plan_is_the_best_layout_that_fits(capsys: pytest.CaptureFixture[str]) -> None:
    # the planted fault: plain data parallelism (what the plan used to assume) does not fit, exit 1
    rc, out, _ = _run([*BIG, "--tp", "1", "--pp", "1", "--dp", "5120"], capsys)
    assert rc == 1 and "DOES NOT FIT" in out
    # no degrees given: the search's best layout, named as such, fits: exit 0
    rc, out, _ = _run(BIG, capsys)
    assert rc == 0 and "FITS" in out and "chosen: the best of" in out
    rc, doc, _ = _json([*BIG, "--search", "--top", "3"], capsys)
    best, par = doc["search"][0], doc["inputs"]["parallel"]
    assert rc == 0 and doc["layout"]["chosen_by"] == "search" and doc["layout"]["layouts_fit"] == doc["search_fit_total"]
    assert doc["memory"]["verdict"] in ("fits", "tight")
    assert (par["tp"], par["pp"], par["cp"], par["dp"], par["sp"], par["zero"]) == (
        best["tp"], best["pp"], best["cp"], best["dp"], best["sp"], best["zero"])
    assert doc["inputs"]["training"]["micro_batch"] == best["micro_batch"]


def test_exit_1_only_when_no_layout_fits(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["--preset", "dense-500b", "--gpus", "8"], capsys)
    assert rc == 1 and "no layout fits" in out and "DOES NOT FIT" in out
    rc, doc, _ = _json(["--preset", "dense-500b", "--gpus", "8", "--search"], capsys)
    assert rc == 1 and doc["search"] == [] and doc["layout"]["layouts_fit"] == 0


def test_search_exits_0_when_layouts_fit_even_if_the_given_one_does_not(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run([*BIG, "--tp", "1", "--dp", "5120", "--search"], capsys)
    assert rc == 0 and "DOES NOT FIT" in out and "the layout given does not fit" in out
    rc, out, _ = _run([*BIG, "--tp", "1", "--dp", "5120"], capsys)  # the same without --search: its verdict
    assert rc == 1


@pytest.mark.slow
def test_search_table_shows_each_varied_degree_and_explains_cost(capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    rc, out, _ = _run(["--preset", "llama3-8b", "--gpus", "8", "--global-batch", "32", "--search", "--top", "0"], capsys)
    header = next(ln for ln in out.splitlines() if ln.split()[:3] == ["#", "tp", "pp"])
    assert header.split() == ["#", "tp", "pp", "cp", "dp", "sp", "b", "ZeRO", "recompute", "GiB/GPU", "headroom", "cost"]
    assert "cost: relative heuristic, lower is better, 1.000 = no recompute" in " ".join(out.split())
    assert max(len(ln) for ln in out.splitlines()) <= 80
    rc, doc, _ = _json(["--preset", "llama3-8b", "--gpus", "8", "--global-batch", "32", "--search", "--top", "0"], capsys)
    found = doc["search"]
    for key in ("tp", "pp", "cp", "dp", "sp", "micro_batch", "zero", "recompute"):
        assert len({c[key] for c in found}) > 1, key  # each one varied
    # what the user gave is held, and said to be
    rc, out, _ = _run(["--preset", "llama3-8b", "--gpus", "8", "--global-batch", "32", "-b", "2", "--no-sp",
                       "--search", "--top", "0"], capsys)
    assert "held fixed: GPUs, global batch, precision, attention, sp, micro-batch." in " ".join(out.split())
    rc, doc, _ = _json(["--preset", "llama3-8b", "--gpus", "8", "--global-batch", "32", "-b", "2", "--no-sp",
                        "--search", "--top", "0"], capsys)
    assert {c["micro_batch"] for c in doc["search"]} == {2} and not any(c["sp"] for c in doc["search"])


def test_json_says_what_the_text_says(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--preset", "dense-500b", "--gpus", "5120", "--tp", "8", "--pp", "16", "--sp", "--distributed-optimizer",
            "--gpu", "H200"]
    rc, out, _ = _run(args, capsys)
    assert "ZeRO stage 1 (distributed optimizer)" in out and "500,520,734,720 parameters" in out
    rc, doc, _ = _json(args, capsys)
    assert doc["inputs"]["parallel"]["zero"] == 1 and doc["inputs"]["parallel"]["distributed_optimizer"] is True
    assert doc["inputs"]["model"]["params"] == 500_520_734_720 == doc["params"]
    assert doc["layout"]["chosen_by"] == "given" and doc["layout"]["layouts_fit"] is None


def test_an_implied_global_batch_is_stated(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run(["--preset", "llama3-8b", "--gpus", "64", "--tp", "8"], capsys)
    assert "global batch 8 sequences (1 micro-batch per step), implied: b·dp = 1·8 (--global-batch not given)" in \
        " ".join(out.split())
    rc, doc, _ = _json(["--preset", "llama3-8b", "--gpus", "64", "--tp", "8"], capsys)
    assert doc["layout"]["global_batch_implied"] is True and doc["inputs"]["training"]["global_batch"] == 8
    rc, out, _ = _run(["--preset", "llama3-8b", "--gpus", "64", "--tp", "8", "--global-batch", "64"], capsys)
    assert "implied" not in out
    rc, doc, _ = _json(["--preset", "llama3-8b", "--gpus", "64", "--tp", "8", "--global-batch", "64"], capsys)
    assert doc["layout"]["global_batch_implied"] is False


PCT = r"-?[\d,]+\.\d\d%"


def test_one_headroom_format(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    rc, out, _ = _run([*BIG, "--tp", "1", "--pp", "1", "--dp", "5120"], capsys)  # free = -47.9 of capacity
    row = next(ln for ln in out.splitlines() if "headroom (free share" in ln)
    shown = re.search(PCT, row)
    assert rc == 1 and shown and shown.group(0).startswith("-4,7"), row  # not '-47.9'
    assert f"headroom {shown.group(0)} of" in out  # the verdict line says the same, the same way
    rc, out, _ = _run(["--preset", "llama3-8b", "--gpus", "8", "--search"], capsys)
    table = out.split("Layouts that fit", 1)[1]
    rows = [ln for ln in table.splitlines() if re.match(r"\s*\d+\s", ln)]
    assert rows and all(re.search(PCT, ln) for ln in rows)


@pytest.mark.parametrize("args", [["--preset", "llama3-8b", "--gpus", "8"], ["--preset", "dense-500b", "--gpus", "5120"],
                                  ["--params", "7.5B", "--dp", "64", "--zero", "2"]])
def test_rules_are_named_by_their_public_source(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = _run([*args, "--explain"], capsys)
    text = " ".join(out.split())
    assert "seed" not in text.lower()
    assert "Rajbhandari et al. 2020" in text and "Narayanan et al. 2021 §3" in text
    framework = next(ln for ln in out.split("Formulas and sources")[0].splitlines() if ln.startswith("framework:"))
    assert "13 B" in framework


def test_help_and_formulas_never_cite_the_seed(capsys: pytest.CaptureFixture[str]) -> None:
    from trainready.plan.explain import FORMULAS

    assert not any("seed" in " ".join(row).lower() for row in FORMULAS)
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    assert "seed" not in capsys.readouterr().out.lower()


def test_explain_fits_80_columns(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    rc, out, _ = _run(["--preset", "gpt3-175b", "--tp", "8", "--pp", "8", "--dp", "1", "--attention", "classic",
                       "--explain"], capsys)
    assert rc == 0 and "Korthikanti" in out and "Formulas and sources" in out
    assert max(len(ln) for ln in out.splitlines()) <= 80
    monkeypatch.setenv("COLUMNS", "200")  # not by accident: a wider terminal gets wider lines
    rc, out, _ = _run(["--preset", "gpt3-175b", "--tp", "8", "--pp", "8", "--dp", "1", "--attention", "classic",
                       "--explain"], capsys)
    assert max(len(ln) for ln in out.splitlines()) > 80


@pytest.mark.slow
def test_a_held_sp_is_applied_to_the_chosen_layout(capsys: pytest.CaptureFixture[str]) -> None:
    """`--sp` without --tp means 'sequence parallel wherever tp > 1' (also when nothing fits: no exit 2)."""
    rc, on, _ = _json(["--preset", "llama3-70b", "--gpus", "64", "--sp", "--search", "--top", "0"], capsys)
    rc2, off, _ = _json(["--preset", "llama3-70b", "--gpus", "64", "--no-sp", "--search", "--top", "0"], capsys)
    assert rc == rc2 == 0 and on["inputs"]["parallel"]["tp"] > 1 and on["inputs"]["parallel"]["sp"] is True
    assert all(c["sp"] == (c["tp"] > 1) for c in on["search"]) and not any(c["sp"] for c in off["search"])
    rc, _, err = _run(["--preset", "dense-500b", "--gpus", "8", "--sp"], capsys)
    assert rc == 1 and not err
