"""A model figure's outputs (replays/modelfig.py): summary.csv, the plot, report.md, report.json, summary.json.

Plotted as the paper plots Figs. 6-7: communication time T_push + T_pull against the number of
workers, one line per series (the analytic model), the flow model's points as markers of the
same colour on it, one panel per `panels` entry. The report puts both models' numbers side by
side, with their ratio, and judges the paper's statements (the file's `claims`) on each model
by replays.claims, the engine the emulated figures use: each model's values become claims.Measured
points (ModelValue: a panel is a group, W the x), so the verdicts read the same everywhere. The
files are written by replays.outputs, the figure-level summary by replays.figsummary.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replays import figsummary, outputs
from replays.claims import Claim, ClaimResult, evaluate
from replays.evidence import PointFidelity
from replays.modelfig import ModelFigure
from replays.provenance import Provenance

LOG = logging.getLogger(__name__)

#: the two models a claim is judged on, and the row field each one's value is in
MODELS = {"analytic": "analytic_s", "flow model": "flowmodel_s"}


def _by(rows: list[dict[str, Any]], panel: str, series: str, field: str) -> dict[int, float]:
    return {r["W"]: r[field] for r in rows if r["panel"] == panel and r["series"] == series and r.get(field)}


@dataclass(frozen=True)
class ModelPoint:
    """A model figure's point as a claim reads it (replays.claims.PointLike): its panel is the
    group, W the x."""

    id: str
    series: str
    group: str
    x: float
    x_name: str = "W"


@dataclass(frozen=True)
class ModelValue:
    """One point's value on one model, as replays.claims.Measured: `bct` is the figure's y (the
    communication time); a model's value has no fidelity verdict, compress or host-time split."""

    point: ModelPoint
    bct: float | None
    faithful: bool | None = None
    unfaithful_reason: str = ""
    compress: float = 1.0
    rest_s: float | None = None
    link_s: float | None = None
    mtu: int | None = None
    bct_paper: float | None = None

    @property
    def pred(self) -> dict:
        return {}

    @property
    def placed(self) -> dict:
        return {}


def point_id(row: dict[str, Any]) -> str:
    """A model figure's point, as its claims and its summary name it: panel, series, W."""
    return f"{row['panel']}-{row['series']}-W{row['W']}"


def model_values(rows: list[dict[str, Any]], field: str) -> list[ModelValue]:
    """The rows as one model's values (`field`), one per (panel, series, W), for replays.claims."""
    out: dict[tuple[str, str, int], ModelValue] = {}
    for r in rows:
        key = (r["panel"], r["series"], r["W"])
        point = ModelPoint(point_id(r), r["series"], r["panel"], r["W"])
        out.setdefault(key, ModelValue(point, r.get(field) or None))
    return list(out.values())


def judge(claims: list[Claim], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every claim on each model (claims in file order, each on the analytic model then the flow
    model), by replays.claims in each panel the claim names: ClaimResults as report.json keeps
    them, with the model's name."""
    out = []
    for claim in claims:
        for model, field in MODELS.items():
            out += [{**r.model_dump(), "model": model} for r in evaluate([claim], model_values(rows, field), {})]
    return out


def plot(fig: ModelFigure, rows: list[dict[str, Any]], path: Path) -> None:
    plt = outputs.pyplot()
    n = len(fig.panels)
    canvas, axes = plt.subplots(1, n, figsize=(6.2 * n, 4.6), squeeze=False)
    for ax, panel in zip(axes[0], fig.panels, strict=True):
        for i, series in enumerate(panel.series):
            colour = f"C{i}"
            style = "--" if not series.paper_literal else "-"
            a = _by(rows, panel.id, series.label, "analytic_s")
            if a:
                ax.plot(list(a), list(a.values()), style, color=colour, label=f"{series.label} (analytic)")
            f = _by(rows, panel.id, series.label, "flowmodel_s")
            if f:
                label = f"{series.label} (flow model)"
                ax.plot(list(f), list(f.values()), "o", mfc="none", color=colour, ms=8, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(fig.xlabel)
        ax.set_ylabel("communication time T_push + T_pull (s)")
        ax.set_title(panel.title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    canvas.suptitle(
        f"{fig.title}\nS = {fig.model_mb:g} MB, latency {fig.latency_us:g} us, R = {fig.tors}, "
        f"P = {fig.ps}, B_w = {fig.worker_mbps / 1000:g} Gbit/s",
        fontsize=10,
    )
    canvas.tight_layout()
    outputs.save_png(canvas, path)


CSV_FIELDS = [
    "panel", "series", "W", "P", "hosts", "equation", "c", "hops", "analytic_s", "flowmodel_s", "busiest_s",
    "flow_over_analytic",
]  # fmt: skip


def csv_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """summary.csv's rows: the point's numbers and the flow model over the analytic one."""
    out = []
    for r in rows:
        ratio = r["flowmodel_s"] / r["analytic_s"] if r.get("flowmodel_s") else None
        out.append({**{k: r.get(k) for k in CSV_FIELDS}, "flow_over_analytic": ratio})
    return out


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


def table(fig: ModelFigure, rows: list[dict[str, Any]]) -> list[str]:
    """Markdown: per panel, W down, series across, each cell `analytic / flow model`."""
    lines: list[str] = []
    for panel in fig.panels:
        labels = [s.label for s in panel.series]
        lines += [f"**{panel.title}** (s, analytic / flow model)", ""]
        lines += ["| W | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
        for w in sorted({r["W"] for r in rows if r["panel"] == panel.id}):
            cells = []
            for label in labels:
                r = next((r for r in rows if r["panel"] == panel.id and r["series"] == label and r["W"] == w), None)
                cells.append("-" if r is None else f"{_fmt(r['analytic_s'])} / {_fmt(r.get('flowmodel_s'))}")
            lines.append(f"| {w} | " + " | ".join(cells) + " |")
        lines.append("")
    return lines


def differences(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown: per series, the range of flow model / analytic and what the analytic side used."""
    lines = [
        "| panel | series | equation | C (Eq. 7) | hops | flow model / analytic (min - max) |",
        "|---|---|---|---|---|---|",
    ]
    seen: dict[tuple[str, str], list[dict[str, Any]]] = {}
    flow = {json.dumps(r["spec"], sort_keys=True): r["flowmodel_s"] for r in rows if r.get("flowmodel_s")}
    for r in rows:
        seen.setdefault((r["panel"], r["series"]), []).append(r)
    for (panel, series), rs in seen.items():
        # a line drawn without markers (Eq. 6 read another way) compares with its network's flow model
        sims = [(flow.get(json.dumps(r["spec"], sort_keys=True)), r["analytic_s"]) for r in rs]
        ratios = [f / a for f, a in sims if f]
        span = f"{min(ratios):.3f} - {max(ratios):.3f}" if ratios else "-"
        cs = sorted({r["c"] for r in rs if r["c"] is not None})
        eqs = sorted({r["equation"] for r in rs})
        hops = sorted({r["hops"] for r in rs})
        lines.append(
            f"| {panel} | {series} | {', '.join(eqs)} | {', '.join(map(str, cs)) or '-'} | "
            f"{', '.join(map(str, hops))} | {span} |"
        )
    return lines


def write_model_report(
    fig: ModelFigure,
    out: Path,
    rows: list[dict[str, Any]],
    cap: int,
    quick: bool,
    wall_s: float,
    started: Provenance | None = None,
) -> None:
    verdicts = judge(fig.claims, rows)
    notes = sorted({r["flowmodel_note"] for r in rows if r.get("flowmodel_note")})
    flow_wall = sum(r.get("wall_s", 0.0) for r in rows)
    md = [
        f"# {fig.title}{' (quick)' if quick else ''}",
        "",
        f"No emulation: the analytic model (Eqs. 5-7) and the flow model (SimGrid) at the paper's "
        f"Section 4.2 parameters: S = {fig.model_mb:g} MB, latency {fig.latency_us:g} us per link, R = "
        f"{fig.tors}, P = {fig.ps}, B_w = {fig.worker_mbps:g} Mbit/s. Flow-model points up to W = {cap}; "
        f"analytic beyond. Networks built by topologies.build (routes: the controller's, via the flow "
        f"model's router). What the file inferred about the paper's axes is in "
        f"workloads/figures/{fig.figure}.yaml.",
        "",
        *table(fig, rows),
        "## The paper's claims, on each model",
        "",
        "| claim | model | verdict | numbers |",
        "|---|---|---|---|",
        *[f"| {v['label']} | {v['model']} | {v['verdict']} | {v['detail']} |" for v in verdicts],
        "",
        "## Flow model against analytic",
        "",
        *differences(rows),
        "",
        f"SimGrid settings: {'; '.join(notes) or '-'}. Points computed this time and kept ones: "
        f"{flow_wall:.1f} s of point time in total (as first computed); the last replay that computed "
        f"points took {wall_s:.1f} s.",
        "",
    ]
    data = {"figure": fig.figure, "quick": quick, "wall_s": wall_s, "claims": verdicts, "points": rows}
    files = outputs.ReportFiles(
        markdown=("report.md", "\n".join(md)),
        data=("report.json", data),
        table=outputs.Table("summary.csv", CSV_FIELDS, csv_rows(rows)),
        plots=[(f"{fig.figure}.png", lambda path: plot(fig, rows, path))],
    )
    outputs.write_report_files(out, files)
    figsummary.write_figure_summary(
        out,
        figure=fig.figure,
        kind="model-figure",
        title=fig.title,
        command=f"testbed replay {fig.figure}",
        quick=quick,
        wall_s=wall_s,
        depends_on=[f"workloads/figures/{fig.figure}.yaml", *figsummary.MODEL_DEPENDS],
        files=files,
        points=[PointFidelity(id=p, faithful=None, fidelity="model") for p in dict.fromkeys(map(point_id, rows))],
        headlines=[figsummary.headline(fig.figure, ClaimResult.model_validate(v), v["model"]) for v in verdicts],
        started=started,
    )
