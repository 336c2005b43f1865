import pytest
import torch

from trainready.checks import REGISTRY, CheckContext
from trainready.checks.matmul import inputs_for, matmul_mode, matmul_on_device
from trainready.numerics.bounds import U_FP32
from trainready.records import Status
from trainready.spec import default_spec

ON_GPU = torch.cuda.is_available()
WHERE = "GPU 0" if ON_GPU else "cpu"  # how the check names device 0


def _run(tmp_path, faults=None):
    return REGISTRY["matmul"]().execute(CheckContext(default_spec(), tmp_path, faults or {}))


@pytest.fixture(scope="module")
def small_inputs():
    return inputs_for(128)


def test_corrupt_element_is_caught_exactly_before_clean_passes(small_inputs):
    bad = matmul_on_device("cpu", "bf16", small_inputs, corrupt=True, nondet=False)
    assert bad["exact_mismatches"] == 1  # the +1 survives bf16 rounding and the integer product catches it
    good = matmul_on_device("cpu", "bf16", small_inputs, corrupt=False, nondet=False)
    assert good["exact_mismatches"] == 0 and good["repeat_mismatches"] == 0
    # the random product's error is real (non-zero) and inside the bound: the test measures something
    assert 0 < good["rel_err"] and 0 < good["bound_ratio"] <= 1.0


def test_fp32_error_is_near_unit_roundoff(small_inputs):
    r = matmul_on_device("cpu", "fp32", small_inputs, corrupt=False, nondet=False)
    assert 0 < r["rel_err"] < 64 * U_FP32


def test_nondeterminism_is_caught(small_inputs):
    r = matmul_on_device("cpu", "fp32", small_inputs, corrupt=False, nondet=True)
    assert r["repeat_mismatches"] == 1 and r["exact_mismatches"] == 0


@pytest.mark.slow
def test_check_fails_naming_dtype_and_device_then_passes(tmp_path):
    bad = _run(tmp_path, {"matmul.corrupt": "0"})
    assert bad.status == Status.FAIL
    assert f"{WHERE} bf16: integer product wrong in 1 element(s)" in bad.message
    assert "fp32" not in bad.message  # only the planted dtype
    bad32 = _run(tmp_path, {"matmul.corrupt": "0:fp32"})
    assert bad32.status == Status.FAIL and f"{WHERE} fp32" in bad32.message
    good = _run(tmp_path)
    assert good.status == Status.PASS, good.message
    assert ("tf32: n/a on CPU" in good.message) != ON_GPU
    names = {(m.name, m.label_dict["dtype"]) for m in good.metrics}
    assert ("matmul_err_vs_bound", "bf16") in names and ("matmul_rel_err", "bf16") in names and ("matmul_exact_mismatches", "fp32") in names
    assert all(m.ok for m in good.metrics)


def test_fault_on_another_gpu_does_not_touch_this_device(tmp_path):
    assert _run(tmp_path, {"matmul.corrupt": "99"}).status == Status.PASS


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_planted_bitflip_fails_naming_the_bound(tmp_path, dtype):
    """One flipped top significand bit in one element of both products: not an integer error, not a
    repeat mismatch; only the statistical bound can catch it."""
    r = _run(tmp_path, {"matmul.bitflip": f"0:{dtype}"})
    assert r.status == Status.FAIL, r.message
    assert f"{WHERE} {dtype}: random product off by" in r.message and "statistical error bound" in r.message
    assert "integer" not in r.message and "twice" not in r.message


def test_nondeterministic_check_fails(tmp_path):
    r = _run(tmp_path, {"matmul.nondeterministic": "0"})
    assert r.status == Status.FAIL and f"{WHERE} bf16: same product twice differs in 1 element(s)" in r.message


def test_matmul_mode_restores_flags():
    import torch

    m = torch.backends.cuda.matmul
    before = (m.fp32_precision, m.allow_bf16_reduced_precision_reduction)
    with matmul_mode("tf32"):  # (on a CPU build the flags exist and are inert)
        assert m.fp32_precision == "tf32" and m.allow_bf16_reduced_precision_reduction is False
    assert (m.fp32_precision, m.allow_bf16_reduced_precision_reduction) == before


def test_cli_exit_code_and_message(cli):
    r = cli("node", "--only", "matmul", "--plant", "matmul.corrupt=0")
    assert r.returncode == 3, r.stdout + r.stderr  # a planted run (records.PLANTED_EXIT)
    assert "verdict: FAIL" in r.stdout
    assert "bf16" in r.stdout and "Traceback" not in r.stderr
