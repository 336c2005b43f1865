"""Relevant environment variables, with anything secret-looking redacted.

Redaction is by NAME (a variable called *TOKEN*, *SECRET*, *KEY*, ... keeps its
name, loses its value) and by VALUE (a token-shaped string is redacted under any
name; a URL keeps its host but loses the password in ``user:pass@``).  `scrub`
applies the value rules to every string of a whole manifest.
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

REDACTED = "<redacted>"

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
# Name fragments that mark a secret (matched case-insensitively anywhere in the name).
SECRET_NAME = re.compile(
    r"TOKEN|SECRET|KEY|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|AUTH|PRIVATE|COOKIE|SESSION|SIGNATURE|_PW$|_PASS$|APIKEY",
    re.IGNORECASE,
)
# Token shapes (any name). Sources: GitHub token prefixes (ghp_/gho_/ghu_/ghs_/ghr_, github_pat_),
# Hugging Face "hf_", AWS access key ids (AKIA/ASIA + 16), JWT (three base64url parts, header "eyJ"),
# Slack "xox?-", OpenAI-style "sk-", PEM private-key blocks.
SECRET_VALUE = re.compile(
    r"(gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{20,}|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|sk-[A-Za-z0-9_-]{20,}|-----BEGIN [A-Z ]*PRIVATE KEY-----)"
)
# scheme://user:password@host → keep user and host.
URL_PASSWORD = re.compile(r"(?P<pre>[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]+:)(?P<pw>[^@\s/]+)(?P<at>@)")


def redact_value(value: str) -> str:
    """Redact token-shaped substrings and URL passwords; the rest of the string stays."""
    value = URL_PASSWORD.sub(lambda m: m.group("pre") + REDACTED + m.group("at"), value)
    return SECRET_VALUE.sub(REDACTED, value)


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def _env_style_secret(key: object) -> bool:
    return isinstance(key, str) and key == key.upper() and any(c.isalpha() for c in key) and is_secret_name(key)


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


def scrub(obj: Any) -> Any:
    """Apply `redact_value` to every string (keys and values) of a JSON-able object; the
    value of an environment-style key (UPPER_CASE) with a secret-looking name is redacted whole."""
    if isinstance(obj, str):
        return redact_value(obj)
    if isinstance(obj, dict):
        return {
            scrub(k): REDACTED if _env_style_secret(k) and isinstance(v, str) else scrub(v) for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return [scrub(v) for v in obj]
    return obj
