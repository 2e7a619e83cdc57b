"""Figure files (workloads/figures/<figure>.yaml): their schema, loading, and where a point's runs go.

Shared by the sweep that runs a figure and the report that draws it, so neither imports the other.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from replays.claims import Claim, check_claim
from topologies.schema import InputError, SafeName, is_safe_name, one_line_error, read_yaml
from workloads.timeline import TimelineEvent

REPO = Path(__file__).resolve().parent.parent
FIGURES = REPO / "workloads" / "figures"
TOPOLOGIES = REPO / "topologies"


class FigureError(InputError):
    """A figure name or file that cannot be replayed; the message is the one line shown to the user."""


class Point(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: SafeName
    topology: str = Field(description="file in topologies/")
    set: dict[str, Any] = Field(default_factory=dict, description="topology fields to override")
    job: dict[str, Any] = Field(default_factory=dict, description="job fields over the defaults")
    series: str = Field(default="", description="legend entry (line or bar colour)")
    group: str = Field(default="", description="x group of a bar chart / panel of a line chart")
    x: float | None = Field(default=None, description="x value of a line chart")
    compress: float | None = Field(
        default=None, gt=0, description="this point's compress (else the figure's): a wall-time knob per point"
    )
    timeline: list[TimelineEvent] = Field(
        default_factory=list, description="timeline events of this point's run (workloads.timeline)"
    )


class Quick(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    points: list[str]
    job: dict[str, Any] = Field(default_factory=dict)
    compress: float | None = None
    repeat: int = Field(default=1, ge=1, description="runs per point of the smoke path")


class Compare(BaseModel):
    """Every point run once more with other job fields (Fig. 13: the other host-time mode). These
    runs feed the report's decomposition and speed-up curve, where each is labelled by its mode;
    the claims, the bars and the headline keep the figure's own runs. The quick subset skips them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: SafeName = Field(description="the runs' folders: points/<id>.<name>/rep<k>/")
    job: dict[str, Any] = Field(description="job fields over the figure's and the point's")
    repeat: int = Field(default=1, ge=1, description="runs per point")
    points: list[str] | None = Field(default=None, description="ids of the points compared (default: every point)")

    def compares(self, point: Point) -> bool:
        return self.points is None or point.id in self.points

    def point(self, point: Point) -> Point:
        """The point as its comparison run (same series and group; its own folder)."""
        return point.model_copy(update={"id": f"{point.id}.{self.name}"})


class Figure(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    figure: SafeName
    title: str
    xlabel: str = ""
    plot: str = Field(default="bars", description="bars | lines")
    metric: Literal["bct", "gst"] = Field(
        default="bct",
        description="what is plotted and judged: bct (iteration time) or gst (synchronisation time of scheme jobs)",
    )
    scale: float | None = Field(default=None, description="default scale (else B_w / emulated_mbps)")
    emulated_mbps: float | None = Field(default=None, description="emulate every B_w at this rate")
    compress: float = 1.0
    repeat: int = Field(default=3, ge=1, description="runs per point (a 95% CI needs several)")
    repeat_as: Literal["rounds", "runs"] = Field(
        default="rounds",
        description="rounds: a point's repetitions are rounds of one job (one network, one set of TF processes: "
        "runs.rounds); runs: a separate job each",
    )
    job: dict[str, Any] = Field(default_factory=dict)
    points: list[Point]
    quick: Quick | None = None
    compare: Compare | None = Field(default=None, description="every point once more with other job fields")
    claims: list[Claim] = Field(default_factory=list, description="the paper's claims (replays.claims)")

    @model_validator(mode="after")
    def _claims_name_real_points(self) -> Figure:
        """A claim naming a series, group or paper number that does not exist is refused at load."""
        for i, claim in enumerate(self.claims):
            problem = check_claim(claim, self.points)
            if problem:
                raise ValueError(f"claims.{i}.{problem}")
        ids = {p.id for p in self.points}
        for pid in (self.compare.points or []) if self.compare else []:
            if pid not in ids:
                raise ValueError(f"compare.points: no point {pid!r}; points: {', '.join(sorted(ids))}")
        return self


def figure_names(mode: Literal["emulated", "model", "all"] = "emulated") -> list[str]:
    """Figure files by kind: `emulated` sweeps (this module's schema), `model` figures computed
    from the analytic and flow models only (`mode: model`, replays/modelfig.py), or `all`."""
    names = sorted(p.stem for p in FIGURES.glob("*.yaml"))
    if mode == "all":
        return names
    model = {n for n in names if _is_model_file(FIGURES / f"{n}.yaml")}
    return sorted(model) if mode == "model" else [n for n in names if n not in model]


#: `testbed replay GROUP`: the figures of one paper. The PSNet paper's files are named figN; the
#: other papers' start with their system's name (rat-fig6, hips-table3). `all` is every figure.
GROUPS = {"psnet": r"fig\d+", "rat": r"rat-.+", "hips": r"hips-.+", "plink": r"plink-.+"}


def group_names(group: str, mode: Literal["emulated", "model", "all"] = "all") -> list[str] | None:
    """The figures (of `mode`, as figure_names) that `testbed replay GROUP` runs, numbers in order;
    None when GROUP is not `all` or a paper of GROUPS (then it names one figure)."""
    if group != "all" and group not in GROUPS:
        return None
    names = [n for n in figure_names(mode) if group == "all" or re.fullmatch(GROUPS[group], n)]
    return sorted(names, key=lambda n: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", n)])  # fig9 < fig10


def _is_model_file(path: Path) -> bool:
    data = read_yaml(path)
    return isinstance(data, dict) and data.get("mode") == "model"


def load_figure(name: str) -> Figure:
    path = FIGURES / f"{name}.yaml"
    if not is_safe_name(name) or not path.exists():  # a name is never a path out of FIGURES
        raise FigureError(f"{name}: no such figure; figures: {', '.join(figure_names('all'))}")
    if _is_model_file(path):
        raise FigureError(f"{path}: a model figure (mode: model): `testbed replay {name}` computes it, no sweep")
    try:
        return Figure.model_validate(read_yaml(path))
    except ValidationError as err:
        raise FigureError(one_line_error(str(path), err, Figure)) from None


#: how each metric is named in tables and plots
METRIC_LABELS = {"bct": "BCT", "gst": "GST (sync per iteration)"}


def rep_dir(out: Path, point: Point, rep: int) -> Path:
    return out / "points" / point.id / f"rep{rep}"
