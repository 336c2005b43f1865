"""What `trainready node` starts before its checks' registry is imported: the rank processes' forkserver, for the
checks that launch ranks (commands/_node_start.py RANK_CHECKS, a table that must say what the registry says)."""

from __future__ import annotations

from trainready.commands import _node_start as node_start
from trainready.records import Level


def test_the_rank_checks_table_is_the_registrys():
    from trainready.checks import REGISTRY

    launching = {name: cls.level for name, cls in REGISTRY.items() if cls.launches_ranks}
    assert launching == node_start.RANK_CHECKS


def test_rank_checks_chooses_as_select_does():
    from trainready.checks import select

    cases = [(None, None, Level.LIGHT), (None, None, Level.QUICK), (None, None, Level.STANDARD),
             (None, None, Level.BURN_IN), (["versions", "matmul"], None, Level.STANDARD),
             (["resume"], None, Level.QUICK), (None, ["resume", "comm"], Level.STANDARD)]
    picked = {str(c): node_start.rank_checks(*c) for c in cases}
    assert picked[str(cases[0])] == [] and picked[str(cases[4])] == []  # no ranks: no forkserver
    assert "resume" in picked[str(cases[5])] and "resume" not in picked[str(cases[6])]
    for only, skip, level in cases:
        want = [c.name for c in select(only, skip, level) if c.launches_ranks]
        assert sorted(node_start.rank_checks(only, skip, level)) == sorted(want), (only, skip, level)
