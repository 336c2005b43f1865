"""The one validator of spec tables keyed by an op name: comm.expected_busbw_gbps, comm.expected_efficiency,
comm.min_fraction_by_op and fleet.expected_busbw_gbps.

A key is an op name, optionally '@<ranks>' (the figure applies only at that world size).  A key no run
measures is a figure never judged, so each table is checked against the ops its own check runs: the node's
comm check runs every op of hardware/collectives.py, the cross-node collective (cluster/tasks/collective.py) and `cluster
pairs` only CROSS_NODE_OPS.  A typo is refused with the nearest op named; an alias ('allreduce', which the
comm command's --ops accepts) with its canonical name.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from trainready.errors import ConfigError

if TYPE_CHECKING:
    from trainready.spec.model import NodeSpec

# The ops the cross-node step and `cluster pairs` measure (cluster/tasks/collective.py runs these).
CROSS_NODE_OPS: tuple[str, ...] = ("all_reduce",)


@dataclass(frozen=True)
class OpTable:
    """One op-keyed table of the spec and what its keys and values must be."""

    key: str
    """Dotted spec key of the table, e.g. 'comm.expected_busbw_gbps'."""
    ops: tuple[str, ...]
    """Op names its check measures: a key naming another op would never be judged."""
    who: str
    """What measures those ops, for the message ('the comm check', 'the cross-node step')."""
    value_ok: Callable[[float], bool]
    """Whether a value can be meant (values are finite here: the loader refuses inf and nan)."""
    value_rule: str
    """The rule `value_ok` applies, as the message says it ('GB/s > 0')."""


def comm_ops() -> tuple[str, ...]:
    """Every op the node's comm check sweeps (hardware/collectives.py)."""
    from trainready.hardware.collectives import OPS

    return tuple(OPS)


def grammar(ops: Sequence[str], who: str) -> str:
    """What a key must be, in words."""
    return f"an op name {who} measures ({', '.join(ops)}), optionally '@<ranks>' with ranks >= 1"


def key_error(key: str, ops: Sequence[str], who: str) -> str | None:
    """Why `key` is not 'op' or 'op@ranks' with op in `ops`; None when it is."""
    from trainready.hardware.collectives import OP_ALIASES

    op, at, ranks = key.partition("@")
    if at and not (ranks.isascii() and ranks.isdigit() and int(ranks) >= 1):
        return f"expected {grammar(ops, who)}, got '{key}' (ranks '{ranks}' is not an integer >= 1)"
    if op in ops:
        return None
    hint = ""
    if OP_ALIASES.get(op) in ops:
        hint = f" ('{op}' is an alias: write '{OP_ALIASES[op]}')"
    elif op in comm_ops():
        hint = f" ({who} does not run {op}: this figure would never be judged)"
    elif near := difflib.get_close_matches(op, ops, n=1, cutoff=0.6):
        hint = f" (did you mean '{near[0]}'?)"
    return f"expected {grammar(ops, who)}, got '{key}'{hint}"


def check_table(path: str, table: OpTable, values: Mapping[str, float]) -> None:
    """Every key and value of one op-keyed table, or a ConfigError naming the file and the key."""
    for key, value in values.items():
        why = key_error(key, table.ops, table.who)
        if why is not None:
            raise ConfigError(path, f"{table.key}.{key}", why)
        if not table.value_ok(value):
            raise ConfigError(path, f"{table.key}.{key}", f"expected {table.value_rule}, got {value!r}")


def op_tables(spec: NodeSpec) -> list[tuple[OpTable, Mapping[str, float]]]:
    """Every op-keyed table of a spec with its values (tests/test_spec_fuzz.py holds this list to the model:
    a dict field of the spec that is not here must be named there as keyed by something else)."""
    c, f = spec.comm, spec.fleet
    ops = comm_ops()
    node, cross = "the comm check", "the cross-node step"
    return [
        (OpTable("comm.expected_busbw_gbps", ops, node, lambda v: v > 0, "GB/s > 0"), c.expected_busbw_gbps),
        (OpTable("comm.expected_efficiency", ops, node, lambda v: v > 0, "a ratio > 0"), c.expected_efficiency),
        (OpTable("comm.min_fraction_by_op", ops, node, lambda v: 0 < v <= 1, "a fraction 0 < x <= 1"),
         c.min_fraction_by_op),
        (OpTable("fleet.expected_busbw_gbps", CROSS_NODE_OPS, cross, lambda v: v > 0, "GB/s > 0"),
         f.expected_busbw_gbps),
    ]
