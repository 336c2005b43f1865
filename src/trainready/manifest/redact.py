"""Redaction of secrets in records: by NAME and by VALUE, and nothing else changes.

By name (`is_secret_name`): the name is split into words (``_ - .`` and camelCase), so
``TOKENIZER_PATH``, ``NCCL_IB_PKEY`` and ``MAX_TOKENS`` are not secrets while ``HF_TOKEN``,
``PGPASSWORD``, ``apiKey`` and ``WANDB_API_KEY`` are.  Strong words (TOKEN, SECRET, PASSWORD,
CREDENTIAL(S), API KEY, ACCESS KEY, PRIVATE KEY, ...) count in any key; weak ones (KEY, AUTH,
PASS, PW, PWD, CREDS) only in an environment-style UPPER_CASE name, so a record's ``"key"``
field survives.  A name ending in a reference word (``..._PATH``, ``..._FILE``, ``..._URL``)
holds where the secret is, not the secret: kept.

By value, every match is a WHOLE token (never inside a longer word, the bug that turned
``/mnt/disk-checkpoints`` into ``/mnt/di<redacted>``):

* URL passwords, with or without a user (``redis://:pw@h:6379``), the user and host kept;
* ``Authorization: ...``, ``Bearer <token>``, ``NAME=value`` and ``--name value`` where
  NAME is a secret name;
* vendor token formats, from each vendor's documentation: GitHub ``ghp_/gho_/ghu_/ghs_/ghr_``
  and ``github_pat_``, Hugging Face ``hf_``, OpenAI/Anthropic ``sk-``, Slack ``xox?-``,
  AWS key ids ``AKIA/ASIA``, GitLab ``glpat-``, Google ``AIza``, Stripe ``sk_live_``, JWTs
  (``eyJ...``), PEM private-key blocks;
* any other run of >= 32 letters and digits that has upper case, lower case and digits and
  changes character class often (random base62/base64, not a CamelCase name).

Hex is never redacted by value: git commits, sha256 digests, UUIDs, checksums are hex and are
evidence.  A 40-hex W&B key is redacted because its NAME (WANDB_API_KEY) is a secret name.
"""

from __future__ import annotations

import re
from typing import Any

REDACTED = "<redacted>"

_STRONG = {"TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWORDS", "PASSWD", "PASSPHRASE", "CREDENTIAL",
           "CREDENTIALS", "APIKEY", "ACCESSKEY", "SECRETKEY", "AUTHORIZATION", "COOKIE", "COOKIES"}
_STRONG_SUFFIX = ("PASSWORD", "PASSWD", "TOKEN", "SECRET", "APIKEY")  # PGPASSWORD, HFTOKEN
_KEY_QUALIFIERS = {"API", "ACCESS", "SECRET", "PRIVATE", "SIGNING", "ENCRYPTION", "CLIENT", "AUTH"}
_WEAK = {"KEY", "AUTH", "CREDS", "PWD"}
_WEAK_LAST = {"PASS", "PW"}  # only as the last word: DB_PASS, REDIS_PW (not PASS_THROUGH)
# A last word that names where/how a secret is used, not the secret itself.
_REFERENCE = {"PATH", "FILE", "FILES", "DIR", "SOCK", "SOCKET", "TYPE", "URL", "URI", "HOST", "PORT", "ENDPOINT",
              "MODE", "METHOD", "ENABLE", "ENABLED", "DISABLE", "DISABLED", "LEN", "LENGTH", "NAME", "COUNT"}
# TOKEN after these is a tokenizer/accounting term (flops_per_token, eos_token), not a credential.
_TOKEN_TERMS = {"PER", "BOS", "EOS", "PAD", "UNK", "SEP", "CLS", "MASK", "START", "END", "FIRST", "LAST",
                "NEXT", "NUM", "MAX", "MIN", "SPECIAL"}
_NOT_SECRET = {"PWD", "OLDPWD"}  # the shell's working directories


def _words(name: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name)
    return [w.upper() for w in re.split(r"[^A-Za-z0-9]+", spaced) if w]


def _env_style(name: str) -> bool:
    return name == name.upper() and any(c.isalpha() for c in name)


def is_secret_name(name: str) -> bool:
    """Does a variable/key called `name` hold a secret?  (Word rules above.)"""
    words = _words(name)
    if not words or name in _NOT_SECRET or (len(words) > 1 and words[-1] in _REFERENCE):
        return False
    weak = _env_style(name)
    for i, w in enumerate(words):
        prev = words[i - 1] if i else ""
        if w == "TOKEN" and prev in _TOKEN_TERMS:
            continue
        if w in _STRONG or w.endswith(_STRONG_SUFFIX):
            return True
        if w == "KEY" and prev in _KEY_QUALIFIERS:
            return True
        if weak and (w in _WEAK or (w in _WEAK_LAST and i == len(words) - 1 and i > 0)):
            return True
    return False


_L = r"(?<![A-Za-z0-9_+/=-])"  # start of a whole token
_R = r"(?![A-Za-z0-9_+/=-])"  # end of a whole token
_VENDOR = re.compile(_L + r"(?:"
                     r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{40,}"  # GitHub token formats
                     r"|hf_[A-Za-z0-9]{20,}"  # Hugging Face user access tokens
                     r"|sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{20,}"  # OpenAI (sk-, sk-proj-), Anthropic (sk-ant-)
                     r"|xox[abeprs]-[0-9]+-[A-Za-z0-9-]{8,}"  # Slack (xoxb-<team>-<bot>-<secret>)
                     r"|(?:AKIA|ASIA)[0-9A-Z]{16}"  # AWS access key ids
                     r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab personal access tokens
                     r"|AIza[0-9A-Za-z_-]{35}"  # Google API keys
                     r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
                     r"|eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"  # JWT (base64url header {")
                     r")" + _R)
_PEM = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----(?:.*?-----END [A-Z ]*PRIVATE KEY-----|.*)", re.DOTALL)
# scheme://[user]:password@host  (password may contain '@': the host is after the LAST '@' before '/')
_URL_PW = re.compile(r"(?P<pre>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/\s:@]*:)(?P<pw>[^\s/]+?)@(?=[^@\s/]*(?:[/\s?#]|$))")
_AUTH_HEADER = re.compile(r"(?i)(?P<pre>\b(?:proxy-)?authorization\s*[:=]\s*)(?P<v>[^\r\n]+)")
_BEARER = re.compile(r"(?P<pre>\b[Bb]earer\s+)(?P<v>(?=[A-Za-z0-9._~+/=-]*[0-9._~+/=-])[A-Za-z0-9._~+/=-]{8,})")
_ASSIGN = re.compile(r"(?<![A-Za-z0-9_.-])(?P<name>[A-Za-z][A-Za-z0-9_.-]*)(?P<eq>=)(?P<v>[^\s&;,'\"]+)")
_FLAG = re.compile(r"(?<![A-Za-z0-9-])(?P<name>--[A-Za-z][A-Za-z0-9-]*)(?P<eq>[= ])(?P<v>[^\s'\"-][^\s'\"]*)")
_RUN = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9+/]{32,}={0,2}(?![A-Za-z0-9])")


def _class(c: str) -> int:
    return 0 if c.isupper() else 1 if c.islower() else 2 if c.isdigit() else 3


def looks_random(token: str, min_len: int = 32) -> bool:
    """Random base62/base64, not a name: upper, lower and digits; the character class changes at >= 30%
    of positions (random: ~65%); and either >= 25% of capitals are not followed by a lower-case letter
    (random: ~58%; CamelCase words: ~0%) or the digits are spread over >= 4 runs (random 32 chars: ~5;
    a name's '70B...2024': 1-3).  Measured on seeded random base62 keys: 1% of 32-character keys slip
    through (a third of those have no digit at all), 0.2% of 40-character ones, none of 64."""
    alnum = [c for c in token if c.isalnum()]
    if len(alnum) < min_len or not (any(c.isupper() for c in alnum) and any(c.islower() for c in alnum)
                                    and any(c.isdigit() for c in alnum)):
        return False
    pairs = list(zip(token, token[1:] + " "))
    if sum(_class(a) != _class(b) for a, b in pairs[:-1]) < 0.3 * (len(token) - 1):
        return False
    caps = [b for a, b in pairs if a.isupper()]
    digit_runs = len(re.findall(r"[0-9]+", token))
    return sum(not b.islower() for b in caps) >= 0.25 * len(caps) or digit_runs >= 4


def _vendor(m: re.Match[str]) -> str:
    """`sk-` also begins ordinary words (sk-prod-node-0001): an OpenAI/Anthropic key has a random run."""
    tok = m.group(0)
    if tok.startswith("sk-") and not any(looks_random(r, 16) for r in re.findall(r"[A-Za-z0-9]{16,}", tok)):
        return tok
    return REDACTED


def path_like(run: str) -> bool:
    """A run with '/' whose segments are mostly not random: a path (`pv7iej8f/inputs/cluster/runs/20261206T23Z`),
    not base64.  A segment reads as random when it has 6+ characters mixing capitals and lower case (a base64
    key's pieces between its slashes nearly always do; path pieces are lower-case words, hex and dates); the run
    is a path when such segments hold at most half its characters.  Otherwise `looks_random` decides, as for any
    run.  Measured on 2,000 seeded random 40-character base64 keys holding a '/' (random.Random(7)): 2 kept."""
    if "/" not in run:
        return False
    parts = run.split("/")
    noisy = sum(len(p) for p in parts if len(p) >= 6 and any(c.isupper() for c in p) and any(c.islower() for c in p))
    return noisy * 2 <= len(run)


def _run(m: re.Match[str]) -> str:
    """A random-looking run, unless it is a base64 digest (sha256-..., sha512:...) or a path."""
    before = m.string[max(0, m.start() - 7):m.start()]
    keep = re.fullmatch(r"sha\d{3}[-:]", before) or path_like(m.group(0)) or not looks_random(m.group(0))
    return m.group(0) if keep else REDACTED


def _named(m: re.Match[str]) -> str:
    name = m.group("name").lstrip("-")
    return m.group(0) if not is_secret_name(name) else m.group("name") + m.group("eq") + REDACTED


def redact_value(value: str) -> str:
    """Redact secret-shaped whole tokens in `value`; every other character stays as it was."""
    if REDACTED == value:
        return value
    v = _PEM.sub(REDACTED, value)
    v = _URL_PW.sub(lambda m: m.group("pre") + REDACTED + "@", v)
    v = _AUTH_HEADER.sub(lambda m: m.group("pre") + REDACTED, v)
    v = _BEARER.sub(lambda m: m.group("pre") + REDACTED, v)
    v = _ASSIGN.sub(_named, v)
    v = _FLAG.sub(_named, v)
    v = _VENDOR.sub(_vendor, v)
    return _RUN.sub(_run, v)


def scrub(obj: Any, secret: bool = False) -> Any:
    """A copy of a JSON-able object: every string under a secret name (any depth) replaced whole,
    `redact_value` on every other string (keys included).  Numbers and booleans are never secrets."""
    if isinstance(obj, str):
        return REDACTED if secret else redact_value(obj)
    if isinstance(obj, dict):
        return {scrub(k): scrub(v, secret or (isinstance(k, str) and is_secret_name(k))) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [scrub(v, secret) for v in obj]
    return obj
