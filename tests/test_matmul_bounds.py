"""The matmul check's error bounds: derived from K, tight enough that one flipped
significand bit in one element of the product is caught, and never tripped by a healthy product.

Planted faults are flipped bits (the silent-data-corruption shape), each shown FAILING before the
clean product is shown passing.  On this CPU fp32 and bf16 run as on a GPU; tf32 runs its arithmetic
model (tf32-representable inputs, fp32 accumulation), which is what the GPU's tf32 pass judges.
"""

from __future__ import annotations

import math

import pytest
import torch

from trainready.checks.matmul import K_RANDOM, N_GPU, flip_target, inputs_for, matmul_on_device
from trainready.numerics.bounds import (
    U_ACC,
    coefficients,
    confidence_lambda,
    element_bounds,
    gamma,
    to_tf32_values,
    top_bit,
)

GPU_SIZE = (N_GPU, N_GPU, K_RANDOM)  # the product the GPU check judges: 4096 x 1024 @ 1024 x 4096


@pytest.fixture(scope="module")
def small():
    return inputs_for(128)


def test_statistical_bound_grows_like_sqrt_k_beside_the_worst_case():
    lam = confidence_lambda(4096 * 4096 * 1024, U_ACC)
    assert 9.0 < lam < 10.0  # false alarm 1e-9 over 2^34 rounding chains
    for k in (256, 1024, 4096):
        stat, worst = coefficients("fp32", 4096, 4096, k)
        assert stat == pytest.approx(confidence_lambda(4096 * 4096 * k, U_ACC) * math.sqrt(k) * U_ACC, rel=1e-3)
        assert worst == pytest.approx(gamma(k, U_ACC), rel=1e-6)
        assert stat < worst  # the statistical bound is the tighter one from K = 256 on
    s1, _ = coefficients("fp32", 4096, 4096, 1024)
    s4, _ = coefficients("fp32", 4096, 4096, 4096)
    assert s4 / s1 == pytest.approx(2.0, rel=0.02)  # 4x K: 2x bound (sqrt), the worst case grows 4x
    with pytest.raises(ValueError):
        coefficients("fp8", 1, 1, 1)


@pytest.mark.parametrize("dtype", ["fp32", "tf32", "bf16"])
def test_flipped_top_bit_fails_then_clean_passes(small, dtype):
    bad = matmul_on_device("cpu", dtype, small, corrupt=False, nondet=False, flip=True, size=GPU_SIZE)
    assert bad["bound_ratio"] > 1.0 and bad["repeat_mismatches"] == 0  # only the bound can see it
    good = matmul_on_device("cpu", dtype, small, corrupt=False, nondet=False, size=GPU_SIZE)
    assert 0 < good["bound_ratio"] <= 1.0 and good["worst_ratio"] <= 1.0


def _detected_fraction(c: torch.Tensor, ref, stat, bit: int) -> float:
    """Flip `bit` in EVERY element at once; judging is per element, so this is M·N one-flip experiments."""
    f = c.clone()
    iv = f.view(torch.int16 if f.dtype == torch.bfloat16 else torch.int32)
    iv ^= 1 << bit
    return float(((f.double() - ref).abs() > stat).double().mean())


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["fp32", "tf32", "bf16"])
def test_at_the_real_k_a_flipped_high_bit_is_caught_in_nearly_every_element(dtype):
    """The GPU product's K (1024) and confidence (4096 x 4096 outputs), on 64 of its rows."""
    g = torch.Generator().manual_seed(5)
    tdt = torch.bfloat16 if dtype == "bf16" else torch.float32
    a = torch.randn(64, K_RANDOM, generator=g).to(tdt)
    b = torch.randn(K_RANDOM, N_GPU, generator=g).to(tdt)
    if dtype == "tf32":
        a, b = to_tf32_values(a), to_tf32_values(b)
    c = a @ b
    ref = a.double() @ b.double()
    stat, _ = element_bounds(dtype, ref, a.double().abs() @ b.double().abs(), *GPU_SIZE)
    assert float(((c.double() - ref).abs() / stat).max()) <= 1.0  # healthy: no false alarm in 262144 elements
    top = top_bit(dtype)
    fractions = {bit: _detected_fraction(c, ref, stat, bit) for bit in range(top, -1, -1)}
    assert fractions[top] >= 0.995  # the top significand bit: caught unless |C_ij| is ~0 (< 0.5% of elements)
    if dtype == "bf16":
        # bf16: bits 6..1 (64..2 ulp) are caught; bit 0 (1 ulp) is within the output rounding we allow.
        assert fractions[1] >= 0.85 and fractions[0] < 0.5
    else:
        assert fractions[top - 6] >= 0.85  # fp32/tf32 results: the top 7 of 23 stored bits in >= 85% of elements


def test_flip_target_is_a_typical_element(small):
    ref = small["a"].double() @ small["b"].double()
    idx = flip_target(ref, K_RANDOM)
    assert abs(float(ref.view(-1)[idx])) >= 0.5 * math.sqrt(K_RANDOM) and idx < 10
