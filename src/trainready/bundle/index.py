"""The bundle's top-level index: index.json (machines, --verify) and INDEX.md (people).

Both list every item with its sha256 and what it is for, laid out as the handoff records table
(layout.SECTIONS); each section also states the facts the records hold (driver, kernel, image
digest, commit, ...) or says plainly that nothing in the bundle covers it.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from trainready.bundle.layout import BUNDLE_SCHEMA, SECTIONS, Item
from trainready.report.kinds import Record


def _get(doc: Any, *path: str) -> Any:
    for key in path:
        doc = doc.get(key) if isinstance(doc, Mapping) else None
    return doc


def _said(value: Any) -> bool:
    return value not in (None, "", [], {}) and not (isinstance(value, str) and value.startswith("unavailable"))


def _facts(pairs: Sequence[tuple[str, Any]]) -> list[str]:
    return [f"{k}: {v}" for k, v in pairs if _said(v)]


def section_facts(env: Mapping[str, Any] | None, records: Sequence[Record]) -> dict[str, list[str]]:
    e = env or {}
    gpus = _get(e, "gpu", "nvml", "gpus") or []
    names = sorted({str(g.get("name")) for g in gpus if isinstance(g, Mapping) and g.get("name")})
    facts = {
        "hardware": _facts([("host", _get(e, "host", "hostname")), ("OS", _get(e, "host", "os")),
                            ("kernel", _get(e, "host", "kernel")), ("CPU", _get(e, "host", "cpu_model")),
                            ("memory GiB", _get(e, "host", "memory_gib")),
                            ("GPUs", f"{len(gpus)} x {', '.join(names)}" if gpus else None),
                            ("driver", _get(e, "gpu", "nvml", "driver_version")),
                            ("driver CUDA", _get(e, "gpu", "nvml", "cuda_driver_version")),
                            ("InfiniBand", "present" if isinstance(e.get("infiniband"), (list, dict)) else None)]),
        "services": _facts([("time sync", ", ".join(map(str, _get(e, "host", "time_sync", "daemons") or [])) or None)]),
        "container": _facts([("inside a container", _get(e, "container", "inside")),
                             ("hints", ", ".join(map(str, _get(e, "container", "hints") or [])) or None)]),
        "packages": _facts([("python", _get(e, "software", "python")), ("torch", _get(e, "software", "torch")),
                            ("CUDA (torch)", _get(e, "software", "torch_cuda")), ("cuDNN", _get(e, "software", "cudnn")),
                            ("NCCL", _get(e, "software", "nccl")),
                            ("package set", _get(e, "software", "package_set_sha256")),
                            ("env vars recorded (secrets redacted)", len(e.get("env") or {}) or None)]),
        "code": _facts([("commit", _get(e, "code", "code", "commit")), ("dirty", _get(e, "code", "code", "dirty")),
                        ("lock file sha256", _get(e, "code", "lock", "sha256"))]),
        "artifacts": _facts([("image digest", _get(e, "container", "image_digest"))]),
        "training": [],
        "launch": [f"{r.kind}: {r.status}" for r in records if r.kind not in ("env", "plan", "compare")],
        "previous": [f"compare: {r.status} ({'; '.join(map(str, r.doc.get('reasons', []) or [])) or 'no regression'})"
                     for r in records if r.kind == "compare"],
    }
    return facts


def index_doc(items: Sequence[Item], referenced: Sequence[Item], facts: Mapping[str, list[str]], meta: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "schema": BUNDLE_SCHEMA,
        **meta,
        "sections": [{"id": sid, "title": title, "facts": list(facts.get(sid, []))} for sid, title in SECTIONS],
        "items": [i.to_json() for i in items],
        "referenced": [i.to_json() for i in referenced],
    }


# What to give `trainready bundle` when a section of the table is empty.
MISSING = {
    "hardware": "give a `trainready env --json` record (or leave out --no-env)",
    "services": "add their state with `--add services=FILE` (e.g. `nvidia-smi -q`, `dcgmi discovery -l`, `systemctl status nvidia-fabricmanager`)",
    "container": "run `trainready env` inside the image",
    "packages": "run `trainready env` inside the image",
    "code": "`trainready env --code DIR --lock FILE`, `--add lock=uv.lock`, `--add recipe=Dockerfile`",
    "artifacts": "`trainready env --image-digest sha256:…` (or TRAINREADY_IMAGE_DIGEST) and `--data PATH` for imported files",
    "training": "`--add config=train.yaml`, `--add tokenizer=DIR`, `--data PATH` (checksums only)",
    "launch": "give the node/comm/resume/cluster records",
    "previous": "give a `trainready compare --json` record, `--add previous=OLD_ENV.json`, `--checkpoint DIR`",
}


def _md_cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def index_md(doc: Mapping[str, Any]) -> str:
    lines = [
        "# trainready handoff bundle", "",
        f"Made {doc.get('created_at')} by trainready {doc.get('tool_version')} with `{_md_cell(doc.get('command', ''))}`.",
        "Check it with `trainready bundle --verify THIS_BUNDLE`: every file's sha256 is re-computed and each changed, "
        "missing or extra file is named.  `index.json` holds the same list for machines.", "",
        "| section | what the bundle holds | file | sha256 | what it is for |", "|---|---|---|---|---|",
    ]
    by_section: dict[str, list[Mapping[str, Any]]] = {}
    for it in [*doc.get("items", []), *doc.get("referenced", [])]:
        by_section.setdefault(str(it.get("section")), []).append(it)
    for sec in doc.get("sections", []):
        facts = "; ".join(sec.get("facts") or []) or ""
        its = by_section.get(sec["id"], [])
        if not its and not facts:
            lines.append(f"| **{sec['title']}** | not covered by these records: {MISSING.get(sec['id'], '--add ROLE=FILE')} | | | |")
            continue
        if not its:
            lines.append(f"| **{sec['title']}** | {_md_cell(facts)} | (see env.json) | | |")
        for j, it in enumerate(its):
            head = f"**{sec['title']}**" if j == 0 else ""
            fact = _md_cell(facts) if j == 0 else ""
            note = f" ({it['note']})" if it.get("note") else ""
            lines.append(f"| {head} | {fact} | `{_md_cell(it['path'])}` | `{str(it['sha256'])[:16]}…` | "
                         f"{_md_cell(str(it['what']) + note)} |")
    return "\n".join(lines) + "\n"
