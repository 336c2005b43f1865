"""`--plant`: one table of names (suite/plants.py) that matches the code; misspellings are exit 2;
a planted/replayed run says so in its record and banner, is never a clean PASS, and cannot seed a spec."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
from rich.console import Console

from trainready.commands.common import parse_plants
from trainready.errors import UsageError
from trainready.records import CheckResult, Level, Report, Status
from trainready.report.render import print_report
from trainready.suite.plants import BY_COMMAND, COMM_PLANTS, PLANTS, RESUME_PLANTS

PKG = Path(__file__).resolve().parents[1] / "src" / "trainready"
H200 = Path(__file__).parent / "data" / "facts_h200x8.json"

# Every way the code reads a plant.  A read in any other shape fails test_every_read_is_understood.
READ = re.compile(r"(?:\.fault|faults\.get)\(")
LITERAL = re.compile(r'(?:\.fault|faults\.get)\("([\w.]+)"\)|node_facts\(ctx, "([\w.]+)"\)')
FAMILY = re.compile(r'(?:\.fault|faults\.get)\(f"(\w+)\.\{(\w+)\}"\)')
# Reads that pass a name through (the accessor itself, and node_facts(ctx, NAME)).
PASS_THROUGH = {("suite/base.py", "name"), ("checks/gpus.py", "fault")}


def _family(path: Path, text: str, pos: int, var: str) -> list[str]:
    """The values of VAR in `for VAR in (...)` / `for VAR in NAME` on the read's line, else the nearest before."""
    line_end = text.find("\n", pos)
    loops = list(re.finditer(rf"for {var} in (\([^)]*\)|\w+)", text[:pos])) + \
        list(re.finditer(rf"for {var} in (\([^)]*\)|\w+)", text[pos:line_end]))
    assert loops, f"{path}: cannot see what {var} ranges over"
    src = loops[-1].group(1)
    if src.startswith("("):
        return re.findall(r'"(\w+)"', src)
    mod = importlib.import_module("trainready." + ".".join(path.relative_to(PKG).with_suffix("").parts))
    return list(getattr(mod, src))


def names_read_by_code() -> set[str]:
    found: set[str] = set()
    for path in sorted(PKG.rglob("*.py")):
        text = path.read_text()
        rel = str(path.relative_to(PKG))
        for m in LITERAL.finditer(text):
            found.add(m.group(1) or m.group(2))
        for m in FAMILY.finditer(text):
            found.update(f"{m.group(1)}.{k}" for k in _family(path, text, m.start(), m.group(2)))
        for m in READ.finditer(text):
            arg = text[m.end():].split(")", 1)[0]
            understood = arg.startswith('"') or arg.startswith('f"') or (rel, arg) in PASS_THROUGH
            assert understood, f"{rel}: plant read {m.group(0)}{arg}) not understood by this test; extend it"
    return found


def test_table_is_exactly_what_the_code_reads() -> None:
    read = names_read_by_code()
    assert {"matmul.corrupt", "gpus.facts", "versions.facts", "comm.slow_rank", "resume.skip_rng"} <= read  # scan works
    assert set(PLANTS) == read, f"missing from table: {read - set(PLANTS)}; never read: {set(PLANTS) - read}"
    from trainready.comm.run import SWEEP_FAULTS as COMM_CLI
    from trainready.resume.protocol import PLANTS as RESUME_PROTOCOL

    assert {f"comm.{k}" for k in COMM_CLI} == set(COMM_PLANTS)  # the sweep's own parser (comm.run.sweep_faults)
    assert {f"resume.{k}" for k in RESUME_PROTOCOL} == set(RESUME_PLANTS)
    assert set(BY_COMMAND["comm"]) == {n for n in read if n.startswith("comm.")}
    assert set(BY_COMMAND["resume"]) == {n for n in read if n.startswith(("resume.", "compat."))}
    assert set(BY_COMMAND["node"]) == {n for n in read if not n.startswith(("cluster.", "compat."))}  # every check
    assert set(BY_COMMAND["cluster"]) == {n for n in read if n.startswith("cluster.")}
    assert all(doc.strip() and "\n" not in doc for doc in PLANTS.values())


def test_parse_plants_checks_names_per_command() -> None:
    with pytest.raises(UsageError, match=r"did you mean comm\.slow_rank\?"):
        parse_plants(["comm.slow_rnk=1"], "comm")
    with pytest.raises(UsageError, match=r"--plant resume\.skip_rgn: unknown .*did you mean resume\.skip_rng\?"):
        parse_plants(["resume.skip_rgn=1"], "resume")
    assert parse_plants(["resume.skip_rng=1"], "resume") == {"resume.skip_rng": "1"}
    with pytest.raises(UsageError, match="unknown fault for `trainready comm`"):
        parse_plants(["allreduce.hang_rank=1"], "comm")  # a node plant means nothing to comm
    assert parse_plants(["allreduce.hang_rank=1"], "node") == {"allreduce.hang_rank": "1"}


@pytest.mark.slow
def test_misspelled_plant_is_exit_2_naming_it(cli) -> None:
    bad = cli("node", "--only", "matmul", "--plant", "matmul.corupt=0")
    assert bad.returncode == 2, bad.stdout + bad.stderr
    line = bad.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "--plant matmul.corupt: unknown fault" in line and "did you mean matmul.corrupt?" in line
    ok = cli("node", "--only", "matmul", "--plant", "matmul.corrupt=0", "--json", "-")
    assert ok.returncode == 3, ok.stderr  # spelled right, it is planted and the check fails: a planted run, exit 3
    assert json.loads(ok.stdout)["results"][0]["status"] == "fail"
    res = cli("resume", "--plant", "resume.skip_rgn=1")
    assert res.returncode == 2 and "did you mean resume.skip_rng?" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr


def _report(status: Status, context: dict) -> Report:
    r = CheckResult("gpus", "t", Level.QUICK, status, "m", "", (), 0.0)
    return Report("node", "h", "t", 0.0, "v", {}, (r,), context)


def test_planted_run_is_at_most_warn_and_says_so() -> None:
    planted = {"planted": {"gpus.facts": "x.json"}}
    assert _report(Status.PASS, {}).status == Status.PASS
    capped = _report(Status.PASS, planted)
    assert capped.status == Status.WARN and capped.exit_code == 3  # records.PLANTED_EXIT
    assert capped.to_json()["status"] == "warn" and capped.to_json()["context"]["planted"] == {"gpus.facts": "x.json"}
    failed = _report(Status.FAIL, planted)
    assert failed.status == Status.FAIL and failed.exit_code == 3  # only PASS is downgraded; exit 3 whatever the checks
    for rep, shown in ((_report(Status.PASS, {}), False), (capped, True)):
        con = Console(record=True, width=300)
        print_report(rep, con)
        text = con.export_text()
        assert ("PLANTED FAULTS / REPLAYED FACTS: gpus.facts=x.json" in text) is shown
        assert ("this record is a test, not evidence" in text) is shown


@pytest.mark.slow  # ~12 s on 2 loaded cores: CLI start-ups
def test_replayed_h200_facts_are_not_a_clean_pass(cli, tmp_path: Path) -> None:
    rec = tmp_path / "rec.json"
    r = cli("node", "--only", "gpus", "--spec", "example:h200-8x", "--plant", f"gpus.facts={H200}",
            "--json", str(rec))
    assert r.returncode == 3, r.stderr  # a planted run: never exit 0
    doc = json.loads(rec.read_text())
    assert doc["results"][0]["status"] == "pass" and "8 × NVIDIA H200" in doc["results"][0]["message"]
    assert doc["status"] == "warn" and doc["context"]["planted"] == {"gpus.facts": str(H200)}
    assert "PLANTED FAULTS / REPLAYED FACTS" in " ".join(r.stdout.split())
    # ... and such a record cannot become the fleet's reference; the same record unplanted can.
    bad = cli("spec", "init", "--from-report", str(rec), "-o", str(tmp_path / "a.toml"))
    assert bad.returncode == 2 and not (tmp_path / "a.toml").exists()
    assert "a test record is not evidence" in bad.stderr and "gpus.facts" in bad.stderr, bad.stderr
    del doc["context"]["planted"]
    clean = tmp_path / "clean.json"
    clean.write_text(json.dumps(doc))
    good = cli("spec", "init", "--from-report", str(clean), "-o", str(tmp_path / "b.toml"))
    assert good.returncode == 0 and (tmp_path / "b.toml").is_file(), good.stderr


@pytest.mark.slow  # ~12 s on 2 loaded cores: CLI start-ups
def test_comm_record_is_marked(cli, tmp_path: Path) -> None:
    spec = tmp_path / "met.toml"
    spec.write_text('[comm]\nexpected_busbw_gbps = { "all_reduce@2" = 1e-9 }\n')  # met by any working machine
    args = ("comm", "--world-size", "2", "--backend", "gloo", "--ops", "all_reduce", "-b", "1K", "-e", "1K", "-q",
            "--spec", str(spec), "--json", "-")
    clean = json.loads(cli(*args).stdout)
    assert clean["status"] == "pass" and "planted" not in clean["context"]  # unplanted: PASS, no mark
    r = cli(*args, "--plant", "comm.slow_ms=1")
    assert r.returncode == 3, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "warn" and doc["context"]["planted"] == {"comm.slow_ms": "1"}  # same run, planted: capped


def test_plant_values_are_checked_when_parsed() -> None:
    from trainready.commands.common import parse_plants
    from trainready.errors import UsageError

    with pytest.raises(UsageError, match=r"^--plant comm.slow_rank=x: expected RANK \(an integer\)$"):
        parse_plants(["comm.slow_rank=x"], "node")
    with pytest.raises(UsageError, match=r"comm.slow_ms=fast: expected MS \(a number\)"):
        parse_plants(["comm.slow_ms=fast"], "comm")
    assert parse_plants(["comm.slow_rank=3", "comm.slow_ms=2.5", "matmul.corrupt=0:fp32", "train_step.sdpa=x"],
                        "node") == {"comm.slow_rank": "3", "comm.slow_ms": "2.5", "matmul.corrupt": "0:fp32",
                                    "train_step.sdpa": "x"}


@pytest.mark.parametrize("plant", ["resume.skip_rng=0", "resume.flip_byte=false", "train_step.sdpa=0",
                                   "train_step.adamw=off", "train_step.freeze=0", "train_step.nan=no",
                                   "comm.slow_ms=0", "comm.slow_pct=0", "comm.slow_pct=-20", "gpus.facts="])
def test_a_plant_value_that_reads_as_off_is_rejected_not_planted(plant: str) -> None:
    command = "resume" if plant.startswith("resume.") else "node"
    with pytest.raises(UsageError) as info:
        parse_plants([plant], command)
    assert str(info.value).startswith(f"--plant {plant}") and "\n" not in str(info.value)
    assert "leave the plant out" in str(info.value)


def test_position_plants_take_0_as_rank_or_gpu_0_and_refuse_negatives() -> None:
    # RANK/IDX/N are 0-based positions (suite/plants.py): 0 is rank/GPU/step 0, planted on purpose
    assert parse_plants(["comm.wrong_rank=0", "matmul.corrupt=0:fp32", "comm.fault_step=0"], "node") == {
        "comm.wrong_rank": "0", "matmul.corrupt": "0:fp32", "comm.fault_step": "0"}
    with pytest.raises(UsageError, match=r"^--plant comm.slow_rank=-1: expected RANK >= 0 \(0-based\)$"):
        parse_plants(["comm.slow_rank=-1"], "comm")
    assert parse_plants(["resume.skip_rng=1", "comm.slow_pct=20"], "node") == {"resume.skip_rng": "1",
                                                                               "comm.slow_pct": "20"}


def _planted_record(tmp_path: Path, context: dict) -> Path:
    from trainready.records import CheckResult, Level, Metric, Report, Status

    res = CheckResult("train_step", "t", Level.STANDARD, Status.PASS, "m", "",
                      (Metric.of("train_mfu", 0.3, "1", None, model="small", params=1, gpu_model="NVIDIA H200"),), 0.0)
    p = tmp_path / "rec.json"
    p.write_text(json.dumps(Report("node", "h", "t", 0.0, "v", {}, (res,), context).to_json()))
    return p


def test_every_consumer_of_records_refuses_a_planted_one(cli, tmp_path: Path) -> None:
    from trainready.plan.measured import read_mfu
    from trainready.records import read_report

    for context in ({"planted": {"matmul.corrupt": "0"}}, {"planted_faults": ["comm.slow_rank"]}):
        rec = _planted_record(tmp_path, context)
        with pytest.raises(UsageError, match="was made with --plant .*a test record is not evidence"):
            read_report(str(rec), "--x", "a record")
        with pytest.raises(UsageError, match=r"^--mfu-from .*: the record was made with --plant"):
            read_mfu(str(rec))
    assert read_mfu(str(_planted_record(tmp_path, {}))).value == 0.3  # the same record unplanted is read
    rec = _planted_record(tmp_path, {"planted": {"comm.slow_pct": "20"}})
    r = cli("plan", "--preset", "llama3-8b", "--gpus", "8", "--gpu", "H200", "--mfu-from", str(rec))
    assert r.returncode == 2 and "a test record is not evidence" in r.stderr and "Traceback" not in r.stderr
