"""Relevant environment variables, with anything secret redacted (rules in `probe.redact`).

A variable with a secret NAME keeps its name and loses its value; every other value
has secret-shaped whole tokens redacted (URL passwords, vendor tokens, random keys).
"""

from __future__ import annotations

import os
from typing import Mapping

from trainready.manifest.redact import REDACTED, is_secret_name, redact_value, scrub

__all__ = ["EXACT", "PREFIXES", "REDACTED", "capture", "is_secret_name", "redact_value", "relevant", "scrub"]

# Variables captured: by prefix, and a few exact names.
PREFIXES = (
    "NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_", "TORCHELASTIC_", "SLURM_", "OMP_", "MASTER_",
    "NVIDIA_", "NVTE_", "CUBLAS_", "CUDNN_", "TRITON_", "UCX_", "FI_", "GLOO_", "MKL_", "KMP_", "HF_",
    "TRANSFORMERS_", "MEGATRON_", "ENROOT_", "PYXIS_", "PMIX_", "OMPI_", "TRAINREADY_", "NVSHMEM_", "SHARP_",
)
EXACT = (
    "WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "LD_LIBRARY_PATH", "LD_PRELOAD",
    "PATH", "PYTHONPATH", "PYTHONHASHSEED", "CUDA_HOME", "container",
)


def relevant(name: str) -> bool:
    return name in EXACT or name.startswith(PREFIXES)


def capture(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """Relevant variables, sorted by name, secrets redacted."""
    env = os.environ if env is None else env
    out = {}
    for name in sorted(env):
        if relevant(name):
            out[name] = REDACTED if is_secret_name(name) else redact_value(env[name])
    return out
