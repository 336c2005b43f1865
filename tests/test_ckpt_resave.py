"""Saving the same step again: a crash at ANY rename/delete of the save leaves `latest`
naming a complete checkpoint that loads (the old one before the pointer moved, the new one after)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
import torch

from conftest import params, trained_cpu
from trainready.ckpt.load import load_checkpoint, resolve_latest
from trainready.ckpt.save import save_checkpoint
from trainready.workload.loop import TrainConfig, Trainer

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled")


class Crash(Exception):
    """Stands in for a kill at this instant."""


def _loaded(root: Path) -> dict[str, torch.Tensor]:
    fresh = Trainer(TrainConfig(steps=20), torch.device("cpu"), 1, 0)
    load_checkpoint(resolve_latest(root), fresh.model, fresh.optimizer)
    return params(fresh)


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def _crash_at(n: int, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make the n-th os.replace / os.rename / shutil.rmtree call (from anywhere) raise Crash."""
    calls: list[str] = []

    def wrap(name: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def f(*args: Any, **kw: Any) -> Any:
            calls.append(f"{name}({', '.join(Path(str(a)).name for a in args[:2])})")
            if len(calls) == n:
                raise Crash(calls[-1])
            return real(*args, **kw)
        return f

    monkeypatch.setattr(os, "replace", wrap("replace", os.replace))
    monkeypatch.setattr(os, "rename", wrap("rename", os.rename))
    monkeypatch.setattr(shutil, "rmtree", wrap("rmtree", shutil.rmtree))
    return calls


@pytest.mark.slow
def test_crash_at_every_point_of_a_resave_leaves_latest_loadable(tmp_path: Path) -> None:
    old_tr, new_tr = trained_cpu(1, 2, 32), trained_cpu(3, 2, 32)
    old, new = params(old_tr), params(new_tr)
    assert not _same(old, new)  # the two saves are distinguishable
    outcomes: list[str] = []
    for n in range(1, 100):
        root = tmp_path / f"crash-{n}"
        save_checkpoint(root, 5, old_tr.model, old_tr.optimizer, {"v": "old"})
        with pytest.MonkeyPatch.context() as mp:
            calls = _crash_at(n, mp)
            try:
                save_checkpoint(root, 5, new_tr.model, new_tr.optimizer, {"v": "new"})
                crashed = False
            except (Crash, BaseException) as exc:  # DCP wraps it in a CheckpointException (a BaseException)
                if isinstance(exc, KeyboardInterrupt):
                    raise
                assert "Crash" in f"{type(exc).__name__} {exc}", exc
                crashed = True
        got = _loaded(root)  # latest resolves and verifies, whatever instant the crash hit
        assert _same(got, old) or _same(got, new), f"crash at {calls[-1]}: loaded neither save"
        outcomes.append("old" if _same(got, old) else "new")
        if not crashed:
            assert outcomes[-1] == "new"
            # Nothing but the live checkpoint (and its pointer) is left behind.
            assert sorted(p.name for p in root.iterdir()) == sorted(["latest", resolve_latest(root).name])
            break
    assert "old" in outcomes and outcomes[-1] == "new" and len(outcomes) >= 4


def test_resave_after_a_crash_cleans_up_and_alternates_names(tmp_path: Path) -> None:
    tr = trained_cpu(1, 2, 32)
    names = []
    for _ in range(3):
        save_checkpoint(tmp_path, 7, tr.model, tr.optimizer, {})
        names.append(resolve_latest(tmp_path).name)
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("step-7")] == [names[-1]]
    assert names[0] == "step-7" and names[1].startswith("step-7.r") and names[2] == "step-7"
    save_checkpoint(tmp_path, 70, tr.model, tr.optimizer, {})  # another step never deletes step-7's neighbours
    save_checkpoint(tmp_path, 7, tr.model, tr.optimizer, {})
    assert (tmp_path / "step-70").is_dir()
