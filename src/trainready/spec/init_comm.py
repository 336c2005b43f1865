"""spec init's [comm] table: busbw floors per op, all ops together, collective efficiency (the rules of spec/floors.py)."""

from __future__ import annotations

import math
import statistics
from typing import Any, Mapping

from trainready.errors import UsageError
from trainready.spec.figures import int_label, metrics, run_label, sig
from trainready.spec.floors import EFFICIENCY_MIN_MARGIN, MIN_MARGIN, Floor, comm_floor
from trainready.spec.model import CommSpec

BUSBW_METRIC = "comm_busbw_avg"
EFFICIENCY_METRIC = "comm_efficiency"  # busbw / same-run ring send/recv busbw (comm/evaluate.py)


def _mean_fraction(per_run: list[dict[str, float]], expected: Mapping[str, float], backends: Mapping[str, str],
                   tolerance: float, floors: list[Floor], notes: list[str], what: str = "busbw") -> float | None:
    """comm.min_fraction_all_ops (what='busbw') or comm.min_fraction_efficiency: each run's geometric mean over
    ops of figure / expectation (the judged quantity, comm/evaluate.judge_all_ops / judge_efficiency), then the
    floor rule of one figure (spec/floors.py) over those means.  Written when every run measured the same >= 2
    ops with a non-zero figure."""
    key = "comm.min_fraction_all_ops" if what == "busbw" else "comm.min_fraction_efficiency"
    keys = sorted(k for k in expected if expected[k] > 0)
    runs = [r for r in per_run if r]
    if len(keys) < 2 or not runs:
        return None
    if any(sorted(k for k in r if r[k] > 0) != keys for r in runs):
        notes.append(f"{key}: the runs measured different ops; not written")
        return None
    means = [math.exp(sum(math.log(r[k] / expected[k]) for k in keys) / len(keys)) for r in runs]
    f = comm_floor(f"all {len(keys)} ops (geometric mean of {what} / expectation)", means, backends[keys[0]],
                   tolerance, unit="x expectation", margins=MIN_MARGIN if what == "busbw" else EFFICIENCY_MIN_MARGIN)
    floors.append(f)
    return round(f.floor, 3)


def _perrun_label(reports: list[Mapping[str, Any]], metric: str, notes: list[str]
             ) -> tuple[list[dict[str, float]], dict[str, str], set[tuple[int, int]]]:
    """Each run's figures of `metric` by 'op@ranks', the backend of each key, and the averaging windows seen."""
    backends: dict[str, str] = {}
    windows = set()
    per_run: list[dict[str, float]] = []  # run -> 'op@ranks' -> figure (the comm check writes one per op)
    for i, rep in enumerate(reports):
        per_run.append({})
        for m in metrics(rep, metric, notes, run_label(i, reports)):
            lab = dict(m.get("labels", {}))
            op, ranks = lab.get("op"), int_label(lab.get("ranks"))
            if not (op and ranks):
                notes.append(f"{run_label(i, reports)}{metric} figure without op/ranks labels {lab}: no floor")
                continue
            if lab.get("dtype", "float") != "float":
                notes.append(f"{run_label(i, reports)}{op}@{ranks} in {lab.get('dtype')}: expectations are for float "
                             "(comm.expected_busbw_gbps has no dtype); no floor")
                continue
            # The expectation is the reference's figure at its world size ('op@N': a 2-GPU figure says
            # nothing about 8 GPUs).
            per_run[-1][f"{op}@{ranks}"] = float(m["value"])
            backends[f"{op}@{ranks}"] = str(lab.get("backend", ""))
            lo, hi = int_label(lab.get("from_bytes")), int_label(lab.get("to_bytes"))
            if lo and hi:
                windows.add((lo, hi))
    return per_run, backends, windows


def _by_key(per_run: list[dict[str, float]]) -> dict[str, list[float]]:
    values: dict[str, list[float]] = {}  # 'op@ranks' -> its figures in run order
    for run in per_run:
        for key, v in run.items():
            values.setdefault(key, []).append(v)
    return values


def comm_spec(reports: list[Mapping[str, Any]], tolerance: float, floors: list[Floor],
               notes: list[str]) -> CommSpec:
    """busbw per 'op@ranks' over the runs; one averaging window for all; collective efficiency the same way."""
    per_run, backends, windows = _perrun_label(reports, BUSBW_METRIC, notes)
    if len(windows) > 1:
        raise UsageError(f"--from-report: busbw figures averaged over different sizes {sorted(windows)}; "
                         "expected records of the same sweep (`trainready node` runs, or `trainready comm` "
                         "runs with the same -b/-e/-f)")
    values = _by_key(per_run)
    expected: dict[str, float] = {}
    fractions: dict[str, float] = {}
    for key, vals in values.items():
        f = comm_floor(key, vals, backends[key], tolerance)
        floors.append(f)
        expected[key] = sig(f.low)
        fractions[key] = f.fraction
    if reports and not values and not any("busbw" in n for n in notes):
        notes.append("comm.expected_busbw_gbps: no busbw figure in the record(s) (the comm check did not run); "
                     "not written")
    all_ops = _mean_fraction(per_run, expected, backends, tolerance, floors, notes)
    eff_runs, eff_backends, _ = _perrun_label(reports, EFFICIENCY_METRIC, [])  # absent from older records: no note
    # The expected efficiency is the reference's median (only the mean over ops is judged, with its own floor).
    eff_expected = {k: sig(statistics.median(v)) for k, v in _by_key(eff_runs).items()}
    eff_floor = _mean_fraction(eff_runs, eff_expected, eff_backends, tolerance, floors, notes, what="efficiency")
    return CommSpec(min_fraction=tolerance, expected_busbw_gbps=expected, min_fraction_by_op=fractions,
                    min_fraction_all_ops=all_ops, expected_efficiency=eff_expected if eff_floor else {},
                    min_fraction_efficiency=eff_floor,
                    expected_sizes_bytes=tuple(windows.pop()) if windows else ())
