"""A valid spec setting that switches a judgement off is said, never a silent PASS: `spec check` lists it, and
the check it switches off says so in its own result (resume: WARN; cluster.limits: SKIP; the fleet's slow rule:
its statistics line; compare: a 'not judged' line)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from conftest import run_cli
from test_compare import record
from trainready.cluster.tasks import crosschecks
from trainready.cluster.judge.stats import robust_bound
from trainready.records import Status
from trainready.resume.compare import Tolerance
from trainready.resume.verdict import judge
from trainready.spec import load_spec
from trainready.spec.disabled import disabled
from trainready.spec.model import FleetSpec

SWITCHED_OFF = ('[resume]\nrtol = 1000.0\n[fleet]\nnofile_min = 0\n'
                '[compare]\nmetrics = { comm_time = { direction = "info" } }\n')


def test_spec_check_lists_what_a_spec_switches_off(tmp_path: Path) -> None:
    p = tmp_path / "off.toml"
    p.write_text(SWITCHED_OFF, encoding="utf-8")
    lines = disabled(load_spec(p)[0])
    assert [line.split(" ", 1)[0] for line in lines] == ["resume:", "fleet.nofile_min", "compare.metrics.comm_time.direction"]
    assert "rtol 1000 >= 1 disables" in lines[0]
    r = run_cli("spec", "check", str(p), timeout=60)
    assert r.returncode == 0 and r.stdout.count("switches off:") == 3, r.stdout + r.stderr
    for example in ("cpu-default", "h200-8x", "b200-reference", "local-slurm"):
        assert disabled(load_spec(f"example:{example}")[0]) == [], example  # the shipped specs switch nothing off


def _rank(losses: dict[int, float]) -> dict[str, Any]:
    """One rank's result of a resume run that matched in every component."""
    row = {"name": "param:w", "max_abs": 0.0, "ok": True}
    return {"determinism": "on", "precision": "fp32", "losses": losses, "params": 1,
            "differs_before_load": {"parameters": True, "optimizer state": True},
            "final": {"params": [row], "optim": [dict(row, name="optim:w.exp_avg")],
                      "scalars": [{"ok": True, "max_abs": 0.0, "note": ""}] * 4},
            "restored": {"step": {"ok": True, "note": ""}}}


def _judge(tol: Tolerance) -> Any:
    losses = {s: 5.0 - 0.01 * s for s in range(1, 11)}
    runs = {role: [_rank(losses)] for role in ("A", "B", "C")}
    pc = SimpleNamespace(tolerance=tol, train=SimpleNamespace(steps=10, mode="ddp"), checkpoint_step=5,
                         world_size=1, backend="gloo", model=None)
    return judge(runs, {}, {"A": 1.0, "B": 0.5, "C": 0.5, "total": 2.0}, pc, "run")


def test_resume_says_when_its_tolerance_cannot_fail() -> None:
    assert _judge(Tolerance()).status == Status.PASS
    assert _judge(Tolerance(rtol=1e-3)).status == Status.PASS
    out = _judge(Tolerance(rtol=1e3))
    assert out.status == Status.WARN and out.message.startswith("rtol 1000 >= 1 disables the numeric comparisons")
    assert "rtol" in out.remedy


def test_nofile_min_zero_skips_the_limits_check_and_says_why() -> None:
    cross = {"node1": {"limits": {"nofile_soft": 1024}}, "node2": {"limits": {"nofile_soft": 4096}}}
    result, found = crosschecks.limits(cross, FleetSpec(nofile_min=0))
    assert result.status == Status.SKIP and not found
    assert result.message.startswith("not judged: spec fleet.nofile_min = 0") and "1024" in result.message
    assert crosschecks.limits(cross, FleetSpec(nofile_min=2048))[0].status == Status.FAIL


def test_a_robust_bound_at_or_below_zero_says_it_flags_nothing() -> None:
    tight = robust_bound("gemm_bf16", "TFLOP/s", [750.0, 755.0, 760.0, 500.0], 0.95, 3.0)
    assert tight.flags_nothing == "" and tight.slow(500.0)
    blind = robust_bound("gemm_bf16", "TFLOP/s", [750.0, 755.0, 760.0, 500.0], 0.95, 1e6)
    assert not blind.slow(1.0) and "no gemm_bf16 figure is below it" in blind.flags_nothing
    assert blind.to_json()["flags_nothing"] == blind.flags_nothing
    assert robust_bound("gemm_bf16", "TFLOP/s", [1.0, 2.0], 0.95, 1e6).flags_nothing == ""  # not judged at all


def test_compare_says_which_metric_the_spec_never_judges(tmp_path: Path) -> None:
    base, new, spec = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "s.toml"
    base.write_text(json.dumps(record()))
    new.write_text(json.dumps(record(tps=100.0)))  # -90%: a regression had the metric been judged
    spec.write_text('[compare.metrics.train_tokens_per_s]\ndirection = "info"\n'
                    '[compare.metrics.train_tokens_per_sec]\nrel = 0.01\n', encoding="utf-8")
    r = run_cli("compare", str(base), str(new), "--spec", str(spec), timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert 'not judged: compare.metrics.train_tokens_per_s.direction = "info"' in r.stdout
    assert "not applied: compare.metrics.train_tokens_per_sec names no metric of either record" in r.stdout
