"""Checkpoint compatibility across environments: `resume --save-only` in one process, `--load-from` in another.

Each planted difference (a changed dtype, a missing tensor, an RNG state of another format, a continuation
that differs, unreadable DCP metadata) must be named before the clean pair is shown to pass."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from trainready.resume.compat_env import row, structure_rows

SHORT = ("--steps", "4", "--checkpoint-step", "2")


def save(cli, directory: Path, *extra: str) -> None:
    r = cli("resume", *SHORT, "--save-only", str(directory), *extra)
    assert r.returncode == (3 if "--plant" in extra else 0), r.stdout + r.stderr  # records.PLANTED_EXIT
    assert (directory / "compat.json").is_file() and (directory / "reference-rank0.pt").is_file()


def load(cli, directory: Path, out: Path, *extra: str) -> tuple[int, dict]:
    r = cli("resume", "--load-from", str(directory), "--json", str(out), *extra)
    assert r.returncode in (0, 1, 3), r.stdout + r.stderr  # 3: a load of a planted checkpoint (records.PLANTED_EXIT)
    assert "Traceback" not in r.stdout + r.stderr
    return r.returncode, json.loads(out.read_text())


def failing(doc: dict) -> list[dict]:
    return [x for x in doc["results"][0]["details"]["table"] if not x["ok"]]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    from tests.conftest import run_cli

    d = tmp_path_factory.mktemp("compat") / "clean"
    save(run_cli, d)
    return d


@pytest.mark.slow
@pytest.mark.parametrize("plant, component, note", [
    ("compat.dtype=tok_emb.weight", "tensor model.tok_emb.weight", "dtype differs"),
    ("compat.missing=tok_emb.weight", "tensor model.tok_emb.weight", "missing tensor"),
    ("compat.rng=1", "RNG state torch_cpu", "RNG state format differs"),
])
def test_planted_difference_is_named(cli, tmp_path, plant, component, note):
    save(cli, tmp_path / "ck", "--plant", plant)
    rc, doc = load(cli, tmp_path / "ck", tmp_path / "l.json")
    assert rc == 3 and doc["status"] == "fail"  # the planted checkpoint fails, and the run is marked a test
    bad = failing(doc)
    assert [(b["component"], note in b["note"]) for b in bad] == [(component, True)]
    assert component in doc["results"][0]["message"]
    assert doc["context"]["planted"]  # a load of a planted checkpoint is marked as a test


@pytest.mark.slow
def test_continuation_that_differs_is_named_then_tolerance_declared(cli, tmp_path, saved):
    d = tmp_path / "ck"
    shutil.copytree(saved, d)
    ref = torch.load(d / "reference-rank0.pt", weights_only=True)
    ref["tensors"]["param:pos_emb.weight"] += 1e-4
    torch.save(ref, d / "reference-rank0.pt")
    rc, doc = load(cli, d, tmp_path / "l.json")
    assert rc == 1
    bad = failing(doc)
    assert len(bad) == 1 and bad[0]["component"].startswith("parameters") and "pos_emb.weight" in bad[0]["note"]
    rc, doc = load(cli, d, tmp_path / "l2.json", "--atol", "1e-3")
    assert rc == 0 and "within atol=0.001" in doc["results"][0]["message"]


@pytest.mark.slow
def test_unreadable_dcp_metadata_is_named(cli, tmp_path, saved):
    d = tmp_path / "ck"
    shutil.copytree(saved, d)
    step = d / "ckpt" / (d / "ckpt" / "latest").read_text().strip()
    (step / ".metadata").write_bytes(b"not a pickle")
    rc, doc = load(cli, d, tmp_path / "l.json")
    assert rc == 1 and [b["component"] for b in failing(doc)] == ["DCP metadata"]
    assert "unreadable by torch" in failing(doc)[0]["here"]


@pytest.mark.slow
def test_clean_save_loads_and_continues_bitwise_in_a_fresh_process(cli, tmp_path, saved):
    rc, doc = load(cli, saved, tmp_path / "l.json")
    assert rc == 0, doc["results"][0]["message"]
    assert "bitwise equal" in doc["results"][0]["message"] and failing(doc) == []
    comps = [x["component"] for x in doc["results"][0]["details"]["table"]]
    assert "DCP metadata version" in comps and any(c.startswith("loss, steps 3-4") for c in comps)
    man = json.loads((saved / "compat.json").read_text())
    assert man["schema"] == "trainready.compat/1" and man["environment"]["torch"] == torch.__version__
    assert man["entries"]["model.tok_emb.weight"]["dtype"] == "torch.float32"
    assert set(man["rng_format"]) >= {"python", "numpy", "torch_cpu"}


def test_usage_errors_are_one_line(cli, tmp_path, saved):
    r = cli("resume", "--load-from", str(tmp_path / "nope"))
    assert r.returncode == 2 and "--load-from" in r.stderr and r.stderr.count("\n") == 1
    r = cli("resume", "--save-only", str(saved))
    assert r.returncode == 2 and "already holds" in r.stderr
    r = cli("resume", "--save-only", str(tmp_path / "a"), "--load-from", str(saved))
    assert r.returncode == 2 and "give one" in r.stderr


def test_structure_rows_shape_extra_and_version():
    saved = {"dcp_version": "0.9.0", "entries": {"model.w": {"dtype": "torch.float32", "shape": [4, 4]},
                                                "optim.x": {"bytes": True}}}
    read = dict(saved["entries"])
    expected = {"model.w": {"dtype": "torch.float32", "shape": [4, 8]}}
    rows = structure_rows(saved, "0.9.0", read, expected, {"python": "version 3, 625 words"}, {"python": "version 3, 625 words"})
    bad = [r for r in rows if not r["ok"]]
    assert [(r["component"], r["note"]) for r in bad] == [("tensor model.w", "shape differs")]
    extra = next(r for r in rows if r["component"] == "entry optim.x")
    assert extra["ok"] and "ignored" in extra["note"]
    assert rows[0]["component"] == "DCP metadata version" and rows[0]["note"].startswith("differs")
    assert row("a", "b", "c", True) == {"component": "a", "saved": "b", "here": "c", "ok": True, "note": ""}
