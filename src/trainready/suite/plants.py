"""Every `--plant NAME=VALUE` name, with what it does: the ONE table the CLI validates against.

Plants are fault injections and fact replays for tests of the whole CLI. A misspelled
plant silently ignored would be a PASS that tested nothing, so each command accepts
only the names below that its checks actually read; tests/test_plants.py scans the
sources so this table cannot drift from the code.  Any run with plants is marked in its
record (context "planted"), its overall verdict is capped at WARN and it exits
records.PLANTED_EXIT (3) whatever its checks say; records.read_report refuses such a record.

A value of 0 never plants anything by accident: RANK/IDX/N values are 0-based positions (0 is
rank 0, GPU 0, step 0: a fault planted on purpose, as the table says); for every other plant
0 (or false/off/no/empty) would read as "off", so it is rejected (exit 2): leave the plant out.
"""

from __future__ import annotations

import difflib

from trainready.errors import UsageError

# Read by the checks `trainready node` runs (through CheckContext.fault).
CHECK_PLANTS: dict[str, str] = {
    "gpus.facts": "PATH: judge a captured NodeFacts JSON (python -m trainready.manifest.facts) instead of this machine",
    "versions.facts": "PATH: judge versions from a captured NodeFacts JSON instead of this machine",
    "matmul.corrupt": "IDX[:DTYPE]: bump one element of the matmul results on GPU IDX (0 on CPU); DTYPE fp32|tf32|bf16, default bf16",
    "matmul.nondeterministic": "IDX[:DTYPE]: the repeated matmul on GPU IDX differs by one ulp in one element",
    "matmul.bitflip": "IDX[:DTYPE]: flip the highest stored significand bit of one element of both random products on GPU IDX",
    "fingerprint.bitflip": "RANK[:OP/PATTERN]: flip the last stored significand bit of one element (chunk 13 of "
                           "64) of that entry's result (default gemm-bf16/random-7) on GPU (or CPU rank) RANK, every "
                           "repeat; in the burn-in, bf16 GEMM random-7 from its second window on",
    "fingerprint.intermittent": "RANK: the same flip in the second repeat of gemm-bf16/random-7 only (an intermittent "
                                "fault: the device disagrees with itself)",
    "fingerprint.shared": "any: every device flips the top stored bit of the largest element of gemm-bf16/random-7 "
                          "(a wrong answer all share: only the float64 check sees it)",
    "fingerprint.drift": "RANK|all: GPU (or CPU rank) RANK's group key, or every one's, says another torch build "
                         "(configuration drift)",
    "throughput.slow_gpu": "IDX: GPU IDX reports half its GEMM TFLOP/s and HBM copy GB/s",
    "train_step.freeze": "PARAM: leave this parameter (any other value: the first one) without an update",
    "train_step.nan": "loss|grad: inject a NaN into the loss, or (any other value) into a gradient",
    "train_step.sdpa": "any: one element of the first SDPA backend's output is off by 1",
    "train_step.adamw": "any: perturb the fused AdamW step so it differs from foreach AdamW",
    "burnin.slow": "IDX:SECONDS: after SECONDS of burn-in, GPU (or CPU rank) IDX runs each timed GEMM batch 50 "
                   "times and counts it once (its TFLOP/s falls to a fiftieth)",
    "burnin.counter": "IDX:COUNTER: GPU (or CPU rank) IDX's after-reading of COUNTER (ecc_uncorrected, xid, ...) is "
                      "one more than its before-reading (judge-only: planted after reading)",
    "fabric.replay": "PATH: judge the fabric of a folder `trainready env --capture-fabric` wrote (its sys/ for "
                     "sysfs, its node.json for NVML and the services) instead of this machine",
    "fabric.port_down": "NIC: every port of this RDMA device reads DOWN (Disabled)",
    "fabric.half_rate": "NIC: every port of this RDMA device reads half its rate (an NDR 400 port trained to 200)",
    "fabric.hca_missing": "NIC: NCCL_IB_HCA reads as =every other RDMA device, this one left out",
    "fabric.nvlink_down": "GPU:LINK: this NVLink of this GPU reads inactive",
    "fabric.service_down": "UNIT: this service (nvidia-fabricmanager, nvlsm) reads not running",
    "fabric.counter_rise": "NIC|GPU:LINK: this NIC's symbol_error (or this GPU link's replay count) reads "
                           "fabric.counter_rise_max + 1 above its reading at the run's start (judge-only)",
    "allreduce.hang_rank": "RANK: this rank never joins the all-reduce (hang)",
    "allreduce.wrong_rank": "RANK: this rank contributes a wrong value",
    "allreduce.die_rank": "RANK: this rank's process exits mid-run",
}

# Read by `trainready node --health-check` (cluster/health/passive.py).
HEALTH_PLANTS: dict[str, str] = {
    "health.reading": "PATH: judge this passive reading (the `reading` of a trainready.healthstate/1 file) instead "
                      "of NVML and the kernel log",
}

# Read by the comm sweep (check `comm` and `trainready comm`): kwargs of comm.sweep.sweep_rank.
COMM_PLANTS: dict[str, str] = {
    "comm.slow_rank": "RANK: this rank sleeps before every collective (a straggler)",
    "comm.slow_link": "PAIR: I-J: ranks I and J sleep comm.slow_ms before every pairwise exchange with each other "
                      "(a slow link)",
    "comm.transient_link": "PAIR: I-J: as comm.slow_link in the pairwise matrix only; measured alone the pair is as "
                           "fast as any (a burst of other work, not a fault: the straggler must not be named)",
    "comm.slow_ms": "MS: how long the slow rank (or each end of the slow link) sleeps per op (default 20 ms; > 0)",
    "comm.slow_pct": "PCT: every rank's timed collectives take PCT% longer, the point-to-point reference of "
                     "comm.efficiency does not (slow collectives; > 0)",
    "comm.hang_rank": "RANK: this rank stops at step comm.fault_step (hang)",
    "comm.wrong_rank": "RANK: this rank sends wrong elements",
    "comm.die_rank": "RANK: this rank's process exits at step comm.fault_step",
    "comm.fault_step": "N: the sweep step (op x size, from 0) at which hang/die happen (default 0)",
    "comm.once": "1: comm.slow_rank and comm.slow_pct hold in the first sweep only; measured again the sweep is "
                 "healthy (a burst of other work on the fabric: its timing must not fail)",
}

# Read by the resume protocol (check `resume` and `trainready resume`); VALUE 1 plants it (0 is rejected).
RESUME_PLANTS: dict[str, str] = {
    "resume.skip_rng": "1: run C does not restore any RNG state",
    "resume.skip_rng_python": "1: run C does not restore Python's random state",
    "resume.skip_rng_numpy": "1: run C does not restore NumPy's random state",
    "resume.skip_data": "1: run C does not restore the data position",
    "resume.skip_lr": "1: run C does not restore the LR scheduler",
    "resume.flip_byte": "1: flip one byte of a checkpoint file after B saves it",
    "resume.fill_disk": "1: fill the --dir filesystem (all but 64 KiB) after the free-space check, just before B saves",
}

# Read by `trainready cluster run/resume` (cluster/plants/faults.py): each names the node it plants on.
CLUSTER_PLANTS: dict[str, str] = {
    "cluster.fail": "NODE[:CHECK]: that node's CHECK fails: matmul (default) gets a corrupted element (matmul.corrupt=0), "
                    "train_step a NaN loss (train_step.nan=loss), fingerprint a flipped last bit in GPU (rank) 0's bf16 "
                    "GEMM (fingerprint.bitflip=0: the fleet's identical GPUs name it)",
    "cluster.drift": "NODE: that node's manifest reports torch '0.0.0+planted' (a different software version), and "
                     "its fingerprint key another torch build (fingerprint.drift=all)",
    "cluster.slow": "NODE[:FACTOR]: that node's throughput metrics (tokens/s, GEMM, HBM) are multiplied by FACTOR (default 0.5)",
    "cluster.slow_once": "NODE[:FACTOR]: as cluster.slow, in the acceptance array only: measured again, the node is "
                         "as fast as the others (a transient slowdown, not a fault)",
    "cluster.slow_link": "NODE[+NODE...]: those nodes' network link is slow: their ranks sleep before every "
                         "collective of a `cluster pairs` step, as cluster.slow's do there (a bad leaf switch: plant "
                         "it on every node of one)",
    "cluster.switch_down": "NODE[+NODE...]: those nodes' leaf switch is down: their ranks of the cross-node all_reduce "
                           "fail at process-group set-up (gloo/NCCL told to use a network interface that does not "
                           "exist: GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME), the other ranks wait on them",
    "cluster.hang": "NODE: that node's acceptance task stops in its first check (sleeps until Slurm's time limit or the collector ends it)",
    "cluster.kill": "NODE: that node's acceptance task kills itself with SIGKILL",
    "cluster.clock": "NODE:SECONDS: that node's clock readings in the clock exchange are SECONDS ahead",
    "cluster.storage": "NODE: that node writes and reads a private directory on another filesystem instead of --results",
    "cluster.nofile": "NODE:N: that node lowers its open-files limit to N before the limits check",
    "cluster.silent": "NODE: that node's rank joins the cross-node all_reduce, then stops before the first collective",
    "cluster.vanish": "NODE: that node's cross-node task exits at once: no cross record, its rank never joins",
    "cluster.decline": "NODE:PCT: `cluster sweep` records that node's figures as its first sweep's x (1 - PCT/100)^k, "
                       "k its earlier sweeps (a slow decline; judge-only: planted after measuring)",
    "cluster.text": "NODE: that node's matmul fails and every check message in its record starts with a NUL byte, a lone "
                    "surrogate, ESC and BEL (a broken or hostile node's text)",
    "cluster.forge": "NODE:VICTIM: NODE's task overwrites VICTIM's record with a failing one once VICTIM wrote it (a "
                     "rogue node writing through the shared results folder)",
    "cluster.rails": "GBPS: `cluster pairs --fabric` runs no ib_write_bw: every rail measures 0.98 x its port's sysfs rate "
                     "(GBPS where sysfs gives none), slowed by cluster.nic_slow, cluster.slow and cluster.slow_link",
    "cluster.nic_slow": "NODE:RAIL[:FACTOR]: with cluster.rails, that node's NIC of index RAIL (from 0) measures FACTOR "
                        "(default 0.5) of the others in `cluster pairs --fabric` (a slow NIC)",
    "cluster.sysfs": "PATH: the RDMA probe of `cluster pairs --fabric` and of the cross step reads PATH as sysfs (a tree "
                     "`env --capture-fabric` wrote, or its sys/) instead of /sys, on every node",
    "cluster.image": "NODE:PATH[,NODE:PATH...]: each NODE is given the squashfs PATH instead of --container-image (Pyxis runs it)",
}

# Read by `trainready resume --save-only` (resume/compat.py): a checkpoint "from another environment".
COMPAT_PLANTS: dict[str, str] = {
    "compat.dtype": "PARAM: save this model parameter as bfloat16 (any other value: the first one)",
    "compat.missing": "PARAM: leave this model parameter out of the checkpoint (any other value: the first one)",
    "compat.rng": "1: save torch's CPU generator state in another format (a CUDA generator's 16 bytes)",
}

PLANTS: dict[str, str] = {**CHECK_PLANTS, **HEALTH_PLANTS, **COMM_PLANTS, **RESUME_PLANTS, **COMPAT_PLANTS, **CLUSTER_PLANTS}

# Which names each command's checks read: `node` runs every check (incl. comm and resume); `cluster` its own.
BY_COMMAND: dict[str, dict[str, str]] = {
    "node": {**CHECK_PLANTS, **HEALTH_PLANTS, **COMM_PLANTS, **RESUME_PLANTS},
    "comm": COMM_PLANTS,
    "resume": {**RESUME_PLANTS, **COMPAT_PLANTS},
    "cluster": CLUSTER_PLANTS,
}


def validate(names: list[str] | tuple[str, ...], command: str) -> None:
    """Unknown plant for this command → UsageError (exit 2), one line with the closest match."""
    valid = BY_COMMAND[command]
    for name in names:
        if name in valid:
            continue
        close = difflib.get_close_matches(name, list(valid), n=1, cutoff=0.6)
        hint = f"did you mean {close[0]}? " if close else ""
        raise UsageError(f"--plant {name}: unknown fault for `trainready {command}` ({hint}valid: {', '.join(valid)})")


# The value each plant takes, from its doc's leading word: numbers are checked when the CLI parses them
# (a `comm.slow_rank=x` through `node` would otherwise surface as a check *error*, not a usage error).
_NUMERIC = {"RANK": int, "IDX": int, "N": int, "MS": float, "PCT": float}
_POSITIONS = ("RANK", "IDX", "N")  # 0-based: 0 names rank/GPU/step 0
_OFF = ("0", "0.0", "false", "off", "no", "")  # would read as "off": never planted anyway


def validate_values(plants: dict[str, str]) -> None:
    """A value that is not the number its plant reads, a negative position, or a value that reads as
    "off" (0, false, ...) on a plant that is not a position → UsageError (exit 2), one line."""
    for name, value in plants.items():
        kind = PLANTS.get(name, "").split(":", 1)[0].split("[", 1)[0]
        conv = _NUMERIC.get(kind)
        head = value.split(":", 1)[0]
        if conv is not None:
            try:
                number = conv(head)
            except ValueError:
                what = "an integer" if conv is int else "a number"
                raise UsageError(f"--plant {name}={value}: expected {kind} ({what})") from None
            if kind in _POSITIONS:
                if number < 0:
                    raise UsageError(f"--plant {name}={value}: expected {kind} >= 0 (0-based)")
                continue
            if number > 0:
                continue
            raise UsageError(f"--plant {name}={value}: expected {kind} > 0 (0 would plant nothing; "
                             "leave the plant out)")
        if kind == "PAIR":
            _check_pair(name, value)
            continue
        if head.strip().lower() in _OFF:
            raise UsageError(f"--plant {name}={value}: {value or 'empty'} would read as 'off'; "
                             "leave the plant out to run unplanted")


def _check_pair(name: str, value: str) -> None:
    """A PAIR plant's value: 'I-J', two different ranks >= 0."""
    from trainready.comm.rankdata import rank_pair

    try:
        rank_pair(value.split(":", 1)[0])
    except ValueError:
        raise UsageError(f"--plant {name}={value}: expected PAIR I-J (two different ranks, 0-based)") from None
