"""Every replay kind's figure-level summary.json (replays.evidence, schema figure-summary/1), built one way.

An emulated figure (replays.report), a model figure (replays.modelfig_report) and the matrix
(replays.matrix_report) each hand over their name, kind, files, points' fidelity and claim results
(replays.claims.ClaimResult, one claims engine for all); this module turns each claim result into
the page's headline (the number behind it where the claim type has one, the verdict as the claims
engine wrote it) and writes the summary through replays.outputs, beside the report.

The provenance is the run's (replays.provenance: commit, local changes, machine, command line),
captured when its points started, not when its report was written: a commit made while a replay
ran must not pass for the code its points ran on. An emulated replay keeps it in `run.json` with
its wall time (the time queued for the emulator left out); a model replay hands it over itself.
A `--report-only` redraw of runs with no `run.json` records the tree that drew it. Every summary
also records the tree whose code drew it (`drawn`, replays.evidence.loaded_tree): a replay that
keeps its points redraws them with today's claims and report code, which the page then judges
against that tree rather than the points' (replays.staleness.DRAWING).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from replays import outputs
from replays.catalogue import paper_of
from replays.claims import PAPER_EQ, ClaimResult
from replays.evidence import FigureSummary, Files, Headline, PointFidelity, loaded_tree, write_summary
from replays.provenance import Provenance, capture

#: what every replay's numbers depend on beside its own file: the replay code, the topology model
#: and the papers' numbers
COMMON_DEPENDS = ["replays/", "topologies/", "results/reference/"]
#: what an emulated run depends on (the platform; schemes.registry and the engine for scheme jobs)
EMULATED_DEPENDS = ["runs/", "emulation/", "controller/", "tfjob/", "engine/", "schemes/"]
#: what a model figure depends on (not the flow model's calibration file: a model figure simulates
#: the paper's network, uncalibrated, models.flow.paper_scale and runs.simulate's `calibrated=False`)
MODEL_DEPENDS = ["models/"]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "all"


def measured_of(result: ClaimResult) -> tuple[float | None, str]:
    """The one number behind a claim result and its unit, where its type has one (a speed-up, a
    gap, a spread); (None, '') where the verdict rests on an order or a bound (the detail says it)."""
    v = result.values
    if result.type == "faster_than" and v.get("ratio") is not None:
        return v["ratio"], "x (paper-equivalent seconds)" if result.unit == PAPER_EQ else "x"
    if result.type == "within_percent_of" and v.get("difference") is not None:
        return v["difference"] * 100, "% apart" + (" (largest)" if "x" in v else "")
    if result.type == "varies" and v.get("spread") is not None:
        return v["spread"] * 100, "% spread"
    return None, ""


def headline(
    figure: str,
    result: ClaimResult,
    model: str = "",
    n: int | None = None,
    decomposition: Any = None,
    ci95: float | None = None,
) -> Headline:
    """One claim result as the page's card. `model`: which model a model figure's result is on;
    `decomposition`: the parts of the BCTs it compares, where the figure splits them; `ci95`: the
    half-width of the measured number's 95% CI, where the figure has one (a speed-up's)."""
    measured, unit = measured_of(result)
    paper = result.values.get("paper")
    parts = [figure, _slug(result.group), result.type, *(["paper"] if result.compares_paper else [])]
    if result.type == "bounded_by_model" and result.points:
        parts.append(result.points[0])
    if model:
        parts.append(_slug(model))
    return Headline(
        id=".".join(parts),
        claim=f"{result.label} [{model}]" if model else result.label,
        paper_value=paper,
        paper_text=f"{paper:g}x" if paper is not None and result.type == "faster_than" else None,
        measured=measured,
        ci95=ci95 if measured is not None else None,
        n=n if measured is not None else None,
        unit=unit,
        verdict=result.verdict,
        why=result.detail if result.holds is False else "",
        detail=result.detail,
        points=result.points,
        decomposition=decomposition,
    )


def unique(headlines: list[Headline]) -> list[Headline]:
    """The headlines with ids made unique (a second card with the same id gets -2, -3...)."""
    seen: dict[str, int] = {}
    out = []
    for h in headlines:
        seen[h.id] = seen.get(h.id, 0) + 1
        out.append(h if seen[h.id] == 1 else h.model_copy(update={"id": f"{h.id}-{seen[h.id]}"}))
    return out


def run_record(wall_s: float, queued_s: float, started: Provenance) -> dict[str, Any]:
    """`run.json` of a replay whose points ran: its wall time, the time queued, and the tree it started on."""
    return {"wall_s": wall_s, "queued_s": queued_s, "ended": time.time(), "provenance": started.model_dump()}


def last_run(out: Path) -> tuple[float | None, Provenance | None]:
    """The last run's wall time (queueing left out) and start provenance from `out`/run.json, if any."""
    path = out / "run.json"
    if not path.exists():
        return None, None
    run = json.loads(path.read_text())
    started = Provenance.model_validate(run["provenance"]) if "provenance" in run else None
    return run["wall_s"] - run.get("queued_s", 0.0), started


def write_figure_summary(
    out: Path,
    *,
    figure: str,
    kind: Literal["figure", "model-figure", "matrix"],
    title: str,
    command: str,
    quick: bool,
    wall_s: float | None,
    depends_on: Sequence[str],
    files: outputs.ReportFiles,
    points: Sequence[PointFidelity],
    headlines: Sequence[Headline] = (),
    repetitions: int | None = None,
    started: Provenance | None = None,
) -> Path:
    """results/<name>/summary.json for the replay whose report `files` were just written in `out`;
    `started`: the provenance captured when its points started (else: now)."""
    provenance = started or capture(quick=quick)
    summary = FigureSummary(
        name=out.name,
        kind=kind,
        paper=paper_of(figure),
        title=title,
        command=command + (" --quick" if quick else ""),
        quick=quick,
        provenance=provenance.finished(wall_s) if wall_s is not None else provenance,
        drawn=loaded_tree(),
        depends_on=list(dict.fromkeys([*depends_on, *COMMON_DEPENDS])),
        files=Files(report=files.markdown[0], data=files.table.name, figures=[name for name, _ in files.plots]),
        repetitions=repetitions,
        points=list(points),
        headlines=unique(list(headlines)),
    )
    return write_summary(out, summary)  # marked complete, last, whole
