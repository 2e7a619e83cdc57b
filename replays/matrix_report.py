"""The matrix's outputs from its cells' summaries: matrix.md, matrix.csv, matrix.json, matrix.png.

Reads only results/<matrix>/points/<cell>/rep*/summary.json (so `--report-only` redraws without
running). Per cell: GST and BCT mean with a 95% CI, the schedule's expectation (bytes on the busiest
cable over its rate) and HiPS Table 3's formula where it has one, cross-region bytes, the fidelity
verdict; a cell that does not apply says why. tf-ps has no synchronisation phase of its own: its
GST is the measured communication of each step (the links' busy time, runs.steptime), and its
expectation and cross-region bytes are counted on the `ps` schedule, which is TF's push/pull traffic.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from replays import figsummary, outputs
from replays.evidence import PointFidelity
from replays.figure import rep_dir
from replays.matrix import Cell, MatrixRun
from runs.stats import describe
from runs.summary import RunSummary, Stats, SummaryError, read_summary
from schemes.count import expected_sync_s
from schemes.registry import gather
from schemes.registry import get as get_scheme
from schemes.schedule import ELEM_BYTES, cross_region_bytes
from topologies.build import build_network

NORMALISATION = "colour: the cell's GST over the fastest GST of its topology (row); 1 = the row's best scheme"


class CellResult(BaseModel):
    """One cell as the table shows it."""

    topology: str
    label: str
    scheme: str
    applies: bool
    why: str = Field(description="why the cell does not apply; empty where it does")
    workers: int | None = Field(description="hosts whose gradients are summed")
    repetitions: int
    failed: list[str]
    gst_mean_s: float | None
    gst_ci95_s: float | None
    bct_mean_s: float | None
    bct_ci95_s: float | None
    ci_over: str = Field(description="repetitions | iterations (one repetition) | ''")
    expected_sync_s: float | None = Field(description="the schedule's busiest cable's bytes over its rate")
    gst_formula_s: float | None = Field(description="HiPS Table 3's GST where the scheme and topology have one")
    cross_region_bytes: int | None = Field(description="bytes between hosts of different regions, all levels")
    faithful: bool | None
    fidelity: str


class MatrixReport(BaseModel):
    """What matrix.md says, as data: matrix.json."""

    matrix: str
    title: str
    quick: bool
    emulated_mbps: float
    compress: float
    model: str
    gradient_bytes_emulated: float | None = Field(description="one gradient size for every cell")
    repetitions: int
    job: dict[str, Any]
    wall_s: float | None
    normalisation: str = NORMALISATION
    cells: list[CellResult]


def _fold(stats: list[Stats | None]) -> tuple[float | None, float | None, str]:
    """Mean and 95% CI half-width: over the repetitions' means, or one run's own over its iterations."""
    measured = [s for s in stats if s and s.n and s.mean is not None]
    if not measured:
        return None, None, ""
    if len(measured) > 1:
        d = describe([float(s.mean or 0.0) for s in measured])
        return d["mean"], d["ci95"], "repetitions"
    ci = measured[0].ci95
    return measured[0].mean, ci if isinstance(ci, int | float) and math.isfinite(ci) else None, "iterations"


def _tf_ps_counts(cell: Cell, model_bytes: float) -> tuple[float, int]:
    """A TF job (tf-ps): the expectation and cross-region bytes of the schedule its bytes follow
    (the registry compiles TF's push/pull traffic as the `ps` schedule)."""
    assert cell.spec is not None
    net = build_network(cell.spec, cell.source)
    sched = get_scheme(cell.scheme).compile(gather(net, cell.scheme, int(model_bytes) // ELEM_BYTES))
    return expected_sync_s(net, sched), sum(cross_region_bytes(sched, net.family.regions(net)))


def cell_result(cell: Cell, out: Path, reps: int) -> CellResult:
    base = {"topology": cell.topo.id, "label": cell.topo.label, "scheme": cell.scheme, "applies": cell.applies}
    summaries: list[RunSummary] = []
    failed: list[str] = []
    for k in range(1, reps + 1) if cell.applies else []:
        try:
            s = read_summary(rep_dir(out, cell.point, k) / "summary.json")
        except OSError:
            failed.append(f"rep{k}: not run")
            continue
        except SummaryError as err:  # one line naming the file and the field
            failed.append(f"rep{k}: {err}")
            continue
        if s.complete:
            summaries.append(s)
        else:
            failed.append(f"rep{k}: {s.error or 'incomplete'}")
    tf = not get_scheme(cell.scheme).engine  # TF's job: no sync phase of its own, its links' busy time
    gst = _fold([(s.step_split.comm_s if s.step_split else None) if tf else s.gst_s for s in summaries])
    bct = _fold([s.bct_s for s in summaries])
    first = summaries[0] if summaries else None
    expected = first.expected_sync_s if first else None
    cross_total = sum(first.cross_region_bytes) if first and first.cross_region_bytes else None
    if tf and first:
        expected, cross_total = _tf_ps_counts(cell, float(first.model_bytes_emulated or 0.0))
    return CellResult(
        **base,
        why=cell.why,
        workers=first.workers if first else None,
        repetitions=len(summaries),
        failed=failed,
        gst_mean_s=gst[0],
        gst_ci95_s=gst[1],
        bct_mean_s=bct[0],
        bct_ci95_s=bct[1],
        ci_over=gst[2] or bct[2],
        expected_sync_s=expected,
        gst_formula_s=first.gst_formula_s if first else None,
        cross_region_bytes=cross_total,
        faithful=all(s.faithful for s in summaries) if summaries else None,
        fidelity="; ".join(sorted({s.fidelity_reason for s in summaries})),
    )


def _num(x: float | None, ci: float | None = None) -> str:
    if x is None:
        return "-"
    return f"{x:.2f}" + (f" ±{ci:.2f}" if ci is not None else "")


def _status(c: CellResult) -> str:
    if not c.applies:
        return f"n/a: {c.why}"
    if c.gst_mean_s is None and c.bct_mean_s is None:
        return "; ".join(c.failed) if all(f.endswith("not run") for f in c.failed) else "failed: " + "; ".join(c.failed)
    return "faithful" if c.faithful else f"NOT faithful: {c.fidelity}"


def markdown(rep: MatrixReport) -> str:
    """matrix.md: settings, then one row per cell."""
    gradient = f"{rep.gradient_bytes_emulated / 1e6:.3f} MB" if rep.gradient_bytes_emulated else "-"
    lines = [
        f"# {rep.title}" + (" (quick)" if rep.quick else ""),
        "",
        f"- every cell: {rep.model} gradient, {gradient} emulated (paper size / scale / compress {rep.compress:g}), "
        f"every B_w emulated at {rep.emulated_mbps:g} Mbit/s; job {json.dumps(rep.job)}; "
        f"{rep.repetitions} repetition(s) per cell",
        "- GST: per run, the mean over its measured iterations of the slowest worker's synchronisation time "
        "(tf-ps: the links' busy time per step, runs.steptime); BCT: compute + sync + apply per "
        "iteration (tf-ps: TF's step); ± is the 95% CI (over repetitions, or over one run's iterations)",
        "- expected: the schedule's bytes on the busiest cable over its rate (tf-ps: the ps schedule); "
        "Table 3: HiPS's GST formula where it has one; cross-region: bytes between hosts of different "
        "oversubscribed regions (counted on the schedule; '-' where the topology has none)",
        f"- heat map ({rep.matrix}.png): {rep.normalisation}",
    ]
    if rep.wall_s is not None:
        lines.append(f"- wall time of the last run: {rep.wall_s / 60:.1f} min (time queued behind other runs left out)")
    lines += [
        "",
        f"![{rep.matrix}]({rep.matrix}.png)",
        "",
        "| topology | scheme | W | GST (s) | BCT (s) | expected (s) | Table 3 (s) | cross-region (MB) | verdict |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for c in rep.cells:
        cross = "-" if not c.cross_region_bytes else f"{c.cross_region_bytes / 1e6:.2f}"
        lines.append(
            f"| {c.label} | {c.scheme} | {c.workers or '-'} | {_num(c.gst_mean_s, c.gst_ci95_s)} "
            f"| {_num(c.bct_mean_s, c.bct_ci95_s)} | {_num(c.expected_sync_s)} | {_num(c.gst_formula_s)} "
            f"| {cross} | {_status(c).replace('|', '/')} |"
        )
    return "\n".join(lines) + "\n"


CSV_FIELDS = [
    "topology", "label", "scheme", "applies", "why", "workers", "repetitions", "gst_mean_s", "gst_ci95_s",
    "bct_mean_s", "bct_ci95_s", "ci_over", "expected_sync_s", "gst_formula_s", "cross_region_bytes", "faithful",
    "fidelity", "failed",
]  # fmt: skip


def csv_rows(cells: list[CellResult]) -> list[dict[str, Any]]:
    """matrix.csv's rows: one per cell, its failures joined."""
    return [{**c.model_dump(), "failed": "; ".join(c.failed)} for c in cells]


def heatmap(rep: MatrixReport, path: Path) -> None:
    """Rows topologies, columns schemes; colour = GST over the row's fastest; each cell's GST in
    seconds written on it (* not faithful), grey 'n/a' where the cell does not apply."""
    import matplotlib
    import numpy as np

    plt = outputs.pyplot()

    rows = list(dict.fromkeys(c.label for c in rep.cells))
    cols = list(dict.fromkeys(c.scheme for c in rep.cells))
    grid = np.full((len(rows), len(cols)), np.nan)
    for c in rep.cells:
        if c.gst_mean_s is not None:
            grid[rows.index(c.label), cols.index(c.scheme)] = c.gst_mean_s
    best = np.nanmin(np.where(np.isnan(grid), np.inf, grid), axis=1, keepdims=True)
    norm = np.ma.masked_invalid(grid / np.where(np.isfinite(best), best, np.nan))
    fig, ax = plt.subplots(figsize=(1.3 * len(cols) + 3, 0.8 * len(rows) + 2))
    cmap = matplotlib.colormaps["viridis_r"].with_extremes(bad="#dddddd")
    im = ax.imshow(norm, cmap=cmap, aspect="auto", vmin=1)
    top = float(norm.max()) if norm.count() else 1.0
    for c in rep.cells:
        i, j = rows.index(c.label), cols.index(c.scheme)
        if c.gst_mean_s is not None:
            text = f"{c.gst_mean_s:.2f} s" + ("" if c.faithful else "*")
        else:
            text = "n/a" if not c.applies else "not run" if all(f.endswith("not run") for f in c.failed) else "failed"
        dark = c.gst_mean_s is not None and float(norm[i, j]) > 1 + (top - 1) / 2  # white on the dark half
        ax.text(j, i, text, ha="center", va="center", fontsize=8, color="w" if dark else "k")
    ax.set_xticks(range(len(cols)), cols, rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    fig.colorbar(im, ax=ax, label="GST / fastest GST of the row")
    gradient = f"{rep.gradient_bytes_emulated / 1e6:.2f} MB" if rep.gradient_bytes_emulated else ""
    ax.set_title(
        f"{rep.title}{' (quick)' if rep.quick else ''}\nGST per iteration (s, emulated; * not faithful); "
        f"{rep.model} {gradient} at {rep.emulated_mbps:g} Mbit/s",
        fontsize=9,
    )
    fig.tight_layout()
    outputs.save_png(fig, path)


def write_matrix_report(run: MatrixRun) -> MatrixReport:
    """matrix.md, matrix.csv, matrix.json and <matrix>.png in the run's folder; returns the report."""
    m, fig, cells, out, reps, quick = run.spec, run.fig, run.cells, run.out, run.reps, run.quick
    command, source = run.command, run.source
    out.mkdir(parents=True, exist_ok=True)
    results = [cell_result(c, out, reps) for c in cells]
    sizes = []
    for c in cells:
        for k in range(1, reps + 1) if c.applies else []:
            try:
                size = read_summary(rep_dir(out, c.point, k) / "summary.json").model_bytes_emulated
            except (OSError, SummaryError):
                continue
            if size is not None:
                sizes.append(size)
    wall_s, started = figsummary.last_run(out)
    rep = MatrixReport(
        matrix=m.matrix,
        title=m.title,
        quick=quick,
        emulated_mbps=m.emulated_mbps,
        compress=m.compress,
        model=fig.job.get("model", ""),
        gradient_bytes_emulated=statistics.median(sizes) if sizes else None,
        repetitions=reps,
        job=fig.job,
        wall_s=wall_s,
        cells=results,
    )
    files = outputs.ReportFiles(
        markdown=("matrix.md", markdown(rep)),
        data=("matrix.json", rep),
        table=outputs.Table("matrix.csv", CSV_FIELDS, csv_rows(results)),
        plots=[(f"{m.matrix}.png", lambda path: heatmap(rep, path))],
    )
    outputs.write_report_files(out, files)
    figsummary.write_figure_summary(
        out,
        figure=m.matrix,
        kind="matrix",
        title=m.title,
        command=command,
        quick=quick,
        wall_s=rep.wall_s,
        depends_on=[source, *figsummary.EMULATED_DEPENDS],
        files=files,
        points=[
            PointFidelity(id=c.point.id, faithful=r.faithful, fidelity=r.fidelity or r.why)
            for c, r in zip(cells, results, strict=True)
        ],
        repetitions=reps,
        started=started,
    )
    return rep
