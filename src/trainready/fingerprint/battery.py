"""Run the battery on one device: every op on every input pattern, R times; hash the first result (SHA-256 per
chunk, in order) and compare each repeat with it bit for bit on the device.

Determinism settings (`settings`), each because a kernel's bits depend on it:

* cuBLAS: one stream (the default), a fixed workspace (`CUBLAS_WORKSPACE_CONFIG=:4096:8`, set before the
  process creates its first handle: the launch's environment), FP32 GEMMs in IEEE mode (TF32 only for the TF32
  GEMM), no reduced-precision split-K for BF16/FP16 (`allow_*_reduced_precision_reduction = False`); cuBLAS
  documents bitwise-identical results for the same architecture, SM count and toolkit under these conditions
  ("Results reproducibility", cuBLAS Library User Guide);
* SDPA pinned to one backend (FlashAttention on CUDA, the math kernel on the CPU);
* `torch.use_deterministic_algorithms(True)`; on the CPU one intra-op thread, so the BLAS splits no reduction.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterator

from trainready.fingerprint import ops as ops_mod
from trainready.fingerprint.ops import OPS, Op
from trainready.fingerprint.patterns import BLOCK, PATTERNS

# The battery's version, recorded in the group key: raise it with any change that can change a device's bits or
# the key's wording (an op, a shape, an input pattern, a setting, the hashing).  Devices and a reference of
# another version are not compared ("not compared: battery 1 vs 2"); tests/test_fingerprint_key.py pins the
# key's fields and settings' wording to this number.
VERSION = 1
CHUNKS = 64  # hashed regions per output (fewer when it has fewer elements)
CHUNK_HEX = 8  # hex digits kept of each chunk's SHA-256 (the entry's digest hashes the whole chunk digests)
# How the inputs are made (patterns.py, ops._operand): a battery whose inputs are made otherwise gives other bits
INPUTS = f"host float64, random in {BLOCK}-element seeded blocks, cast on the device"
WORKSPACE = ":4096:8"  # CUBLAS_WORKSPACE_CONFIG: eight 4 MiB workspaces, fixed (cuBLAS "Results reproducibility")


@dataclass(frozen=True)
class Plants:
    """Faults planted in this rank's battery (tests and the self-test only)."""

    flip: str = ""  # "OPKEY/PATTERN": flip the last stored bit of one element, every repeat
    intermittent: bool = False  # flip the same bit in the second repeat only
    shared: bool = False  # flip the top stored bit of bf16 GEMM random-7's largest element (every rank plants it)


def op_key(op: Op) -> str:
    return f"{op.kind}-{op.dtype}"


@contextlib.contextmanager
def settings(op: Op, on_gpu: bool) -> Iterator[None]:
    """The determinism settings for one op (process-global: the rank runs one op at a time); restored after."""
    import torch

    m = torch.backends.cuda.matmul
    old = (m.fp32_precision, m.allow_bf16_reduced_precision_reduction, m.allow_fp16_reduced_precision_reduction)
    try:
        m.fp32_precision = "tf32" if op.dtype == "tf32" else "ieee"
        m.allow_bf16_reduced_precision_reduction = False
        m.allow_fp16_reduced_precision_reduction = False
        if op.kind == "sdpa":
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(SDPBackend.FLASH_ATTENTION if on_gpu else SDPBackend.MATH):
                yield
        else:
            yield
    finally:
        m.fp32_precision, m.allow_bf16_reduced_precision_reduction, m.allow_fp16_reduced_precision_reduction = old


def settings_record(on_gpu: bool, threads: int) -> dict[str, str]:
    """The settings as recorded in the group key (the CPU's intra-op threads too: they split a CPU GEMM's work;
    a GPU's bits do not depend on the host's threads, so a GPU key leaves them out)."""
    out = {"cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG", "unset") if on_gpu else "n/a",
           "fp32_gemm": "ieee (tf32 for the TF32 GEMM)", "reduced_precision_reduction": "off",
           "sdpa_backend": "flash" if on_gpu else "math", "deterministic_algorithms": "on", "stream": "default",
           "inputs": INPUTS}
    return out if on_gpu else {**out, "intra_op_threads": str(threads)}


def _bounds(numel: int) -> list[int]:
    c = min(CHUNKS, numel)
    return [i * numel // c for i in range(c + 1)]


def digest(out: Any, workers: int = 1) -> tuple[str, str]:
    """(SHA-256 of the chunk digests in order, the chunks' first CHUNK_HEX hex digits concatenated)."""
    host = out.detach().contiguous().cpu()
    buf = host.view(-1).view(__import__("torch").uint8).numpy()
    per = host.element_size()
    edges = _bounds(host.numel())
    parts = [(edges[i] * per, edges[i + 1] * per) for i in range(len(edges) - 1)]
    if workers > 1 and host.numel() * per >= 1 << 22:
        with ThreadPoolExecutor(workers) as pool:  # hashlib releases the GIL on large buffers
            full = list(pool.map(lambda p: hashlib.sha256(buf[p[0]:p[1]]).digest(), parts))
    else:
        full = [hashlib.sha256(buf[a:b]).digest() for a, b in parts]
    head = f"{host.dtype}:{tuple(host.shape)}".encode()
    return hashlib.sha256(head + b"".join(full)).hexdigest(), "".join(d.hex()[:CHUNK_HEX] for d in full)


def flip(out: Any, index: int, bit: int) -> None:
    """Flip stored bit `bit` (0 = the last significand bit) of element `index` (flat), in place."""
    import torch

    ity = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[out.element_size()]
    iv = out.view(-1).view(ity)
    iv[index] ^= 1 << bit


def plant_index(numel: int) -> int:
    """The element a planted low-bit flip hits: inside chunk 13 (of 64), so the message's chunk is checkable."""
    edges = _bounds(numel)
    return min(edges[min(12, len(edges) - 2)] + 3, numel - 1)


def first_diff_chunk(a: Any, b: Any) -> int | None:
    """0-based chunk of the first element where a and b differ bit for bit (None: identical)."""
    import torch

    ity = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[a.element_size()]
    ne = (a.reshape(-1).view(ity) != b.reshape(-1).view(ity)).nonzero()
    if ne.numel() == 0:
        return None
    idx = int(ne[0, 0])
    edges = _bounds(a.numel())
    return next(i for i in range(len(edges) - 1) if edges[i] <= idx < edges[i + 1])


def _planted(op: Op, pattern: str, out: Any, plants: Plants, repeat: int) -> None:
    here = f"{op_key(op)}/{pattern}"
    if plants.flip == here or (plants.intermittent and repeat == 1 and here == "gemm-bf16/random-7"):
        flip(out, plant_index(out.numel()), 0)
    if plants.shared and here == "gemm-bf16/random-7":
        flip(out, int(out.double().abs().argmax()), ops_mod.opbounds.OUT_BITS[op.out] - 1)


def run_entry(op: Op, pattern: str, size: str, device: Any, repeats: int, plants: Plants,
              workers: int = 1, bases: dict[Any, Any] | None = None) -> dict[str, Any]:
    """One op on one pattern: digest, chunks, float64 error ratio, repeats that differ and the first such chunk."""
    on_gpu = str(device).startswith("cuda")
    t0 = time.perf_counter()
    x = ops_mod.inputs(op, pattern, size, device, bases)
    with settings(op, on_gpu):
        first = ops_mod.compute(op, x)
        _planted(op, pattern, first, plants, 0)
        bad, where = 0, None
        for r in range(1, repeats):
            again = ops_mod.compute(op, x)
            _planted(op, pattern, again, plants, r)
            c = first_diff_chunk(first, again)
            if c is not None:
                bad, where = bad + 1, where if where is not None else c
    dig, chunks = digest(first, workers)
    return {"id": f"{op_key(op)}/{pattern}", "op": op.name, "shape": ops_mod.shape_label(op, size),
            "pattern": pattern, "digest": dig, "chunks": chunks, "ratio": ops_mod.error_ratio(op, x, first),
            "repeat_mismatches": bad, "repeat_chunk": where, "seconds": round(time.perf_counter() - t0, 4)}


def supported(op: Op, device: Any) -> str | None:
    """Why `op` cannot run on `device` (None: it can): a tiny run of it, the error's first line."""
    try:
        x = ops_mod.inputs(op, "ones", "cpu", device)
        with settings(op, str(device).startswith("cuda")):
            ops_mod.compute(op, x)
    except Exception as exc:  # noqa: BLE001 - the reason is recorded with the fingerprint
        text = str(exc).strip().splitlines()
        return f"{type(exc).__name__}: {text[0] if text else ''}"[:160]
    return None


def run_battery(device: Any, size: str, repeats: int, plants: Plants = Plants(), workers: int = 1,
                left_out: dict[str, str] | None = None) -> dict[str, Any]:
    """Every op on every pattern; ops in `left_out` (op key -> why) and those the device cannot run are left out
    and named."""
    import torch

    t0 = time.perf_counter()
    skipped = dict(left_out or {})
    entries: list[dict[str, Any]] = []
    bases: dict[Any, Any] = {}  # the host's random bases, drawn once per run
    # The C flag behind torch.use_deterministic_algorithms, whose Python wrapper imports torch._inductor
    # (~2 s per process here, ~25 s on a loaded 2-core host); warn_only: an op without a deterministic variant warns
    torch._C._set_deterministic_algorithms(True, warn_only=True)
    for op in OPS:
        if op_key(op) in skipped:
            continue
        why = supported(op, device)
        if why:
            skipped[op_key(op)] = why
            continue
        entries += [run_entry(op, p, size, device, repeats, plants, workers, bases) for p in PATTERNS]
    if str(device).startswith("cuda"):
        torch.cuda.synchronize(device)
    return {"entries": entries, "left_out": skipped, "battery_s": time.perf_counter() - t0}
