"""compare.py without processes: tolerance rules and the 'could pass by accident' guard."""

from __future__ import annotations

import copy

import torch

from trainready.resume.compare import Tolerance, compare_states, differs_before_load, restored
from trainready.train import rng


def _state(scale: float = 1.0) -> dict:
    rng.seed_all(0)
    return {
        "tensors": {"param:w": torch.ones(4) * scale, "optim:w.exp_avg": torch.zeros(4) + scale},
        "step": 10, "lr": {"last_epoch": 10, "last_lr": [1e-3]},
        "data": {"seed": 1, "epoch": 0, "position": 10}, "rng": rng.capture(),
    }


def test_bitwise_vs_tolerance() -> None:
    a, b = _state(), _state()
    b["tensors"]["param:w"] = b["tensors"]["param:w"] + 1e-7
    strict = compare_states(b, a, Tolerance())
    assert not strict["params"][0]["ok"] and strict["params"][0]["max_abs"] > 0
    loose = compare_states(b, a, Tolerance(atol=1e-6))
    assert loose["params"][0]["ok"]


def test_identical_fresh_state_is_flagged_as_vacuous() -> None:
    a = _state()
    differs = differs_before_load(copy.deepcopy(a), a, Tolerance())
    assert not any(differs.values())  # every component would pass by accident
    fresh = _state(scale=2.0)
    fresh.update(step=0, lr={"last_epoch": 0, "last_lr": [1e-4]}, data={"seed": 1, "epoch": 0, "position": 0})
    torch.rand(3)
    fresh["rng"] = rng.capture()
    assert all(differs_before_load(fresh, a, Tolerance()).values())


def test_restored_names_what_differs() -> None:
    a = _state()
    c = copy.deepcopy(a)
    c["lr"] = {"last_epoch": 0, "last_lr": [1e-4]}
    out = restored(c, a)
    assert not out["LR scheduler"]["ok"] and "last_epoch 0 vs 10" in out["LR scheduler"]["note"]
    assert out["RNG state"]["ok"] and out["data position"]["ok"]
