"""Model-only figures (`mode: model` in workloads/figures/<name>.yaml): the PSNet paper's Figs. 6-7.

Section 4.2 of the paper evaluates PSNet at a scale its testbed could not hold, from its own
analytic model; this machine cannot emulate past ~30 hosts either. So these figures run no
emulation: each point is the analytic T_push + T_pull (Eqs. 5-7, models.bct_scale) and, up
to a stated number of workers, the flow model's (models.flow.paper_scale) beside it, on a
network built by topologies.build from a spec this module sizes per point (a `layout`), so both
rest on the same topology model and the same routes as `testbed run` and `testbed simulate`.

This module is the file's schema, the sizing and one point's computation; replays.modelreplay
runs a figure (`testbed replay fig6`), replays.modelfig_report writes what it shows.
"""

from __future__ import annotations

import json
import logging
import re
import time
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from replays.claims import Claim, Monotone, WithinPercentOf
from replays.figure import FIGURES, FigureError, figure_names
from topologies import kinds
from topologies.build import build_network
from topologies.kinds.fattree import fattree_k  # noqa: F401  (re-exported: the tests size FatTrees by it)
from topologies.model import Kind, PaperJob
from topologies.schema import SafeName, one_line_error, parse_spec, read_yaml

LOG = logging.getLogger(__name__)

#: the emulator's rate ceiling is checked even on specs it never runs: rates are divided by this
#: (the flow model and the analytic model read the paper's rates, so the value changes nothing)
SPEC_SCALE = 1000.0


def layout_kind(name: str) -> Kind:
    """The kind whose layouts include `name` (topologies.model.Kind.layouts); ValueError otherwise."""
    for kind in kinds.KINDS.values():
        if name in kind.layouts:
            return kind
    known = [x for k in kinds.KINDS.values() for x in k.layouts]
    raise ValueError(f"{name!r} is no kind's layout; use one of {', '.join(known)}")


def _check_layout(name: str) -> str:
    layout_kind(name)
    return name


#: a series' layout: one of the registered kinds' (PSNet's one or two modules, FatTree's two pods)
Layout = Annotated[str, AfterValidator(_check_layout)]


class Series(BaseModel):
    """One line of a panel: a layout of the job on a topology, sized per point by W."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: str
    layout: Layout
    K: float = Field(default=1.0, gt=0, description="PSNet: B_s = K x B_w")
    r: float = Field(default=1.0, ge=1, description="FatTree: oversubscription at the ToR layer")
    paper_literal: bool = Field(default=True, description="Eq. 6 as printed (P - 1), else as derived (P - P1)")
    flowmodel: bool = Field(default=True, description="put flow-model points beside this line")
    set: dict[str, Any] = Field(default_factory=dict, description="more topology fields")

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.label.lower()).strip("-")


class Panel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: SafeName
    title: str
    series: list[Series] = Field(min_length=1)


#: the claim types a model figure's curves can be judged by (replays.claims), each with `per_x`:
#: judged at every W, since every series has one value per W
MODEL_CLAIMS = (Monotone, WithinPercentOf)


class ModelQuick(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    workers: list[int] = Field(min_length=1)
    flowmodel_max_workers: int = Field(ge=0)


class ModelFigure(BaseModel):
    """The file's schema (workloads/figures/README.md, "Model figures")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    figure: SafeName
    mode: Literal["model"]
    title: str
    xlabel: str = "workers W"
    model_mb: float = Field(gt=0, description="S in MB (10^6 bytes)")
    latency_us: float = Field(ge=0, description="one link's latency")
    worker_mbps: float = Field(gt=0, description="B_w")
    tors: int = Field(ge=1, description="R")
    ps: int = Field(ge=1, description="P, the job's parameter servers")
    workers: list[int] = Field(min_length=1, description="the x axis: W")
    flowmodel_max_workers: int = Field(ge=0, description="flow-model points up to this W (analytic beyond)")
    panels: list[Panel] = Field(min_length=1)
    claims: list[Claim] = Field(default_factory=list, description="replays.claims types; a group is a panel")
    quick: ModelQuick

    @model_validator(mode="after")
    def _names(self) -> ModelFigure:
        """Each claim is of a type a model figure judges, at every W, in panels that exist and
        hold every series it names (its `groups` are panel ids; none: every panel)."""
        panels = {p.id: {s.label for s in p.series} for p in self.panels}
        for i, c in enumerate(self.claims):
            if not isinstance(c, MODEL_CLAIMS):
                raise ValueError(f"claims.{i}.type: a model figure judges monotone and within_percent_of, not {c.type}")
            if not c.per_x:
                raise ValueError(f"claims.{i}.per_x: a model figure's claims are judged at every W; set per_x: true")
            for g in c.groups or panels:
                if g not in panels:
                    raise ValueError(f"claims.{i}.groups: no panel {g!r}; panels: {', '.join(panels)}")
                for name in c.named_series():
                    if name not in panels[g]:
                        raise ValueError(f"claims.{i}: panel {g} has no series {name!r}")
        return self


def load_model_figure(name: str) -> ModelFigure:
    """The model figure `name` (workloads/figures/<name>.yaml with `mode: model`), validated."""
    if name not in figure_names("model"):  # also keeps a name from being a path out of FIGURES
        raise FigureError(f"{name}: no such model figure; model figures: {', '.join(figure_names('model'))}")
    path = FIGURES / f"{name}.yaml"
    try:
        return ModelFigure.model_validate(read_yaml(path))
    except ValidationError as err:
        raise FigureError(one_line_error(str(path), err, ModelFigure)) from None


# --- sizing: one spec per (series, W), through the topology model --------------------------------
def spec_data(fig: ModelFigure, series: Series, workers: int) -> dict[str, Any]:
    """The topology fields of a point: the figure's paper parameters, the layout's shape at W
    (the kind that owns the layout sizes it)."""
    common = {"worker_mbps": fig.worker_mbps, "delay_ms": fig.latency_us / 1000, "scale": SPEC_SCALE}
    name = f"{fig.figure}-{series.layout}-w{workers}"  # no label: two panels' same line is one point
    job = PaperJob(workers, fig.ps, tors=fig.tors, K=series.K, r=series.r, worker_mbps=fig.worker_mbps)
    try:
        shape = layout_kind(series.layout).layout(series.layout, job)
    except ValueError as err:
        raise FigureError(f"{fig.figure}: {series.label}: {err}") from None
    return {"name": name, **shape, **common, **series.set}


# --- points ---------------------------------------------------------------------------------------
#: spec fields that set rates only: points differing in nothing else share one routing
RATE_FIELDS = ("oversubscription", "K", "inter_module_mbps", "name")


def compute_point(
    fig: ModelFigure, series: Series, workers: int, flow_cap: int, routed: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Analytic and (up to `flow_cap` workers) flow-model T_push + T_pull of one point.
    `routed` keeps this replay's routings by shape (RATE_FIELDS left out) to reuse across r, K."""
    from models.bct_scale import analytic_comm
    from models.flow.paper_scale import job_routes, rebind, simulate_ps_job

    data = spec_data(fig, series, workers)
    source = f"{FIGURES / fig.figure}.yaml ({series.label}, W={workers})"
    t0 = time.perf_counter()
    net = build_network(parse_spec(data, source), source)
    model_bytes = fig.model_mb * 1e6
    shape = json.dumps({k: v for k, v in data.items() if k not in RATE_FIELDS}, sort_keys=True)
    routed = {} if routed is None else routed
    job = rebind(routed[shape], net) if shape in routed else job_routes(net, model_bytes)
    routed[shape] = job
    a = analytic_comm(net, job.routes, model_bytes, job.workers, job.pss, paper_literal=series.paper_literal)
    point: dict[str, Any] = {
        "spec": data,
        "W": workers,
        "P": len(job.pss),
        "hosts": len(net.hosts()),
        "equation": a.equation,
        "hops": a.hops,
        "c": a.c,
        "analytic_s": a.t_comm_s,
        "flowmodel_s": None,
        "busiest_s": None,
        "flowmodel_note": "",
    }
    if series.flowmodel and workers <= flow_cap:
        f = simulate_ps_job(net, job)
        point.update(flowmodel_s=f.t_comm_s, busiest_s=f.busiest_s, flowmodel_note=f.config, messages=f.messages)
    elif series.flowmodel:
        point["flowmodel_note"] = f"W > {flow_cap}: analytic only (the figure's flow-model cap)"
    point["wall_s"] = time.perf_counter() - t0
    return point
