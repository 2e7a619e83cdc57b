"""A figure's outputs from its runs' summaries: summary.csv, <figure>.png, report.md, report.json.

Reads only results/<figure>/points/*/rep*/summary.json, so a figure can be redrawn without
rerunning (`testbed replay FIG --report-only`). The claims the figure file declares (see
replays.claims) are judged on the measured data, not asserted in advance. report.json holds the
same points and verdicts as report.md, for programs: the overview of `testbed replay all` and the
speed-up headline read it instead of parsing the markdown.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from replays import decomposition as decomp
from replays import dvfclocks, figsummary, outputs
from replays.claims import (
    PAPER_EQ,
    REFERENCE,
    ClaimResult,
    FasterThan,
    bct_view,
    evaluate,
    paper_number,
    paper_reference,
)
from replays.evidence import PointFidelity
from replays.figure import METRIC_KEYS, METRIC_LABELS, METRIC_UNITS, REPO, Figure, Point, rep_dir
from replays.provenance import Provenance
from runs.stats import describe
from runs.summary import RunSummary, Stats, SummaryError, read_summary
from workloads.experiment import host_time_mode

CI_METHOD = (
    "95% CI: Student t over the repetitions' mean BCTs (n = repetitions) where a point has two or more "
    "repetitions; with a single repetition, Student t over that run's per-step BCTs (column 'CI over')"
)


@dataclass
class Row:
    """One point of a figure: its repetitions folded into a mean and a 95% confidence interval."""

    point: Point
    bcts: list[float] = field(default_factory=list)  # per repetition, the mean of the figure's metric
    summaries: list[RunSummary] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    metric: str = "bct_s"  # the summary field the figure plots and judges (bct_s, or gst_s for schemes)

    def _stats(self) -> Stats:
        """The first repetition's statistics of the figure's metric."""
        return self.summaries[0].metric(self.metric) or Stats()

    @property
    def bct(self) -> float | None:
        return statistics.fmean(self.bcts) if self.bcts else None

    @property
    def spread(self) -> float:
        return (max(self.bcts) - min(self.bcts)) if len(self.bcts) > 1 else 0.0

    @property
    def ci_over(self) -> str:
        """What the CI is computed over: 'repetitions', 'steps' (one repetition) or '' (none)."""
        if len(self.bcts) > 1:
            return "repetitions"
        return "steps" if self.ci95 is not None else ""

    @property
    def ci_n(self) -> int:
        """Samples behind the CI: repetitions, or the single run's measured steps."""
        return len(self.bcts) if len(self.bcts) > 1 else self._stats().n if self.bcts else 0

    @property
    def ci95(self) -> float | None:
        """Half-width of the 95% CI of the mean (see CI_METHOD); None where it cannot be computed."""
        if len(self.bcts) > 1:
            return describe(self.bcts)["ci95"]
        ci = self._stats().ci95 if self.summaries else None
        return ci if isinstance(ci, int | float) and math.isfinite(ci) else None

    @property
    def pred(self) -> dict:
        return self.summaries[0].pred if self.summaries else {}

    @property
    def placed(self) -> dict:
        """The model with the measured per-PS byte split (see runs.predict.placement_prediction)."""
        return self.summaries[0].predicted_placement or {} if self.summaries else {}

    @property
    def faithful(self) -> bool | None:
        if not self.summaries:
            return None
        return all(s.faithful for s in self.summaries)

    @property
    def fidelity_reason(self) -> str:
        return "; ".join(sorted({s.fidelity_reason for s in self.summaries}))

    @property
    def compress(self) -> float:
        return self.summaries[0].compress_factor if self.summaries else 1.0

    @property
    def rest_s(self) -> float | None:
        """Measured per-step time besides communication (runs.steptime), mean over repetitions."""
        d = decomp.decompose(self)
        return d.rest_s if d else None

    @property
    def link_s(self) -> float | None:
        """The busy time of the one link busy longest in a step (runs.steptime), emulated seconds,
        mean over repetitions; None unless every repetition measured it."""
        d = decomp.decompose(self)
        return d.link_s / d.compress if d and d.link_s is not None and d.compress else None

    @property
    def mtu(self) -> int | None:
        """The MTU the point's network ran at (its run summary's), for the wire's header share."""
        return self.summaries[0].mtu if self.summaries else None

    @property
    def paper_bcts(self) -> list[float] | None:
        """Per repetition, the BCT in paper-equivalent seconds (replays.decomposition: its measured
        communication x compress + the rest); None unless every repetition split its steps."""
        if not self.summaries or self.metric != "bct_s":
            return None
        out = [v for s in self.summaries if (v := decomp.paper_bct_s(s)) is not None]
        return out if len(out) == len(self.summaries) else None

    @property
    def bct_paper(self) -> float | None:
        """The point's mean BCT in paper-equivalent seconds (what a compressed figure's speed-ups
        compare: compress then cancels), None without step splits."""
        v = self.paper_bcts
        return statistics.fmean(v) if v else None

    @property
    def ci95_paper(self) -> float | None:
        """Half-width of bct_paper's 95% CI over repetitions (None with fewer than two)."""
        v = self.paper_bcts
        return describe(v)["ci95"] if v and len(v) > 1 else None

    def percentile(self, key: str) -> float | None:
        """The mean over repetitions of each run's per-iteration `key` (p50, p95) of the metric."""
        got = [getattr(s.metric(self.metric), key, None) for s in self.summaries]
        vals = [float(v) for v in got if isinstance(v, int | float)]
        return statistics.fmean(vals) if vals and len(vals) == len(self.summaries) else None

    @property
    def plink(self) -> dict[str, Any] | None:
        """PLink's groups over the repetitions (runs.plink_groups' summary entry): the first run's
        groups, the mean AMI against the racks and PAIA of the raw and embedded probes."""
        entries = [s.get("plink") for s in self.summaries if s.get("plink")]
        if not entries:
            return None

        def mean(key: str) -> float | None:
            vals = [float(e[key]) for e in entries if isinstance(e.get(key), int | float) and math.isfinite(e[key])]
            return statistics.fmean(vals) if vals else None

        first = entries[0]
        return {
            "groups_mode": first.get("groups_mode"),
            "groups": [len(m) for m in (first.get("groups") or {}).values()],
            "ami_vs_racks": mean("ami_vs_racks"),
            "paia_raw": mean("paia_raw"),
            "paia_embedded": mean("paia_embedded"),
            "probe_mbps": [mean("probe_mbps_min"), mean("probe_mbps_max")] if first.get("probe_rounds") else None,
            "runs": len(entries),
        }

    @property
    def unfaithful_reason(self) -> str:
        """Why the repetitions that were not faithful were not (what a claim says it did not judge)."""
        return "; ".join(sorted({s.fidelity_reason for s in self.summaries if not s.faithful}))


def collect(
    out: Path, points: list[Point], reps: int, metric: str = "bct", redrawn: Mapping[Path, RunSummary] | None = None
) -> list[Row]:
    """Each point's repetitions: the mean of `metric` (bct, or gst for scheme jobs) per finished run.
    `redrawn`: summaries recomputed by --report-only (by their summary.json's path), read instead
    of the files, which stay as the runs wrote them."""
    key = METRIC_KEYS[metric]
    rows = []
    for p in points:
        row = Row(p, metric=key)
        for k in range(1, reps + 1):
            try:
                f = rep_dir(out, p, k) / "summary.json"
                s = (redrawn or {}).get(f) or read_summary(f)
            except OSError:
                row.failed.append(f"rep{k}: not run")
                continue
            except SummaryError as err:  # one line naming the file and the field
                row.failed.append(f"rep{k}: {err}")
                continue
            stats = s.metric(key)
            if s.complete and stats and stats.n and stats.mean is not None:
                row.bcts.append(stats.mean)
                row.summaries.append(s)
            else:
                row.failed.append(f"rep{k}: {s.error or 'incomplete'}")
        rows.append(row)
    return rows


# --- the figure's results as data (report.json) ---------------------------------------------------
class PointResult(BaseModel):
    """One point's numbers as the report shows them."""

    id: str
    series: str
    group: str
    x: float | None
    repetitions: int = Field(description="repetitions measured")
    failed: list[str]
    bct_mean_s: float | None
    ci95_s: float | None = Field(description="half-width of the 95% CI of the mean")
    bct_paper_s: float | None = Field(
        default=None, description="mean BCT in paper-equivalent seconds (communication x compress + the rest)"
    )
    ci95_paper_s: float | None = Field(default=None, description="half-width of bct_paper_s's 95% CI")
    ci_over: str = Field(description="repetitions | steps | '' (see FigureReport.ci_method)")
    ci_n: int
    spread_s: float
    p50_s: float | None = Field(default=None, description="the mean over repetitions of each run's per-iteration P50")
    p95_s: float | None = Field(default=None, description="the mean over repetitions of each run's per-iteration P95")
    model_bct_min_s: float | None
    model_bct_max_s: float | None
    model_t_push_s: float | None
    model_gst_s: float | None = Field(default=None, description="scheme jobs: the schedule's busiest cable / its rate")
    model_gst_formula_s: float | None = Field(
        default=None, description="HiPS Table 3's GST for the scheme on this BCube/Torus (gst_formula_s), else None"
    )
    equation: str | None
    scale: float | None
    compress: float | None
    model_bytes_emulated: float | None
    faithful: bool | None
    fidelity: str
    note: str = ""
    plink: dict[str, Any] | None = Field(default=None, description="PLink's groups, AMI and PAIA (Row.plink)")


class FigureReport(BaseModel):
    """What report.md says, as data: report.json."""

    figure: str
    title: str
    metric: str = Field(default="bct", description="bct | gst | bcast | wire: what the points' means are of")
    quick: bool
    repetitions: int = Field(description="repetitions asked for per point")
    repeat_as: str = Field(
        default="runs",
        description="rounds: the repetitions of a point were rounds of one job (runs.rounds); runs: separate jobs",
    )
    job: dict[str, Any]
    emulated_mbps: float | None
    compress: float
    wall_s: float | None = Field(description="the last sweep, time queued behind other emulations left out")
    ci_method: str
    paper: dict[str, Any] = Field(description=f"the figure's entry in results/reference/{REFERENCE.name}")
    points: list[PointResult]
    claims: list[ClaimResult]
    decomposition: list[decomp.Decomposition] = Field(default_factory=list, description="paper-equivalent s")
    ratio_curves: list[decomp.RatioCurve] = Field(default_factory=list, description="speed-up vs host time")
    dvf_clocks: list[dict[str, Any]] = Field(
        default_factory=list, description="Parameter Flow's DVF points: the traffic cut per clock (replays.dvfclocks)"
    )

    @property
    def faithful_points(self) -> int:
        return sum(p.faithful is True for p in self.points)


def point_result(r: Row, note: str = "") -> PointResult:
    s = r.summaries[0] if r.summaries else None
    return PointResult(
        id=r.point.id,
        series=r.point.series,
        group=r.point.group,
        x=r.point.x,
        repetitions=len(r.bcts),
        failed=r.failed,
        bct_mean_s=r.bct,
        ci95_s=r.ci95,
        bct_paper_s=r.bct_paper,
        ci95_paper_s=r.ci95_paper,
        ci_over=r.ci_over,
        ci_n=r.ci_n,
        spread_s=r.spread,
        p50_s=r.percentile("p50"),
        p95_s=r.percentile("p95"),
        model_bct_min_s=r.pred.get("bct_min_s"),
        model_bct_max_s=r.pred.get("bct_max_s"),
        model_t_push_s=r.pred.get("t_push_s"),
        model_gst_s=r.pred.get("gst_s"),
        model_gst_formula_s=s.gst_formula_s if s else None,
        equation=r.pred.get("equation"),
        scale=s.scale if s else None,
        compress=(s.compress if s else None) or r.point.compress,  # not run yet: what the figure asks for
        model_bytes_emulated=s.model_bytes_emulated if s else None,
        faithful=r.faithful,
        fidelity=r.fidelity_reason or "; ".join(r.failed),
        note=note,
        plink=r.plink,
    )


def load_report(out: Path) -> FigureReport | None:
    """A figure folder's report.json, or None (not written yet, or by an older version)."""
    try:
        return FigureReport.model_validate_json((out / "report.json").read_text())
    except (OSError, ValidationError):
        return None


def headlines(rep: FigureReport) -> dict[str, dict]:
    """Per group: the paper's speed-up and the claim's measured one, its unit (paper-equivalent
    seconds where the runs were compressed, replays.claims.paper_equivalent_ratio), the ratio as
    run, the two points and the host-time mode of the figure's own runs (not `compare` ones).
    What `testbed replay` prints last and bench_replay compares."""
    out: dict[str, dict] = {}
    mode = host_time_mode(rep.job.get("host_time"))
    for c in rep.claims:
        if c.type != "faster_than" or c.compares_paper or c.values.get("paper") is None:
            continue
        out[c.group] = {
            "paper": c.values["paper"],
            "measured": c.values.get("ratio"),
            "as_run": c.values.get("as_run", c.values.get("ratio")),
            "unit": c.unit,
            "verdict": c.verdict,
            "series": c.series,
            "points": c.points,
            "mode": mode,
        }
    return out


def ratio_ci95(
    ratio: float, fast: PointResult | None, slow: PointResult | None, paper_eq: bool = False
) -> float | None:
    """Half-width of the speed-up's 95% CI from its two points' own (first order: the relative
    half-widths add in quadrature), of their BCTs as run or in paper-equivalent seconds (the
    unit the claim took); None where a point has no CI."""
    if not fast or not slow:
        return None
    if paper_eq:
        (mf, cf), (ms, cs) = (fast.bct_paper_s, fast.ci95_paper_s), (slow.bct_paper_s, slow.ci95_paper_s)
    else:
        (mf, cf), (ms, cs) = (fast.bct_mean_s, fast.ci95_s), (slow.bct_mean_s, slow.ci95_s)
    if not (mf and cf and ms and cs):
        return None
    return ratio * math.hypot(cf / mf, cs / ms)


# --- outputs --------------------------------------------------------------------------------------
CSV_FIELDS = {
    "point": "id",
    "series": "series",
    "group": "group",
    "x": "x",
    "reps": "repetitions",
    "bct_mean_s": "bct_mean_s",
    "bct_ci95_s": "ci95_s",
    "ci_over": "ci_over",
    "ci_n": "ci_n",
    "bct_spread_s": "spread_s",
    "p50_s": "p50_s",
    "p95_s": "p95_s",
    "model_bct_min_s": "model_bct_min_s",
    "model_bct_max_s": "model_bct_max_s",
    "model_t_push_s": "model_t_push_s",
    "equation": "equation",
    "scale": "scale",
    "compress": "compress",
    "model_bytes_emulated": "model_bytes_emulated",
    "faithful": "faithful",
    "fidelity": "fidelity",
    "failed": "failed",
}


def csv_rows(points: list[PointResult]) -> list[dict[str, Any]]:
    """summary.csv's rows: one per point, its times to 4 decimals."""
    rows = []
    for p in points:
        row = {col: getattr(p, attr) for col, attr in CSV_FIELDS.items()}
        row["failed"] = "; ".join(p.failed)
        for col in ("bct_mean_s", "bct_ci95_s", "bct_spread_s", "p50_s", "p95_s", "model_bct_min_s", "model_bct_max_s"):
            row[col] = _f(row[col])
        row["model_t_push_s"] = _f(row["model_t_push_s"])
        rows.append(row)
    return rows


def _f(x: float | None) -> str:
    return "" if x is None else f"{x:.4f}"


def _err(r: Row) -> float:
    return r.ci95 or 0.0


def bars_paper_equivalent(rows: list[Row]) -> bool:
    """Whether bars show paper-equivalent seconds: where a group's points ran at different
    compress (claims.bct_view), bars as run would set different fractions of the paper's
    communication side by side; then every bar is drawn in the one unit the claims judge."""
    groups = dict.fromkeys(r.point.group for r in rows)
    views = [bct_view([r for r in rows if r.point.group == g and r.bct]) for g in groups]
    return any(v is not None and v[1] == PAPER_EQ for v in views) and all(r.bct_paper for r in rows if r.bct)


def lines_paper_equivalent(rows: list[Row]) -> bool:
    """Whether a line chart's panel shows paper-equivalent seconds: where its points ran
    compressed (Fig. 9: VGG-16 at 8-32, ResNet50 at 8) and split their steps, as its
    `bounded_by_model` claims judge them. As run, each compress sets a different fraction of the
    paper's communication beside the same host time; in paper-equivalent seconds (measured points,
    and the model's bounds: replays.decomposition.paper_bounds) it cancels."""
    measured = [r for r in rows if r.bct is not None]
    return any(r.compress != 1 for r in measured) and all(r.bct_paper is not None for r in measured)


def _line(r: Row, paper_eq: bool) -> tuple[float | None, float, tuple[float, float] | None]:
    """A line chart's point: (BCT, its 95% CI half-width, the model's (BCT_min, BCT_max)), as run
    or in paper-equivalent seconds."""
    if not paper_eq:
        bounds = (r.pred["bct_min_s"], r.pred["bct_max_s"]) if r.pred.get("bct_max_s") else None
        return r.bct, _err(r), bounds
    return r.bct_paper, r.ci95_paper or 0.0, decomp.paper_bounds(r.pred, r.compress)


def plot(fig: Figure, rows: list[Row], path: Path) -> None:
    """Grouped bars (series within groups) or lines (x vs BCT, one panel per group, model lines);
    error bars are the 95% CI of each point's mean."""
    plt = outputs.pyplot()
    groups = list(dict.fromkeys(r.point.group for r in rows))
    series = list(dict.fromkeys(r.point.series for r in rows))
    if fig.plot == "lines":
        fig_, axes = plt.subplots(1, len(groups), figsize=(5 * len(groups), 4), squeeze=False)
        for ax, g in zip(axes[0], groups, strict=True):
            paper_eq = lines_paper_equivalent([r for r in rows if r.point.group == g])
            for i, s in enumerate(series):
                pts = sorted(
                    (r for r in rows if r.point.group == g and r.point.series == s and r.bct is not None),
                    key=lambda r: r.point.x or 0,
                )
                if not pts:
                    continue
                color = f"C{i}"
                xs = [r.point.x for r in pts]
                lines = [_line(r, paper_eq) for r in pts]
                ax.errorbar(
                    xs,
                    [y for y, _, _ in lines],
                    yerr=[e for _, e, _ in lines],
                    fmt="o:",
                    capsize=3,
                    color=color,
                    label=f"{s} measured (95% CI)",
                )
                if all(b is not None for _, _, b in lines):
                    ax.plot(xs, [b[1] for _, _, b in lines], "-", color=color, alpha=0.6, label=f"{s} BCT_max (model)")
                    ax.plot(xs, [b[0] for _, _, b in lines], "--", color=color, alpha=0.6, label=f"{s} BCT_min (model)")
            ax.set_title(g)
            ax.set_xlabel(fig.xlabel)
            unit = "paper-equivalent s" if paper_eq else _unit(fig.metric)
            ax.set_ylabel(f"{METRIC_LABELS[fig.metric]} ({unit})")
            if ax.get_legend_handles_labels()[0]:  # a panel with no point measured has no legend
                ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
    else:
        fig_, ax = plt.subplots(figsize=(max(8, 1.6 * len(groups) * len(series) / 2), 4.5))
        width = 0.8 / max(1, len(series))
        paper_eq = bars_paper_equivalent(rows)
        for i, s in enumerate(series):
            xs, ys, errs = [], [], []
            for j, g in enumerate(groups):
                r = next((r for r in rows if r.point.group == g and r.point.series == s), None)
                y = (r.bct_paper if paper_eq else r.bct) if r else None
                if r and y is not None:
                    xs.append(j + (i - (len(series) - 1) / 2) * width)
                    ys.append(y)
                    errs.append((r.ci95_paper or 0.0) if paper_eq else _err(r))
            ax.bar(xs, ys, width, yerr=errs, capsize=3, label=s, color=f"C{i}")
        _formula_markers(ax, rows, groups, series, width)
        ax.set_xticks(range(len(groups)), groups)
        unit = "paper-equivalent s" if paper_eq else _unit(fig.metric)  # report.md says how: comm x compress + rest
        ax.set_ylabel(f"{METRIC_LABELS[fig.metric]} ({unit}; bars: 95% CI)", fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(axis="y", alpha=0.3)
    fig_.suptitle(fig.title, fontsize=10)
    fig_.tight_layout()
    outputs.save_png(fig_, path)


def _unit(metric: str) -> str:
    """A metric's unit as a plot's axis names it."""
    return "s, emulated" if METRIC_UNITS[metric] == "s" else f"{METRIC_UNITS[metric]}, emulated"


def _formula_markers(ax: Any, rows: list[Row], groups: list[str], series: list[str], width: float) -> None:
    """A black bar-wide tick at HiPS Table 3's GST (`gst_formula_s`) on every bar that has one."""
    xs, ys = [], []
    for i, s in enumerate(series):
        for j, g in enumerate(groups):
            r = next((r for r in rows if r.point.group == g and r.point.series == s), None)
            formula = r.summaries[0].gst_formula_s if r and r.summaries else None
            if formula is not None:
                xs.append(j + (i - (len(series) - 1) / 2) * width)
                ys.append(formula)
    if xs:
        ax.plot(xs, ys, "k_", markersize=14, markeredgewidth=2, linestyle="none", label="HiPS Table 3 formula")


def _faithful_word(f: bool | None) -> str:
    return "faithful" if f else "NOT faithful" if f is False else "no run"


METRIC_TEXT = {
    "bct": "- BCT: per run, the mean over its measured steps of the slowest worker's step time (emulated "
    "seconds); per point, the mean over its repetitions",
    "gst": "- GST: per run, the mean over its measured iterations of the slowest worker's synchronisation time "
    "(emulated seconds; RAT's ICT without compute); per point, the mean over its repetitions; model: the "
    "schedule's bytes on the busiest cable over that cable's rate (a bound a perfectly pipelined run meets)",
    "bcast": "- broadcast: per run, the mean over its measured iterations of the time a worker took to receive "
    "all aggregated updates (from the servers' first send to each worker's last receive, the mean over the "
    "workers; emulated seconds); per point, the mean over its repetitions",
    "wire": "- wire: per run, the mean over its measured iterations of the MB the engine put on the wire (every "
    "host's sends, pushes and broadcasts, after DVF and the wire form; emulated MB); per point, the mean over its "
    "repetitions; summary.json's nic_bytes has what the hosts' interfaces carried",
}


def _paper_eq_text(p: PointResult) -> str:
    if p.bct_paper_s is None:
        return "-"
    return f"{p.bct_paper_s:.2f}" + (f" ±{p.ci95_paper_s:.2f}" if p.ci95_paper_s is not None else "")


def _compress_text(rep: FigureReport) -> str:
    """The runs' compress: one number, or per group (per series where that lists fewer: Fig. 9's
    models) where points set their own (a wall-time knob: speed-ups are then compared in
    paper-equivalent seconds, where it cancels)."""

    def by(key: Callable[[PointResult], str]) -> dict[str, set[float]]:
        out: dict[str, set[float]] = {}
        for p in rep.points:
            out.setdefault(key(p), set()).add(p.compress if p.compress is not None else rep.compress)
        return out

    by_group = by(lambda p: p.group)
    values = set().union(*by_group.values()) if by_group else {rep.compress}
    if len(values) == 1:
        return f"{next(iter(values)):g}"
    by_series = by(lambda p: p.series)
    if sum(map(len, by_series.values())) < sum(map(len, by_group.values())):
        by_group = by_series  # the shorter listing: Fig. 9 compresses per model, not per panel
    return ", ".join(f"{g or '-'} {'/'.join(f'{c:g}' for c in sorted(cs))}" for g, cs in by_group.items())


#: how report.md says that a point's repetitions were rounds of one job
ROUNDS_TEXT = (
    " (as rounds of one job per point: one network, one set of TF processes, one warm-up; each round "
    "its own steps, verdict and step split: runs.rounds)"
)


def _plink_markdown(rep: FigureReport) -> list[str]:
    """PLink's groups per point, where runs grouped hosts: sizes, AMI against the racks, PAIA of
    the raw probes and of the embedding (the paper's §3.4 accuracy, with and without Eq. (1))."""
    rows = [p for p in rep.points if p.plink]
    if not rows:
        return []

    def num(v: float | None, pct: bool = False) -> str:
        return "-" if v is None else (f"{v:.1%}" if pct else f"{v:.2f}")

    out = [
        "",
        "## PLink's groups",
        "",
        "Per point, over its repetitions: how hosts were grouped, the groups' sizes (first run), their AMI against "
        "the racks (1: the racks), and where probes were measured the probed bandwidth's range and PAIA (the share of "
        "triplets whose order the distances get right against the racks) of the raw probes and of the embedding.",
        "",
        "| point | grouping | group sizes | AMI vs racks | probes (Mbit/s) | PAIA raw | PAIA embedded |",
        "|---|---|---|---|---|---|---|",
    ]
    for p in rows:
        g = p.plink or {}
        mbps = g.get("probe_mbps")
        span = f"{mbps[0]:.1f}-{mbps[1]:.1f}" if mbps and None not in mbps else "-"
        out.append(
            f"| {p.id} | {g.get('groups_mode')} | {', '.join(map(str, g.get('groups') or []))} "
            f"| {num(g.get('ami_vs_racks'))} | {span} | {num(g.get('paia_raw'), True)} "
            f"| {num(g.get('paia_embedded'), True)} |"
        )
    return out


def markdown(rep: FigureReport) -> str:
    """report.md: settings, the points with their CIs, the claims judged, fidelity per point."""
    lines = [f"# {rep.title}" + (" (quick)" if rep.quick else ""), ""]
    lines += [
        f"- points: {len(rep.points)}, repetitions each: {rep.repetitions}"
        + (ROUNDS_TEXT if rep.repeat_as == "rounds" else "")
        + f"; job: {json.dumps(rep.job)}",
        f"- emulated worker rate: {rep.emulated_mbps or '-'} Mbit/s (scale = B_w / that; rates and model "
        f"bytes divided together, so S/B is the paper's); compress {_compress_text(rep)}: model "
        "bytes divided further, so communication takes 1/compress of the paper's time",
        METRIC_TEXT[rep.metric],
        f"- {rep.ci_method}",
    ]
    if rep.wall_s is not None:
        lines.append(
            f"- wall time of the last sweep: {rep.wall_s / 60:.1f} min (time queued behind other emulations left out)"
        )
    unit = METRIC_UNITS[rep.metric]
    lines += [
        "",
        f"![{rep.figure}]({rep.figure}.png)",
        "",
        f"| point | series | group | x | {rep.metric.upper()} mean ({unit}) | 95% CI ({unit}) | CI over "
        f"| P50 ({unit}) | P95 ({unit}) | model (s) | eq. | scale | compress | paper-eq. (s) | faithful |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for p in rep.points:
        model = f"{p.model_bct_min_s:.2f}-{p.model_bct_max_s:.2f}" if p.model_bct_min_s else "-"
        if rep.metric == "gst" and p.model_gst_s is not None:
            model = f"{p.model_gst_s:.2f} (schedule)"
            if p.model_gst_formula_s is not None:
                model += f"; {p.model_gst_formula_s:.2f} (Table 3)"
        bct = f"{p.bct_mean_s:.3f}" if p.bct_mean_s is not None else "failed: " + "; ".join(p.failed)
        ci = f"±{p.ci95_s:.3f}" if p.ci95_s is not None else "-"
        over = f"{p.ci_n} {'reps' if p.ci_over == 'repetitions' else 'steps'}" if p.ci_over else "-"
        pct = " | ".join("-" if v is None else f"{v:.3f}" for v in (p.p50_s, p.p95_s))
        lines.append(
            f"| {p.id} | {p.series} | {p.group} | {'' if p.x is None else f'{p.x:g}'} | {bct} | {ci} | {over} "
            f"| {pct} | {model} | {p.equation or '-'} | {'-' if p.scale is None else f'{p.scale:g}'} "
            f"| {'-' if p.compress is None else f'{p.compress:g}'} | {_paper_eq_text(p)} "
            f"| {'yes' if p.faithful else 'no' if p.faithful is False else '-'} |"
        )
    lines += ["", "## The paper's claims, checked on these data", ""]
    for c in rep.claims:
        lines.append(f"- **{c.label}**: {c.verdict}." + (f" {c.detail}" if c.detail else ""))
    if not rep.claims:
        lines.append("- (no claim declared in the figure file)")
    if rep.paper:
        lines += ["", f"Paper's stated numbers ({REFERENCE.parent.relative_to(REPO)}/): {json.dumps(rep.paper)}"]
    lines += _plink_markdown(rep)
    if rep.decomposition or rep.ratio_curves:
        lines += decomp.markdown(rep.decomposition, rep.ratio_curves, f"{rep.figure}-ratio.png")
    lines += ["", "## Fidelity", ""]
    for p in rep.points:
        lines.append(f"- {p.id}: {_faithful_word(p.faithful)} ({p.fidelity})" + (f"; {p.note}" if p.note else ""))
    return "\n".join(lines) + "\n"


ITERATIONS_TEXT = (
    "\n\nEach point's first repetition over its measured iterations (GST per iteration; dotted lines: the "
    "timeline's events at their step; the summaries' `autotune` entry lists every re-plan):\n\n![{name}]({name})\n"
)


def plot_iterations(fig: Figure, rows: list[Row], path: Path) -> None:
    """Per group a panel: each point's first repetition, its GST per measured iteration
    (gst_iterations_s), and the timeline's `at_step` events (counted from the first measured one)."""
    plt = outputs.pyplot()
    groups = list(dict.fromkeys(r.point.group for r in rows))
    fig_, axes = plt.subplots(len(groups), 1, figsize=(8, 3.2 * len(groups)), squeeze=False)
    for ax, g in zip(axes[:, 0], groups, strict=True):
        for i, r in enumerate(x for x in rows if x.point.group == g):
            ys = r.summaries[0].get("gst_iterations_s") if r.summaries else None
            if not ys:
                continue
            ax.plot(range(1, len(ys) + 1), ys, ".-", color=f"C{i}", label=r.point.series)
            warmup = int({**fig.job, **r.point.job}.get("warmup", 2))
            for e in r.point.timeline:
                if e.at_step is not None:
                    ax.axvline(e.at_step - warmup + 0.5, color="grey", linestyle=":", linewidth=1)
        ax.set_title(g, fontsize=9)
        ax.set_xlabel("measured iteration")
        ax.set_ylabel("GST (s)")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
    fig_.tight_layout()
    outputs.save_png(fig_, path)


def write_report(
    fig: Figure,
    out: Path,
    points: list[Point],
    reps: int,
    notes: dict[str, str],
    wall_s: float | None = None,
    quick: bool = False,
    redrawn: Mapping[Path, RunSummary] | None = None,
) -> list[ClaimResult]:
    """summary.csv, <figure>.png, report.md and report.json from the runs in `out` (each written
    whole: topologies.files); returns the claims. `redrawn`: as collect's (--report-only)."""
    rows = collect(out, points, reps, fig.metric, redrawn)
    notes = {p.id: "; ".join(filter(None, [notes.get(p.id, ""), *retry_notes(out, p, reps)])) for p in points}
    last_wall, started = figsummary.last_run(out)
    if wall_s is None:
        wall_s = last_wall
    reference = paper_reference()
    rep = FigureReport(
        figure=fig.figure,
        title=fig.title,
        metric=fig.metric,
        quick=quick,
        repetitions=reps,
        repeat_as="rounds" if any("round" in x for r in rows for x in r.summaries) else "runs",
        job=fig.job,
        emulated_mbps=fig.emulated_mbps,
        compress=fig.compress,
        wall_s=wall_s,
        ci_method=CI_METHOD,
        paper=reference.get(fig.figure) or {},
        points=[point_result(r, notes.get(r.point.id, "")) for r in rows],
        claims=evaluate(fig.claims, rows, reference),
    )
    compared = []  # the figure's `compare` runs: the decomposition and the curve show them beside
    if fig.compare and not quick:
        mine = [fig.compare.point(p) for p in points if fig.compare.compares(p)]
        compared = collect(out, mine, fig.compare.repeat, fig.metric, redrawn)
    rep.decomposition, rep.ratio_curves = speedup_curves(fig, rows + compared, reference)
    plots: list[tuple[str, Callable[[Path], None]]] = [(f"{fig.figure}.png", lambda p: plot(fig, rows, p))]
    if rep.ratio_curves:
        title = f"{fig.title}: speed-up vs host time"
        plots.append((f"{fig.figure}-ratio.png", lambda p: decomp.plot(rep.ratio_curves, p, title)))
    text = markdown(rep)
    rep.dvf_clocks = dvfclocks.curves(rows)  # Parameter Flow's runs with DVF: the cut per clock (Fig. 9)
    if rep.dvf_clocks:
        png = f"{fig.figure}-clocks.png"
        plots.append((png, lambda p: dvfclocks.plot(rep.dvf_clocks, p, f"{fig.title}: DVF's cut per clock")))
        text += "\n".join(dvfclocks.markdown(rep.dvf_clocks)).replace("CLOCKS_PNG", png) + "\n"
    if any(s.get("autotune") for r in rows for s in r.summaries):  # PLink's Fig. 10: GST over the run
        plots.append((f"{fig.figure}-iterations.png", lambda p: plot_iterations(fig, rows, p)))
        at = text.index("\n## The paper's claims")
        text = text[:at] + ITERATIONS_TEXT.format(name=f"{fig.figure}-iterations.png") + text[at:]
    table = outputs.Table("summary.csv", list(CSV_FIELDS), csv_rows(rep.points))
    files = outputs.ReportFiles(("report.md", text), ("report.json", rep), table, plots)
    outputs.write_report_files(out, files)
    write_summary(fig, out, rep, files, started)
    return rep.claims


def write_summary(
    fig: Figure, out: Path, rep: FigureReport, files: outputs.ReportFiles, started: Provenance | None = None
) -> Path:
    """The figure-level summary.json (replays.figsummary): a card per claim result, a speed-up's
    with the decomposition of the BCTs it compares."""
    cards = []
    points = {p.id: p for p in rep.points}
    for c in rep.claims:
        parts = [d.model_dump() for d in rep.decomposition if d.id in c.points] if c.type == "faster_than" else []
        ci = None
        ratio = c.values.get("ratio")
        if c.type == "faster_than" and ratio and len(c.points) == 2 and not c.verdict.startswith("not judged"):
            fast, slow = (points.get(i) for i in c.points)  # the speed-up's CI, as testbed replay prints it
            ci = ratio_ci95(ratio, fast, slow, c.unit == PAPER_EQ)
        card = figsummary.headline(fig.figure, c, n=rep.repetitions, decomposition=parts or None, ci95=ci)
        cards.append(card)
    return figsummary.write_figure_summary(
        out,
        figure=fig.figure,
        kind="figure",
        title=fig.title,
        command=f"testbed replay {fig.figure}",
        quick=rep.quick,
        wall_s=rep.wall_s,
        depends_on=[f"workloads/figures/{fig.figure}.yaml", *figsummary.EMULATED_DEPENDS],
        files=files,
        points=[PointFidelity(id=p.id, faithful=p.faithful, fidelity=p.fidelity) for p in rep.points],
        headlines=cards,
        repetitions=rep.repetitions,
        started=started,
    )


def speedup_curves(
    fig: Figure, rows: list[Row], reference: dict[str, Any]
) -> tuple[list[decomp.Decomposition], list[decomp.RatioCurve]]:
    """Each point's BCT in parts that add up, and the speed-up over host time for each of the
    figure's speed-ups the paper states a number for (replays.decomposition); ([], []) when it has none."""
    speedups = [(c.series, c.than, c.paper) for c in fig.claims if isinstance(c, FasterThan) and c.paper]
    if not speedups or fig.metric != "bct":  # the decomposition splits step times
        return [], []
    return decomp.curves(rows, speedups, lambda key, group: paper_number(key, group, reference))


def retry_notes(out: Path, point: Point, reps: int) -> list[str]:
    """What the sweep re-ran for this point and why (the `retries` its summaries record)."""
    notes = []
    for k in range(1, reps + 1):
        try:
            s = read_summary(rep_dir(out, point, k) / "summary.json")
        except (OSError, SummaryError):  # collect() already says why the repetition is missing
            continue
        for r in s.retries:
            then = "faithful" if s.complete and s.faithful else "still not faithful" if s.complete else "failed again"
            at = f"at scale {r.rerun_scale:g}" if r.rerun_scale != r.scale else "at the same scale"
            notes.append(f"rep{k} re-run once {at} ({then}); first attempt: {r.why}")
    return notes


def overview(results: Path, names: list[str]) -> str:
    """Markdown: per figure, the paper's claims as checked on our data, fidelity and wall time
    (read from each figure's report.json, so it reflects the last run or --report-only)."""
    lines = ["| figure | the paper's claim, checked on our data | faithful points | wall time |", "|---|---|---|---|"]
    for name in names:
        rep = load_report(results / name)
        if rep is None:
            hint = " (redraw: --report-only)" if (results / name / "report.md").exists() else ""
            lines.append(f"| {name} | not replayed yet{hint} | - | - |")
            continue
        claims = [f"**{c.label}**: {c.verdict}." + (f" {c.detail}" if c.detail else "") for c in rep.claims]
        wall = "-" if rep.wall_s is None else f"{rep.wall_s / 60:.1f} min"
        lines.append(
            f"| {name} | {'<br>'.join(c.replace('|', '/') for c in claims) or '-'} "
            f"| {rep.faithful_points}/{len(rep.points)} | {wall} |"
        )
    return "\n".join(lines)
