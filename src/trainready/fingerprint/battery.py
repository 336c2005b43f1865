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
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Iterator

from trainready.fingerprint import ops as ops_mod
from trainready.fingerprint.ops import OPS, Op
from trainready.fingerprint.patterns import BLOCK, PATTERNS, draw_bases
from trainready.numerics.bounds import bits_view, flip_bit

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
    if workers > 1:
        with ThreadPoolExecutor(workers) as pool:
            return host_digest(out.detach().contiguous().cpu(), pool)
    return host_digest(out.detach().contiguous().cpu(), None)


def host_digest(host: Any, pool: ThreadPoolExecutor | None) -> tuple[str, str]:
    """`digest` of a host tensor; its chunks hashed on `pool`'s threads when it is large (hashlib releases the
    GIL on large buffers)."""
    buf = host.view(-1).view(__import__("torch").uint8).numpy()
    per = host.element_size()
    edges = _bounds(host.numel())
    parts = [(edges[i] * per, edges[i + 1] * per) for i in range(len(edges) - 1)]
    if pool is not None and host.numel() * per >= 1 << 22:
        full = list(pool.map(lambda p: hashlib.sha256(buf[p[0]:p[1]]).digest(), parts))
    else:
        full = [hashlib.sha256(buf[a:b]).digest() for a, b in parts]
    head = f"{host.dtype}:{tuple(host.shape)}".encode()
    return hashlib.sha256(head + b"".join(full)).hexdigest(), "".join(d.hex()[:CHUNK_HEX] for d in full)


class Hasher:
    """Hashes the battery's outputs off the device's critical path: on a GPU each output is copied to the host on
    a side stream (after the default stream's work that made it: `wait_stream` at submission) and hashed on
    host threads while the default stream computes the next entries; the ops themselves stay on the default
    stream (cuBLAS's reproducibility is per stream).  At most PENDING outputs wait, so their device memory is
    bounded.  On a CPU (gloo ranks sharing few cores) each output is hashed at once, in the caller's thread."""

    PENDING = 3

    def __init__(self, device: Any, workers: int) -> None:
        import torch

        self.on_gpu = str(device).startswith("cuda")
        self.device = torch.device(device)
        self.hash_pool = ThreadPoolExecutor(workers) if workers > 1 else None
        self.copier = ThreadPoolExecutor(1) if self.on_gpu else None
        self.stream = torch.cuda.Stream(self.device) if self.on_gpu else None
        self.waiting: list[Future[tuple[str, str]]] = []

    def submit(self, out: Any) -> Future[tuple[str, str]]:
        if self.copier is None:
            done: Future[tuple[str, str]] = Future()
            done.set_result(host_digest(out.detach().contiguous(), self.hash_pool))
            return done
        import torch

        assert self.stream is not None
        self.stream.wait_stream(torch.cuda.current_stream(self.device))  # after the work that made `out`
        fut = self.copier.submit(self._copy_and_hash, out)
        self.waiting = [f for f in self.waiting if not f.done()] + [fut]
        if len(self.waiting) > self.PENDING:
            self.waiting.pop(0).result()
        return fut

    def _copy_and_hash(self, out: Any) -> tuple[str, str]:
        import torch

        torch.cuda.set_device(self.device)  # the current device is per host thread
        with torch.cuda.stream(self.stream):
            host = out.detach().contiguous().cpu()
        return host_digest(host, self.hash_pool)

    def close(self) -> None:
        for pool in (self.copier, self.hash_pool):
            if pool is not None:
                pool.shutdown(wait=True)


def flip(out: Any, index: int, bit: int) -> None:
    """Flip stored bit `bit` (0 = the last significand bit) of element `index` (flat), in place."""
    flip_bit(out, index, bit)


def plant_index(numel: int) -> int:
    """The element a planted low-bit flip hits: inside chunk 13 (of 64), so the message's chunk is checkable."""
    edges = _bounds(numel)
    return min(edges[min(12, len(edges) - 2)] + 3, numel - 1)


def first_diff_chunk(a: Any, b: Any) -> int | None:
    """0-based chunk of the first element where a and b differ bit for bit (None: identical)."""
    ne = (bits_view(a.reshape(-1)) != bits_view(b.reshape(-1))).nonzero()
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
              hasher: Hasher, bases: dict[Any, Any] | None = None, ratio: bool = True) -> dict[str, Any]:
    """One op on one pattern: float64 error ratio (`ratio`: else None), repeats that differ and the first such
    chunk; "digest" is a future of (digest, chunks) from `hasher` (`run_battery` resolves it)."""
    on_gpu = str(device).startswith("cuda")
    t0 = time.perf_counter()
    x = ops_mod.inputs(op, pattern, size, device, bases)
    with settings(op, on_gpu):
        first = ops_mod.compute(op, x)
        _planted(op, pattern, first, plants, 0)
        hashed = hasher.submit(first)
        bad, where = 0, None
        for r in range(1, repeats):
            again = ops_mod.compute(op, x)
            _planted(op, pattern, again, plants, r)
            c = first_diff_chunk(first, again)
            if c is not None:
                bad, where = bad + 1, where if where is not None else c
    return {"id": f"{op_key(op)}/{pattern}", "op": op.name, "shape": ops_mod.shape_label(op, size),
            "pattern": pattern, "digest": hashed, "chunks": "",
            "ratio": ops_mod.error_ratio(op, x, first) if ratio else None,
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


def base_keys(size: str) -> list[tuple[tuple[int, ...], int]]:
    """(shape, operand) of every random base the battery of `size` uses (ops.inputs)."""
    keys: list[tuple[tuple[int, ...], int]] = []
    for op in OPS:
        shape = ops_mod.shape_of(op, size)
        if op.kind == "gemm":
            keys += [((shape[0], shape[2]), 0), ((shape[1], shape[2]), 1)]
        else:
            keys += [(shape, i) for i in range(3 if op.kind == "sdpa" else 1)]
    return list(dict.fromkeys(keys))


def run_battery(device: Any, size: str, repeats: int, plants: Plants = Plants(), workers: int = 1,
                left_out: dict[str, str] | None = None, ratios: bool = True) -> dict[str, Any]:
    """Every op on every pattern; ops in `left_out` (op key -> why) and those the device cannot run are left out
    and named.  `ratios`: each entry's float64 error ratio (the burn-in, which keeps only digests, leaves them
    out: None).  The random bases are drawn on host threads (once per process) while the device starts up in
    `supported`; outputs are hashed while the device computes the next entries (`Hasher`)."""
    import torch

    t0 = time.perf_counter()
    skipped = dict(left_out or {})
    entries: list[dict[str, Any]] = []
    bases: dict[Any, Any] = {}  # this run's device copies of the process's random bases
    # The C flag behind torch.use_deterministic_algorithms, whose Python wrapper imports torch._inductor
    # (~2 s per process here, ~25 s on a loaded 2-core host); warn_only: an op without a deterministic variant warns
    torch._C._set_deterministic_algorithms(True, warn_only=True)
    with ThreadPoolExecutor(1) as bg:
        drawn = bg.submit(draw_bases, base_keys(size))
        for op in OPS:
            if op_key(op) not in skipped and (why := supported(op, device)):
                skipped[op_key(op)] = why
        drawn.result()
    hasher = Hasher(device, workers)
    try:
        for op in OPS:
            if op_key(op) not in skipped:
                entries += [run_entry(op, p, size, device, repeats, plants, hasher, bases, ratios) for p in PATTERNS]
        for e in entries:
            e["digest"], e["chunks"] = e["digest"].result()
    finally:
        hasher.close()
    if str(device).startswith("cuda"):
        torch.cuda.synchronize(device)
    return {"entries": entries, "left_out": skipped, "battery_s": time.perf_counter() - t0}
