"""Runs that outlive their collector: --controller-wait (how long a silent slurmctld is waited for), `cluster run
--detach` (submit, print the run id, return) and `cluster attach` / `cluster run --attach` (pick a run up where
its state says it is: cluster/runstate.py).  Used by run.py, pairs.py and rollout.py of this package."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Callable, Iterator

import typer

from trainready.cluster.control import outage

WAIT_HELP = ("Seconds to wait for a slurmctld that does not answer (restart, failover, munge restart) before "
             "giving up with exit 2 and the command that picks the run up; the tasks run on meanwhile (default: "
             "2 x the cluster's SlurmctldTimeout, at least 300).")


def wait_option() -> Any:
    return typer.Option(None, "--controller-wait", min=0.0, help=WAIT_HELP)


ATTACH_HELP = ("Pick up the newest unfinished run under --results where it stopped (as `cluster attach`): nothing "
               "already submitted or measured runs again; the run's own options apply.")


def attach_option() -> Any:
    return typer.Option(False, "--attach", help=ATTACH_HELP)


@contextlib.contextmanager
def patient(wait_s: float | None, say: Callable[[str], None]) -> Iterator[outage.Patience]:
    """Every Slurm call of the command inside waits for a silent controller: up to `wait_s`, else the bound
    outage.default_bound() draws from the cluster's SlurmctldTimeout (read from `scontrol show config`)."""
    from trainready.cluster.control import slurm

    p = outage.Patience(wait_s if wait_s is not None else outage.WAIT_FLOOR_S, say)
    with outage.patient(p):
        if wait_s is None:
            text = slurm.config().get("SlurmctldTimeout", "").split()
            p.bound_s = outage.default_bound(float(text[0]) if text and text[0].isdigit() else None)
        yield p


def detach(fleet: Any, say: Callable[[str], None]) -> Path:
    """A run started and left to Slurm: its nodes chosen, its array submitted, its state written; no collector."""
    from trainready.cluster.fleet import begin, submit_array
    from trainready.spec import load_spec

    spec, _ = load_spec(fleet.spec)
    here, sel, _ = begin(fleet, "run", say)
    sel.say_not_tested(say)
    if sel.nodes:
        job = submit_array(here, list(sel.nodes), spec.gpu.count)
        say(f"job {job}: {len(sel.nodes)} node(s) submitted; no collector until you attach")
    return here.results


def attach(results: Path, run_id: str | None, wait_s: float | None, say: Callable[[str], None],
           finish: Callable[[Any, Path], int]) -> int:
    """Pick up a run of RESULTS (RUN_ID, else the newest unfinished one): wait for its tasks, collect the
    records, run the cross-node step if it has not run, write the verdict (`finish`); a `cluster resume` run
    also acts on its verdict and deletes its reservation (revalidate.py); a finished run: its verdict said
    again.  Returns the exit code."""
    from trainready.cluster import runstate
    from trainready.cluster.fleet import attach_command, run_fleet
    from trainready.errors import UsageError

    run_dir = runstate.find(results, run_id)
    st = runstate.read(run_dir)
    if "exit_code" in st:
        say(f"run {run_dir.name} finished at {st.get('finished')}; its verdict: {run_dir / 'fleet.json'}")
        return int(st["exit_code"])
    if st.get("kind") not in ("run", "resume"):
        raise UsageError(f"{run_dir.name}: a {st.get('kind')} is picked up by running its own command again")
    opts = runstate.options_from(st["options"])
    runstate.claim(run_dir)
    with patient(wait_s, say) as p:
        p.pickup = attach_command(run_dir)
        say(f"attaching to {st['kind']} {run_dir.name} ({st.get('phase', 'not submitted')})")
        if st["kind"] == "resume":
            from trainready.cluster.revalidate import attach_resume

            verdict = attach_resume(run_dir, st, say)
            if verdict is None:
                return 1
        else:
            verdict = run_fleet(opts, say, "run", attach=run_dir)
        return finish(verdict, opts.results)
