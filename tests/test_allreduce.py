import dataclasses

import pytest

from trainready.checks import REGISTRY, CheckContext
from trainready.records import Status
from trainready.spec import default_spec


def _run(tmp_path, faults=None, timeout=60.0):
    spec = default_spec()
    spec = dataclasses.replace(spec, comm=dataclasses.replace(spec.comm, timeout_s=timeout, backend="gloo"))
    return REGISTRY["allreduce"]().execute(CheckContext(spec, tmp_path, faults or {}))


@pytest.mark.slow
def test_wrong_value_fails_before_healthy_passes(tmp_path):
    bad = _run(tmp_path, {"allreduce.wrong_rank": "2"})
    assert bad.status == Status.FAIL and "expected 36" in bad.message and "36.5" in bad.message
    good = _run(tmp_path)
    assert good.status == Status.PASS, good.message
    assert "every rank holds 36" in good.message
    sums = [m for m in good.metrics if m.name == "allreduce_sum"]
    assert len(sums) == 8 and all(m.value == 36 and m.ok for m in sums)


@pytest.mark.slow
def test_dead_rank_is_named(tmp_path):
    r = _run(tmp_path, {"allreduce.die_rank": "5"})
    assert r.status == Status.FAIL and "rank 5 died (exit code 17)" in r.message


@pytest.mark.slow
def test_hung_rank_is_named_within_timeout(tmp_path):
    r = _run(tmp_path, {"allreduce.hang_rank": "3"}, timeout=20.0)  # generous: 8 ranks on a loaded 2-core host
    assert r.status == Status.FAIL
    assert "rank 3 hung at 'before all_reduce'" in r.message
    assert "rank 0 hung" not in r.message
    # Ends (never hangs the CLI): a loose bound, not a speed test; start-up on a loaded
    # 2-core machine has its own allowance in launch().
    assert r.duration_s < 20.0 * 3 + 30
