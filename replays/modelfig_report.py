"""A model figure's outputs (replays/modelfig.py): summary.csv, the plot, report.md, report.json.

Plotted as the paper plots Figs. 6-7: communication time T_push + T_pull against the number of
workers, one line per series (the analytic model), the flow model's points as markers of the
same colour on it, one panel per `panels` entry. The report puts both models' numbers side by
side, with their ratio, and judges the paper's statements (the file's `claims`) on each model.
"""

from __future__ import annotations

import csv
import itertools
import json
import logging
from pathlib import Path
from typing import Any

from replays.modelfig import ModelClaim, ModelFigure
from topologies.files import atomic_open, atomic_path, write_json_atomic, write_text_atomic

LOG = logging.getLogger(__name__)

#: the two models a claim is judged on, and the row field each one's value is in
MODELS = {"analytic": "analytic_s", "flow model": "flowmodel_s"}


def _by(rows: list[dict[str, Any]], panel: str, series: str, field: str) -> dict[int, float]:
    return {r["W"]: r[field] for r in rows if r["panel"] == panel and r["series"] == series and r.get(field)}


def judge(claim: ModelClaim, rows: list[dict[str, Any]], field: str) -> tuple[str, str]:
    """(verdict, numbers) of one claim on one model's values (`field`): holds, does NOT hold,
    or not measured (no W has every series it names)."""
    names = [*claim.series, claim.of] if claim.type == "overlap" else claim.series
    values = {s: _by(rows, claim.panel, s, field) for s in names}
    ws = sorted(set.intersection(*(set(v) for v in values.values())))
    if not ws:
        return "not measured", ""
    if claim.type == "overlap":
        gaps = {w: abs(values[claim.series[0]][w] - values[claim.of][w]) / values[claim.of][w] * 100 for w in ws}
        worst = max(gaps, key=lambda w: gaps[w])
        ok = gaps[worst] <= claim.percent
        return ("holds" if ok else "does NOT hold"), f"largest gap {gaps[worst]:.2f}% at W={worst}"
    ok = all(values[a][w] >= values[b][w] * (1 - 1e-9) for a, b in itertools.pairwise(names) for w in ws)
    last = ws[-1]
    if claim.strict:
        ok = ok and values[names[0]][last] > values[names[-1]][last] * (1 + 1e-9)
    detail = " > ".join(f"{s} {values[s][last]:.3f} s" for s in names)
    return ("holds" if ok else "does NOT hold"), f"at W={last}: {detail}"


def plot(fig: ModelFigure, rows: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    with atomic_path(path) as tmp:
        canvas.savefig(tmp, dpi=120)
    plt.close(canvas)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    fields = ["panel", "series", "W", "P", "hosts", "equation", "c", "hops", "analytic_s", "flowmodel_s", "busiest_s"]
    with atomic_open(path, newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=[*fields, "flow_over_analytic"], extrasaction="ignore")
        w.writeheader()
        for r in rows:
            ratio = r["flowmodel_s"] / r["analytic_s"] if r.get("flowmodel_s") else None
            w.writerow({**{k: r.get(k) for k in fields}, "flow_over_analytic": ratio})


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
    fig: ModelFigure, out: Path, rows: list[dict[str, Any]], cap: int, quick: bool, wall_s: float
) -> None:
    write_csv(out / "summary.csv", rows)
    plot(fig, rows, out / f"{fig.figure}.png")
    verdicts = []
    for claim in fig.claims:
        for model, field in MODELS.items():
            verdict, detail = judge(claim, rows, field)
            verdicts.append({"text": claim.text, "model": model, "verdict": verdict, "detail": detail})
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
        *[f"| {v['text']} | {v['model']} | {v['verdict']} | {v['detail']} |" for v in verdicts],
        "",
        "## Flow model against analytic",
        "",
        *differences(rows),
        "",
        f"SimGrid settings: {'; '.join(notes) or '-'}. Points computed this time and kept ones: "
        f"{flow_wall:.1f} s of point time in total (as first computed); this replay took {wall_s:.1f} s.",
        "",
    ]
    write_text_atomic(out / "report.md", "\n".join(md))
    data = {"figure": fig.figure, "quick": quick, "wall_s": wall_s, "claims": verdicts, "points": rows}
    write_json_atomic(out / "report.json", data)
