"""Experiment files: a topology file plus a job (model, batch size, iterations, placement, scale).

    name: psnet-vgg16
    topology: ../topologies/psnet-testbed.yaml   # relative to this file
    scale: 10                                    # optional: overrides the topology's scale
    job:
      model: vgg16          # vgg16 | resnet50 | resnet110 | tiny
      batch_size: 1         # BS per worker step
      iterations: 10        # measured steps per worker (after warm-up)
      warmup: 2             # steps dropped from the statistics
      placement: balanced   # balanced (default: every PS within 5% of S/P) | round-robin (TF's)
      model_bytes: null     # paper-equivalent S; default: the paper's size of the model
      width: null           # explicit width multiplier instead of model_bytes
      host_time: scaled     # scaled (default): the run's own host time | full: every step padded to
                            # the full-size job's host time measured here (tfjob.hosttime) | a number
                            # of seconds: padded to that host time per step (pinned: another
                            # machine's, or the paper's implied one), the same on every machine

W and P are the topology's workers and PSs. The emulated job pushes S / scale bytes (the model's
width is chosen to hit that), on links at B / scale, so S/B keeps the paper's value.

Several jobs share one topology with `jobs:` instead of `job:`, each naming its own hosts:

    jobs:
      - {name: a, model: tiny, workers: [w1_1_1, w1_2_1], ps: [ps1_1]}
      - {name: b, model: tiny, workers: [w1_3_1, w1_1_2], ps: [ps1_2]}

`timeline:` and `random_failures:` (workloads.timeline) apply events while the job runs; a PS
that fails is replaced by a standby PS of the topology (`standby_ps`), the job restarting from
its last checkpoint (`checkpoint_every`). Scheme jobs take the same events but fail_ps (no
standby there), plus `pause_senders` (RAT's paused hosts, held inside the engine).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, ValidationError, model_validator

from schemes import registry
from schemes.registry import SchemeName
from topologies import kinds
from topologies.schema import (
    InputError,
    SafeName,
    TopologySpec,
    check_finite,
    load_spec,
    name_from_path,
    one_line_error,
    parse_spec,
    read_yaml,
)
from workloads.timeline import RandomFailures, TimelineEvent

#: seconds without a finished step and without a link moving bytes that make a stall (the default of
#: a job's stall_s: found within a minute; TF starting 8 processes on 2 cores is not counted, see runs/stall.py)
STALL_S = 45.0

#: the paper's model sizes (Table 2), read as MiB of float32 parameters (tfjob.dnn's docstring)
PAPER_BYTES = {"vgg16": 138_357_544 * 4, "resnet50": 25_557_032 * 4}
#: Paper-equivalent S per model: Table 2's VGG-16 and ResNet50 (their ImageNet parameter bytes,
#: tfjob.dnn.PAPER_BYTES); ResNet110 and tiny have no paper size: their width-1 CIFAR bytes;
#: mnist: HiPS Table 1's "1 million parameters" of float32.
PAPER_MODEL_BYTES: dict[str, float] = {**PAPER_BYTES, "resnet110": 6_922_856, "tiny": 96_936, "mnist": 4_000_000}
#: Parameter Flow's Table 2 (float32): LR 105M, MF 16.3M, AlexNet 61M parameters. LR and MF are
#: numpy models (engine.npmodels, compute: numpy); AlexNet is a payload of its size (calibrated)
PF_MODEL_BYTES = {"lr": 105_000_000 * 4, "mf": 16_300_000 * 4, "alexnet": 61_000_000 * 4}
PAPER_MODEL_BYTES.update(PF_MODEL_BYTES)
#: models with no TF graph here: sized by bytes alone (width 1), run by the scheme engine
BYTES_ONLY = frozenset(PF_MODEL_BYTES)

#: a scheme job's pipelining segment in emulated KB (JobSpec.segment_kb): measured, results/bench/schemes.md
SEGMENT_KB = 64.0
#: a job's host-time mode when `host_time` is a number of seconds
PINNED = "pinned"


def host_time_mode(host_time: str | float | None) -> str:
    """A `host_time` value's mode: scaled, full, or pinned where it is a number of seconds."""
    if host_time is None:
        return "scaled"
    return PINNED if isinstance(host_time, int | float) else str(host_time)


class ExperimentError(InputError):
    """An experiment file (or a job's hosts) that cannot run; the message is the one line shown to the user."""


class JobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: SafeName = Field(default="job", description="names the job's results when several share a topology")
    workers: list[str] | None = Field(default=None, description="worker hosts (default: all the topology's)")
    ps: list[str] | None = Field(default=None, description="PS hosts (default: all the topology's)")
    checkpoint_every: int = Field(default=0, ge=0, description="the chief checkpoints every N steps (0: never)")
    model: Literal["vgg16", "resnet50", "resnet110", "tiny", "mnist", "lr", "mf", "alexnet"] = Field(
        description="model architecture; lr, mf (numpy) and alexnet (a payload of its size) are Parameter Flow's"
    )
    batch_size: int = Field(default=1, ge=1, description="samples per worker step (BS)")
    iterations: int = Field(default=10, ge=1, description="measured steps per worker")
    warmup: int = Field(default=2, ge=0, description="steps before the measured ones")
    placement: Literal["round-robin", "balanced"] = Field(
        default="balanced", description="balanced: S/P per PS (tfjob.placement); round-robin: TF's default"
    )
    model_bytes: float | None = Field(default=None, gt=0, description="paper-equivalent S in bytes")
    width: float | None = Field(default=None, gt=0, description="explicit width multiplier")
    seed: int = Field(default=1)
    threads: int = Field(default=1, ge=1, description="TF intra/inter-op threads per process")
    deadline_s: float = Field(default=900.0, gt=0, description="a process still running then is stopped")
    stall_s: float = Field(
        default=STALL_S,
        ge=5,
        description="a run with no finished step and no link moving bytes for this many seconds is stopped as "
        "stalled (runs/stall.py); raise it above a step's longest compute",
    )
    scheme: SchemeName = Field(
        default=registry.DEFAULT,
        description="synchronisation: a scheme of the registry (schemes/registry.py): tf-ps (TensorFlow's PS "
        "job, the default) or one the scheme engine runs (ring, rat, hips, ...)",
    )
    compute: Literal["tf", "calibrated", "numpy"] = Field(
        default="tf",
        description="schemes: real TF gradients, or this machine's measured compute time with seeded random ones, "
        "or (lr, mf) the numpy model's real updates",
    )
    compute_s: float | None = Field(
        default=None, ge=0, description="calibrated: seconds of compute per step (default: measured here, cached)"
    )
    check: bool = Field(default=False, description="schemes: verify every worker holds the exact sum, every step")
    hips_stages: Literal["ms", "rs", "ps"] | list[Literal["ms", "rs", "ps"]] | None = Field(
        default=None, description="hips: the method of every stage, or one per level (level 0 first); default rs"
    )
    hips_parallel: bool = Field(default=True, description="hips: h processes, one per level order (NIC), W/h each")
    segment_kb: float = Field(
        default=SEGMENT_KB,
        ge=0,
        description="schemes: pipelining; every chunk goes in segments of at most this many emulated KB, a relay "
        "forwarding one while the next arrives (0: whole chunks, store-and-forward)",
    )
    pf_tree: Literal["tsb", "flat"] = Field(
        default="tsb",
        description="pf: the broadcast's shape: tsb (the paper's P3 tree of workers, relays streaming it on) or "
        "flat (every server sends to every worker: push + broadcast without the tree)",
    )
    pf_degree: int = Field(default=5, ge=1, le=64, description="pf: T, the most children a node of TSB's tree has")
    pf_depth: int = Field(default=3, ge=1, le=16, description="pf: H, the most hops from the servers to a worker")
    dvf: Literal["off", "encode", "low", "up", "dynamic"] = Field(
        default="off",
        description="pf: DVF on the wire. off: raw float32; encode: PF's wire form only (sparse above 80%% zeros, "
        "snappy), nothing held back; low / up: entries with |U| <= delta / sqrt(t) held back for the next "
        "iteration with delta_low / delta_up; dynamic: delta_low where every link the host sends on measured "
        "sufficient, else delta_up (the paper's network-aware DVF)",
    )
    dvf_delta_low: float | None = Field(default=None, gt=0, description="pf: DVF's delta_low (the paper's per model)")
    dvf_delta_up: float | None = Field(default=None, gt=0, description="pf: DVF's delta_up, above delta_low")
    dvf_sufficient_mbps: float | None = Field(
        default=None,
        gt=0,
        description="pf, dvf dynamic: paper-equivalent Mbit/s a link must measure to be sufficient (default: the "
        "paper's 50 Mbit/s at 1 Gbit/s, i.e. 5%% of the workers' link rate)",
    )
    staleness: int = Field(
        default=0,
        ge=0,
        le=64,
        description="pf, ps: SSP's staleness s, a worker computes clock t once it has applied the broadcasts of "
        "every clock up to t - s - 1 (0: BSP); needs barrier: false",
    )
    streams: int = Field(
        default=1,
        ge=1,
        le=16,
        description="schemes: TCP connections per peer a host sends to (default 1; plink 4, the paper's)",
    )
    plink_groups: Literal["probe", "racks", "random"] | None = Field(
        default=None,
        description="plink: how hosts are grouped: probe (ProbeEmbed on bandwidth probes measured over the network "
        "before the first iteration; the default), racks (the topology's racks: ground truth) or random (Balanced "
        "Random, seeded by the job's seed)",
    )
    plink_probe_s: float | None = Field(
        default=None, gt=0, description="plink, plink_groups probe: seconds of each probe round (iperf3; default 1)"
    )
    autotune: bool | None = Field(
        default=None,
        description="plink: between iterations, Quicktune re-assigns the masters from the bandwidth measured when "
        "an iteration slows or speeds by > 20%, and Finetune moves them by blame (schemes/plink.py; default false)",
    )
    barrier: bool = Field(
        default=True,
        description="schemes: every host starts each synchronisation together (a barrier, as MPI benchmarks time a "
        "collective), so GST counts from one start; the wait is in BCT. false: each host starts when its step does",
    )
    colocate_ps: bool = Field(
        default=False,
        description="tf-ps: the PS tasks run inside the (one) worker's host and talk to it over that host's "
        "loopback, no network between them (HiPS Table 1's one machine)",
    )
    host_time: Literal["scaled", "full"] | PositiveFloat = Field(
        default="scaled",
        description="scaled: the run's own host time at its scaled model size; full: every step padded to the "
        "full-size job's host time on this machine (tfjob.hosttime); a number: every step padded to that many "
        "seconds of host time (pinned: the same on every machine, e.g. another machine's or the paper's implied)",
    )

    @property
    def host_time_mode(self) -> str:
        """scaled, full or pinned (host_time a number of seconds)."""
        return host_time_mode(self.host_time)

    @property
    def engine(self) -> bool:
        """Whether the scheme engine runs this job's synchronisation (else TF's PS job does)."""
        return registry.get(self.scheme).engine

    @model_validator(mode="before")
    @classmethod
    def _scheme_defaults(cls, data: object) -> object:
        """The scheme's own defaults (SchemeSpec.job_defaults: PLink's 4 streams) where the file sets
        no value, and another scheme's own fields refused (SchemeSpec.own_fields)."""
        if not isinstance(data, dict):
            return data
        spec = registry.SCHEMES.get(data.get("scheme", registry.DEFAULT))
        if spec is None:
            return data  # the scheme field's own check names it
        for other in registry.SCHEMES.values():
            for name in sorted(other.own_fields - spec.own_fields):
                if data.get(name) is not None:
                    raise ValueError(f"{name}: only {other.name} takes it (job.scheme is {spec.name}); remove it")
        return {**spec.job_defaults, **{k: v for k, v in data.items() if v is not None or k not in spec.job_defaults}}

    @model_validator(mode="after")
    def _full_host_time_is_tf_ps(self) -> JobSpec:
        if self.host_time != "scaled" and self.engine:
            raise ValueError(
                f"host_time: {self.host_time} pads the TF PS job's steps; a scheme job takes compute_s instead"
            )
        if self.model in BYTES_ONLY and not self.engine:
            raise ValueError(f"model: {self.model} has no TF graph here; run it with a scheme (scheme: pf, ps, ...)")
        if (self.compute == "numpy") != (self.model in ("lr", "mf")):
            raise ValueError(
                "compute: numpy runs Parameter Flow's numpy models (model: lr or mf), and they run only with it"
            )
        if self.model == "alexnet" and (self.compute != "calibrated" or self.compute_s is None):
            raise ValueError(
                "model: alexnet is a payload of AlexNet's size: give compute: calibrated and compute_s "
                "(seconds per step; the paper's K40 took 1.2 s)"
            )
        if self.compute == "calibrated" and self.compute_s is not None and self.compute_s >= self.stall_s:
            raise ValueError(
                f"stall_s: {self.stall_s:g} s is not above compute_s {self.compute_s:g} s: a step's compute alone "
                "would read as a stall; raise stall_s"
            )
        if self.staleness and not registry.get(self.scheme).ssp:
            ssp = ", ".join(n for n, sp in registry.SCHEMES.items() if sp.ssp)
            raise ValueError(f"staleness: {self.scheme} runs BSP only; SSP is for {ssp}: set staleness: 0")
        if self.staleness and self.barrier:
            raise ValueError("barrier: SSP lets workers run up to staleness clocks apart; set barrier: false")
        if self.dvf != "off" and not registry.get(self.scheme).codec:
            codecs = ", ".join(n for n, sp in registry.SCHEMES.items() if sp.codec)
            raise ValueError(f"dvf: {self.scheme} sends raw gradients; DVF is for {codecs}: set dvf: off")
        if self.dvf in ("low", "up", "dynamic"):
            lo, up = self.dvf_delta_low, self.dvf_delta_up
            if lo is None or up is None:
                raise ValueError(
                    f"dvf: {self.dvf} needs dvf_delta_low and dvf_delta_up (the paper's: LR 1e-4 / 2e-4, "
                    "MF 5e-4 / 1e-3, AlexNet 2e-3 / 5e-3; set them for your gradients' scale)"
                )
            if not lo < up:
                raise ValueError(f"dvf_delta_low: must be below dvf_delta_up, got {lo} and {up}")
        if self.colocate_ps and self.engine:
            raise ValueError("colocate_ps places TF's PS tasks in the worker's host; a scheme job has none: remove it")
        if self.colocate_ps and self.workers is not None and len(self.workers) != 1:
            raise ValueError(f"colocate_ps: the PSs share one worker's host; name one worker, got {self.workers}")
        return self

    @property
    def paper_bytes(self) -> float:
        return self.model_bytes if self.model_bytes is not None else PAPER_MODEL_BYTES[self.model]


class ExperimentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: SafeName = Field(default="", description="results/<name>/ (default: the file's name)")
    topology: str = Field(description="topology YAML, relative to the experiment file")
    scale: float | None = Field(default=None, gt=0, description="overrides the topology's scale")
    compress: float = Field(
        default=1.0,
        ge=1,
        description="divides the model bytes further (not the rates): communication "
        "takes 1/compress of the paper's time, for sweeps that must fit a time budget",
    )
    job: JobSpec | None = None
    jobs: list[JobSpec] | None = Field(default=None, description="several jobs at once, each with its own hosts")
    dark_ms: float | None = Field(default=None, ge=0, description="overrides the topology's ECS dark period")
    timeline: list[TimelineEvent] = Field(default_factory=list, description="events applied while the job runs")
    random_failures: RandomFailures | None = None
    budget: bool = Field(
        default=True,
        description="off: do not check the resource budget (memory, cores, the datapath's ceiling) before "
        "building; for users who know the machine holds more than the per-process estimates say",
    )

    @model_validator(mode="after")
    def _one_of_job_jobs(self) -> ExperimentSpec:
        if (self.job is None) == (self.jobs is None):
            raise ValueError("job: give either job (one job on all hosts) or jobs (a list, each naming its hosts)")
        engine_jobs = [j for j in self.all_jobs if j.engine]
        if engine_jobs and (self.jobs is not None and len(self.jobs) > 1):
            raise ValueError("jobs: a scheme job (scheme: ...) runs alone for now; give one job")
        actions = {e.action for e in self.timeline}
        if engine_jobs and "fail_ps" in actions:
            raise ValueError(
                "timeline: fail_ps restarts a TF PS job on a standby PS; a scheme job has no standby: "
                "fail the PS's cable (link_down) instead"
            )
        if "fail_ps" in actions and any(j.colocate_ps for j in self.all_jobs):
            raise ValueError("timeline: fail_ps fails a PS host; with colocate_ps the PSs run in the worker's host")
        if not engine_jobs and "shuffle" in actions:
            raise ValueError(
                "timeline: shuffle runs the background hosts' traffic beside a scheme job (job.scheme: pf, ps, ...); "
                "a TF PS job does not take it yet"
            )
        if not engine_jobs and "pause_senders" in actions:
            raise ValueError(
                "timeline: pause_senders pauses hosts inside the scheme engine; it needs a scheme job "
                "(job.scheme: ring, rat, ...); for tf-ps use link_down"
            )
        if self.jobs is not None:
            names = [j.name for j in self.jobs]
            if len(set(names)) != len(names):
                raise ValueError(f"jobs: names must differ, got {names}; set name on each job")
            if len(self.jobs) > 1 and any(j.workers is None or j.ps is None for j in self.jobs):
                raise ValueError("jobs: each of several jobs needs its workers and ps host lists")
            hosts = [h for j in self.jobs for h in (j.workers or []) + (j.ps or [])]
            if len(set(hosts)) != len(hosts):
                raise ValueError(f"jobs: a host is in two jobs ({sorted({h for h in hosts if hosts.count(h) > 1})})")
        return self

    @property
    def all_jobs(self) -> list[JobSpec]:
        """The jobs to run: `jobs`, or the single `job`."""
        return list(self.jobs) if self.jobs is not None else [self.job]  # type: ignore[list-item]

    @property
    def main(self) -> JobSpec:
        """The first job: the one `at_step` events and the figure statistics follow."""
        return self.all_jobs[0]


def load_experiment(path: str | Path) -> tuple[ExperimentSpec, TopologySpec, Path]:
    """Read an experiment file and its topology (with the scale override applied)."""
    p = Path(path)
    data = read_yaml(p)  # one-line errors: unreadable, not UTF-8, not YAML, infinite numbers
    if not isinstance(data, dict):
        raise ExperimentError(f"{p}: (top level): expected a mapping with topology and job")
    data.setdefault("name", name_from_path(p))
    try:
        exp = ExperimentSpec.model_validate(data)
    except ValidationError as err:
        raise ExperimentError(one_line_error(str(p), err, ExperimentSpec)) from None
    check_finite(exp.model_dump(), str(p))  # "inf" as a string: pydantic reads it as a float
    topo_path = (p.parent / exp.topology).resolve()
    if not topo_path.exists():
        raise ExperimentError(f"{p}: topology: {exp.topology} not found (relative to {p.parent}); fix the path")
    topo = load_spec(topo_path)
    overrides = {k: v for k, v in (("scale", exp.scale), ("dark_ms", exp.dark_ms)) if v is not None}
    if "dark_ms" in overrides and not kinds.get(topo.kind).has_ecs:
        raise ExperimentError(f"{p}: dark_ms: only a PSNet topology has an ECS; remove dark_ms")
    if overrides:
        topo = parse_spec({**topo.model_dump(), **overrides}, str(topo_path))
    return exp, topo, topo_path
