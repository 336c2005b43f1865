"""Redaction: secrets go, by name and by value; every other byte of a record stays.

The benign table holds values a real manifest or record carries (hostnames, paths, versions,
UUIDs, digests, PCI ids, commits); each must survive `scrub` byte for byte, as a value and
inside a sentence.  The secret table holds one secret per row in a realistic context; the
secret must not appear in the scrubbed output.  Fake tokens are drawn from a seeded RNG in each
vendor's documented format, so no real credential is in the repository.
"""

from __future__ import annotations

import json
import random
import string

import pytest

from trainready.manifest.envvars import capture
from trainready.manifest.redact import REDACTED, is_secret_name, redact_value, scrub

_rng = random.Random(9)
B62 = string.ascii_letters + string.digits


def rand(n: int, alphabet: str = B62) -> str:
    return "".join(_rng.choice(alphabet) for _ in range(n))


HEX40 = "70d99e998b4955e0049d13a98d77ae1b14db1f45"  # torch_git of the captured H200 manifest
SHA = "sha256:e3f1e2e1f7e41fa33f57d463a6581c5fd4e951da9cd90171095c9c5ea09a8440"

BENIGN = [
    "node-task-scheduler-worker-0001",  # the host (was node-ta<redacted>)
    "/mnt/disk-checkpoints-shared-2024",  # the path (was /mnt/di<redacted>)
    "sk-prod-trainer-node-0001",
    "task-sk-scheduler-worker-000000000000001",
    "gpu-h200-rack07-node012.cluster.internal",
    "ip-10-0-1-23.ec2.internal",
    "trainer-7f9c8d6b5-x2k4p",
    "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2",
    "/home/alice/.cache/huggingface/hub/models--gpt2/snapshots/607a30d783dfa663caf39e06633721c8d4cfcd7e",
    "checkpoints/Run7B/Step000123/ModelStates2024",
    "/data/runs/Llama3Pretrain70BRun20240601Final/latest",
    "TheQuickBrownFoxJumpsOverTheLazyDog2024AndMore",
    "2.11.0+cu130",
    "2.28.9",
    "9.19.0.56",
    "580.159.04",
    "GPU-5f3c1a2b-8d4e-4f6a-9b0c-1d2e3f4a5b6c",
    "123e4567-e89b-12d3-a456-426614174000",
    SHA,
    f"nvcr.io/nvidia/pytorch:25.01-py3@{SHA}",
    "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=",  # a base64 (SRI) digest
    "0000:1b:00.0",
    "00000000:1B:00.0",
    HEX40,
    "a" * 64,
    "mlx5_0:1,mlx5_1:1",
    "cuda>=13.0 brand=tesla,driver>=535,driver<536",
    "https://mirror.example.com:8443/simple/torch",
    "ssh://git@github.com:22/org/repo.git",
    "git@github.com:org/repo.git",
    "http://[::1]:8080/metrics",
    "TOKENIZER_PATH=/data/tokenizers/gpt2 NCCL_IB_PKEY=0x8001",
    "python train.py --tokenizer-path /data/tok --num-tokens 1000000 --max_tokens=4096",
    "Bearer tokens are described in RFC 6750",
    "Authorization header missing",
    "hf_transfer enabled",
    "gpu-[001-128]",
    "xoxo-hugs-and-kisses",
]


@pytest.mark.parametrize("value", BENIGN)
def test_benign_value_survives_byte_for_byte(value):
    assert redact_value(value) == value
    doc = {"host": value, "note": f"seen on {value}; ok", "list": [value], value: 1}
    assert scrub(doc) == doc


@pytest.mark.parametrize("key, value", [
    ("commit", HEX40), ("torch_git", HEX40), ("package_set_sha256", SHA), ("key", "params"),
    ("flops_per_token", "6.1e9"), ("TOKENIZER_PATH", "/data/tok"), ("NCCL_IB_PKEY", "0x8001"),
    ("eos_token", "<|endoftext|>"), ("MAX_TOKENS", "4096"), ("PWD", "/root"), ("SSH_KEY_PATH", "/root/.ssh/id"),
])
def test_benign_key_keeps_its_value(key, value):
    assert scrub({key: value}) == {key: value}


W_KEY = "4f" * 20  # a W&B API key is 40 hex: secret by its NAME only
SECRETS = [
    ("redis://:pw@h:6379/0", ":pw@"),  # the URL (kept its password)
    ("https://alice:hunter2pass@mirror.example/torch", "hunter2pass"),
    ("postgres://app:p@ss-word@db.internal:5432/x", "p@ss-word"),
    (f"pulled with hf_{rand(34, string.ascii_letters)}", None),
    (f"GH ghp_{rand(36)} push", None),
    (f"gho_{rand(36)}", None),
    (f"github_pat_{rand(22)}_{rand(59)}", None),
    (f"OPENAI sk-{rand(48)}", None),
    (f"key sk-proj-{rand(40, B62 + '-_')}{rand(20)}", None),
    (f"sk-ant-api03-{rand(40)}-{rand(40)}AA", None),
    (f"slack xoxb-{rand(12, string.digits)}-{rand(13, string.digits)}-{rand(24)}", None),
    ("aws AKIAIOSFODNN7EXAMPLE ok", "AKIAIOSFODNN7EXAMPLE"),
    (f"glpat-{rand(20)}", None),
    (f"AIza{rand(35)}", None),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTYifQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c", "SflKxwRJ"),
    (f"Authorization: Bearer {rand(30)}.x", None),
    ("curl -H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", "dXNlcjpwYXNzd29yZA"),
    (f"WANDB_API_KEY={W_KEY} python train.py", W_KEY),
    ("PGPASSWORD=correcthorse psql", "correcthorse"),
    ("train --password=hunter2 --hf-token abcdefgh", "hunter2"),
    ("train --hf-token abcdefgh", "abcdefgh"),
    ("https://host/file?access_token=abc123def&x=1", "abc123def"),
    (f"leaked {rand(40)} here", None),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow"),
]


def _secret_of(text: str, secret: str | None) -> str:
    """The secret itself: given, or the token that carries the vendor prefix."""
    if secret:
        return secret
    return max(text.replace("'", " ").split(), key=len)


@pytest.mark.parametrize("text, secret", SECRETS)
def test_secret_never_reaches_the_output(text, secret):
    s = _secret_of(text, secret)
    assert s in text  # the planted secret is there before
    out = json.dumps(scrub({"note": text, "list": [text]}))
    assert s not in out and REDACTED in out


@pytest.mark.parametrize("key, value", [
    ("WANDB_API_KEY", W_KEY), ("HF_TOKEN", "x"), ("password", "correct horse"), ("apiKey", "plainvalue123"),
    ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"), ("DB_PASS", "s3"), ("REDIS_PW", "s3"),
    ("client_secret", "abc"), ("TRAINREADY_AUTH_HEADER", "Bearer x"), ("PGPASSWORD", "pg"), ("SSH_KEY", "k"),
])
def test_secret_names_lose_their_values(key, value):
    assert is_secret_name(key)
    assert scrub({key: value}) == {key: REDACTED}
    assert scrub({"env": {key: [value]}}) == {"env": {key: [REDACTED]}}  # a list under a secret name, too


def test_capture_uses_the_same_rules():
    env = {"TORCH_TOKENIZER_PATH": "/data/tok", "HF_TOKEN": "x", "NCCL_IB_PKEY": "0x8001",
           "SLURM_JOB_NAME": "node-task-scheduler-worker-0001", "TORCH_HOME": "redis://:pw@h:6379"}
    out = capture(env)
    assert out["TORCH_TOKENIZER_PATH"] == "/data/tok" and out["NCCL_IB_PKEY"] == "0x8001"
    assert out["SLURM_JOB_NAME"] == "node-task-scheduler-worker-0001" and out["HF_TOKEN"] == REDACTED
    assert out["TORCH_HOME"] == "redis://:<redacted>@h:6379"


def test_numbers_are_never_secrets():
    assert scrub({"HF_TOKEN": 3, "tokens": 12, "ok": True}) == {"HF_TOKEN": 3, "tokens": 12, "ok": True}


def test_a_path_of_words_dates_and_hex_stays_byte_for_byte_a_base64_key_with_a_slash_does_not() -> None:
    """A run of [A-Za-z0-9/] 32+ long that is a path (a self-test's scratch folder, a sweep's run folder) was
    redacted as a random token: '/tmp/trainready-selftest-<redacted>-run' in a fleet record."""
    import base64
    import random

    from trainready.manifest.redact import REDACTED, redact_value

    key = "k7Qz/9XbLm2PqR8tVw3YcN5hJ4dFg6Ks1Ae0TuWi"  # base64-shaped, a '/' inside
    assert redact_value(f"token {key}") == f"token {REDACTED}"
    for path in ("/tmp/trainready-selftest-pv7iej8f/inputs/cluster/vanish/runs/20261206T232752Z-run",
                 "/home/ops/sweep/runs/20261206T030000Z-sweep/nodes/gpu0001.json",
                 "/acc/runs/20261203T210512Z-run/fleet.json"):
        assert redact_value(path) == path
    rng = random.Random(7)
    keys = [k for k in (base64.b64encode(rng.randbytes(30)).decode() for _ in range(800)) if "/" in k][:200]
    kept = [k for k in keys if redact_value(f"key {k}") != f"key {REDACTED}"]
    assert len(keys) == 200 and len(kept) <= 2, kept
