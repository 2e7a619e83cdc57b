"""The topology x scheme matrix: every (topology, scheme) cell that makes sense, at one rate and one
gradient size, into one table and one heat map.

    testbed matrix [workloads/matrix/matrix.yaml] [--quick] [--repeat N] [--fresh] [--report-only]

This module reads the file, decides each cell and runs the cells; replays.matrix_report writes
the table (matrix.md, .csv, .json) and the heat map (matrix.png).

A matrix file (workloads/matrix/README.md) names the topologies (files in topologies/ with
overrides), the schemes (the columns: any names of the scheme registry, schemes/registry.py) and
one job. Each cell either runs or says why it does not apply (`why_not`, the registry's reasons):
HiPS needs servers with address digits (BCube, Torus); ps and tf-ps need PS hosts; tf-ps starts
one TF process per host (~650 MB, this machine's 2 cores), so only topologies with at most
`max_tf_processes` hosts; RAT on a network without an oversubscribed region is depth-one trees,
the schedule of mesh.

The cells that run are points of a generated figure (replays.figure.Point, metric gst) and go
through the sweep's code (replays.sweep: point_topology, point_experiment, run_repetition ->
runs.runner.run_job) into results/<matrix>/points/<cell>/rep<k>/, so a matrix resumes as a
sweep does: finished cells are kept. Unlike a figure, no cell is re-run at a larger scale: every cell
runs at the file's rate with the same gradient, and an unfaithful cell keeps its verdict. A cell
whose offered load (workloads.budget.offered_load_mbps, scheme-aware) exceeds the emulator's budget
makes the file refused, naming the cell and the highest rate that fits.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from emulation import tso
from replays import figsummary, sweep
from replays.figure import REPO, TOPOLOGIES, Figure, Point, rep_dir
from replays.provenance import capture
from runs.engine_job import prepare
from schemes.registry import Limits, SchemeName
from schemes.registry import get as get_scheme
from topologies.build import build_network
from topologies.files import write_json_atomic
from topologies.model import Network
from topologies.schema import InputError, SafeName, TopologySpec, one_line_error, read_yaml
from workloads.budget import OVERRIDE_TOPO, check_job
from workloads.experiment import ExperimentError, JobSpec

LOG = logging.getLogger(__name__)
MATRICES = REPO / "workloads" / "matrix"
DEFAULT_FILE = MATRICES / "matrix.yaml"
#: job fields a matrix sets per cell or per topology, not in its `job`
CELL_FIELDS = ("scheme", "workers", "ps")


class MatrixError(InputError):
    """A matrix file that cannot run; the message is the one line shown to the user."""


class MatrixTopology(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    id: SafeName
    label: str = Field(description="row label of the table and heat map")
    topology: str = Field(description="file in topologies/")
    set: dict[str, Any] = Field(default_factory=dict, description="topology fields to override")


class MatrixQuick(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    topologies: list[str]
    schemes: list[SchemeName]
    job: dict[str, Any] = Field(default_factory=dict, description="job fields over the matrix's job")
    repeat: int = Field(default=1, ge=1)


class MatrixSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    matrix: SafeName = Field(description="results/<matrix>/ (and <matrix>-quick/)")
    title: str
    emulated_mbps: float = Field(gt=0, description="every topology's B_w emulated at this rate (scale = B_w / it)")
    compress: float = Field(default=1.0, ge=1, description="divides the model bytes further (not the rates)")
    repeat: int = Field(default=1, ge=1, description="runs per cell (1: the CI is over the run's iterations)")
    max_tf_processes: int = Field(default=8, ge=2, description="tf-ps runs only where W + P is at most this")
    job: dict[str, Any] = Field(description="one job for every cell (workloads/README.md), without scheme")
    topologies: list[MatrixTopology]
    schemes: list[SchemeName]
    quick: MatrixQuick | None = None

    @model_validator(mode="after")
    def _names_exist(self) -> MatrixSpec:
        cell = [f for f in CELL_FIELDS if f in self.job]
        if cell:
            raise ValueError(f"job.{cell[0]}: the matrix sets it per cell; remove it from job")
        ids = [t.id for t in self.topologies]
        if len(set(ids)) != len(ids):
            raise ValueError(f"topologies: ids must differ, got {ids}")
        if self.quick:
            unknown = [t for t in self.quick.topologies if t not in ids]
            if unknown:
                raise ValueError(f"quick.topologies: {unknown[0]} is no topology id of the matrix ({', '.join(ids)})")
            extra = [s for s in self.quick.schemes if s not in self.schemes]
            if extra:
                raise ValueError(f"quick.schemes: {extra[0]} is not in the matrix's schemes")
        return self


def load_matrix(path: Path) -> MatrixSpec:
    """A matrix file, checked: schema, then every topology file and the job (one-line errors)."""
    if not path.exists():
        raise MatrixError(f"{path}: no such matrix file; shipped: {', '.join(str(p) for p in MATRICES.glob('*.yaml'))}")
    try:
        m = MatrixSpec.model_validate(read_yaml(path))
    except ValidationError as err:
        raise MatrixError(one_line_error(str(path), err, MatrixSpec)) from None
    for i, t in enumerate(m.topologies):
        if not (TOPOLOGIES / t.topology).exists():
            raise MatrixError(f"{path}: topologies.{i}.topology: {t.topology} is not a file in {TOPOLOGIES}")
    try:
        JobSpec.model_validate(m.job)
    except ValidationError as err:
        raise MatrixError(one_line_error(f"{path} (job)", err, JobSpec)) from None
    return m


@dataclass
class Cell:
    """One (topology, scheme) cell: the point it runs as, or why it does not apply."""

    topo: MatrixTopology
    scheme: str
    point: Point
    why: str = ""  # non-empty: the cell does not apply, and this says why
    spec: TopologySpec | None = None
    source: str = ""

    @property
    def applies(self) -> bool:
        return not self.why


@dataclass
class MatrixRun:
    """A matrix's cells and where their runs are: what the report reads."""

    spec: MatrixSpec
    fig: Figure
    cells: list[Cell]
    out: Path
    reps: int
    quick: bool
    path: Path = DEFAULT_FILE

    @property
    def source(self) -> str:
        """The matrix file, relative to the checkout where it is in it."""
        p = self.path.resolve()
        return str(p.relative_to(REPO)) if p.is_relative_to(REPO) else str(self.path)

    @property
    def command(self) -> str:
        """The command that reproduces it (the summary's): `testbed matrix`, naming a file not the default."""
        return "testbed matrix" if self.path.resolve() == DEFAULT_FILE.resolve() else f"testbed matrix {self.source}"


def why_not(net: Network, job: JobSpec, scheme: str, scale: float, max_tf: int) -> str:
    """Why `scheme` does not apply on this network ("" when it does), checked without running it:
    the scheme's own reasons (schemes.registry SchemeSpec.why_not), then, for the scheme engine,
    what a scheme job checks before it runs (hosts, PSs, the schedule compiling)."""
    spec = get_scheme(scheme)
    why = spec.why_not(net, Limits(max_tf_processes=max_tf))
    if why or not spec.engine:
        return why or ""
    try:
        prepare(job.model_copy(update={"scheme": scheme, "compute_s": 0.0}), net, scale, "")
    except ExperimentError as err:
        return str(err).split(": ", 1)[-1].removeprefix("job.scheme: ")
    return ""


def plan(m: MatrixSpec, path: Path, quick: bool = False) -> tuple[Figure, list[Cell]]:
    """The matrix as a figure (one point per cell that applies) and every cell, in table order.
    Refuses the file where a cell would exceed the emulator's budget at the matrix's rate."""
    if quick and m.quick is None:
        raise MatrixError(f"{path}: quick: the file defines no quick subset; add quick: {{topologies, schemes}}")
    topos = [t for t in m.topologies if not quick or t.id in m.quick.topologies]  # type: ignore[union-attr]
    schemes = [s for s in m.schemes if not quick or s in m.quick.schemes]  # type: ignore[union-attr]
    job = {**m.job, **(m.quick.job if quick and m.quick else {})}
    reps = m.quick.repeat if quick and m.quick else m.repeat
    name = f"{m.matrix}-quick" if quick else m.matrix
    grid = [
        (t, Point(id=f"{t.id}-{s}", topology=t.topology, set=t.set, job={"scheme": s}, series=s, group=t.label))
        for t in topos
        for s in schemes
    ]
    points = [p for _, p in grid]
    fig = Figure(
        figure=name, title=m.title, metric="gst", emulated_mbps=m.emulated_mbps, compress=m.compress, repeat=reps,
        job=job, points=points,
    )  # fmt: skip
    cells = []
    jobspec = JobSpec.model_validate(job)
    for topo, p in grid:
        spec, source, note = sweep.point_topology(fig, p)
        base_scale = spec.worker_mbps / m.emulated_mbps
        why = why_not(build_network(spec, source), jobspec, p.series, base_scale * m.compress, m.max_tf_processes)
        if note and not why:
            fits = m.emulated_mbps * base_scale / spec.scale
            raise MatrixError(
                f"{path}: emulated_mbps: cell {p.id}: {note}; every cell runs at one rate and gradient size, "
                f"so lower emulated_mbps to {fits:.3g} or less (the budget is {tso.ceiling(spec.mtu)[0]:g} "
                f"Mbit/s at MTU {spec.mtu})"
            )
        cells.append(Cell(topo, p.series, p, why, spec, source))
    return fig, cells


def check_budget(fig: Figure, cells: list[Cell], path: Path) -> None:
    """Refuse the matrix (BudgetError) if a cell that runs would not fit this machine
    (workloads.budget), before the first cell is built."""
    for c in cells:
        if c.applies and c.spec is not None:
            exp = sweep.point_experiment(fig, c.point, quick=False)
            where = f"{path} (cell {c.point.id})"
            check_job(c.spec, c.source, exp.all_jobs, exp.compress, where, override=OVERRIDE_TOPO)


def run_matrix(
    path: Path = DEFAULT_FILE,
    quick: bool = False,
    repeat: int | None = None,
    fresh: bool = False,
    results: Path = REPO / "results",
    progress: bool = True,
    report_only: bool = False,
    budget: bool = True,
) -> MatrixRun:
    """Run (or resume) every cell that applies (none with `report_only`); the table and heat map
    are replays.matrix_report's (write_matrix_report(run))."""
    from tqdm import tqdm

    m = load_matrix(path)
    fig, cells = plan(m, path, quick)
    if budget and not report_only:
        check_budget(fig, cells, path)
    out = results / fig.figure
    reps = repeat or fig.repeat
    todo = [(c, k) for c in cells if c.applies for k in range(1, reps + 1)]
    if fresh and not report_only:
        for c, k in todo:
            (rep_dir(out, c.point, k) / "summary.json").unlink(missing_ok=True)
    t0, ran = time.monotonic(), False
    now = capture(quick)  # kept cells must have run on this code (sweep.drop_other_code)
    bar = tqdm(todo, desc=fig.figure, unit="run", disable=not progress or report_only)
    for c, k in bar:
        d = rep_dir(out, c.point, k)
        if not report_only:
            sweep.drop_other_code([d], now)
        if report_only or sweep.finished(d) is not None:  # kept: finished cells, faithful or not
            continue
        bar.set_postfix_str(f"{c.point.id} rep{k}")
        ran = True
        exp = sweep.point_experiment(fig, c.point, quick=False)  # the quick job is already in fig.job
        assert c.spec is not None
        sweep.run_repetition(
            exp, c.spec, c.source, d, f"{path}#{c.point.id}", rescale=False, provenance=now.model_dump()
        )
    bar.close()
    if ran:
        queued = sum(
            (sweep.finished(rep_dir(out, c.point, k)) or {}).get("timings", {}).get("lock_wait_s", 0.0) for c, k in todo
        )
        wall = time.monotonic() - t0
        write_json_atomic(out / "run.json", figsummary.run_record(wall, queued, now), indent=None)
    return MatrixRun(m, fig, cells, out, reps, quick, path)
