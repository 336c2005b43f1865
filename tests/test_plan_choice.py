"""`plan` chooses what it can recommend: a layout that fits before a cheaper tight one, the framework advice
under the plan agreeing with the chosen layout or saying why not (and which layout does follow it), and a
GPU given only by its figures named as such, not as the table's default."""

from __future__ import annotations

import json

from evidence_records import run_main

from trainready.plan.advice import follows
from trainready.plan.inputs import Hardware, Parallel, PlanInput
from trainready.plan.model import PRESETS
from trainready.plan.search import choose


def _plan_json(*args: str) -> tuple[dict, str]:  # type: ignore[type-arg]
    r = run_main("plan", *args, "--json", "-")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout), r.stderr


def test_a_layout_that_fits_beats_a_cheaper_tight_one() -> None:
    inp = PlanInput(PRESETS["llama3-70b"], Parallel(gpus=64), hardware=Hardware(gpu="H100"))
    _, found = choose(inp)
    best = found[0]
    cheaper_tight = [c for c in found if c.verdict == "tight" and c.cost < best.cost]
    assert cheaper_tight  # the case is real: a tight layout with a lower heuristic cost exists ...
    assert best.verdict == "fits"  # ... and loses to the best that fits
    doc, _ = _plan_json("--preset", "llama3-70b", "--gpus", "64", "--gpu", "H100")
    assert doc["memory"]["verdict"] == "fits"


def test_the_500b_layout_says_why_it_departs_from_the_advice_and_which_follows_it() -> None:
    doc, err = _plan_json("--preset", "dense-500b", "--gpus", "5120", "--gpu", "B200", "--tokens", "10T")
    p = doc["inputs"]["parallel"]
    assert "pipeline parallelism across servers" in doc["advice"] and "ZeRO-1" in doc["advice"]
    assert p["zero"] == 2 and p["pp"] == 1  # the search's best departs from that advice ...
    note = doc["layout"]["departs_from_advice"]
    assert note.startswith("the chosen layout departs from this advice — ZeRO stage 2 instead of ZeRO-1")  # ... says so
    assert "note: the chosen layout departs" in " ".join(err.split())
    flags = note.split("plan it with ")[1].rstrip(".").split()
    again, _ = _plan_json("--preset", "dense-500b", "--gpus", "5120", "--gpu", "B200", *flags)
    q = again["inputs"]["parallel"]
    assert q["zero"] <= 1 and q["pp"] > 1 and again["memory"]["verdict"] == "fits"  # the one it names follows it
    assert again["layout"]["departs_from_advice"] == ""  # a layout given is planned as given


def test_a_layout_that_follows_the_advice_gets_no_note() -> None:
    doc, err = _plan_json("--preset", "llama3-8b", "--gpus", "8", "--gpu", "H100")
    p = doc["inputs"]["parallel"]
    assert p["tp"] == 1 and p["pp"] == 1 and "sharded data parallelism" in doc["advice"]
    assert doc["layout"]["departs_from_advice"] == "" and "departs" not in err
    inp = PlanInput(PRESETS["llama3-8b"], Parallel(gpus=8), hardware=Hardware(gpu="H100"))
    assert follows(choose(inp)[1][0], PRESETS["llama3-8b"].total_params)


def test_a_gpu_given_by_its_figures_is_not_named_h100() -> None:
    r = run_main("plan", "--params", "7.5B", "--dp", "64", "--zero", "2", "--gpu-mem-gib", "32", "--peak-tflops", "125")
    assert r.returncode == 0, r.stderr
    assert "H100" not in r.stdout
    assert "GPU custom (32 GiB, 125 TFLOP/s dense BF16: --gpu-mem-gib, --peak-tflops)" in " ".join(r.stdout.split())
    named = run_main("plan", "--params", "7.5B", "--dp", "64", "--zero", "2", "--gpu", "H100")
    assert "GPU H100" in named.stdout  # the table's name where one is given
