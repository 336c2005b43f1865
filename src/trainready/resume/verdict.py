"""Turn the three runs' per-rank results into one verdict, a component table and metrics."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from trainready.records import Metric, Outcome, Status, Threshold
from trainready.resume.compare import LABELS, Tolerance
from trainready.spec.disabled import tolerance_disables

REMEDY_RESUME = (
    "The named component was not saved or not restored: check the checkpoint contents "
    "(train-rank-R.json) and the restore order (model/optimizer, then scheduler, data position, RNG last)."
)

REMEDY_BLIND = ("Declare a relative tolerance below 1 (resume.rtol / --rtol; 0 with atol 0 = bitwise): max |Δ| "
                "in the table is what this run needed.")


def _loss_diff(a: dict[Any, float], b: dict[Any, float], steps: range, tol: Tolerance) -> tuple[float, int | None]:
    """(max |Δ| over the steps, first step outside the tolerance or None). Keys may be str after JSON."""
    worst, first = 0.0, None
    for s in steps:
        x, y = float(b.get(s, b.get(str(s), math.nan))), float(a.get(s, a.get(str(s), math.nan)))
        d = abs(x - y)
        worst = max(worst, d) if not math.isnan(d) else math.inf
        if first is None and not tol.floats_match(x, y):
            first = s
    return worst, first


def _pretty(name: str) -> str:
    kind, _, rest = name.partition(":")
    if kind == "param":
        return f"parameter {rest}"
    fqn, _, key = rest.rpartition(".")
    return f"optimizer {key} of {fqn}"


def _loss_series(runs: dict[str, list[dict[str, Any]]]) -> dict[str, list[list[float]]]:
    """Rank 0's loss at every step of each run, [[step, loss], ...]: the HTML report's resume chart."""
    out = {}
    for role, ranks in runs.items():
        losses = ranks[0].get("losses", {}) if ranks else {}
        out[role] = [[int(s), float(v)] for s, v in sorted(losses.items(), key=lambda kv: int(kv[0]))]
    return out


@dataclass
class Table:
    """The component table (one row per component) and, for each component that differs, what differs first."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    firsts: list[str] = field(default_factory=list)


def judge(runs: dict[str, list[dict[str, Any]]], declared: dict[str, Any], walls: dict[str, float], pc: Any, run_dir: str) -> Outcome:
    tol: Tolerance = pc.tolerance
    n, k, ws = pc.train.steps, pc.checkpoint_step, pc.world_size
    A, C = runs["A"], runs["C"]
    details: dict[str, Any] = {"declared": declared, "run_dir": run_dir, "wall_s": walls,
                               "determinism": A[0]["determinism"], "precision": A[0]["precision"],
                               "nondeterministic_ops": sorted({w for r in A + C for w in r.get("nondeterministic_ops", [])})}
    details["loss_series"] = _loss_series(runs)
    metrics = [Metric.of("resume_wall_time", v, "s", None, run=role) for role, v in walls.items()]
    early = _cannot_judge(runs, k, ws, tol, metrics, details)
    if early is not None:
        return early
    table = Table()
    _tensor_rows(C, ws, table)
    _scalar_rows(C, n, table)
    _loss_row(A, C, n, k, ws, tol, table)
    for row in table.rows:
        row["tolerance"] = tol.describe()
        metrics.append(Metric.of("resume_max_abs_delta", row["max_abs"], "1",
                                 Threshold("<=", tol.atol, "1", "declared resume.atol") if tol.rtol == 0 and not math.isnan(row["max_abs"]) else None,
                                 component=row["component"].split(" (")[0]))
    restored_txt = _restored(C, details)
    details["table"] = table.rows
    details["params_per_rank"] = C[0]["params"]
    details["loss"] = {"A_step1": A[0]["losses"].get(1), f"A_step{n}": A[0]["losses"].get(n)}
    where = f"{ws} {pc.backend} rank{'s' if ws > 1 else ''}, {pc.train.mode}, {A[0]['precision']}"
    if pc.model is not None:
        details["model"] = pc.model.to_json()
        where += f", vocab {pc.model.config.vocab_size} ({'from the data' if pc.model.vocab_from == 'data' else '--vocab-size'})"
    if not table.firsts:
        biggest = max((r["max_abs"] for r in table.rows if not math.isnan(r["max_abs"])), default=0.0)
        blind = tolerance_disables(tol.atol, tol.rtol)  # a match the tolerance could not have refused: WARN
        return Outcome(Status.WARN if blind else Status.PASS,
                       (f"{blind}; " if blind else "") +
                       f"resumed run C matches uninterrupted run A ({tol.describe()}; {where}): parameters, optimizer "
                       f"state, step, LR, data position, RNG, loss {k + 1}-{n}; max |Δ| {biggest:.3g}; "
                       f"{walls['total']:.1f} s for {n}+{k}+{n - k} steps",
                       tuple(metrics), remedy=REMEDY_BLIND if blind else "", details=details)
    return Outcome(Status.FAIL,
                   f"resumed run C differs from uninterrupted run A ({tol.describe()}; {where}): {table.firsts[0]}; "
                   + "; ".join(restored_txt),
                   tuple(metrics), remedy=REMEDY_RESUME, details=details)


def _cannot_judge(runs: dict[str, list[dict[str, Any]]], k: int, ws: int, tol: Tolerance, metrics: list[Metric],
                  details: dict[str, Any]) -> Outcome | None:
    """A refused checkpoint, runs A and B apart before the checkpoint, or a comparison that could pass by
    accident: the outcome that says so; else None (and details gains differs_before_load)."""
    A, B, C = runs["A"], runs["B"], runs["C"]
    errs = [c["checkpoint_error"] for c in C if "checkpoint_error" in c]
    if errs:
        return Outcome(Status.FAIL, f"run C refused the checkpoint: {errs[0]}", tuple(metrics),
                       remedy="The checkpoint on disk is corrupted or half-written; it was NOT loaded. "
                       "Check the storage (dmesg, filesystem errors) and save again.", details=details)
    for r in range(ws):
        d, first = _loss_diff(A[r]["losses"], B[r]["losses"], range(1, k + 1), tol)
        if first is not None:
            return Outcome(Status.FAIL,
                           f"runs A and B already differ at step {first} on rank {r} (|Δ loss| {d:.3g}), before any "
                           "checkpoint: training is not reproducible here, so resume cannot be judged",
                           tuple(metrics), remedy="Run in deterministic mode (default) and look at the recorded "
                           "nondeterministic ops; or declare a tolerance (--atol/--rtol).", details=details)
    vacuous = sorted({c for r in C for c, differs in r["differs_before_load"].items() if not differs})
    details["differs_before_load"] = {c: all(r["differs_before_load"][c] for r in C) for c in C[0]["differs_before_load"]}
    if vacuous:
        declared = "" if tol.bitwise else (f" within the declared tolerance ({tol.describe()}: it cannot tell a "
                                           "restored component from a fresh one)")
        return Outcome(Status.ERROR, f"C's fresh state already matches A's final state in: {', '.join(vacuous)}"
                       f"{declared}; the comparison could pass by accident", tuple(metrics),
                       remedy="Use more steps or a smaller tolerance so that training changes every component.",
                       details=details)
    return None


def _tensor_rows(C: list[dict[str, Any]], ws: int, table: Table) -> None:
    """Parameters and optimizer state: the largest |Δ| over ranks and the first tensor outside the tolerance."""
    for group, label in (("params", "parameters"), ("optim", "optimizer state")):
        worst, bad = 0.0, None
        for r, c in enumerate(C):
            for row in c["final"][group]:
                worst = max(worst, row["max_abs"])
                if bad is None and not row["ok"]:
                    bad = (r, row)
        count = len(C[0]["final"][group])
        table.rows.append({"component": f"{label} ({count} tensors/rank)", "max_abs": worst, "ok": bad is None,
                           "note": ""})
        if bad:
            r, row = bad
            table.firsts.append(f"{_pretty(row['name'])} differs, max |Δ| {row['max_abs']:.3g}"
                                + (f" on rank {r}" if ws > 1 else ""))
            table.rows[-1]["note"] = f"first: {_pretty(row['name'])}"


def _scalar_rows(C: list[dict[str, Any]], n: int, table: Table) -> None:
    """Step, LR, data position and RNG at the last step, over every rank."""
    for i, comp in enumerate(("step", "lr", "data", "rng")):
        per = [c["final"]["scalars"][i] for c in C]
        ok = all(p["ok"] for p in per)
        worst_s = max((p["max_abs"] for p in per), key=lambda v: -1 if math.isnan(v) else v)
        note = next((p["note"] for p in per if not p["ok"]), "")
        table.rows.append({"component": LABELS[comp], "max_abs": worst_s, "ok": ok, "note": note if not ok else ""})
        if not ok:
            table.firsts.append(f"{LABELS[comp]} at step {n} differs ({note})")


def _loss_row(A: list[dict[str, Any]], C: list[dict[str, Any]], n: int, k: int, ws: int, tol: Tolerance,
              table: Table) -> None:
    """The loss of the resumed steps k+1..n against run A's, every rank."""
    worst_l, first_step = 0.0, None
    for r in range(ws):
        d, f = _loss_diff(A[r]["losses"], C[r]["losses"], range(k + 1, n + 1), tol)
        worst_l = max(worst_l, d)
        first_step = f if first_step is None else (min(first_step, f) if f is not None else first_step)
    table.rows.append({"component": f"loss, steps {k + 1}-{n}", "max_abs": worst_l, "ok": first_step is None,
                       "note": f"first differs at step {first_step}" if first_step else ""})
    if first_step is not None:
        table.firsts.append(f"loss first differs at step {first_step} (max |Δ| {worst_l:.3g})")


def _restored(C: list[dict[str, Any]], details: dict[str, Any]) -> list[str]:
    """'<component> was restored: yes/no (why)' for each component, also into details['restored']."""
    restored_txt = []
    details["restored"] = {}
    for label in C[0]["restored"]:
        per = [c["restored"][label] for c in C]
        ok = all(p["ok"] for p in per)
        note = next((p["note"] for p in per if not p["ok"]), "")
        details["restored"][label] = {"restored": ok, "note": note}
        restored_txt.append(f"{label} was restored: " + ("yes" if ok else f"no ({note})"))
    return restored_txt
