"""The image record in `cluster run --container-image` (image/fleet.py, cluster/control/image.py): every node's copy is
held to the record's sha256, the batch script carries the record into the node record, and a registry
reference for many nodes is warned about.  No Slurm needed: the verdict's inputs and the batch script."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from conftest import run_cli

SHA_A, SHA_B = "sha256:" + "a" * 64, "sha256:" + "b" * 64


def write_record(tmp_path: Path, sha: str = SHA_A) -> Path:
    sqsh = tmp_path / "img.sqsh"
    sqsh.write_bytes(b"x")
    doc = {"schema": "trainready.image/1", "file": "img.sqsh", "reference": "docker://r#i@sha256:" + "c" * 64,
           "digest": "sha256:" + "c" * 64, "sha256": sha, "size_bytes": 1}
    Path(f"{sqsh}.json").write_text(json.dumps(doc))
    return sqsh


def test_a_node_whose_copy_differs_from_the_record_is_rejected_naming_both_sums(tmp_path) -> None:
    from trainready.cluster.judge.verdict import NodeInput
    from trainready.image.fleet import against_record, record_facts

    facts = record_facts(str(write_record(tmp_path)), None)
    assert facts is not None and facts["sha256"] == SHA_A and facts["digest"].endswith("c" * 64)
    nodes = [NodeInput(n, {"node": n, "container": {"image_sha256": s}}) for n, s in (("a", SHA_A), ("b", SHA_B))]
    nodes.append(NodeInput("c", None, not_tested="drained"))
    got = {ni.node: ni for ni in against_record(nodes, facts)}
    assert got["a"].record is not None and got["c"].not_tested == "drained"
    assert got["b"].record is None and got["b"].cause == "image differs", got["b"]
    assert got["b"].no_result == f"image differs: {SHA_B} on this node vs {SHA_A} (record {tmp_path}/img.sqsh.json)"
    # every node alike, but not the record's file: all rejected (checked against the record, not only each other)
    same = [NodeInput(n, {"node": n, "container": {"image_sha256": SHA_B}}) for n in "xy"]
    assert all(ni.cause == "image differs" for ni in against_record(same, facts))


def test_the_batch_script_carries_the_record_into_the_node_record(tmp_path) -> None:
    from trainready.cluster import steps
    from trainready.cluster.control import image
    from trainready.cluster.options import Container, FleetOptions
    from trainready.image.fleet import record_facts

    sqsh = write_record(tmp_path)
    facts = record_facts(str(sqsh), None)
    script = steps.batch_script(FleetOptions(results=tmp_path, container=Container(str(sqsh), record=facts)))
    line = next(ln for ln in script.splitlines() if ln.startswith(f"export {image.RECORD_VAR}="))
    value = shlex.split(line.split("=", 1)[1])[0]
    got = image.node_facts(str(sqsh), env={image.RECORD_VAR: value, image.SHA_VAR: "a" * 64})
    assert got["image_record"] == facts and got["image_sha256"] == SHA_A, got


def test_record_options_are_checked(tmp_path) -> None:
    from trainready.errors import UsageError
    from trainready.image.fleet import record_facts

    assert record_facts(str(tmp_path / "none.sqsh"), None) is None  # no record beside: the old check only
    with pytest.raises(UsageError, match="registry reference, not a file"):
        record_facts("nvcr.io#nvidia/pytorch:25.01-py3", str(tmp_path / "r.json"))
    sqsh = write_record(tmp_path)
    (tmp_path / "bad.json").write_text(json.dumps({"schema": "trainready.image/1", "file": "img.sqsh"}))
    with pytest.raises(UsageError, match="bad.json: key 'reference'"):
        record_facts(str(sqsh), str(tmp_path / "bad.json"))
    p = run_cli("cluster", "run", "--results", str(tmp_path / "r"), "--container-image", str(sqsh), "--image-record",
                str(tmp_path / "nothere.json"))
    assert p.returncode == 2 and "nothere.json: no such image record" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_registry_reference_for_many_nodes_is_warned_about() -> None:
    from trainready.image.fleet import warn_registry

    said: list[str] = []
    warn_registry("nvcr.io#nvidia/pytorch:25.01-py3", 640, said.append)
    warn_registry("nvcr.io#nvidia/pytorch:25.01-py3", 2, said.append)
    warn_registry("/local/images/a.sqsh", 640, said.append)
    assert len(said) == 1 and "640 pulls" in said[0] and "trainready image import" in said[0], said
