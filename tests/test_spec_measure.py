"""`spec init --measure --repeat N`: floors from N usable runs.  A run in which a measured check failed or
errored is said, with the check's words, and measured again in its place (N more runs at most); a reference
that fails every run is said every time and never gives a floor."""

from __future__ import annotations

from rich.console import Console

from trainready.commands.spec import _measure


class _Run:
    def __init__(self, status: str, message: str) -> None:
        self.doc = {"results": [{"name": "throughput", "status": "skip", "message": "no GPU"},
                                {"name": "comm", "status": status, "message": message, "metrics": []}]}

    def to_json(self) -> dict:
        return self.doc


def _planned(monkeypatch, statuses: list[tuple[str, str]]) -> list[int]:  # type: ignore[no-untyped-def]
    """run_checks answers with `statuses` in turn; returns the list its calls are counted in."""
    calls: list[int] = []

    def fake(kind, checks, ctx):  # type: ignore[no-untyped-def]
        calls.append(len(calls))
        return _Run(*statuses[len(calls) - 1])

    monkeypatch.setattr("trainready.suite.runner.run_checks", fake)
    return calls


def test_a_failed_run_is_said_and_measured_again(monkeypatch) -> None:
    calls = _planned(monkeypatch, [("warn", "ok"), ("fail", "gloo sweep over 8 ranks failed (whole sweep\n585 s): hung"),
                                   ("warn", "ok")])
    said: list[str] = []
    runs = _measure(2, Console(stderr=True, quiet=True), said)
    assert len(runs) == 2 and len(calls) == 3 and all(r["results"][1]["status"] == "warn" for r in runs)
    assert said == ["measurement run 2: comm FAIL (gloo sweep over 8 ranks failed (whole sweep 585 s): hung); "
                    "not a floor, measured again"]


def test_a_reference_that_fails_every_run_gives_no_floor_and_says_so(monkeypatch) -> None:
    calls = _planned(monkeypatch, [("error", "RuntimeError: boom")] * 2)
    said: list[str] = []
    assert _measure(1, Console(stderr=True, quiet=True), said) == [] and len(calls) == 2
    assert said == ["measurement run 1: comm ERROR (RuntimeError: boom); not a floor, measured again",
                    "measurement run 2: comm ERROR (RuntimeError: boom); not a floor, no run left to measure again",
                    "floors from 0 of the 1 run(s) asked for (2 measured; see above)"]
