"""`testbed replay fig6|fig7`: run a model figure (replays/modelfig.py) and write its outputs.

Writes results/<figure>[-quick]/: points/<panel>-<series>-W<W>.json (one per point, kept and
reused while its spec and the code that computes it are unchanged, replays.keptpoints, so a rerun
only computes what changed; `fresh` recomputes; points are computed on a process pool, one
process per core), run.json (the wall time and tree of the last replay that computed points),
summary.csv, <figure>.png (one panel per `panels` entry: analytic lines, flow-model markers),
report.md and report.json (the paper's claims judged on both models; replays.modelfig_report).
"""

from __future__ import annotations

import json
import logging
import os
import time
from concurrent.futures import as_completed
from pathlib import Path
from typing import Any

from replays import figsummary
from replays.figure import REPO
from replays.keptpoints import KeptPoints, replay_provenance, stamp
from replays.modelfig import ModelFigure, Panel, Series, compute_point, load_model_figure, spec_data
from replays.modelfig_report import write_model_report
from replays.pool import worker_pool
from replays.provenance import capture
from topologies.files import write_json_atomic

LOG = logging.getLogger(__name__)
#: what a point's numbers depend on: the module that computes it, the models and the topology
#: model it reaches
POINT_DEPENDS = ["replays/modelfig.py", *figsummary.MODEL_DEPENDS, "topologies/"]


def point_file(out: Path, panel: Panel, series: Series, workers: int) -> Path:
    return out / "points" / f"{panel.id}-{series.slug}-W{workers}.json"


def _compute_width(fig: ModelFigure, todo: list[tuple[str, Series]], workers: int, cap: int) -> dict[str, Any]:
    """One W's pending points (by key), sharing one routing cache: routings are kept by shape,
    and a shape includes W, so the points of one W are all that can share one."""
    routed: dict[str, Any] = {}
    return {key: compute_point(fig, series, workers, cap, routed) for key, series in todo}


def _pool_size(tasks: int) -> int:
    """Processes for the model's points: one per core (the flow model and the routing are
    single-threaded Python), no more than there are W values to compute."""
    return max(1, min(tasks, os.cpu_count() or 1))


def replay_model_figure(name: str, quick: bool = False, fresh: bool = False, results: Path = REPO / "results") -> Path:
    """Compute (or reuse) every point of a model figure, then write CSV, plot and report.

    Pending points run one W per task, the largest W first, on a process pool with one process per
    core: Fig. 7's W = 720 (~86 s, 2026-11-24) takes one core while the other computes the rest.
    Processes are spawned, not forked: the group replay's process may hold TensorFlow's threads."""
    fig = load_model_figure(name)
    out = results / (f"{name}-quick" if quick else name)
    (out / "points").mkdir(parents=True, exist_ok=True)
    xs = fig.quick.workers if quick else fig.workers
    cap = fig.quick.flowmodel_max_workers if quick else fig.flowmodel_max_workers
    t0 = time.monotonic()
    started = capture(quick)  # the tree its points are computed on
    kept_points = KeptPoints(started, POINT_DEPENDS)
    wanted: list[tuple[Panel, Series, int, str]] = []
    points: dict[str, dict[str, Any]] = {}  # by spec: a line two panels share runs once
    todo: dict[int, dict[str, Series]] = {}  # W -> pending points by key
    for panel in fig.panels:
        for series in panel.series:
            for w in xs:
                want_flow = series.flowmodel and w <= cap
                data = spec_data(fig, series, w)
                key = json.dumps([data, series.paper_literal, want_flow], sort_keys=True)
                wanted.append((panel, series, w, key))
                if key in points or key in todo.get(w, {}):
                    continue
                due = ("flowmodel_s",) if want_flow else ()
                kept = None if fresh else kept_points.get(point_file(out, panel, series, w), data, due)
                if kept is not None:
                    points[key] = kept
                else:
                    todo.setdefault(w, {})[key] = series
    widths = sorted(todo, reverse=True)
    if widths:
        procs = _pool_size(len(widths))
        LOG.info("%s: %d points to compute over %d processes", name, sum(map(len, todo.values())), procs)
        with worker_pool(procs) as pool:
            futures = {pool.submit(_compute_width, fig, list(todo[w].items()), w, cap): w for w in widths}
            for done in as_completed(futures):
                LOG.info("%s: W=%d done (%d points)", name, futures[done], len(todo[futures[done]]))
                points.update({k: stamp(p, started) for k, p in done.result().items()})
    rows: list[dict[str, Any]] = []
    for panel, series, w, key in wanted:
        write_json_atomic(point_file(out, panel, series, w), points[key])
        rows.append({"panel": panel.id, "series": series.label, **points[key]})
    wall = time.monotonic() - t0
    wall, started = replay_provenance(out, bool(widths), wall, started)
    write_model_report(fig, out, rows, cap, quick, wall, started)
    return out
