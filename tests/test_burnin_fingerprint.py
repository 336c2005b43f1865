"""The fingerprint battery in every window of the burn-in: a device whose bits change once hot is named with
its window before a healthy run shows zero mismatches in every window."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainready.burnin.prints import judge_prints, mismatches

NAMES = [f"rank {i} (CPU)" for i in range(4)]


def _prints(ranks: int, windows: int, off: dict[tuple[int, int], str] | None = None) -> dict[int, list[dict]]:
    base = {"gemm-bf16/random-7": "a" * 64, "exp-fp32/ones": "b" * 64}
    out = {}
    for r in range(ranks):
        out[r] = []
        for w in range(windows):
            fp = dict(base)
            if off and (r, w) in off:
                fp[off[(r, w)]] = "f" * 64
            out[r].append({"t": 100.0 + 10 * w, "window": w, "fp": fp})
    return out


def test_a_device_off_in_a_hot_window_is_named_before_a_healthy_run_passes():
    fails, metrics, detail = judge_prints(_prints(4, 3, {(2, 1): "exp-fp32/ones"}), NAMES, 100.0)
    assert fails == ["rank 2 (CPU): fingerprint differs from its peers' majority in 1 of 3 window(s), first window "
                     "1 (10 s in): 1 entr(ies), e.g. exp-fp32/ones"]
    assert detail["rank 2 (CPU)"] == [0, 1, 0] and detail["rank 0 (CPU)"] == [0, 0, 0]
    assert {(m.label_dict["device"], m.label_dict["window"]) for m in metrics if m.value} == {("rank 2 (CPU)", "1")}
    ok_fails, ok_metrics, _ = judge_prints(_prints(4, 3), NAMES, 100.0)
    assert ok_fails == [] and len(ok_metrics) == 12 and all(m.ok for m in ok_metrics)


def test_with_two_devices_each_is_held_to_its_own_first_window():
    per = mismatches(_prints(2, 3, {(1, 2): "gemm-bf16/random-7"}))
    assert per == {0: [(0, []), (1, []), (2, [])], 1: [(0, []), (1, []), (2, ["gemm-bf16/random-7"])]}
    fails, _, _ = judge_prints(_prints(2, 3, {(1, 2): "gemm-bf16/random-7"}), NAMES, 100.0)
    assert "differs from its own first window in 1 of 3 window(s)" in fails[0]


@pytest.mark.slow
def test_burnin_names_the_rank_whose_battery_changes_when_hot(cli, tmp_path: Path):
    base = ("node", "--spec", "example:cpu-default", "--only", "burnin", "--duration", "8s")
    bad = cli(*base, "--plant", "fingerprint.bitflip=1", "--json", str(tmp_path / "bad.json"),
              "--workdir", str(tmp_path / "w"))
    res = json.loads((tmp_path / "bad.json").read_text())["results"][0]
    assert bad.returncode == 3 and res["status"] == "fail", res["message"]
    # the CPU profile's burn-in runs 2 ranks (burnin.cpu_ranks): too few for a majority, each is held to its own
    # cold first window
    assert any(f.startswith("rank 1 (CPU): fingerprint differs from its own first window") and
               "gemm-bf16/random-7" in f for f in res["details"]["findings"]), res["details"]["findings"]
    per = res["details"]["fingerprint_mismatches_per_window"]
    assert per["rank 1 (CPU)"][0] == 0 and sum(per["rank 1 (CPU)"]) >= 1  # cold first window clean, then off
    assert all(sum(v) == 0 for k, v in per.items() if k != "rank 1 (CPU)")
    ok = cli(*base, "--json", str(tmp_path / "ok.json"))
    res = json.loads((tmp_path / "ok.json").read_text())["results"][0]
    per = res["details"]["fingerprint_mismatches_per_window"]
    assert ok.returncode == 0 and len(per) == 2 and all(len(v) >= 2 and sum(v) == 0 for v in per.values()), per
    assert not any("fingerprint" in f for f in res["details"]["findings"])
