"""A scheme model figure's outputs (replays/schemefig.py): summary.csv, the plot, report.md,
report.json, summary.json.

Drawn as the emulated bar figures are (a group per network, a bar per scheme), on a log scale (a
PS at 32:1 is tens of times a RAT), with each point's own references beside it: the busiest
cable's bytes over its rate (what no schedule beats) and, for HiPS's schemes, Table 3's formula.
The file's claims are judged by replays.claims, the engine every figure uses: each point's
flow-model GST is its `bct`, its bound the schedule's expectation a faster_than claim explains with.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replays import figsummary, outputs
from replays.claims import ClaimResult, FasterThan, evaluate, paper_reference
from replays.evidence import PointFidelity
from replays.provenance import Provenance
from replays.schemefig import SchemeModelFigure

LOG = logging.getLogger(__name__)
#: what a scheme figure's points depend on beside the models: the schemes, the simulation's entry
#: (runs/simulate.py, named: the figure's kind, replays.staleness) and what it reaches in runs/ and
#: engine/ (a scheme job's hosts, options and pauses), and the experiment model
SCHEME_DEPENDS = ["schemes/", "runs/simulate.py", "runs/", "engine/", "workloads/experiment.py"]
#: the model every claim of these figures is judged on (the headline cards name it)
MODEL = "flow model"


@dataclass(frozen=True)
class ValuePoint:
    """A point as a claim reads it (replays.claims.PointLike)."""

    id: str
    series: str
    group: str
    x: float | None
    x_name: str = "x"


@dataclass(frozen=True)
class SchemeValue:
    """A point's flow-model GST as replays.claims.Measured: no fidelity verdict (a model), its
    schedule's busiest-cable bound as the expectation a speed-up is explained with."""

    point: ValuePoint
    bct: float | None
    pred: dict = field(default_factory=dict)
    faithful: bool | None = None
    unfaithful_reason: str = ""
    compress: float = 1.0
    rest_s: float | None = None
    link_s: float | None = None
    mtu: int | None = None
    bct_paper: float | None = None

    @property
    def placed(self) -> dict:
        return {}


def values(rows: list[dict[str, Any]]) -> list[SchemeValue]:
    return [
        SchemeValue(ValuePoint(r["id"], r["series"], r["group"], r["x"]), r["gst_s"], {"gst_s": r["bound_s"]})
        for r in rows
    ]


def judge(fig: SchemeModelFigure, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every claim on every group, as report.json keeps them (with the model's name)."""
    return [{**r.model_dump(), "model": MODEL} for r in evaluate(fig.claims, values(rows), paper_reference())]


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a and b else None


CSV_FIELDS = [
    "group", "series", "x", "scheme", "hosts", "W", "gst_s", "gst_min_s", "gst_max_s", "seeds", "bound_s",
    "gst_over_bound", "formula_s", "gst_over_formula", "cross_region_over_s", "messages", "sim_s", "max_rss_mb",
    "wall_s",
]  # fmt: skip


def csv_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for r in rows:
        cross = r["cross_region_bytes"][0] / r["model_bytes"] if r["cross_region_bytes"] else None
        out.append(
            {
                **{k: r.get(k) for k in CSV_FIELDS},
                "gst_over_bound": _ratio(r["gst_s"], r["bound_s"]),
                "gst_over_formula": _ratio(r["gst_s"], r.get("formula_s")),
                "cross_region_over_s": cross,
            }
        )
    return out


def _f(v: float | None, fmt: str = ".4f") -> str:
    return "-" if v is None else format(v, fmt)


def table(fig: SchemeModelFigure, rows: list[dict[str, Any]]) -> list[str]:
    """Markdown: one row per point, groups in file order."""
    lines = [
        "| group | hosts | series | GST (s) | busiest cable (s) | GST / busiest | Table 3 (s) | GST / Table 3 | "
        "bytes across regions (x S) | messages |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        spread = f" ({_f(r['gst_min_s'])} - {_f(r['gst_max_s'])}, {r['seeds']} draws)" if r["seeds"] > 1 else ""
        cross = " / ".join(f"{b / r['model_bytes']:.1f}" for b in r["cross_region_bytes"]) or "-"
        lines.append(
            f"| {r['group']} | {r['hosts']} | {r['series']} ({r['scheme']}) | {_f(r['gst_s'])}{spread} | "
            f"{_f(r['bound_s'])} | {_f(_ratio(r['gst_s'], r['bound_s']), '.2f')} | {_f(r.get('formula_s'))} | "
            f"{_f(_ratio(r['gst_s'], r.get('formula_s')), '.2f')} | {cross} | {r['messages']} |"
        )
    return lines


def plot(fig: SchemeModelFigure, rows: list[dict[str, Any]], path: Path) -> None:
    plt = outputs.pyplot()
    groups = [g.group for g in fig.groups if any(r["group"] == g.group for r in rows)]
    series = [s.series for s in fig.series]
    width = 0.8 / len(series)
    canvas, ax = plt.subplots(figsize=(max(6.5, 1.4 * len(groups) * len(series) / 2), 4.8))
    for j, name in enumerate(series):
        xs, ys = [], []
        for i, g in enumerate(groups):
            r = next((r for r in rows if r["group"] == g and r["series"] == name), None)
            if r is None:
                continue
            x = i - 0.4 + width * (j + 0.5)
            xs.append(x)
            ys.append(r["gst_s"])
            ax.plot([x - width / 2, x + width / 2], [r["bound_s"]] * 2, "k-", lw=1.2)
            if r.get("formula_s"):
                ax.plot([x], [r["formula_s"]], "rx", ms=7)
            if r["seeds"] > 1:
                ax.plot([x, x], [r["gst_min_s"], r["gst_max_s"]], "k-", lw=0.8)
        ax.bar(xs, ys, width=width * 0.95, color=f"C{j}", label=name)
    ax.plot([], [], "k-", lw=1.2, label="busiest cable's bytes / rate")
    if any(r.get("formula_s") for r in rows):
        ax.plot([], [], "rx", label="Table 3's formula")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels(groups, fontsize=8)
    ax.set_yscale("log")
    ax.set_xlabel(fig.xlabel)
    ax.set_ylabel("GST on the flow model (s)")
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(fig.title, fontsize=9)
    canvas.tight_layout()
    outputs.save_png(canvas, path)


def against_paper(fig: SchemeModelFigure, verdicts: list[dict[str, Any]]) -> list[str]:
    """Markdown: each speed-up the paper states a number for, ours group by group beside it (the
    first result of each faster_than claim that names a paper key), the last group last (RAT
    Fig. 6's largest oversubscription, HiPS's largest network)."""
    lines = []
    for claim in fig.claims:
        if not isinstance(claim, FasterThan) or not claim.paper:
            continue
        ours = [
            v for v in verdicts
            if v["type"] == "faster_than" and not v["compares_paper"] and v["series"] == [claim.series, claim.than]
            and v["values"].get("ratio") is not None
        ]  # fmt: skip
        if not ours:
            continue
        cells = [f"{v['group']}: {v['values']['ratio']:.2f}x (paper {_f(v['values'].get('paper'), 'g')}x)"
                 for v in ours]  # fmt: skip
        last = ours[-1]["values"]
        share = _ratio(last["ratio"], last.get("paper"))
        lines.append(
            f"- {claim.than} / {claim.series}: " + "; ".join(cells)
            + (f". At {ours[-1]['group']}: {share:.2f} of the paper's." if share else ".")
        )  # fmt: skip
    return lines


def cost(rows: list[dict[str, Any]]) -> list[str]:
    """Markdown: what the largest points cost (the figure's size caps rest on these)."""
    top = sorted(rows, key=lambda r: r["wall_s"], reverse=True)[:6]
    lines = ["| group | series | hosts | messages | SimGrid (s) | max RSS (MB) | point (s, all draws) |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in top:
        lines.append(
            f"| {r['group']} | {r['series']} | {r['hosts']} | {r['messages']} | {r['sim_s']:.1f} | "
            f"{r['max_rss_mb']:.0f} | {r['wall_s']:.1f} |"
        )
    return lines


def write_scheme_report(
    fig: SchemeModelFigure,
    out: Path,
    rows: list[dict[str, Any]],
    quick: bool,
    wall_s: float,
    started: Provenance | None = None,
) -> None:
    verdicts = judge(fig, rows)
    configs = sorted({r["config"] for r in rows})
    model_mb = rows[0]["model_bytes"] / 1e6 if rows else 0.0
    late = [r for r in rows if r.get("pauses_end_s") is not None and r["gst_max_s"] > r["pauses_end_s"]]
    shown = {r["group"] for r in rows}
    omitted = [f"{n} on {g.group}" for g in fig.groups if g.group in shown for n in g.omit]
    md = [
        f"# {fig.title}{' (quick)' if quick else ''}",
        "",
        "No emulation: every point is one synchronisation of the scheme job on the flow model (SimGrid; "
        f"{'; '.join(configs) or '-'}) at the paper's rates and bytes: B = {fig.worker_mbps / 1000:g} Gbit/s "
        f"per host NIC, {fig.latency_us:g} us per cable, S = {model_mb:.1f} MB per worker. The schedule is the "
        "scheme registry's compile with the job's options (what the engine runs), the routes the controller's, "
        "the network the topology model's; a paused group's value is the mean over its draws (seeds). How each "
        f"network is sized, and the caps, are in workloads/figures/{fig.figure}.yaml.",
        "",
        *table(fig, rows),
        "",
        "GST / busiest: the flow model over the busiest cable's bytes over its rate (1.00: the schedule keeps "
        "its bottleneck busy throughout). Bytes across regions: what crosses each oversubscribed level "
        "(rack, ...), in units of S.",
        "",
        *([f"Not simulated (the figure's caps, see its file): {'; '.join(omitted)}.", ""] if omitted else []),
        "## The paper's claims, on the flow model",
        "",
        "| claim | verdict | numbers |",
        "|---|---|---|",
        *[f"| {v['label']} | {v['verdict']} | {v['detail']} |" for v in verdicts],
        "",
    ]
    landing = against_paper(fig, verdicts)
    if landing or fig.notes:
        md += ["## Where it lands against the paper, and why", "", *landing, ""]
        md += [fig.notes.strip(), ""] if fig.notes else []
    if late:
        md += [f"Note: {len(late)} points outlasted their pause draws (the pauses stop after for_s).", ""]
    md += [
        "## Cost",
        "",
        *cost(rows),
        "",
        f"The last replay that simulated points took {wall_s:.1f} s (kept points, computed on the same code, are "
        f"not simulated again; point times are as first computed: "
        f"{sum(r['wall_s'] for r in rows):.0f} s summed over every point's processes).",
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
        depends_on=[f"workloads/figures/{fig.figure}.yaml", *figsummary.MODEL_DEPENDS, *SCHEME_DEPENDS],
        files=files,
        points=[PointFidelity(id=r["id"], faithful=None, fidelity="model") for r in rows],
        headlines=[figsummary.headline(fig.figure, ClaimResult.model_validate(v), v["model"]) for v in verdicts],
        started=started,
    )
