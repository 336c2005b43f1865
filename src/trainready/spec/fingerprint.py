"""The [fingerprint] section of a spec: the reference server's compute fingerprint, compared bit for bit on nodes of
its group key (docs/checks-compute.md). `spec init` writes it only from three or more agreeing devices of one key
(spec/init_fingerprint.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainready.util.strict import doc_field


@dataclass(frozen=True)
class FingerprintSpec:
    key_id: str = doc_field("", "Group key id of the reference server's fingerprint ('' = no reference: nodes are "
                            "compared only with their own and the fleet's identical GPUs). Written by `spec init`.")
    size: str = doc_field("", "Battery size the reference ran (cpu, quick, standard): only a run of the same size "
                          "and key is compared with it.")
    key: dict[str, Any] = doc_field(default_factory=dict, doc="The reference's group key (GPU model, SM count, "
                                    "compute capability, MIG, CUDA, cuBLAS, torch, the battery's version, settings).")
    entries: dict[str, str] = doc_field(default_factory=dict, doc="Battery entry (op/pattern) → the reference's "
                                        "SHA-256 and its chunk digests, 'DIGEST:CHUNKS' (docs/checks-compute.md).")
