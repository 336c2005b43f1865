"""The self-test says how long it will take here, from this machine's last self-test, and never invents a figure
for a case it has not run here."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainready.selftest import expect
from trainready.selftest.cases import Case


def _case(name: str, needs: str = "", exclusive: bool = False) -> Case:
    return Case(name, "x", ("node",), "x", "x", needs=needs, exclusive=exclusive)


def test_the_expected_time_lays_each_cases_seconds_on_its_lanes() -> None:
    cases = [_case("a"), _case("b"), _case("c"), _case("s1", "slurm"), _case("s2", "slurm"), _case("x", exclusive=True)]
    secs = {"a": 30.0, "b": 20.0, "c": 10.0, "s1": 50.0, "s2": 40.0, "x": 15.0}
    e = expect.expected(cases, lanes=2, slurm_lanes=1, seconds=secs)
    assert (e.seconds, e.known, e.total) == (90.0 + 15.0, 6, 6)  # Slurm one at a time: 90 > local 30 | 20 + 10
    e = expect.expected(cases, lanes=2, slurm_lanes=3, seconds=secs)
    assert e.seconds == 50.0 + 15.0 and e.text() == "expected time: ~65 s (this machine's last self-test)"
    e = expect.expected(cases, lanes=2, slurm_lanes=3, seconds={"a": 30.0})
    assert e.text() == "expected time: ~30 s plus 5 case(s) never run here (this machine's last self-test)"
    assert expect.expected(cases, 2, 3, {}).text() == "expected time: unknown (6 case(s), none run on this machine before)"


def test_the_seconds_are_kept_per_case_and_a_skipped_case_keeps_its_figure(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert expect.load() == {}
    expect.remember({"a": 12.34, "b": 3.0})
    expect.remember({"a": 0.0, "c": 7.0})  # a skipped case took no time: its figure stays
    assert expect.load() == {"a": 12.3, "b": 3.0, "c": 7.0}
    (tmp_path / "trainready" / "selftest-seconds.json").write_text("{half")
    assert expect.load() == {}  # a broken cache is no estimate, never an error
