"""`trainready selftest`: every plant has a case (a new plant without one fails here), the docs' fault
catalogue matches the cases, a case that plants nothing is reported missed (the mismatch first), and a
lean subset runs for real and is detected."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evidence_records import run_main

from trainready.suite.plants import PLANTS
from trainready.selftest.cases import CASES, Case
from trainready.selftest.prepare import LAZY, placeholders, spec_text
from trainready.selftest.run import run_case

DOC = Path(__file__).resolve().parents[1] / "docs" / "evidence.md"


# Plants the self-test cannot run: cluster.image gives a node another squashfs, which needs a cluster with Pyxis
# and a test image (tests/test_cluster_pyxis.py plants it there); the self-test has neither to hand.
NEEDS_PYXIS = {"cluster.image"}
# A slow link on every node of one leaf switch: judged only where Slurm has a topology (topology/tree), which the
# self-test's 3 nodes of a site's default partition need not have; tests/test_cluster_topology.py plants it on a
# local cluster with 4 leaf switches; a switch down (its nodes' set-up fails): tests/test_switch_down.py and the
# accuracy campaign (benchmarks/accuracy.py).
NEEDS_TOPOLOGY = {"cluster.slow_link", "cluster.switch_down"}


def test_every_plant_has_a_selftest_case() -> None:
    covered = {p for c in CASES for p in c.plants}
    missing = set(PLANTS) - covered - NEEDS_PYXIS - NEEDS_TOPOLOGY
    assert missing == set(), f"plants without a selftest case: {sorted(missing)}"
    elsewhere = NEEDS_PYXIS | NEEDS_TOPOLOGY
    assert not elsewhere & covered and elsewhere <= set(PLANTS)
    assert "cluster.image" in (Path(__file__).parent / "test_cluster_pyxis.py").read_text()
    assert "cluster.slow_link" in (Path(__file__).parent / "test_cluster_topology.py").read_text()
    assert "cluster.switch_down" in (Path(__file__).parent / "test_switch_down.py").read_text()
    assert covered - set(PLANTS) == set(), f"cases covering unknown plants: {sorted(covered - set(PLANTS))}"
    assert len({c.name for c in CASES}) == len(CASES)


def test_docs_catalogue_lists_exactly_the_cases() -> None:
    section = DOC.read_text().split("### Fault catalogue", 1)[1]
    rows = re.findall(r"^\| `([\w.]+)` \|", section, re.M)
    assert rows == [c.name for c in CASES]


def test_every_placeholder_is_provided(tmp_path: Path) -> None:
    values = placeholders(tmp_path, 0)
    used = {m for c in CASES for a in (*c.argv, *c.before, c.expect) for m in re.findall(r"\{(\w+)\}", a)}
    assert used <= set(values) | set(LAZY), used - set(values) - set(LAZY)
    assert "world_size = 4" in spec_text(0) and "count = 0" in spec_text(0)
    facts = json.loads(Path(values["facts_remap"]).read_text())
    assert facts["nvml"]["gpus"][2]["remap_pending"] is True and facts["nvml"]["count"] == 8


@pytest.mark.slow
def test_a_case_that_plants_nothing_is_missed_and_one_that_plants_is_detected(tmp_path: Path) -> None:
    values = placeholders(tmp_path / "in", 0)
    nothing = Case("versions.none", "nothing planted", ("node", "--spec", "{spec}", "--only", "versions"),
                   "versions", r"numpy")
    res = run_case(nothing, values, 0, tmp_path)
    assert res.outcome == "missed" and res.verdict == "pass"  # the mismatch first: no fault, no detection
    drift = next(c for c in CASES if c.name == "versions.drift")
    res = run_case(drift, values, 0, tmp_path)
    assert res.outcome == "detected" and res.verdict == "fail" and "numpy" in res.message


def test_unmet_needs_are_skipped_with_the_reason(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = next(c for c in CASES if c.needs == "gpu")
    res = run_case(gpu, {}, 0, tmp_path)
    assert res.outcome == "skipped" and "needs a GPU" in res.message
    import trainready.selftest.prepare as prep

    monkeypatch.setattr(prep.shutil, "which", lambda _name: None)  # a machine without Slurm's commands
    assert "no Slurm here" in prep.unmet("slurm", 0)
    res = run_case(Case("cluster.x", "x", ("node",), "x", "x", needs="slurm"), {}, 0, tmp_path)
    assert res.outcome == "skipped" and "no Slurm here" in res.message and res.seconds == 0.0


@pytest.mark.slow
def test_selftest_cli_subset_detects_and_writes_its_record(tmp_path: Path) -> None:
    out = tmp_path / "selftest.json"
    p = run_main("selftest", "--only", "matmul.corrupt,data.truncated_bin", "--json", str(out),
                 "--junit", str(tmp_path / "st.xml"))
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "trainready.selftest/1" and doc["status"] == "pass"
    assert [(c["name"], c["outcome"]) for c in doc["cases"]] == [("matmul.corrupt", "detected"),
                                                                 ("data.truncated_bin", "detected")]
    assert doc["cases"][1]["verdict"] == "exit 2" and ".bin" in doc["cases"][1]["message"]
    assert doc["argv"][:2] == ["trainready", "selftest"]
    assert (tmp_path / "st.xml").read_text().count("<testcase") == 2
    assert run_main("selftest", "--only", "nope").returncode == 2
