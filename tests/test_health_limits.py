"""`trainready node --health-check` bounds each of its checks by CHECK_TIMEOUT_S, as its docs say: the
limits reach the checks as `CheckContext.timeouts` (a typed field), not as an options entry nobody reads."""

from __future__ import annotations

import pytest


@pytest.mark.slow
def test_each_health_check_runs_under_its_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    import trainready.suite.runner as runner
    from trainready.cluster.health.active import CHECK_TIMEOUT_S, CHECKS, run_health

    seen: dict[str, float] = {}
    real = runner.run_checks

    def run_checks(command, checks, ctx, **kw):  # type: ignore[no-untyped-def]
        seen.update({c.name: c().timeout_for(ctx) for c in checks})
        return real(command, checks, ctx, **kw)

    monkeypatch.setattr(runner, "run_checks", run_checks)
    said: list[str] = []
    assert run_health(None, {}, said.append) == 0, said  # a healthy CPU node: nothing drained, no Slurm asked
    assert seen == {c: CHECK_TIMEOUT_S for c in CHECKS}
