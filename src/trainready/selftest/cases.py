"""Every fault trainready claims to catch, as one self-test case each: THE table to extend.

A case runs the real CLI (`python -m trainready ARGV`) in a fresh process with one fault
planted, and is "detected" when the named check FAILS with a message matching `expect`, the
detector's own line for that fault (an `error` result is the run breaking, never a detection).
Cases whose `check` is "" expect the command to refuse bad input (exit 2) with a line matching
`expect`.  Before any case of a detector family is judged, its control run (the same command with
no plant: `control_of`) must pass, so a failure that is not the planted fault cannot count.

Placeholders in ARGV, filled by selftest/prepare.py: {spec} a short self-test spec (4 gloo ranks
or one rank per GPU, collective deadline 20 s on gloo and 30 s with NCCL, 10-step resume), {rank} a rank
that exists here, {facts_*}/{data_*}/{spec_*} files made for the case.  `needs` names what the case requires
(gpu, slurm, multirank); without it the case is not applicable here, with the reason.

Adding a plant to suite/plants.py without a case here fails tests/test_selftest.py.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from trainready.selftest.cases_fabric import ROWS as FABRIC_ROWS
from trainready.selftest.argv import share_key, shared_argv  # noqa: F401 - the fleet cases' runs (re-exported)
from trainready.selftest.argv import (TRAINING, burnin as _burnin, cluster as _cluster, comm as _comm,
                                     compat_save as _compat_save, data as _data, node as _node,
                                     pairs_fabric as _pairs_fabric, resume as _resume, sweep as _sweep)


@dataclass(frozen=True)
class Case:
    name: str  # unique id: the plant name, or a catalogue id (data.truncated_bin, versions.drift)
    fault: str  # what is planted, in words
    argv: tuple[str, ...]
    check: str  # the result that must fail/error; "" = the command must refuse the input (exit 2)
    expect: str  # regex the detector's message must match
    covers: tuple[str, ...] = ()  # plant names (suite/plants.py) this case exercises
    needs: str = ""  # "" | "gpu" | "slurm" | "multirank" | "peers" (3 devices or more)
    before: tuple[str, ...] = ()  # a command run first (e.g. the save in another process that the case loads)
    expect_1rank: str = ""  # what the detector says at world size 1, where that differs (no rank left waiting)
    clean: tuple[tuple[str, str], ...] = ()  # control run: placeholder with the fault -> the same input without it
    judge_only: bool = False  # the figure is planted after measuring: proves the judge, not the measurement
    exclusive: bool = False  # timing-sensitive: runs alone, nothing beside it (the self-test runs cases side by side)
    share: str = ""  # fleet cases: those with the same share are one `cluster run` with all their plants (shared_argv)

    def expectation(self, world: int) -> str:
        return self.expect_1rank if world == 1 and self.expect_1rank else self.expect

    @property
    def plants(self) -> tuple[str, ...]:
        """The --plant names this case exercises (none for faults made as files: truncated data, drift)."""
        from trainready.suite.plants import PLANTS

        return self.covers or ((self.name,) if self.name in PLANTS else ())


def control_of(case: Case) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(before, argv) of the case's control run: the same commands with no plant.  An input that carries
    the fault is swapped for its clean twin (`clean`; a replayed-facts plant keeps its --plant, now
    replaying healthy facts); a case's own output folder becomes one shared by its family's control."""
    swap = dict(case.clean)

    def plain(argv: tuple[str, ...]) -> tuple[str, ...]:
        out: list[str] = []
        it = iter(argv)
        for a in it:
            if a == "--plant":
                value = next(it)
                if any(f"{{{k}}}" in value for k in swap):
                    out += [a, value]
                continue
            out.append(a)
        text = [re.sub(r"\{(\w+)\}", lambda m: "{" + swap.get(m.group(1), m.group(1)) + "}", a) for a in out]
        return tuple(re.sub(r"^(\{(?:scratch|cluster_results)\})/[\w.-]+$", r"\1/control", a) for a in text)

    before, argv = plain(case.before), plain(case.argv)
    key = hashlib.sha1("\0".join(before + argv).encode()).hexdigest()[:8]
    name = f"control-{key}"
    return tuple(a.replace("/control", f"/{name}") for a in before), tuple(a.replace("/control", f"/{name}")
                                                                           for a in argv)


# A hang names the hung rank and the ranks left waiting on it; a loaded machine on which every rank
# missed the deadline says no such thing, so it is not taken for the planted hang.
HUNG = r"rank {rank} hung at '[^']+' \(no progress before the deadline\); ranks? [\d, -]+ (?:was|were) left waiting"
DIED = r"rank {rank} died \(exit code -?\d+\) after '"
HUNG_ALONE = r"rank {rank} hung at '[^']+' \(no progress before the deadline\)"  # at 1 rank nobody waits on it

FP_WHO = r"(?:rank {rank}|GPU {rank} \([^)]*\))"  # the fingerprint's device: a CPU rank, or a GPU by index, PCI, serial

CASES: tuple[Case, ...] = (
    # --- GPUs visible, host and container agree (replayed 8x H200 facts with one fault each)
    Case("gpus.facts", "GPU 2 has a row remap pending (replayed NVML facts of an 8x H200 node)",
         ("node", "--spec", "example:h200-8x", "--only", "gpus", "--plant", "gpus.facts={facts_remap}"),
         "gpus", r"GPU 2\b.*: row remap pending", clean=(("facts_remap", "facts_ok"),)),
    Case("health.reading", "GPU 3 of a replayed 8x H100 node logged Xid 79 (fallen off the bus), its PCIe link at "
         "x8 of x16 (the passive health check)",
         ("node", "--health-check", "--health-state", "{scratch}/health-state.json", "--plant",
          "health.reading={health_bad}"), "health", r"Xid 79 on 0000:1b:00: GPU fallen off the bus",
         clean=(("health_bad", "health_ok"),)),
    Case("versions.facts", "the driver supports CUDA 12.4 but torch is built for CUDA 13.0 (replayed facts)",
         ("node", "--spec", "example:h200-8x", "--only", "versions", "--plant", "versions.facts={facts_old_driver}"),
         "versions", r"driver supports CUDA ≤ 12\.4, torch built for CUDA 13\.0",
         clean=(("facts_old_driver", "facts_ok"),)),
    Case("versions.drift", "a package differs from the version the spec pins (version drift, this machine)",
         ("node", "--spec", "{spec_drift}", "--only", "versions"), "versions",
         r"spec software\.packages\.numpy = '0\.0\.1' but found \d", clean=(("spec_drift", "spec"),)),
    # --- compute right
    Case("matmul.corrupt", "one element of the matmul result is off by one on device 0",
         _node("matmul", "matmul.corrupt=0"), "matmul", r"integer product wrong"),
    Case("matmul.bitflip", "the top significand bit of one element of a random product flips on device 0",
         _node("matmul", "matmul.bitflip=0"), "matmul", r"statistical error bound"),
    Case("matmul.nondeterministic", "a repeated matmul differs by one ulp on device 0",
         _node("matmul", "matmul.nondeterministic=0"), "matmul", r"same product twice differs"),
    # the quick battery (2.3 s per run on an H100, the CPU's own size on a CPU); {rank}: the last rank here.  A
    # device named against its peers needs a strict majority of 3 or more (fingerprint/judge.py MIN_GROUP); one
    # that disagrees with itself, or a wrong answer, needs no peer
    Case("fingerprint.bitflip", "the last significand bit of one element of the last device's bf16 GEMM flips",
         _node("fingerprint", "fingerprint.bitflip={rank}", "--level", "quick"), "fingerprint",
         FP_WHO + r": bf16 GEMM \S+, pattern random-7, chunk 13 of 64 differs from", needs="peers"),
    Case("fingerprint.intermittent", "the last device's bf16 GEMM gives other bits in one repeat only",
         _node("fingerprint", "fingerprint.intermittent={rank}", "--level", "quick"), "fingerprint",
         FP_WHO + r": intermittent"),
    Case("fingerprint.shared", "every device's bf16 GEMM has the same top bit flipped: they agree, float64 does not",
         _node("fingerprint", "fingerprint.shared=1", "--level", "quick"), "fingerprint",
         r"a wrong answer they share", expect_1rank=r"the one device of key \w+ answers gemm-bf16/random-7 .* a wrong "
         r"answer \(no identical peer"),
    Case("fingerprint.drift", "the last device's group key says another torch build",
         _node("fingerprint", "fingerprint.drift={rank}", "--level", "quick"), "cleared:fingerprint",
         FP_WHO + r": group key \w+ differs .*configuration drift", needs="peers"),
    Case("throughput.slow_gpu", "GPU 0 reports half its GEMM TFLOP/s and HBM GB/s",
         _node("throughput", "throughput.slow_gpu=0"), "throughput", r"GPU 0 .* = \d+% of [\w ]+ peak \d+ < \d+%",
         needs="gpu", judge_only=True),
    Case("burnin.slow", "after 3 s of an 8 s burn-in, device 0's GEMM runs at a fiftieth of its speed",
         _burnin("burnin.slow=0:3"), "burnin",
         r"(?:GPU 0|rank 0 \(CPU\)): [\d.e+-]+ → [\d.e+-]+ TFLOP/s after \d+ s", exclusive=True),
    Case("burnin.counter", "device 0's volatile ECC uncorrectable count grows by one during a burn-in",
         _burnin("burnin.counter=0:ecc_uncorrected"), "burnin",
         r"(?:GPU 0|rank 0 \(CPU\)): volatile ECC uncorrectable errors \d+ → \d+ \(\+1\)", judge_only=True),
    # ^ not exclusive: the fault is a counter, no timing; its control's timings beside other cases are judged by
    # the machine's state (a busy host's fall is "not judged", suite/machine.py), never a false alarm
    Case("train_step.freeze", "one parameter is left without an update",
         _node("train_step", "train_step.freeze=first"), "train_step", r"parameter\(s\) not updated: \S"),
    Case("train_step.nan", "a NaN in a gradient", _node("train_step", "train_step.nan=grad"), "train_step",
         r"non-finite gradient"),
    Case("train_step.nan_loss", "a NaN in the loss", _node("train_step", "train_step.nan=loss"), "train_step",
         r"loss not finite", covers=("train_step.nan",)),
    Case("train_step.sdpa", "one element of a fused SDPA backend's output is off by 1",
         _node("train_step", "train_step.sdpa=1"), "train_step", r"SDPA \w+ out differs"),
    Case("train_step.adamw", "the fused AdamW step differs from for-each AdamW",
         _node("train_step", "train_step.adamw=1"), "train_step", r"fused AdamW differs"),
    # --- GPUs exchange results
    Case("allreduce.wrong_rank", "one rank contributes a wrong value", _node("allreduce", "allreduce.wrong_rank={rank}"),
         "allreduce", r"expected \d+ everywhere"),
    Case("allreduce.hang_rank", "one rank never joins the all-reduce (hang)",
         _node("allreduce", "allreduce.hang_rank={rank}"), "allreduce", HUNG, expect_1rank=HUNG_ALONE),
    Case("allreduce.die_rank", "one rank's process exits mid-run", _node("allreduce", "allreduce.die_rank={rank}"),
         "allreduce", DIED),
    Case("comm.wrong_rank", "one rank sends wrong elements in the collective sweep", _comm("comm.wrong_rank={rank}"),
         "comm.all_reduce", r"all_reduce: \d+ wrong element\(s\) at \d+ size\(s\)"),
    Case("comm.hang_rank", "one rank stops at the second sweep step (hang)",
         _comm("comm.hang_rank={rank}", "comm.fault_step=1"), "comm.all_reduce", HUNG,
         covers=("comm.hang_rank", "comm.fault_step"), expect_1rank=HUNG_ALONE),
    Case("comm.die_rank", "one rank's process exits in the collective sweep", _comm("comm.die_rank={rank}"),
         "comm.all_reduce", DIED),
    Case("comm.slow_pct", "every collective takes 300% longer (a uniformly slow fabric), judged against this "
         "machine's own busbw measured first (busbw is 0 by definition at 1 rank)",
         _comm("comm.slow_pct=300", spec="{spec_busbw}"), "comm.all_reduce",
         r"all_reduce: busbw [\d.e+-]+ GB/s avg over .* < [\d.e+-]+ \([\d.]+ \(comm\.min_fraction\) x "
         r"comm\.expected_busbw_gbps\.all_reduce", needs="multirank", clean=(("spec_busbw", "spec"),), exclusive=True),
    Case("comm.once", "every collective takes 900% longer in the first sweep only (a burst of other traffic), "
         "judged against 0.3x this machine's own busbw: measured again, the busbw is judged healthy",
         _comm("comm.slow_pct=900", "comm.once=1", spec="{spec_busbw_loose}"), "cleared:comm.all_reduce",
         r"measured again: the first run's figure was below \(.*\): not a fault",
         needs="multirank", clean=(("spec_busbw_loose", "spec"),), exclusive=True),
    Case("comm.slow_rank", "one rank sleeps 150 ms before every collective (a straggler)",
         _comm("comm.slow_rank={rank}", "comm.slow_ms=150"), "comm.pairs",
         r"rank {rank} slow \([\d.]+x the median in the matrix; alone [\d.]+x pair \d+<->\d+\)",
         covers=("comm.slow_rank", "comm.slow_ms"), needs="multirank"),
    Case("comm.slow_link", "the link between rank 0 and another rank is slow (each end sleeps 20 ms before every "
         "exchange with the other)", _comm("comm.slow_link=0-{rank}", "comm.slow_ms=20"), "comm.pairs",
         r"link 0<->{rank} slow \([\d.]+x the median in the matrix; alone [\d.]+x pair \d+<->\d+\)",
         needs="multirank"),
    Case("comm.transient_link", "the link between rank 0 and another rank is slow in the pairwise matrix only (a "
         "burst of other work: told apart from a fault when its pair measured alone is as fast as any)",
         _comm("comm.transient_link=0-{rank}", "comm.slow_ms=20"), "cleared:comm.pairs",
         r"link 0<->{rank} was [\d.]+x the median in the matrix, [\d.]+x a healthy pair when measured alone: "
         r"not a fault", needs="multirank"),
    # --- the fabric (a replayed HGX B200 server against the spec written from it: selftest/cases_fabric.py)
    *(Case(name, fault, argv, check, expect, judge_only=judge_only,
           clean=(("fabric_node_hdr" if name == "fabric.replay" else "fabric_node", "fabric_node"),),
           covers=(("fabric.counter_rise",) if name == "fabric.counter_rise_nvlink" else ()))
      for name, fault, argv, check, expect, judge_only in FABRIC_ROWS),
    # --- training resumes
    Case("resume.skip_rng", "the resumed run does not restore any RNG state", _resume("resume.skip_rng=1"), "resume",
         r"RNG \w+ was restored: no"),
    Case("resume.skip_rng_python", "the resumed run does not restore Python's random state",
         _resume("resume.skip_rng_python=1"), "resume", r"RNG python was restored: no"),
    Case("resume.skip_rng_numpy", "the resumed run does not restore NumPy's random state",
         _resume("resume.skip_rng_numpy=1"), "resume", r"RNG numpy was restored: no"),
    Case("resume.skip_data", "the resumed run does not restore the data position", _resume("resume.skip_data=1"),
         "resume", r"data position was restored: no"),
    Case("resume.skip_lr", "the resumed run does not restore the LR scheduler", _resume("resume.skip_lr=1"), "resume",
         r"LR scheduler was restored: no"),
    Case("resume.flip_byte", "one byte of a checkpoint file is flipped after it was saved (corrupted checkpoint)",
         _resume("resume.flip_byte=1"), "resume", r"does not match the manifest"),
    Case("resume.fill_disk", "the checkpoint filesystem fills up just before run B saves (a full disk; a 16 MiB "
         "tmpfs of the self-test's own)", ("resume", "--spec", "{spec}", "--dir", "{small_disk}", "--steps", "4",
                                            "--checkpoint-step", "2", "--plant", "resume.fill_disk=1"),
         "resume", r"run B could not save its checkpoint at step 2: .*no space left on device",
         clean=(("small_disk", "control_dir"),)),
    # --- the fleet on Slurm (check "node:NAME": that node must be rejected with a matching reason).  Cases with the
    # same `share` are ONE `cluster run` carrying all their plants, each judged on its own node's line; the plants
    # of one run never overlap in what they make a node say (a node rejected for one check carries no second
    # plant of that check).  {node1}, unplanted in every run, is the run's control.  The runs that wait longest
    # first, so their waits overlap the local cases (selftest/schedule.py).
    Case("cluster.hang", "the third node's acceptance task hangs in its first check (the collector cancels it past "
         "--time)", _cluster("hang", "cluster.hang={node3}", "versions,fingerprint", time="0:25"), "node:{node3}",
         r"no result: task \d+ hung: no progress for \d+ s in check \w+", needs="slurm", share="versions-fingerprint"),
    Case("cluster.fingerprint", "one rank of the second node computes a flipped last bit in its bf16 GEMM: the fleet's "
         "identical ranks name it", _cluster("fingerprint", "cluster.fail={node2}:fingerprint", "versions,fingerprint",
                                             time="0:25"),
         "node:{node2}", r"fingerprint: \S+ rank 0: bf16 GEMM \S+, pattern random-7, chunk 13 of 64 differs from \d+ "
         "identical", covers=("cluster.fail",), needs="slurm", share="versions-fingerprint"),
    Case("cluster.vanish", "the second node's cross-node task exits at once: no record, its rank never joins",
         _cluster("vanish", "cluster.vanish={node2}", collective=True), "node:{node2}",
         r"cross-node: no cross-node record \(", needs="slurm"),
    Case("cluster.silent", "the second node's rank joins the cross-node all_reduce, then stops (the others wait on "
         "it)", _cluster("silent", "cluster.silent={node2}", collective=True), "node:{node2}",
         r"collective: rank\(s\) \[\d+\] at fault in the all_reduce", needs="slurm"),
    # 0.1%: the local cluster's nodes share the host's cores, so the node measured again alone runs up to ~12x
    # faster than in the acceptance array beside the others (370 -> ~4300 tokens/s on a 2-core x86 VM); at 2% it
    # was once cleared by that alone.  A real fleet's nodes do not share cores.
    Case("cluster.slow", "the third node's throughput at 0.1% (a slow node)",
         _cluster("slow", "cluster.slow={node3}:0.001", TRAINING), "node:{node3}",
         r"slow: .*train_tokens_per_s", needs="slurm", judge_only=True, share="training"),
    Case("cluster.fail", "a check fails on the second node (a corrupted matmul element)",
         _cluster("fail", "cluster.fail={node2}", TRAINING), "node:{node2}", r"check matmul: FAIL", needs="slurm",
         share="training"),
    Case("cluster.drift", "the second node reports another torch version (drift from the reference, the first)",
         _cluster("drift", "cluster.drift={node2}", TRAINING), "node:{node2}",
         r"drift: torch.*0\.0\.0\+planted", needs="slurm", judge_only=True, share="training"),
    Case("cluster.clock", "the second node's clock is 5 s ahead", _cluster("clock", "cluster.clock={node2}:5", TRAINING),
         "node:{node2}", r"clock: clock \d+\.\d+ s ahead of the submitting host", needs="slurm", share="training"),
    Case("cluster.storage", "the second node sees another filesystem than --results",
         _cluster("storage", "cluster.storage={node2}", TRAINING),
         "node:{node2}", r"storage: --results is another filesystem here \(st_dev", needs="slurm", share="training"),
    Case("cluster.nofile", "the second node's open-files limit is 1024",
         _cluster("nofile", "cluster.nofile={node2}:1024", TRAINING),
         "node:{node2}", r"limits: ulimit -n 1024 <", needs="slurm", share="training"),
    Case("cluster.slow_once", "the second node's throughput at 2% in its first measurement only (a transient: "
         "told apart from a fault when it is measured again and accepted)",
         _cluster("slow", "cluster.slow_once={node2}:0.02", TRAINING), "cleared:{node2}",
         r"measured again: .* within the bound: not a fault", needs="slurm", judge_only=True, share="training-2"),
    Case("cluster.text", "a check fails on the third node, its messages holding a NUL byte, a lone surrogate, ESC "
         "and BEL (cleaned where read)", _cluster("text", "cluster.text={node3}", TRAINING), "node:{node3}",
         r"check matmul: FAIL.*\ufffd\ufffd\ufffd\[2J\ufffd", needs="slurm", share="training-2"),
    Case("cluster.kill", "the second node's acceptance task is killed (SIGKILL)",
         _cluster("kill", "cluster.kill={node2}"), "node:{node2}", r"no result: task.*signal 9", needs="slurm"),
    Case("cluster.forge", "the third node overwrites the second's record with a failing one (a rogue node): held to "
         "Slurm's exit code of the second's task", _cluster("forge", "cluster.forge={node3}:{node2}"), "node:{node2}",
         r"not tested: its record says FAIL .* Slurm says task \d+ exited 0: written by another process", needs="slurm"),
    Case("cluster.nic_slow", "the second node's compute NIC mlx5_3 measures half its rate to every partner (rail "
         "by rail, as ib_write_bw would; the figures planted on a replayed HGX B200's eight NDR ports)",
         _pairs_fabric("nic_slow", "cluster.nic_slow={node2}:3"), "node:{node2}",
         r"NIC mlx5_3:1 \(rail 3\) below 80% of its rate", covers=("cluster.nic_slow", "cluster.rails", "cluster.sysfs"),
         needs="slurm", judge_only=True),
    # the trend's figures are planted from the node's first recorded one (cluster/sweep/trend.py plant_decline):
    # no timing in the verdict, so it runs beside the other cases
    Case("cluster.decline", "the third node's figures decline 30% a sweep (a slow decline, recorded over two "
         "sweeps: the trend judge against the node's own history)", _sweep("decline", "cluster.decline={node3}:30"),
         "cleared:{node3}", r"train_tokens_per_s@cpu: [\d.]+ tokens/s is 30% below this node's median",
         needs="slurm", before=_sweep("decline", "cluster.decline={node3}:30"), judge_only=True),
    # --- checkpoint compatibility across environments: saved by one process, loaded by another
    Case("compat.dtype", "a parameter saved as bfloat16 where the loader expects float32",
         ("resume", "--load-from", "{scratch}/dtype"), "ckpt_compat", r"tensor model\.\S+: dtype differs",
         before=_compat_save("dtype", "compat.dtype=first")),
    Case("compat.missing", "a parameter left out of the checkpoint", ("resume", "--load-from", "{scratch}/missing"),
         "ckpt_compat", r"tensor model\.\S+: missing", before=_compat_save("missing", "compat.missing=first")),
    Case("compat.rng", "torch's CPU generator state saved in another format", ("resume", "--load-from", "{scratch}/rng"),
         "ckpt_compat", r"RNG state torch_cpu: .*format", before=_compat_save("rng", "compat.rng=1")),
    Case("data.truncated_bin", "the token .bin file is truncated", _data("{data_truncated_bin}"), "",
         r"sample\.bin: truncated \.bin: found \d+ bytes, expected \d+ bytes",
         clean=(("data_truncated_bin", "data_ok"),)),
    Case("data.truncated_idx", "the token .idx file is truncated", _data("{data_truncated_idx}"), "",
         r"sample\.idx: truncated \.idx \(.*\): found \d+ bytes, expected \d+ bytes",
         clean=(("data_truncated_idx", "data_ok"),)),
)
