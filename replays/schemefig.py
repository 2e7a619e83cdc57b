"""Model figures whose points are scheme jobs on the flow model (`mode: model`, `traffic: schemes`).

RAT's and HiPS's effects live at sizes this emulator cannot hold (RAT Fig. 6: racks of tens of
hosts; Fig. 7: 64 servers; HiPS Table 3: up to 65,536 servers). These figures put the same scheme
jobs the engine runs on the networks the paper describes, built by the one topology model
(topologies/), and time them on the flow model (SimGrid, exact max-min at the paper's rates):
each point is `testbed simulate --paper --exact` of one job (runs.simulate.Plan and run, so the
schedule is the registry's compile with the job's options, runs.engine_job.scheme_options, and
the routes are the controller's). A point is a group (a network: one topology file with `set`
fields) times a series (a job: its scheme and options); RAT's paused senders
(`pauses`: k hosts, re-drawn every d, seeds) are drawn by engine.pauses.pause_plan, the plan the
emulated runs use, and held by the flow model (models.flow.simgrid: a paused host's messages
stop in flight and wait to start until its pause ends).

This module is the file's schema and one point's computation; replays.schemefig_replay runs a
figure, replays.schemefig_report writes what it shows. The PSNet figures' model (Eqs. 5-7 beside
the PS job, panels over W) is replays.modelfig.
"""

from __future__ import annotations

import logging
import re
import statistics
import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from replays.claims import Best, Claim, FasterThan, Monotone, WithinPercentOf, check_claim
from replays.figure import FIGURES, TOPOLOGIES, FigureError, figure_names
from topologies.schema import SafeName, is_safe_name, one_line_error, read_yaml

LOG = logging.getLogger(__name__)

#: the claim types a scheme model figure judges, group by group (as an emulated bar figure does)
SCHEME_CLAIMS = (FasterThan, Best, WithinPercentOf, Monotone)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


class Pauses(BaseModel):
    """RAT's failure model (its Fig. 7): k hosts drawn at random send nothing for d seconds, then
    k others are drawn (engine.pauses.pause_plan), from the synchronisation's start."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    k: int = Field(ge=1, description="hosts paused at once")
    every_s: float = Field(gt=0, description="d: seconds each draw lasts")
    seeds: list[int] = Field(default=[1], min_length=1, description="one simulation per seed; the point is their mean")
    for_s: float | None = Field(default=None, gt=0, description="how long the draws go on (default 1000 d)")

    @property
    def duration_s(self) -> float:
        return self.for_s if self.for_s is not None else 1000 * self.every_s


class Group(BaseModel):
    """One x group: a network (a topology file and the fields that size it) and what happens on it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    group: str = Field(min_length=1, description="its label (the x axis)")
    topology: str = Field(description="file in topologies/")
    set: dict[str, Any] = Field(default_factory=dict, description="topology fields over the file's")
    job: dict[str, Any] = Field(default_factory=dict, description="job fields for every series in this group")
    pauses: Pauses | None = None
    x: float | None = Field(default=None, description="a number for the group (o, k), for monotone claims")
    omit: list[str] = Field(default_factory=list, description="series not simulated on this network (a cap)")


class Series(BaseModel):
    """One bar per group: a job (its scheme and options) on the group's network."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    series: str = Field(min_length=1)
    job: dict[str, Any] = Field(description="job fields: scheme, options (over the figure's and the group's)")
    workers: Literal["job", "address-grid"] = Field(
        default="job", description="address-grid: every server of a BCube/Torus address grid (HiPS's MS, RS)"
    )


class SchemeQuick(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    groups: list[str] = Field(min_length=1)
    seeds: int | None = Field(default=None, ge=1, description="at most this many seeds per paused group")


class SchemeModelFigure(BaseModel):
    """The file's schema (workloads/figures/README.md, "Scheme model figures")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    figure: SafeName
    mode: Literal["model"]
    traffic: Literal["schemes"]
    title: str
    xlabel: str = ""
    worker_mbps: float = Field(gt=0, description="B: a host NIC's rate at the paper's scale (every group)")
    latency_us: float = Field(ge=0, description="one cable's latency (every group)")
    job: dict[str, Any] = Field(description="job fields for every point (model, segment_kb...)")
    groups: list[Group] = Field(min_length=1)
    series: list[Series] = Field(min_length=1)
    claims: list[Claim] = Field(default_factory=list)
    notes: str = Field(default="", description="where it lands against the paper and why (the report quotes it)")
    quick: SchemeQuick

    @model_validator(mode="after")
    def _names(self) -> SchemeModelFigure:
        groups = [g.group for g in self.groups]
        series = [s.series for s in self.series]
        for what, names in (("groups", groups), ("series", series)):
            dup = {n for n in names if names.count(n) > 1}
            if dup:
                raise ValueError(f"{what}: {', '.join(sorted(dup))} appear twice; give each a label of its own")
        for g in self.groups:
            if not is_safe_name(g.topology.removesuffix(".yaml")) or not (TOPOLOGIES / g.topology).is_file():
                raise ValueError(f"groups: {g.group}: topology {g.topology!r} is no file in topologies/")
        for i, c in enumerate(self.claims):
            if not isinstance(c, SCHEME_CLAIMS):
                raise ValueError(f"claims.{i}.type: a scheme model figure judges faster_than, best, "
                                 f"within_percent_of and monotone, not {c.type}")  # fmt: skip
            problem = check_claim(c, [p.point for p in self.points()])
            if problem:
                raise ValueError(f"claims.{i}.{problem}")
        for g in self.groups:
            wrong = [n for n in g.omit if n not in series]
            if wrong:
                raise ValueError(f"groups: {g.group}: omit: no series {', '.join(map(repr, wrong))}")
        unknown = [g for g in self.quick.groups if g not in groups]
        if unknown:
            raise ValueError(f"quick.groups: no group {', '.join(map(repr, unknown))}; groups: {', '.join(groups)}")
        return self

    def points(self, quick: bool = False) -> list[PointRef]:
        """Every (group, series) of the figure (the quick subset's groups with `quick`)."""
        keep = set(self.quick.groups) if quick else None
        return [
            PointRef(self, g, s)
            for g in self.groups
            if keep is None or g.group in keep
            for s in self.series
            if s.series not in g.omit
        ]

    def seeds(self, group: Group, quick: bool) -> list[int | None]:
        """The pause draws' seeds a group's points run (one simulation each); [None] without pauses."""
        if group.pauses is None:
            return [None]
        seeds = group.pauses.seeds
        return seeds[: self.quick.seeds] if quick and self.quick.seeds else seeds


class PointRef:
    """One (group, series) of a figure, as a claim reads its points (replays.claims.PointLike)."""

    def __init__(self, fig: SchemeModelFigure, group: Group, series: Series) -> None:
        self.fig, self.g, self.s = fig, group, series

    @property
    def point(self) -> PointRef:
        return self

    @property
    def id(self) -> str:
        return f"{slug(self.g.group)}-{slug(self.s.series)}"

    @property
    def series(self) -> str:
        return self.s.series

    @property
    def group(self) -> str:
        return self.g.group

    @property
    def x(self) -> float | None:
        return self.g.x

    def topology_data(self) -> dict[str, Any]:
        """The group's topology fields: the file's, its `set`, the figure's rate and latency."""
        data = read_yaml(TOPOLOGIES / self.g.topology)
        common = {"worker_mbps": self.fig.worker_mbps, "delay_ms": self.fig.latency_us / 1000}
        return {**data, **common, "name": f"{self.fig.figure}-{slug(self.g.group)}", **self.g.set}

    def job_data(self) -> dict[str, Any]:
        return {**self.fig.job, **self.g.job, **self.s.job}

    def spec(self, seed: int | None) -> dict[str, Any]:
        """Everything a point's number depends on (a kept point is reused while this is unchanged)."""
        pauses = self.g.pauses.model_dump() | {"seed": seed} if self.g.pauses else None
        pauses = {k: v for k, v in pauses.items() if k != "seeds"} if pauses else None
        return {
            "topology": self.topology_data(),
            "job": self.job_data(),
            "workers": self.s.workers,
            "pauses": pauses,
        }


def is_scheme_figure(name: str) -> bool:
    """Whether workloads/figures/<name>.yaml is a model figure of scheme jobs (`traffic: schemes`)."""
    if name not in figure_names("model"):
        return False
    data = read_yaml(FIGURES / f"{name}.yaml")
    return isinstance(data, dict) and data.get("traffic") == "schemes"


def load_scheme_figure(name: str) -> SchemeModelFigure:
    """The scheme model figure `name`, validated; FigureError with one line otherwise."""
    if not is_scheme_figure(name):
        known = [n for n in figure_names("model") if is_scheme_figure(n)]
        raise FigureError(f"{name}: no such scheme model figure; they are: {', '.join(known)}")
    path = FIGURES / f"{name}.yaml"
    try:
        return SchemeModelFigure.model_validate(read_yaml(path))
    except ValidationError as err:
        raise FigureError(one_line_error(str(path), err, SchemeModelFigure)) from None


# --- one point ------------------------------------------------------------------------------------
def compute_point(spec: dict[str, Any], source: str) -> dict[str, Any]:
    """One simulation of a point's spec (PointRef.spec): the job's synchronisation on the flow
    model at the paper's rates and bytes, beside its busiest cable's bound, HiPS Table 3's
    formula where the scheme and network have one, and the bytes that cross each region level."""
    from engine.pauses import pause_plan
    from runs.engine_job import job_hosts, scheme_options
    from runs.simulate import Plan, run, topology_for_simulation
    from schemes.registry import gather
    from schemes.registry import get as get_scheme
    from topologies.build import build_network
    from workloads.experiment import PAPER_MODEL_BYTES, ExperimentError, JobSpec

    t0 = time.perf_counter()
    topo = topology_for_simulation(spec["topology"], source)
    net = build_network(topo, source)
    try:
        job = JobSpec.model_validate(spec["job"])
    except ValidationError as err:
        raise FigureError(one_line_error(source, err, JobSpec)) from None
    if spec["workers"] == "address-grid":
        digits = net.family.address_digits(net)
        job = job.model_copy(update={"workers": [h.name for h in net.hosts() if h.name in digits]})
    try:
        workers, pss = job_hosts(job, net, source)
    except ExperimentError as err:
        raise FigureError(str(err)) from None
    model_bytes = job.model_bytes or PAPER_MODEL_BYTES[job.model]
    pauses: dict[str, list[tuple[float, float]]] = {}
    if spec["pauses"]:
        p = spec["pauses"]
        pauses = pause_plan(workers + pss, p["k"], p["every_s"], p["seed"], 0.0, p["for_s"] or 1000 * p["every_s"])
    plan = Plan(
        name=topo.name or source, net=net, job=job, workers=workers, pss=pss, scheme=job.scheme, width=1.0,
        model_bytes=model_bytes, compress=1.0, paper=True, pauses=pauses,
    )  # fmt: skip
    out = run(plan, calibrated=False)
    scheme = get_scheme(job.scheme)
    options = scheme_options(job)
    inputs = gather(net, scheme, max(len(workers), 1), workers, pss, **options)
    nic_mbps = min(ln.paper_mbps for w in workers for ln in net.links_of(w))
    formula = scheme.formula_s(inputs, model_bytes, nic_mbps)
    regions = net.family.regions(net)
    levels = max((len(v) for v in regions.values()), default=0)
    cross = [0.0] * levels
    t = out.traffic
    for a, b, n in zip(t.src, t.dst, t.nbytes, strict=True):
        for lvl in range(levels):
            ra, rb = regions.get(a, ()), regions.get(b, ())
            if lvl < len(ra) and lvl < len(rb) and ra[lvl] != rb[lvl]:
                cross[lvl] += n
    r = out.result
    paused_until = max((b for ws in pauses.values() for _, b in ws), default=None)
    return {
        "spec": spec,
        "scheme": job.scheme,
        "hosts": len(net.hosts()),
        "W": len(workers),
        "P": len(pss),
        "model_bytes": model_bytes,
        "nic_mbps": nic_mbps,
        "gst_s": r.iteration_s,
        "bound_s": out.bound_s,
        "bound_cable": out.bound_cable,
        "formula_s": formula,
        "cross_region_bytes": cross,
        "total_bytes": float(sum(t.nbytes)),
        "messages": r.messages,
        "links": r.links,
        "routes_s": out.routes.seconds,
        "schedule_s": out.traffic_s,
        "sim_s": r.wall_s,
        "max_rss_mb": r.max_rss_mb,
        "config": out.config_note,
        "pauses_end_s": paused_until,
        "wall_s": time.perf_counter() - t0,
    }


def fold(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """A point's value over its seeds: the mean GST, with the spread; the rest from the first run."""
    gsts = [r["gst_s"] for r in runs]
    return {
        **runs[0],
        "gst_s": statistics.fmean(gsts),
        "gst_min_s": min(gsts),
        "gst_max_s": max(gsts),
        "seeds": len(runs),
        "wall_s": sum(r["wall_s"] for r in runs),
    }
