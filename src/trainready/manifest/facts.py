"""The facts the `gpus` and `versions` checks judge, gathered together.

`python -m trainready.manifest.facts > node_facts.json` dumps them from a real node
so the capture can be kept in tests/data and replayed by the judging functions.
Planted-fault tests point a check at such a file (``--plant gpus.facts=PATH``).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainready.errors import UsageError
from trainready.manifest.gpu import NvmlFacts, collect_nvml
from trainready.manifest.software import Versions, collect_versions
from trainready.manifest.torch_gpus import TorchGpus, collect_torch

FACTS_SCHEMA = "trainready.facts/1"


@dataclass(frozen=True)
class NodeFacts:
    nvml: NvmlFacts
    torch: TorchGpus
    versions: Versions

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": FACTS_SCHEMA,
            "nvml": self.nvml.to_json(),
            "torch": self.torch.to_json(),
            "versions": self.versions.to_json(),
        }

    @staticmethod
    def from_json(d: dict[str, Any]) -> "NodeFacts":
        return NodeFacts(NvmlFacts.from_json(d["nvml"]), TorchGpus.from_json(d["torch"]), Versions.from_json(d["versions"]))


def gather() -> NodeFacts:
    return NodeFacts(collect_nvml(), collect_torch(), collect_versions())


def load(path: str | Path) -> NodeFacts:
    """Facts from a captured JSON file; a bad file is a usage error naming it."""
    try:
        data = json.loads(Path(path).read_text())
        return NodeFacts.from_json(data)
    except OSError as exc:
        raise UsageError(f"facts file {path}: cannot read ({exc.strerror})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"facts file {path}: not a {FACTS_SCHEMA} capture ({type(exc).__name__}: {exc})") from None


if __name__ == "__main__":
    sys.stdout.write(json.dumps(gather().to_json(), indent=2) + "\n")
