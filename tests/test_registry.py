import pytest

from trainready.checks import REGISTRY, Check, CheckContext, register, select
from trainready.errors import DuplicateCheckError, UsageError
from trainready.records import Level, Outcome, Status
from trainready.spec import default_spec


def test_registering_a_name_twice_is_an_error():
    class A(Check):
        name = "dup-test"

        def run(self, ctx):
            return Outcome(Status.PASS, "")

    class B(Check):
        name = "dup-test"

        def run(self, ctx):
            return Outcome(Status.PASS, "")

    register(A)
    try:
        with pytest.raises(DuplicateCheckError, match="registered twice"):
            register(B)
    finally:
        REGISTRY.pop("dup-test", None)


def _ctx(tmp_path):
    return CheckContext(default_spec(), tmp_path)


def test_lifecycle_turns_exceptions_into_error(tmp_path):
    class Boom(Check):
        name = "boom"

        def run(self, ctx):
            raise ZeroDivisionError("division by zero\nsecond line")

    r = Boom().execute(_ctx(tmp_path))
    assert r.status == Status.ERROR and r.message == "ZeroDivisionError: division by zero"
    assert r.duration_s >= 0


def test_lifecycle_timeout(tmp_path):
    import threading

    gate = threading.Event()

    class Slow(Check):
        name = "slow"
        timeout_s = 0.3

        def run(self, ctx):
            gate.wait(5)
            return Outcome(Status.PASS, "late")

    r = Slow().execute(_ctx(tmp_path))
    gate.set()
    assert r.status == Status.ERROR and "timed out" in r.message


def test_skip_reason_skips_without_running(tmp_path):
    ran = []

    class NeedsGpu(Check):
        name = "needs-gpu"

        def skip_reason(self, ctx):
            return "no GPU"

        def run(self, ctx):
            ran.append(1)
            return Outcome(Status.FAIL, "")

    r = NeedsGpu().execute(_ctx(tmp_path))
    assert (r.status, r.message, ran) == (Status.SKIP, "no GPU", [])


def test_select_levels_and_unknown_names():
    quick = {c.name for c in select(None, None, Level.QUICK)}
    standard = {c.name for c in select(None, None, Level.STANDARD)}
    assert "allreduce" in quick and quick <= standard
    assert [c.name for c in select(["allreduce"], None, Level.QUICK)] == ["allreduce"]
    assert "allreduce" not in {c.name for c in select(None, ["allreduce"], Level.STANDARD)}
    with pytest.raises(UsageError, match="unknown check 'nope'"):
        select(["nope"], None, Level.QUICK)


def test_broken_check_module_becomes_an_error_result(tmp_path):
    from trainready.checks.registry_all import _register_broken

    _register_broken("broken-test", ImportError("No module named 'nonexistent'"))
    try:
        r = REGISTRY["broken-test"]().execute(_ctx(tmp_path))
        assert r.status == Status.ERROR and "failed to import: ImportError" in r.message
    finally:
        REGISTRY.pop("broken-test", None)
