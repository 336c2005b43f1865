"""The self-test's 'cleared' judge: a planted transient is told apart from a fault only when the node is accepted
with the warning that says it was measured again; a rejection of it is the false alarm, a miss."""

from __future__ import annotations

import json
from pathlib import Path

from trainready.selftest.judge import Finished, judge_case, judge_control

WARN = "slow: cpu train_tokens_per_s 3 < ...; measured again: 180 tokens/s, within the bound: not a fault"
EXPECT = r"measured again: .* within the bound: not a fault"


def _run(tmp_path: Path, node: dict) -> Finished:  # type: ignore[type-arg]
    rec = tmp_path / "fleet.json"
    rec.write_text(json.dumps({"nodes": [node]}))
    return Finished(("cluster", "run"), 3, "", rec, 1.0)


def test_a_rejected_transient_is_missed_an_accepted_one_with_its_warning_detected(tmp_path: Path) -> None:
    rejected = _run(tmp_path, {"node": "node2", "accepted": False, "reasons": [WARN.replace("within the bound: not "
                                                                                           "a fault", "slow again")]})
    assert judge_case("cleared:node2", EXPECT, rejected).outcome == "missed"
    silent = _run(tmp_path, {"node": "node2", "accepted": True, "warnings": []})
    assert judge_case("cleared:node2", EXPECT, silent).outcome == "missed"  # accepted, but nothing measured again
    cleared = _run(tmp_path, {"node": "node2", "accepted": True, "warnings": [WARN]})
    assert judge_case("cleared:node2", EXPECT, cleared).outcome == "detected"
    assert judge_control("cleared:node2", cleared).outcome == "passed"


def test_a_check_that_clears_a_planted_transient_is_detected_one_that_fails_it_missed(tmp_path: Path) -> None:
    rec = tmp_path / "comm.json"
    said = "pairwise send/recv of 1M B: no slow rank or link; link 0<->3 was 9.1x the median in the matrix, 1.02x"
    rec.write_text(json.dumps({"results": [{"name": "comm.pairs", "status": "pass", "message": said}]}))
    run = Finished(("comm",), 3, "", rec, 1.0)
    assert judge_case("cleared:comm.pairs", r"link 0<->3 was .* 1.02x", run).outcome == "detected"
    assert judge_control("cleared:comm.pairs", run).outcome == "passed"
    rec.write_text(json.dumps({"results": [{"name": "comm.pairs", "status": "fail", "message": "straggler: " + said}]}))
    assert judge_case("cleared:comm.pairs", r"link 0<->3 was .* 1.02x", run).outcome == "missed"
