"""compare.py without processes: tolerance rules and the 'could pass by accident' guard."""

from __future__ import annotations

import copy
import random

import numpy as np

import torch

from trainready.resume.compare import Tolerance, compare_states, differs_before_load, restored
from trainready.workload import rng


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
    torch.rand(3), random.random(), np.random.random()
    if torch.cuda.is_available():  # the CUDA generators are part of the captured state there
        torch.rand(3, device="cuda")
    fresh["rng"] = rng.capture()
    assert all(differs_before_load(fresh, a, Tolerance()).values())


def test_restored_names_what_differs() -> None:
    a = _state()
    c = copy.deepcopy(a)
    c["lr"] = {"last_epoch": 0, "last_lr": [1e-4]}
    out = restored(c, a)
    assert not out["LR scheduler"]["ok"] and "last_epoch 0 vs 10" in out["LR scheduler"]["note"]
    assert out["RNG python"]["ok"] and out["RNG numpy"]["ok"] and out["data position"]["ok"]


def test_each_generator_is_its_own_component() -> None:
    """A generator training never draws from (same state fresh and at the end) is flagged, by name;
    one left unrestored is named, the others are not."""
    a = _state()
    fresh = copy.deepcopy(a)
    fresh["rng"] = dict(a["rng"], torch_cpu="changed", numpy=["MT19937", [0] * 624, 0, 0, 0.0])
    differs = differs_before_load(fresh, a, Tolerance())
    assert differs["RNG torch_cpu"] and differs["RNG numpy"]
    assert differs["RNG python"] is False  # python's generator never moved: a restore could not be seen
    rng.seed_all(0)
    at_k = rng.capture()  # A's generators at the checkpoint step
    for skipped in ("python", "numpy"):
        random.random(), np.random.random(), torch.rand(1)  # C's fresh generators: all elsewhere
        rng.restore(at_k, skip=(skipped,))
        out = restored({**a, "rng": rng.capture()}, {**a, "rng": at_k})
        assert [g for g in ("python", "numpy", "torch_cpu") if not out[f"RNG {g}"]["ok"]] == [skipped]


def test_a_training_step_draws_from_every_host_generator_and_the_draws_matter() -> None:
    """Input noise (workload/loop.py): each step moves python, numpy and torch_cpu, and a different
    python or numpy state gives a different loss (so a skipped restore cannot go unseen)."""
    from trainready.workload.loop import TrainConfig, Trainer

    x = np.random.RandomState(0).randint(0, 512, (2, 32)).astype(np.int64)

    def one_step(perturb: str = "") -> tuple[float, list[str]]:
        tr = Trainer(TrainConfig(steps=5), torch.device("cpu"), 1, 0)  # seeds every generator
        if perturb == "python":
            random.seed(99)  # another state of this generator only
        elif perturb == "numpy":
            np.random.seed(99)
        before = rng.capture()
        loss = tr.step(x, x)
        return loss, rng.differing(before, rng.capture())

    base, moved = one_step()
    assert moved == ["python", "numpy", "torch_cpu"]
    assert one_step("python")[0] != base and one_step("numpy")[0] != base
    tr = Trainer(TrainConfig(steps=5, input_noise=0.0), torch.device("cpu"), 1, 0)
    before = rng.capture()
    tr.step(x, x)
    assert rng.differing(before, rng.capture()) == ["torch_cpu"]  # without noise only dropout draws
