"""The registry of synchronisation schemes: every scheme's facts, listed once here.

A `SchemeSpec` says what a scheme is (name, paper, one-line summary), what it needs from the
network (`Need`: PS hosts, regions, address digits, PLink's clusters), how it runs (TF's PS job or
the scheme engine), which workers it takes by default, how to compile it (`compile(inputs) ->
Schedule`), why it cannot run on a network (`why_not`), its busiest-cable bound, the paper's
closed-form GST where one exists (HiPS Table 3), its message count, what the flow model sends for
it, and the job fields it defaults differently (`job_defaults`: PLink's 4 connections per peer) or
alone takes (`own_fields`). `gather` collects a scheme's inputs from a built `Network` and a job,
so the engine's runs, the flow model, the matrix and the benchmarks all compile a scheme the same
way.

Everything that chooses by scheme asks the registry: the experiment file's `scheme:` is checked
against it (`SchemeName`), the CLI's `--scheme` choices and the matrix's columns come from it, and
no module outside it (and the TF job) compares a scheme's name. Adding a scheme is its schedule
module plus one `register(SchemeSpec(...))` line below (README, "Adding a scheme"); a scheme
defined elsewhere (a test's toy scheme) registers itself and runs the same way, since the engine
hands every host its compiled steps (engine.processes) and never compiles by name.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import AfterValidator

from schemes import gst
from schemes.flat import halving_doubling, mesh, ps, ring
from schemes.hips import PIPELINE, VARIANTS, hips
from schemes.plink import CHUNKS_PER_HOST, initial_plan, racks, two_level
from schemes.rat import rat
from schemes.schedule import Schedule, ScheduleError, segmented

if TYPE_CHECKING:
    from topologies.model import Network


class Need(StrEnum):
    """What a scheme needs from the network beyond its workers and the gradient size."""

    PS_HOSTS = "PS hosts"  # dedicated parameter servers (the topology's PSs, or the job's `ps`)
    REGIONS = "regions"  # each worker's oversubscribed region per level (Kind.regions; RAT)
    DIGITS = "address digits"  # each server's address digits (Kind.address_digits; HiPS)
    CLUSTERS = "clusters"  # hosts grouped by locality (PLink: probes, the topology's racks, or random; `gather`)
    BANDWIDTH = "measured bandwidth"  # per host pair, needed before the run (nothing needs it so far)


class Runner(StrEnum):
    """What runs a scheme's synchronisation."""

    TF_JOB = "TF PS job"  # TensorFlow's own parameter-server job (tfjob/)
    ENGINE = "engine"  # the scheme engine executes the compiled schedule (engine/)


class FlowTraffic(StrEnum):
    """What the flow model (models.flow.demands) sends for a scheme in one iteration."""

    SCHEDULE = "schedule"  # the compiled schedule as a DAG of gated messages
    PS_PHASES = "ps-phases"  # every worker pushes S/P to every PS, a barrier, then the pull


class Workers(StrEnum):
    """Which hosts a scheme's job synchronises when the job names none."""

    TOPOLOGY = "the topology's workers"
    ADDRESS_GRID = "every server of the address grid"  # HiPS: all servers are workers


@dataclass(frozen=True)
class SchemeInputs:
    """Everything a scheme compiles from: hosts, gradient size, and what the network gives.

    `regions` and `digits` hold the workers' (see `gather`); `clusters` each worker's group
    (PLink: `gather` gives the topology's racks unless the job's grouping hands in others) and
    `bandwidth_mbps` pairwise bandwidth where it was measured (PLink's probes: Quicktune's weights)."""

    workers: tuple[str, ...]
    n_elems: int
    servers: tuple[str, ...] = ()
    regions: Mapping[str, Sequence[str]] = field(default_factory=dict)
    digits: Mapping[str, Sequence[int]] = field(default_factory=dict)
    both_ways: bool = False  # rings of cables run both ways at once (Kind.rings_both_ways: Torus)
    trees: int | None = None  # RAT: trees (default one per worker)
    hips_stages: str | Sequence[str] | None = None
    hips_parallel: bool = True
    hips_pipeline: int | None = None
    clusters: Mapping[str, str] | None = None  # PLink: host -> its cluster
    bandwidth_mbps: Mapping[tuple[str, str], float] | None = None  # PLink: measured per pair
    #: pipelining: every chunk cut into segments of at most this many bytes (schedule.segmented)
    segment_bytes: int | None = None

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> SchemeInputs:
        """The inputs an engine config (runs.engine_job's `cfg`, a test's) names (`bandwidth_mbps`
        there as [a, b, Mbit/s] rows: JSON has no tuple keys)."""
        bw = cfg.get("bandwidth_mbps")
        return cls(
            tuple(cfg["workers"]),
            int(cfg["n_elems"]),
            tuple(cfg.get("servers") or ()),
            cfg.get("regions") or {},
            cfg.get("digits") or {},
            bool(cfg.get("both_ways", False)),
            cfg.get("trees"),
            cfg.get("hips_stages"),
            bool(cfg.get("hips_parallel", True)),
            cfg.get("hips_pipeline"),
            clusters=cfg.get("clusters"),
            bandwidth_mbps={(a, b): float(v) for a, b, v in bw} if bw else None,
            segment_bytes=cfg.get("segment_bytes"),
        )

    def config(self) -> dict[str, Any]:
        """The PLink inputs as an engine config holds them (the inverse of `from_config`'s part)."""
        bw = self.bandwidth_mbps
        return {
            "clusters": dict(self.clusters) if self.clusters is not None else None,
            "bandwidth_mbps": [[a, b, v] for (a, b), v in sorted(bw.items())] if bw else None,
        }


@dataclass(frozen=True)
class Limits:
    """What the platform can hold, for `why_not` (a matrix file's `max_tf_processes`)."""

    max_tf_processes: int | None = None


@dataclass(frozen=True)
class SchemeSpec:
    """One scheme's facts (see the module docstring); `build` compiles its schedule."""

    name: str  # as experiment files, the CLI and the matrix write it
    title: str  # as the paper writes it, for messages
    paper: str
    summary: str
    build: Callable[[SchemeInputs], Schedule]
    needs: frozenset[Need] = frozenset()
    runner: Runner = Runner.ENGINE
    flow: FlowTraffic = FlowTraffic.SCHEDULE
    workers: Workers = Workers.TOPOLOGY
    min_workers: int = 2
    #: why it does not apply beyond a missing input (`why_not` checks the needs first)
    check: Callable[[Network, Limits], str | None] | None = None
    #: the row of HiPS Table 3 it is for these inputs and levels (schemes.gst), or None
    table3_row: Callable[[SchemeInputs, int], gst.Row | None] | None = None
    #: messages one synchronisation sends for W workers and P servers, without compiling
    messages: Callable[[int, int], int] | None = None
    #: job fields (workloads.experiment.JobSpec) whose default differs for this scheme, e.g. PLink's
    #: 4 connections per peer; a file's own value wins, and the summary records what ran
    job_defaults: Mapping[str, Any] = field(default_factory=dict)
    #: job fields only this scheme takes (another scheme's job refuses them)
    own_fields: frozenset[str] = frozenset()

    @property
    def engine(self) -> bool:
        """Whether the scheme engine runs it (else TF's PS job does)."""
        return self.runner is Runner.ENGINE

    def compile(self, inputs: SchemeInputs) -> Schedule:
        """Its schedule for these inputs (a TF job's: the schedule its bytes follow, for counting),
        its chunks cut into `inputs.segment_bytes` segments where the job pipelines."""
        return segmented(self.build(inputs), inputs.segment_bytes)

    def default_workers(self, net: Network) -> list[str]:
        """The hosts it synchronises when the job names none."""
        if self.workers is Workers.ADDRESS_GRID:
            digits = net.family.address_digits(net)
            return [n.name for n in net.hosts() if n.name in digits]
        return [n.name for n in net.workers()]

    def default_servers(self, net: Network) -> list[str]:
        """Its dedicated servers when the job names none: the topology's PSs, if it needs any."""
        return [n.name for n in net.pss()] if Need.PS_HOSTS in self.needs else []

    def why_not(self, net: Network, limits: Limits = Limits()) -> str | None:
        """One line on why it cannot (or need not) run on this network, or None where it can."""
        kind = net.spec.kind
        if Need.PS_HOSTS in self.needs and not net.pss():
            return f"{self.name} needs PS hosts; this {kind} has none"
        if Need.DIGITS in self.needs and not net.family.address_digits(net):
            return (
                f"{self.title} groups servers by address digit: only BCube and Torus servers have them, {kind} has none"
            )
        if Need.BANDWIDTH in self.needs:
            return f"{self.name} needs {Need.BANDWIDTH} before the run: nothing measures it yet"
        return self.check(net, limits) if self.check else None

    def expected_sync_s(self, net: Network, inputs: SchemeInputs, paper: bool = False) -> float:
        """Its busiest cable's bytes over that cable's rate through the controller's routes: the
        bound a perfectly pipelined run cannot beat (schemes.count)."""
        from schemes.count import expected_sync_s

        return expected_sync_s(net, self.compile(inputs), paper)

    def formula_s(self, inputs: SchemeInputs, w_bytes: float, b_mbps: float) -> float | None:
        """HiPS Table 3's GST in seconds for a gradient of `w_bytes` over NICs of `b_mbps`, where
        the scheme and the workers' address grid have a cell; else None (schemes.gst)."""
        shape = gst.grid_shape(inputs.digits)
        if shape is None or self.table3_row is None:
            return None
        n, h = shape
        row = self.table3_row(inputs, h)
        return None if row is None else gst.table3(row, n, h, inputs.both_ways).seconds(w_bytes, b_mbps)


#: every scheme, by name, in the order choices are listed
SCHEMES: dict[str, SchemeSpec] = {}


def register(spec: SchemeSpec) -> SchemeSpec:
    """Add a scheme (the entries below; a plugin's or a test's own); returns it."""
    if SCHEMES.get(spec.name, spec) is not spec:
        raise ValueError(f"scheme {spec.name} is registered already; pick another name")
    SCHEMES[spec.name] = spec
    return spec


def unregister(name: str) -> None:
    """Remove a scheme `register` added (a test cleaning up after itself)."""
    SCHEMES.pop(name, None)


def names() -> list[str]:
    """Every scheme's name, in registry order."""
    return list(SCHEMES)


def get(name: str) -> SchemeSpec:
    """The scheme called `name`; a ScheduleError listing the known ones otherwise."""
    try:
        return SCHEMES[name]
    except (KeyError, TypeError):
        raise ScheduleError(f"unknown scheme {name!r}; schemes: {', '.join(SCHEMES)}") from None


def check_name(value: str) -> str:
    """`value` if it names a scheme; the one-line pydantic message listing the names otherwise."""
    if value not in SCHEMES:
        raise ValueError(f"unknown scheme {value!r}; use one of {', '.join(SCHEMES)}")
    return value


#: a file's scheme field: any registered scheme's name
SchemeName = Annotated[str, AfterValidator(check_name)]


def gather(
    net: Network,
    scheme: str | SchemeSpec,
    n_elems: int,
    workers: Sequence[str] | None = None,
    servers: Sequence[str] | None = None,
    regions: Mapping[str, Sequence[str]] | None = None,
    **options: Any,
) -> SchemeInputs:
    """A scheme's inputs from a built network and a job: its workers and servers (the job's, else
    the scheme's defaults), the workers' regions (`net.family.regions`, or `regions`) and address
    digits (`net.family.address_digits`), whether rings run both ways, and the job's options
    (`trees`, `hips_stages`, `hips_parallel`, `hips_pipeline`, `segment_bytes`; PLink's `clusters`
    and `bandwidth_mbps`). A scheme that needs clusters and is given none gets the workers' racks
    in the topology model (schemes.plink.racks: the ground truth)."""
    spec = get(scheme) if isinstance(scheme, str) else scheme
    ws = tuple(workers) if workers is not None else tuple(spec.default_workers(net))
    ss: tuple[str, ...] = ()
    if Need.PS_HOSTS in spec.needs:
        ss = tuple(servers) if servers is not None else tuple(spec.default_servers(net))
    region_of = regions if regions is not None else net.family.regions(net)
    digits = net.family.address_digits(net)
    if Need.CLUSTERS in spec.needs and options.get("clusters") is None:
        options["clusters"] = racks(net, ws)
    return SchemeInputs(
        ws,
        n_elems,
        ss,
        regions={w: tuple(region_of.get(w, ())) for w in ws},
        digits={w: tuple(digits[w]) for w in ws if w in digits},
        both_ways=net.family.rings_both_ways,
        **options,
    )


def compile_from_config(cfg: Mapping[str, Any]) -> Schedule:
    """The schedule an engine config names (its `scheme` and inputs)."""
    return get(cfg["scheme"]).compile(SchemeInputs.from_config(cfg))


# --- the entries --------------------------------------------------------------------------------
def _regionless(net: Network, _: Limits) -> str | None:
    if not any(net.family.regions(net).values()):
        return f"no oversubscribed region on this {net.spec.kind}: RAT's trees are depth one, the schedule of mesh"
    return None


def _tf_processes(net: Network, limits: Limits) -> str | None:
    procs = len(net.workers()) + len(net.pss())
    if limits.max_tf_processes is not None and procs > limits.max_tf_processes:
        return (
            f"tf-ps starts a TF process per host (~650 MB, 2 cores here): {procs} > max_tf_processes "
            f"{limits.max_tf_processes}"
        )
    return None


def _hips(variant: str, i: SchemeInputs) -> Schedule:
    pipeline = PIPELINE if i.hips_pipeline is None else i.hips_pipeline
    return hips(i.workers, i.n_elems, i.digits, i.hips_stages, i.hips_parallel, i.both_ways, variant, pipeline)


def _hips_row(variant: str, i: SchemeInputs, levels: int) -> gst.Row | None:
    return gst.hips_row(variant, i.hips_stages, i.hips_parallel, levels, i.both_ways)


def plink_messages(w: int) -> int:
    """2(W - 1) per master chunk (members to LMs and back, LMs to the GM and back), chunk_count chunks."""
    return 2 * (w - 1) * CHUNKS_PER_HOST * w


def _halving_doubling_messages(w: int, _: int) -> int:
    p = 1 << (w.bit_length() - 1)  # the power of two; the w - p extra workers fold in and out
    return 2 * p * (p - 1) + 2 * (w - p) * p


def _plink(i: SchemeInputs) -> Schedule:
    """2LHA over the inputs' clusters (else the workers' first-level regions, else one group),
    masters weighted by Quicktune where pairwise bandwidth was measured."""
    groups = dict(i.clusters or {})
    if not groups:
        groups = {w: str((tuple(i.regions.get(w, ())) or ("all",))[0]) for w in i.workers}
    plan = initial_plan(i.workers, groups, i.n_elems, i.bandwidth_mbps)
    return two_level(i.workers, i.n_elems, groups, assignment=plan)


_HIPS_PAPER = "HiPS (Geng et al., NetAI 2018), Algorithms 1-2 and Table 3"
_PLINK_PAPER = "PLink (Luo, West, Krishnamurthy, Ceze, Nelson, MLSys 2020), §3.2 and §4.1-4.3"
_RAT_PAPER = "RAT (Wan, Hu, Zhang, ZTE Technology Journal 2020), Table 1"

TF_PS = register(
    SchemeSpec(
        "tf-ps", "TF PS job", "the PSNet paper's job: TensorFlow's parameter servers (tfjob/)",
        "TensorFlow's PS job: workers push gradients to the PSs and pull parameters; counted as the ps schedule",
        lambda i: ps(i.workers, i.n_elems, i.servers),
        needs=frozenset({Need.PS_HOSTS}), runner=Runner.TF_JOB, flow=FlowTraffic.PS_PHASES, min_workers=1,
        check=_tf_processes, messages=lambda w, p: 2 * w * p,
    )
)  # fmt: skip
register(
    SchemeSpec(
        "ps", "PS", "the parameter server (Li et al., OSDI 2014): RAT's and HiPS's PS baseline",
        "P dedicated servers each sum S/P from every worker and send it back (push, then pull)",
        lambda i: ps(i.workers, i.n_elems, i.servers),
        needs=frozenset({Need.PS_HOSTS}), min_workers=1, messages=lambda w, p: 2 * w * p,
    )
)  # fmt: skip
register(
    SchemeSpec(
        "mesh", "MS", "colocated PS (RAT's PS baseline; HiPS's MS, Table 3)",
        "worker i serves shard i: every worker sends shard i to worker i, which sends the sum back",
        lambda i: mesh(i.workers, i.n_elems),
        table3_row=lambda i, levels: "ms", messages=lambda w, p: 2 * w * (w - 1),
    )
)  # fmt: skip
register(
    SchemeSpec(
        "ring", "ring allreduce", "ring allreduce (Baidu; RAT Table 1; HiPS's RS, Table 3)",
        "W-1 reduce-scatter steps, then W-1 all-gather steps, each to the next worker",
        lambda i: ring(i.workers, i.n_elems),
        table3_row=lambda i, levels: "rs", messages=lambda w, p: 2 * w * (w - 1),
    )
)  # fmt: skip
register(
    SchemeSpec(
        "halving-doubling", "halving-doubling", "recursive halving and doubling (Rabenseifner; MPICH)",
        "log2 W exchange steps each way; non-powers of two fold the extra workers in first",
        lambda i: halving_doubling(i.workers, i.n_elems),
        messages=_halving_doubling_messages,
    )
)  # fmt: skip
register(
    SchemeSpec(
        "rat", "RAT", _RAT_PAPER,
        "a tree per worker, one aggregator per oversubscribed region and level: one copy crosses each boundary",
        lambda i: rat(i.workers, i.n_elems, i.regions or {w: () for w in i.workers}, i.trees),
        needs=frozenset({Need.REGIONS}), check=_regionless,
        messages=lambda w, p: 2 * w * (w - 1),
    )
)  # fmt: skip
register(
    SchemeSpec(
        "plink", "PLink 2LHA", _PLINK_PAPER,
        "two-level hierarchical aggregation: members to their group's local master, local masters to the "
        "chunk's global master and back; groups from probes (ProbeEmbed), the racks or at random",
        _plink,
        needs=frozenset({Need.CLUSTERS}),
        messages=lambda w, p: plink_messages(w),
        job_defaults={
            "streams": 4, "segment_kb": 64.0, "plink_groups": "probe", "plink_probe_s": 1.0, "autotune": False,
        },
        own_fields=frozenset({"plink_groups", "plink_probe_s", "autotune"}),
    )
)  # fmt: skip
for _variant, _fixed in VARIANTS.items():  # hips, and the variants that fix every stage's method
    register(
        SchemeSpec(
            _variant, "HiPS", _HIPS_PAPER,
            f"HiPS with {_fixed.upper()} in every stage" if _fixed else
            "a stage per address digit (ms/rs/ps per level, RS by default), h processes rotating the levels",
            functools.partial(_hips, _variant),
            needs=frozenset({Need.DIGITS}), workers=Workers.ADDRESS_GRID,
            table3_row=functools.partial(_hips_row, _variant),
        )
    )  # fmt: skip

#: the scheme a job runs when its file names none: TensorFlow's PS job (the PSNet paper's)
DEFAULT = TF_PS.name

__all__ = [
    "DEFAULT",
    "SCHEMES",
    "FlowTraffic",
    "Limits",
    "Need",
    "Runner",
    "SchemeInputs",
    "SchemeName",
    "SchemeSpec",
    "Workers",
    "check_name",
    "compile_from_config",
    "gather",
    "get",
    "names",
    "register",
    "unregister",
]
