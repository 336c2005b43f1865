"""`trainready resume --data` hands typed records down: the command builds one `ResumeOptions`,
prepares the protocol once (validation and run are the same `ProtocolConfig`), the check runs what
it was handed, and every rank gets a `RankJob` whose fields reach `open_tokens`."""

from __future__ import annotations

import dataclasses
import inspect
import typing
from pathlib import Path

import pytest

from evidence_records import run_main
from trainready.records import Outcome, Status


@pytest.fixture()
def counted(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """Count every `prepare`, and stand in for the protocol run (no ranks start): what it was handed is kept."""
    import trainready.checks.resume as check_mod
    import trainready.resume.setup as setup

    seen: dict[str, list] = {"prepare": [], "run": []}
    real = setup.prepare

    def prepare(*args, **kw):  # type: ignore[no-untyped-def]
        pc = real(*args, **kw)
        seen["prepare"].append(pc)
        return pc

    def run_protocol(pc, progress=None):  # type: ignore[no-untyped-def]
        seen["run"].append(pc)
        return Outcome(Status.PASS, "stand-in run")

    monkeypatch.setattr(setup, "prepare", prepare)
    monkeypatch.setattr(check_mod, "prepare", prepare)
    monkeypatch.setattr(check_mod, "run_protocol", run_protocol)
    return seen


def test_resume_data_is_prepared_once_and_the_check_runs_that_config(counted: dict[str, list], tmp_path: Path) -> None:
    from trainready.data.corpus import write_sample_corpus
    from trainready.resume.protocol import ProtocolConfig

    data = write_sample_corpus(tmp_path / "tok", vocab_size=300)
    ran = run_main("resume", "--data", str(data), "--cpu", "--ranks", "1", "--steps", "4", "--checkpoint-step", "2",
                   "--dir", str(tmp_path / "run"))
    assert ran.returncode == 0, ran.stderr
    assert len(counted["prepare"]) == 1, f"prepare ran {len(counted['prepare'])} times for one `resume --data`"
    (pc,) = counted["run"]
    assert pc is counted["prepare"][0] and isinstance(pc, ProtocolConfig)  # the validated config is the one run
    assert pc.data == str(data.resolve()) and pc.root == tmp_path / "run" and pc.train.steps == 4


def test_node_path_prepares_in_the_check(counted: dict[str, list], tmp_path: Path) -> None:
    """Without a prepared config (`trainready node`) the check prepares it from its typed options, once."""
    from trainready.suite.base import CheckContext
    from trainready.suite.options import CheckOptions
    from trainready.checks.resume import ResumeCheck
    from trainready.resume.options import ResumeOptions
    from trainready.spec import default_spec

    spec = default_spec()
    spec = dataclasses.replace(spec, resume=dataclasses.replace(spec.resume, ranks=1, steps=4, checkpoint_step=2))
    ctx = CheckContext(spec, tmp_path, {}, CheckOptions(resume=ResumeOptions(cpu=True, vocab_size=512)))
    res = ResumeCheck().execute(ctx)
    assert res.status == Status.PASS, res.message
    assert len(counted["prepare"]) == 1 and counted["run"] == counted["prepare"]
    assert counted["run"][0].root == tmp_path / "resume" and counted["run"][0].train.vocab_size == 512


def _hints(obj: object) -> dict[str, object]:
    """The resolved annotations; suite/options.py names ProtocolConfig for type checkers only (importing it
    imports torch, which `import trainready.checks` must not), so it is resolved here from its module."""
    from trainready.resume.protocol import ProtocolConfig

    return typing.get_type_hints(obj, localns={"ProtocolConfig": ProtocolConfig})


def test_the_walk_to_open_tokens_is_typed_records_only() -> None:
    """ResumeOptions → prepare → ProtocolConfig → CheckOptions → run_protocol → RankJob → resume_rank."""
    from trainready.suite.options import CheckOptions
    from trainready.resume.compare import Tolerance
    from trainready.resume.job import RankJob
    from trainready.resume.options import ResumeOptions
    from trainready.resume.protocol import ProtocolConfig
    from trainready.resume.setup import prepare
    from trainready.resume.worker import resume_rank
    from trainready.workload.loop import TrainConfig

    assert _hints(prepare)["options"] is ResumeOptions
    assert _hints(prepare)["return"] is ProtocolConfig
    assert _hints(CheckOptions)["resume"] is ResumeOptions
    assert _hints(CheckOptions)["protocol"] == ProtocolConfig | None
    assert list(inspect.signature(resume_rank).parameters) == ["ctx", "job"]
    assert _hints(resume_rank)["job"] is RankJob
    job = _hints(RankJob)
    assert job["train"] is TrainConfig and job["tolerance"] is Tolerance and job["data"] is str
    for record in (ResumeOptions, RankJob, CheckOptions):
        assert record.__dataclass_params__.frozen, record  # type: ignore[attr-defined]
        untyped = [f.name for f in dataclasses.fields(record) if typing.get_origin(_hints(record)[f.name]) is dict
                   or _hints(record)[f.name] is typing.Any]
        assert not untyped, f"{record.__name__}: {untyped}"
    source = inspect.getsource(resume_rank)
    assert "open_tokens(job.data, job.dtype)" in source
