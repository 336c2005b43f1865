"""The self-test's fleet cases share runs: the plants of a group go into one `cluster run`, each case is judged on
its own node's line, and the control is the run's unplanted reference node ({node1}), which must be accepted.
The real runs are in benchmarks/selftest_time.py and the CLI against a local cluster; here the rules that keep a
shared run honest: no two plants of a group overlap in what they make a node say, the command is the same but
for the plants, and a run whose reference node was rejected proves nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainready.selftest.cases import CASES, Case, share_key, shared_argv
from trainready.selftest.judge import Finished
from trainready.selftest.run import Shared, run_case
from trainready.selftest.schedule import fleet_units

FLEET = [c for c in CASES if c.needs == "slurm"]
VALUES = {"node1": "n1", "node2": "n2", "node3": "n3", "cluster_results": "/r", "spec_fleet": "/s.toml"}


def _groups() -> dict[str, list[Case]]:
    out: dict[str, list[Case]] = {}
    for c in FLEET:
        out.setdefault(share_key(c), []).append(c)
    return out


def _plants(argv: tuple[str, ...]) -> list[tuple[str, str]]:
    return [(argv[i + 1].split("=", 1)[0], argv[i + 1].split("=", 1)[1]) for i, a in enumerate(argv) if a == "--plant"]


def test_a_group_is_one_command_with_every_plant_and_its_own_results() -> None:
    groups = _groups()
    assert len(groups) < len(FLEET)  # some cases do share a run
    training = groups["training"]
    argv = shared_argv(training)
    assert [p for p in _plants(argv)] == [p for c in training for p in _plants(c.argv)]
    assert argv[argv.index("--results") + 1] == "{cluster_results}/share-training"
    lone = groups["cluster.kill"]
    assert shared_argv(lone) == lone[0].argv  # a group of one: the case's own command


def test_commands_that_differ_beyond_their_plants_cannot_share() -> None:
    a = next(c for c in FLEET if c.name == "cluster.fail")
    other = Case("cluster.other", "x", tuple("2:00" if x == "1:00" else x for x in a.argv), a.check, a.expect,
                 needs="slurm", share=a.share)
    with pytest.raises(ValueError, match="cluster.other: its command differs from cluster.fail's"):
        shared_argv([a, other])


@pytest.mark.parametrize("key", sorted(_groups()))
def test_no_plant_of_a_group_overlaps_another(key: str) -> None:
    """One plant name per run (a later --plant of the same name would replace the first), none on the reference
    {node1} (the run's control), and no two cases of a group expecting a line from the same node's same check."""
    group = _groups()[key]
    plants = _plants(shared_argv(group))
    names = [n for n, _ in plants]
    assert len(names) == len(set(names)), plants
    assert not any(v.startswith("{node1}") for _, v in plants), plants
    matmul_nodes = [c.check for c in group if "check matmul" in c.expect]
    assert len(matmul_nodes) == len(set(matmul_nodes)), matmul_nodes


def test_each_run_is_one_lane_of_its_cases_in_table_order() -> None:
    units = fleet_units(CASES)
    assert sum(len(u) for u in units.values()) == len([c for c in FLEET if not c.exclusive])
    assert [CASES[i].name for i in units["training"]] == [c.name for c in FLEET if c.share == "training"]


def _fleet_record(path: Path, accepted: dict[str, bool], reasons: dict[str, list[str]]) -> Path:
    nodes = [{"node": n, "accepted": ok, "reasons": reasons.get(n, []), "warnings": []} for n, ok in accepted.items()]
    path.write_text(json.dumps({"schema": "trainready.fleet/1", "nodes": nodes}))
    return path


@pytest.fixture
def slurm_here(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cases' `needs="slurm"` met (the record is given here: no Slurm is called)."""
    import trainready.selftest.run as run_mod

    monkeypatch.setattr(run_mod, "unmet", lambda needs, gpus: "")


@pytest.mark.usefixtures("slurm_here")
def test_a_run_whose_reference_node_was_rejected_proves_nothing(tmp_path: Path) -> None:
    """The planted node's line matches, but the unplanted reference node of the same run was rejected too: the
    case is broke (its control failed), never detected; with the reference accepted it is detected."""
    case = next(c for c in FLEET if c.name == "cluster.clock")
    line = "clock: clock 5.02 s ahead of the submitting host"
    values = {**VALUES, "root": str(tmp_path)}
    for ref_ok, outcome in ((False, "broke"), (True, "detected")):
        record = _fleet_record(tmp_path / f"share-{ref_ok}.json", {"n1": ref_ok, "n2": False, "n3": True},
                               {"n1": ["check versions: FAIL"], "n2": [line]})
        shared = Shared(tmp_path, values, {})
        shared.done[share_key(case)] = (case.argv, Finished(case.argv, 3, "", record, 12.0), "")
        res = run_case(case, values, 0, tmp_path, shared=shared)
        assert res.outcome == outcome, res
        assert res.seconds == 12.0  # the shared run's time
    assert "control (the run's unplanted reference node) not accepted: check versions: FAIL" in \
        run_case(case, values, 0, tmp_path, shared=_shared_with(tmp_path, case, values, False)).message


def _shared_with(tmp_path: Path, case: Case, values: dict[str, str], ref_ok: bool) -> Shared:
    record = _fleet_record(tmp_path / "again.json", {"n1": ref_ok, "n2": False},
                           {"n1": ["check versions: FAIL"], "n2": ["clock: clock 5.02 s ahead of the submitting host"]})
    shared = Shared(tmp_path, values, {})
    shared.done[share_key(case)] = (case.argv, Finished(case.argv, 3, "", record, 1.0), "")
    return shared


@pytest.mark.usefixtures("slurm_here")
def test_a_failed_preparation_of_a_shared_run_is_broke_with_its_message(tmp_path: Path) -> None:
    case = next(c for c in FLEET if c.name == "cluster.decline")
    values = {**VALUES, "root": str(tmp_path)}
    shared = Shared(tmp_path, values, {})
    shared.done[share_key(case)] = (case.argv, None, "preparation step `trainready cluster sweep` failed (exit 2)")
    res = run_case(case, values, 0, tmp_path, shared=shared)
    assert res.outcome == "broke" and "failed (exit 2)" in res.message
