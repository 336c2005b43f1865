"""Spec dataclasses. Every field has a doc; every field has a default so a spec
file only needs to say what it expects.  `None` means "no expectation": the
matching check reports the figure and does not judge it.
"""

from __future__ import annotations

from dataclasses import dataclass

from trainready.hostsettings.pins import DEFAULT_MATCH
from trainready.spec.burnin import BurnInSpec
from trainready.spec.fabric import FabricSpec
from trainready.spec.fingerprint import FingerprintSpec
from trainready.util.strict import doc_field


@dataclass(frozen=True)
class GpuSpec:
    count: int = doc_field(0, "Number of GPUs this node must expose (0 = a CPU-only node).")
    model: str | None = doc_field(
        None, "Substring the NVML product name must contain, e.g. 'H200' or 'B200'."
    )
    memory_gib_min: float | None = doc_field(None, "Minimum memory per GPU in GiB (NVML total).")
    driver_branch: str | None = doc_field(
        None, "Driver branch (major version), e.g. '580'; compared with NVML's driver version."
    )


@dataclass(frozen=True)
class SoftwareSpec:
    torch: str | None = doc_field(None, "Expected torch.__version__ prefix, e.g. '2.13.0'.")
    cuda: str | None = doc_field(
        None, "Expected torch.version.cuda prefix (the toolkit torch was built for), e.g. '13.3'."
    )
    nccl: str | None = doc_field(None, "Expected NCCL version prefix as torch reports it, e.g. '2.30.7'.")
    cudnn: str | None = doc_field(None, "Expected cuDNN version prefix, e.g. '9.'.")
    python: str | None = doc_field(None, "Expected Python version prefix, e.g. '3.12'.")
    image_digest: str | None = doc_field(
        None, "Container image digest the node must run (sha256:...), compared with --image-digest / TRAINREADY_IMAGE_DIGEST."
    )
    image_sha256: str | None = doc_field(
        None, "sha256:... of the squashfs every node must run under Pyxis (cluster run --container-image FILE.sqsh; "
        "the batch script reads it on each node).",
    )
    slurm: str | None = doc_field(None, "Expected slurmd version prefix on every node (`slurmd -V`), e.g. '22.05'.")
    pyxis: str | None = doc_field(None, "Expected Pyxis version prefix (the version string of the plugin plugstack.conf loads), e.g. '0.24'.")
    enroot: str | None = doc_field(None, "Expected enroot version prefix (`enroot version` on the node), e.g. '4.1'.")
    os: str = doc_field(
        "", "OS the image's userspace must be, as os-release NAME + VERSION_ID, e.g. 'Ubuntu 24.04' ('' = not checked)."
    )
    packages: dict[str, str] = doc_field(
        default_factory=dict,
        doc="Python distributions the image must carry, name → version prefix (importlib.metadata), "
        "e.g. { megatron-core = \"0.19.2\" }.",
    )


@dataclass(frozen=True)
class ComputeSpec:
    gemm_min_fraction: float | None = doc_field(
        0.60,
        "Per-GPU BF16 GEMM TFLOP/s must reach this fraction of the GPU's table peak (dense). "
        "0.60 is conservative: 1x H200 reached 0.74-0.79 of dense peak on 8192^3 (docs/measured-h200.md). "
        "Omitted = not judged.",
    )
    hbm_min_fraction: float | None = doc_field(
        0.70,
        "Per-GPU device-to-device copy bandwidth (read+write bytes) must reach this fraction of HBM peak "
        "(omitted = not judged).",
    )
    gemm_tflops_min: float | None = doc_field(
        None, "Absolute floor for per-GPU BF16 TFLOP/s (set by `spec init` from a reference node)."
    )
    hbm_gbps_min: float | None = doc_field(None, "Absolute floor for per-GPU copy GB/s (set by `spec init`).")
    spread_max: float | None = doc_field(
        0.10, "Largest allowed (best - worst) / best spread of a per-GPU figure across the node's GPUs "
        "(omitted = not judged)."
    )


@dataclass(frozen=True)
class CommSpec:
    world_size: int = doc_field(
        0, "Ranks for node-local collectives; 0 = one per GPU, or 8 gloo ranks on a CPU node."
    )
    backend: str = doc_field(
        "auto", "Collective backend for node-local checks: auto (nccl when GPUs are visible, else gloo), nccl or gloo."
    )
    timeout_s: float = doc_field(60.0, "Per-collective timeout in seconds; a hung rank fails the check after this.")
    min_fraction: float = doc_field(
        0.80, "A collective's busbw must reach this fraction of its expectation (0.80: an op 20% below its expectation fails)."
    )
    expected_busbw_gbps: dict[str, float] = doc_field(
        default_factory=dict,
        doc="Expected bus bandwidth per op in GB/s (1e9 B/s) at large sizes, e.g. { all_reduce = 367.0 }.",
    )
    min_fraction_by_op: dict[str, float] = doc_field(
        default_factory=dict,
        doc="Per-key override of min_fraction (keys as in expected_busbw_gbps). `spec init` writes one per floor "
        "from the reference's measured run-to-run spread (docs/comm.md); a key not here uses min_fraction.",
    )
    min_fraction_all_ops: float | None = doc_field(
        None, "All ops together: the geometric mean over the judged ops of (busbw / its expectation) must reach "
        "this. A uniformly slow fabric or host moves every op together, while one op's run-to-run noise partly "
        "cancels in the mean, so this catches a smaller slowdown than any single op's floor can on a noisy "
        "backend (gloo on shared cores). `spec init` writes it from the reference runs' spread of that same mean "
        "(docs/comm.md); unset = not judged.",
    )
    expected_efficiency: dict[str, float] = doc_field(
        default_factory=dict,
        doc="Expected collective efficiency per op (keys as in expected_busbw_gbps): busbw over the busbw of a ring "
        "send/recv of the same buffer, timed alternately in the same run (docs/comm.md), e.g. { all_reduce = 0.21 }. "
        "Host load slows both alike, so this figure holds still where busbw drifts (gloo on shared cores).",
    )
    min_fraction_efficiency: float | None = doc_field(
        None, "All ops together: the geometric mean over the ops of (efficiency / its expected_efficiency) must "
        "reach this. Catches a collective slow in itself (algorithm, protocol, library) at a few percent; the "
        "busbw floors catch slow links. `spec init` writes it from the reference runs' spread; unset = not judged.",
    )
    expected_sizes_bytes: tuple[int, ...] = doc_field(
        (),
        "[low, high]: message sizes in bytes (inclusive) over which the reference averaged expected_busbw_gbps "
        "(spec init writes it). Each run is judged on its own average over the same sizes, so a short sweep is "
        "never held to a long sweep's figure; a run with no size there warns. [] = each run's own window "
        "(sizes >= its largest / 8).",
    )


@dataclass(frozen=True)
class ResumeSpec:
    steps: int = doc_field(100, "Total training steps of the uninterrupted control run.")
    checkpoint_step: int = doc_field(50, "Step at which run B saves and run C resumes.")
    atol: float = doc_field(
        0.0, "Absolute tolerance for parameters/optimizer/loss comparisons, declared before the run (0 = bitwise)."
    )
    rtol: float = doc_field(0.0, "Relative tolerance, declared before the run (0 = bitwise).")
    ranks: int = doc_field(1, "Data-parallel ranks for the resume protocol.")
    mode: str = doc_field("ddp", "Data parallelism of the resume protocol: 'ddp' or 'fsdp' (FSDP2 fully_shard).")
    preset: str = doc_field("", "Model preset of the reference workload ('tiny', 'small'); '' = tiny on CPU, small on GPU.")
    batch_size: int = doc_field(8, "Sequences per rank per step.")
    seed: int = doc_field(1234, "Seed of model init, dropout and the data order.")


DIRECTIONS = ("auto", "higher", "lower", "exact", "info")


@dataclass(frozen=True)
class MetricTolerance:
    rel: float | None = doc_field(None, "Relative tolerance (fraction of the baseline value, e.g. 0.05 = 5%); unset = the kind's default.")
    abs: float | None = doc_field(None, "Absolute tolerance in the metric's own unit; unset = 0.")
    direction: str = doc_field(
        "auto", "Which way is worse: higher (throughput), lower (time, error), exact (counts), info (never judged); "
        "auto = from the metric's recorded threshold, else its unit and name."
    )


@dataclass(frozen=True)
class CompareSpec:
    rate_rel_tol: float = doc_field(
        0.10, "`trainready compare`: a throughput metric (unit …/s, fraction of peak, MFU) may drop this fraction "
        "below the baseline before it is a regression. 0.10: repeated runs of one healthy GPU node vary a few % "
        "(nccl-tests busbw, GEMM TFLOP/s), so 10% leaves room for that noise.",
    )
    time_rel_tol: float = doc_field(0.10, "Likewise for a time metric (s, ms, us): it may rise by this fraction.")
    allow_changes: tuple[str, ...] = doc_field(
        (), "Version keys the upgrade under test is meant to change (torch, cuda, nccl, cudnn, driver, python, os, "
        "image_digest, packages or packages.NAME); any other changed version fails the comparison.",
    )
    metrics: dict[str, MetricTolerance] = doc_field(
        default_factory=dict, doc="Per-metric overrides by metric name, e.g. { comm_busbw_avg = { rel = 0.05 } }."
    )


@dataclass(frozen=True)
class FleetSpec:
    clock_offset_max_s: float = doc_field(
        1.0, "Largest clock offset of a node against the submitting host, in seconds (1.0: the step threshold of chrony's usual `makestep 1 3`)."
    )
    nofile_min: int = doc_field(
        65535, "Smallest allowed open-files limit (ulimit -n) of a job's task on every node (each NCCL/gloo rank holds sockets to its peers)."
    )
    slow_fraction: float = doc_field(
        0.95,
        "Fleet floor of a throughput metric (GEMM TFLOP/s, HBM GB/s, training tokens/s) as a fraction of the fleet "
        "median: a GPU below it AND below the robust bound median - outlier_k x 1.4826 x MAD is slow. 0.95 catches a "
        "10%-slow GPU; it is 5 sigma below the median for GPUs of one model whose spread is sigma ~1% (an H200 node "
        "measured 741-777 TFLOP/s over its GPUs and repeats, docs/measured-h200.md), so a healthy fleet flags nobody.",
    )
    outlier_k: float = doc_field(
        3.0,
        "k of the robust outlier bound median - k x 1.4826 x MAD (1.4826 x MAD estimates sigma for normal data; "
        "k = 3 is the 'very conservative' cut-off of Leys et al. 2013, J. Exp. Soc. Psychol. 49:764).",
    )
    trend_fraction: float = doc_field(
        0.10,
        "`cluster sweep`: a node's figure (GEMM TFLOP/s, HBM GB/s, tokens/s, busbw) more than this fraction below "
        "the median of its own last trend_runs sweeps is a trend WARN. 0.10: twice the fleet floor's 5% (a GPU's "
        "repeats vary ~1-2%, docs/measured-h200.md), so it names a decline before the fleet floor fails the node.",
    )
    trend_runs: int = doc_field(
        5, "`cluster sweep`: how many of a node's latest sweeps its trend median is taken over."
    )
    trend_min_runs: int = doc_field(
        3,
        "`cluster sweep`: earlier sweeps of a figure a node needs before its trend is judged (a median of one or "
        "two sweeps is no baseline: one loaded sweep would set it). A fall must also exceed 2 median absolute "
        "deviations of those sweeps, and a figure whose own spread is wider than trend_fraction is said noisy.",
    )
    expected_busbw_gbps: dict[str, float] = doc_field(
        default_factory=dict,
        doc="Expected bus bandwidth of the multi-node collective per op in GB/s (keys as comm.expected_busbw_gbps, "
        "e.g. { all_reduce = 360.0 } for 8x400 Gb/s IB); judged with comm.min_fraction.",
    )
    switch_fraction: float = doc_field(
        0.5,
        "More than this share of one leaf switch's nodes (Slurm's topology/tree, topology.conf(5)), and at least 2, "
        "rejected for a cause in switch_causes names the switch as the cause: none of them is drained for it "
        "(cluster/judge/switches.py). 0.5: a majority of the switch, as the fleet-wide guard's majority of the "
        "rejected.",
    )
    switch_causes: tuple[str, ...] = doc_field(
        ("collective", "cross-node", "link"),
        "Cause keys a switch can explain (a cross-node or bandwidth cause): the collective's blame, a node missing "
        "from the cross-node step, a slow pair of `cluster pairs`. A node's own causes (a check, drift, a slow GEMM) "
        "still drain it under a named switch.",
    )
    coverage_days: float = doc_field(
        7.0,
        "`cluster history --coverage`: a node whose last passing active check (cluster run, sweep, --health-check "
        "--active) or passive one (--health-check) is older than this many days is named. 7: a weekly sweep.",
    )
    unjudged_sweeps: int = doc_field(
        3,
        "`cluster sweep`: consecutive sweeps that could not judge a node (not judged on a busy machine, preempted, "
        "no record) after which coverage, `cluster history` and Prometheus say \"cannot be judged for N sweeps\". "
        "Never a drain on its own; the strikes stay as they were. 3: three nightly sweeps in a row.",
    )
    storage_wait_s: float = doc_field(
        30.0, "Seconds with no new file of another node under --results after which a node names the missing ones "
        "(each new file starts the wait again: a fleet's tasks need not start together)."
    )
    join_s: float = doc_field(
        60.0,
        "Seconds every rank of the cross-node collective (and of `cluster pairs`) may take, beyond comm.timeout_s, "
        "to join the rendezvous before the ranks that are there name the missing ones: srun starts a step's tasks "
        "seconds apart on a busy fleet, and a container start (Pyxis/enroot) adds more.",
    )


@dataclass(frozen=True)
class HostSpec:
    match: tuple[str, ...] = doc_field(
        DEFAULT_MATCH, "Host settings (trainready env: host_settings) that must equal the reference node's in a fleet "
        "run; fnmatch patterns ('ib.*'). The default set, each key's reason: hostsettings/pins.py MATCH_REASONS. Others "
        "are shown where they differ, not judged.",
    )
    pins: dict[str, str | int | float] = doc_field(
        default_factory=dict,
        doc="Host settings held to a comparison on every node, key → 'OP VALUE' (OP >=, <=, >, <, ==, !=; none = ==), "
        "e.g. { \"ulimit.memlock\" = \"unlimited\", \"shm.size_gib\" = \">= 1\" }. `spec init` pins the reference's "
        "values of the `match` keys. A pin every node misses is a fleet-wide cause: no node is drained for it.",
    )
    pcie_min_fraction: float | None = doc_field(
        0.60, "Pinned host↔device copy GB/s per GPU and direction must reach this fraction of the link's rate at its "
        "maximum generation and width (hardware/pcie.py: GT/s x lanes x encoding / 8). 0.60: a link trained to half "
        "(Gen5 x16 → Gen4 x16 or Gen5 x8) gives at most 0.5; copies reach ~0.8-0.9 of it on a healthy link "
        "(packet headers). Omitted = not judged.",
    )
    pcie_spread_max: float | None = doc_field(
        0.15, "Largest (best − worst) / best spread of one copy direction across the node's GPUs (omitted = not judged).",
    )


@dataclass(frozen=True)
class NodeSpec:
    name: str = doc_field("unnamed", "Short name of this node profile.")
    description: str = doc_field("", "What this spec describes and where its numbers come from.")
    gpu: GpuSpec = doc_field(default_factory=GpuSpec, doc="What the GPUs must be.")
    software: SoftwareSpec = doc_field(default_factory=SoftwareSpec, doc="Versions the image must carry.")
    compute: ComputeSpec = doc_field(default_factory=ComputeSpec, doc="Compute thresholds.")
    comm: CommSpec = doc_field(default_factory=CommSpec, doc="Collective-communication thresholds.")
    resume: ResumeSpec = doc_field(default_factory=ResumeSpec, doc="Resume-equivalence protocol.")
    fleet: FleetSpec = doc_field(default_factory=FleetSpec, doc="Cross-node checks and fleet verdicts (trainready cluster).")
    compare: CompareSpec = doc_field(default_factory=CompareSpec, doc="Tolerances of `trainready compare` (upgrade gate).")
    host: HostSpec = doc_field(default_factory=HostSpec, doc="Host settings alike on every node; the PCIe copy check.")
    burnin: BurnInSpec = doc_field(default_factory=BurnInSpec, doc="Burn-in: sustained load, judged over time (docs/burn-in.md).")
    fabric: FabricSpec = doc_field(default_factory=FabricSpec, doc="NVLink, NVSwitch and its services, the RDMA NICs, "
                                   "what NCCL uses, the rails (docs/fabric.md).")
    fingerprint: FingerprintSpec = doc_field(default_factory=FingerprintSpec, doc="The reference server's compute "
                                             "fingerprint, compared bit for bit on nodes of its group key.")
