"""Checkpoint save/load in one process: round trip, and every way a checkpoint can be bad."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from conftest import params, trained_cpu
from trainready.ckpt import manifest
from trainready.ckpt.load import load_checkpoint, resolve_latest
from trainready.ckpt.save import save_checkpoint
from trainready.errors import CheckpointError
from trainready.workload.loop import TrainConfig, Trainer

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")


@pytest.mark.slow
def test_round_trip_restores_model_and_optimizer(tmp_path: Path) -> None:
    tr = trained_cpu(3)
    save_checkpoint(tmp_path, 3, tr.model, tr.optimizer, {"note": "x"})
    fresh = Trainer(TrainConfig(steps=20), torch.device("cpu"), 1, 0)
    before = params(fresh)
    assert any(not torch.equal(before[k], v) for k, v in params(tr).items())  # differs before load
    st = load_checkpoint(resolve_latest(tmp_path), fresh.model, fresh.optimizer)
    assert st["note"] == "x" and st["step"] == 3
    assert all(torch.equal(params(fresh)[k], v) for k, v in params(tr).items())
    a, b = tr.optimizer.state_dict()["state"], fresh.optimizer.state_dict()["state"]
    assert all(torch.equal(a[i]["exp_avg_sq"], b[i]["exp_avg_sq"]) for i in a)
    man = manifest.read(tmp_path / "step-3")
    assert set(man["files"]) == {".metadata", "__0_0.distcp", "train-rank-0.json"} or all(
        n.startswith("__0_") or n in (".metadata", "train-rank-0.json") for n in man["files"])
    assert (tmp_path / "latest").read_text().strip() == "step-3"


@pytest.mark.slow
def test_flipped_byte_is_rejected_not_loaded(tmp_path: Path) -> None:
    tr = trained_cpu(2)
    d = save_checkpoint(tmp_path, 2, tr.model, tr.optimizer, {})
    fresh = Trainer(TrainConfig(steps=20), torch.device("cpu"), 1, 0)
    victim = max(d.glob("*.distcp"), key=lambda p: p.stat().st_size)
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    victim.write_bytes(bytes(raw))
    before = params(fresh)
    with pytest.raises(CheckpointError, match=rf"{victim.name}: sha256 .* does not match .*\(corrupted\)"):
        load_checkpoint(resolve_latest(tmp_path), fresh.model, fresh.optimizer)
    assert all(torch.equal(params(fresh)[k], v) for k, v in before.items())  # nothing was loaded


def test_truncated_file_is_rejected(tmp_path: Path) -> None:
    tr = trained_cpu(1)
    d = save_checkpoint(tmp_path, 1, tr.model, tr.optimizer, {})
    victim = next(d.glob("*.distcp"))
    with open(victim, "r+b") as fh:
        fh.truncate(victim.stat().st_size - 10)
    with pytest.raises(CheckpointError, match="truncated"):
        load_checkpoint(d, tr.model, tr.optimizer)


@pytest.mark.slow
def test_half_written_and_missing_pointer(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="no 'latest' pointer"):
        resolve_latest(tmp_path)
    tr = trained_cpu(1)
    d = save_checkpoint(tmp_path, 1, tr.model, tr.optimizer, {})
    (d / "manifest.json").unlink()
    with pytest.raises(CheckpointError, match="half-written"):
        load_checkpoint(resolve_latest(tmp_path), tr.model, tr.optimizer)
    (tmp_path / "latest").write_text("step-1.tmp\n")
    with pytest.raises(CheckpointError, match="expected 'step-N'"):
        resolve_latest(tmp_path)


def test_piece_hashes_match_sha256sum_for_small_files(tmp_path: Path) -> None:
    import hashlib

    p = tmp_path / "f.bin"
    p.write_bytes(b"abc" * 1000)
    assert manifest.hash_file(p)["sha256"] == [hashlib.sha256(b"abc" * 1000).hexdigest()]
