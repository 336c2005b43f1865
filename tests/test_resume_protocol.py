"""The resume-equivalence protocol end to end (fresh processes, gloo), through the
node check, and each planted fault failing with the right message."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from conftest import cpu_machine_only
from trainready.suite.base import CheckContext
from trainready.suite.options import CheckOptions
from trainready.resume.options import ResumeOptions
from trainready.checks.resume import ResumeCheck
from trainready.records import CheckResult, Status
from trainready.spec import load_spec


def _run(tmp_path: Path, faults: dict[str, str] | None = None, **resume: object) -> CheckResult:
    spec, _ = load_spec(None)
    short = {"steps": 20, "checkpoint_step": 10, **resume}
    spec = dataclasses.replace(spec, resume=dataclasses.replace(spec.resume, **short))
    ctx = CheckContext(spec, tmp_path, faults or {}, CheckOptions(resume=ResumeOptions(cpu=True)))
    return ResumeCheck().execute(ctx)


@pytest.mark.slow
def test_full_default_passes_bitwise(tmp_path: Path) -> None:
    res = _run(tmp_path, steps=100, checkpoint_step=50)
    assert res.status == Status.PASS, res.message
    assert "bitwise" in res.message and "loss 51-100" in res.message
    # The test could not have passed by accident: every component differed before loading.
    assert res.details["differs_before_load"] and all(res.details["differs_before_load"].values())
    assert all(v["restored"] for v in res.details["restored"].values())
    assert res.details["declared"]["tolerance"] == {"atol": 0.0, "rtol": 0.0, "mode": "bitwise"}
    assert res.details["determinism"]["use_deterministic_algorithms"] is True
    rows = {r["component"].split(" (")[0]: r for r in res.details["table"]}
    assert rows["parameters"]["max_abs"] == 0.0 and rows["loss, steps 51-100"]["ok"]
    # Evidence: the tolerance was written before run A started.
    run_dir = Path(res.details["run_dir"])
    assert (run_dir / "evidence" / "declared.json").is_file()
    assert (run_dir / "ckpt" / "latest").read_text().strip() == "step-50"


RNG = ("RNG python", "RNG numpy", "RNG torch_cpu")
OTHERS = ("data position", "LR scheduler")


@pytest.mark.slow
@pytest.mark.parametrize(
    "plant, expected, unrestored",
    [
        ("skip_rng", "RNG python was restored: no (state differs", RNG),
        ("skip_rng_python", "RNG python was restored: no (state differs", ("RNG python",)),
        ("skip_rng_numpy", "RNG numpy was restored: no (state differs", ("RNG numpy",)),
        ("skip_data", "data position was restored: no (position 0 vs 10)", ("data position",)),
        ("skip_lr", "LR scheduler was restored: no (last_epoch 0 vs 10", ("LR scheduler",)),
    ],
)
def test_unrestored_piece_fails_and_is_named(tmp_path: Path, plant: str, expected: str,
                                             unrestored: tuple[str, ...]) -> None:
    res = _run(tmp_path, {f"resume.{plant}": "1"})
    assert res.status == Status.FAIL, res.message
    assert expected in res.message
    assert "differs, max |Δ|" in res.message  # the skipped restore changed the training itself
    for label in RNG + OTHERS:
        assert f"{label} was restored: {'no' if label in unrestored else 'yes'}" in res.message, label
    # Every generator differed before loading, so each "restored: yes" above means something.
    assert all(res.details["differs_before_load"][g] for g in RNG)


@pytest.mark.slow
def test_flipped_byte_fails_as_corrupted_checkpoint(tmp_path: Path) -> None:
    res = _run(tmp_path, {"resume.flip_byte": "1"})
    assert res.status == Status.FAIL, res.message
    assert "run C refused the checkpoint" in res.message and "(corrupted)" in res.message
    assert ".distcp: sha256" in res.message


@pytest.mark.slow
@cpu_machine_only  # asserts the CPU default (8 gloo ranks, gloo's sweep table)
def test_short_run_passes(tmp_path: Path) -> None:
    res = _run(tmp_path)
    assert res.status == Status.PASS, res.message
    # node's collective checks use 8 gloo ranks on the CPU default; the resume check says it used 1
    assert "[resume ran on 1 gloo rank (spec resume.ranks), not on the 8 gloo ranks of the collective checks" in res.message
    assert set(RNG) <= set(res.details["restored"]) and all(v["restored"] for v in res.details["restored"].values())
    assert all(res.details["differs_before_load"][g] for g in RNG)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["ddp", "fsdp"])
def test_two_gloo_ranks_pass_and_restore_each_rank(tmp_path: Path, mode: str) -> None:
    steps = (100, 50) if mode == "ddp" else (20, 10)  # FSDP2 on gloo is ~3x slower per step
    res = _run(tmp_path, ranks=2, mode=mode, steps=steps[0], checkpoint_step=steps[1])
    assert res.status == Status.PASS, res.message
    assert f"2 gloo ranks, {mode}" in res.message


@pytest.mark.slow
def test_four_gloo_ranks_ddp_resume_bitwise(tmp_path: Path) -> None:
    """DDP rebuilds its gradient buckets after the first iteration; a restarted process's first
    step used the initial layout, which changes the all-reduce's summation order over > 2 ranks
    (C differed from A by ~1e-8).  The reference workload keeps one layout, so this is bitwise."""
    res = _run(tmp_path, ranks=4, steps=10, checkpoint_step=5)
    assert res.status == Status.PASS, res.message
    assert "4 gloo ranks, ddp" in res.message


@pytest.mark.slow
def test_two_ranks_data_fault_names_the_rank(tmp_path: Path) -> None:
    res = _run(tmp_path, {"resume.skip_data": "1"}, ranks=2)
    assert res.status == Status.FAIL
    assert "on rank 0" in res.message and "data position was restored: no" in res.message
