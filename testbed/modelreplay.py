"""`testbed replay fig6|fig7`: run a model figure (testbed/modelfig.py) and write its outputs.

Writes results/<figure>[-quick]/: points/<panel>-<series>-W<W>.json (one per point, kept and
reused while its spec is unchanged, so a rerun only computes what changed; `fresh` recomputes),
summary.csv, <figure>.png (one panel per `panels` entry: analytic lines, flow-model markers),
report.md and report.json (the paper's claims judged on both models; testbed.modelfig_report).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from testbed.figure import REPO
from testbed.modelfig import Panel, Series, compute_point, load_model_figure, spec_data
from testbed.modelfig_report import write_model_report

LOG = logging.getLogger(__name__)


def point_file(out: Path, panel: Panel, series: Series, workers: int) -> Path:
    return out / "points" / f"{panel.id}-{series.slug}-W{workers}.json"


def kept_point(path: Path, data: dict[str, Any], want_flow: bool) -> dict[str, Any] | None:
    """A saved point computed from the same spec (and with a flow-model value when one is due)."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if saved.get("spec") != data or (want_flow and saved.get("flowmodel_s") is None):
        return None
    return saved


def replay_model_figure(name: str, quick: bool = False, fresh: bool = False, results: Path = REPO / "results") -> Path:
    """Compute (or reuse) every point of a model figure, then write CSV, plot and report."""
    fig = load_model_figure(name)
    out = results / (f"{name}-quick" if quick else name)
    (out / "points").mkdir(parents=True, exist_ok=True)
    xs = fig.quick.workers if quick else fig.workers
    cap = fig.quick.flowmodel_max_workers if quick else fig.flowmodel_max_workers
    t0 = time.monotonic()
    rows: list[dict[str, Any]] = []
    done: dict[str, dict[str, Any]] = {}  # this run's points by spec: a line two panels share runs once
    routed: dict[str, Any] = {}  # this run's routings by shape (compute_point)
    for panel in fig.panels:
        for series in panel.series:
            for w in xs:
                path = point_file(out, panel, series, w)
                want_flow = series.flowmodel and w <= cap
                data = spec_data(fig, series, w)
                key = json.dumps([data, series.paper_literal, want_flow], sort_keys=True)
                point = done.get(key) or (None if fresh else kept_point(path, data, want_flow))
                if point is None:
                    LOG.info("%s: %s %s W=%d", name, panel.id, series.label, w)
                    point = compute_point(fig, series, w, cap, routed)
                done[key] = point
                path.write_text(json.dumps(point, indent=1))
                rows.append({"panel": panel.id, "series": series.label, **point})
    wall = time.monotonic() - t0
    write_model_report(fig, out, rows, cap, quick, wall)
    return out
