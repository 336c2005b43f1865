"""Compare two training states component by component, within a tolerance
declared before the run.

A *state* (what `snapshot` returns, per rank) is::

    {"tensors": {"param:<fqn>": T, "optim:<fqn>.<key>": T, ...},   # local shards
     "step": int, "lr": {"last_epoch": int, "last_lr": [float]},
     "data": sampler.state_dict(), "rng": rng.capture()}

Tolerance: |a - b| <= atol + rtol * |b| elementwise (numpy.isclose's rule);
atol = rtol = 0 means bitwise (torch.equal).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from trainready.workload import rng

SCALAR_COMPONENTS = ("step", "lr", "data", "rng")
LABELS = {"step": "step", "lr": "LR scheduler", "data": "data position", "rng": "RNG state"}


@dataclass(frozen=True)
class Tolerance:
    atol: float = 0.0
    rtol: float = 0.0

    @property
    def bitwise(self) -> bool:
        return self.atol == 0.0 and self.rtol == 0.0

    def describe(self) -> str:
        return "bitwise" if self.bitwise else f"atol={self.atol:g}, rtol={self.rtol:g}"

    def tensors_match(self, a: torch.Tensor, b: torch.Tensor) -> bool:
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if self.bitwise:
            return torch.equal(a, b)
        return bool(torch.isclose(a.double(), b.double(), rtol=self.rtol, atol=self.atol).all())

    def floats_match(self, a: float, b: float) -> bool:
        return a == b if self.bitwise else abs(a - b) <= self.atol + self.rtol * abs(b)


def max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    if a.shape != b.shape:
        return float("inf")
    if a.numel() == 0:
        return 0.0
    return float((a.double() - b.double()).abs().max().item())


def compare_tensors(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor], tol: Tolerance) -> list[dict[str, Any]]:
    """One row per tensor name (a's order): name, max_abs, ok. Missing names do not match."""
    rows = []
    for name in list(a) + [n for n in b if n not in a]:
        if name not in a or name not in b:
            rows.append({"name": name, "max_abs": float("inf"), "ok": False, "note": "missing on one side"})
            continue
        x, y = a[name].detach().cpu(), b[name].detach().cpu()
        rows.append({"name": name, "max_abs": max_abs(x, y), "ok": tol.tensors_match(x, y)})
    return rows


def compare_scalar(component: str, a: dict[str, Any], b: dict[str, Any], tol: Tolerance) -> dict[str, Any]:
    """step / lr / data / rng of two states: ok + a short note of what differs."""
    x, y = a[component], b[component]
    if component == "rng":
        diff = rng.differing(x, y)
        return {"name": "rng", "ok": not diff, "max_abs": 0.0 if not diff else float("nan"), "note": ", ".join(diff)}
    if component == "lr":
        d = abs(float(x["last_lr"][0]) - float(y["last_lr"][0]))
        ok = x["last_epoch"] == y["last_epoch"] and all(
            tol.floats_match(float(p), float(q)) for p, q in zip(x["last_lr"], y["last_lr"])
        )
        return {"name": "lr", "ok": ok, "max_abs": d, "note": f"last_epoch {x['last_epoch']} vs {y['last_epoch']}, lr {x['last_lr'][0]:.6g} vs {y['last_lr'][0]:.6g}"}
    if component == "data":
        keys = sorted(set(x) | set(y))
        diff = [f"{k} {x.get(k)} vs {y.get(k)}" for k in keys if x.get(k) != y.get(k)]
        return {"name": "data", "ok": not diff, "max_abs": 0.0 if not diff else float("nan"), "note": ", ".join(diff)}
    return {"name": component, "ok": x == y, "max_abs": abs(float(x) - float(y)), "note": f"{x} vs {y}"}


def compare_states(c: dict[str, Any], a: dict[str, Any], tol: Tolerance) -> dict[str, Any]:
    """Full comparison of C's state with A's: parameters, optimizer state, then the scalars."""
    rows = compare_tensors(c["tensors"], a["tensors"], tol)
    params = [r for r in rows if r["name"].startswith("param:")]
    optim = [r for r in rows if not r["name"].startswith("param:")]
    scalars = [compare_scalar(k, c, a, tol) for k in SCALAR_COMPONENTS]
    return {"params": params, "optim": optim, "scalars": scalars}


def rng_label(generator: str) -> str:
    return f"RNG {generator}"


def differs_before_load(fresh: dict[str, Any], a: dict[str, Any], tol: Tolerance) -> dict[str, bool]:
    """Does the fresh state fail the tolerance against A's final state, per component?

    A component that already matches before loading would make its later match
    meaningless: the test could pass by accident.  Each random generator (python,
    numpy, torch_cpu, cuda:I) is its own component: one that training never draws
    from would never show a missing restore.
    """
    cmp = compare_states(fresh, a, tol)
    out = {
        "parameters": not all(r["ok"] for r in cmp["params"]),
        "optimizer state": not all(r["ok"] for r in cmp["optim"]),
    }
    for r in cmp["scalars"]:
        if r["name"] != "rng":
            out[LABELS[r["name"]]] = not r["ok"]
    diff = rng.differing(fresh["rng"], a["rng"])
    for g in rng.generators(fresh["rng"], a["rng"]):
        out[rng_label(g)] = g in diff
    return out


def restored(c_after_load: dict[str, Any], a_at_k: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Right after C restored step K: does each train-state component (each generator
    on its own) equal A's at step K (exactly)?"""
    exact = Tolerance()
    out = {LABELS[k]: compare_scalar(k, c_after_load, a_at_k, exact) for k in SCALAR_COMPONENTS if k != "rng"}
    x, y = c_after_load["rng"], a_at_k["rng"]
    diff = rng.differing(x, y)
    for g in rng.generators(x, y):
        ok = g not in diff
        out[rng_label(g)] = {"name": f"rng:{g}", "ok": ok, "max_abs": 0.0 if ok else float("nan"),
                             "note": "" if ok else "state differs from run A's at the checkpoint step"}
    return out
