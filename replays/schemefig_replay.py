"""`testbed replay rat-fig6-scale` (and every `traffic: schemes` model figure): run its points on
the flow model (replays/schemefig.py) and write its outputs (replays/schemefig_report.py).

Writes results/<figure>[-quick]/: points/<group>-<series>[-s<seed>].json (one per simulation,
kept and reused while its spec and the code that computes it are unchanged, replays.keptpoints,
so a rerun only simulates what changed; `fresh` recomputes), run.json (the wall time and tree of
the last replay that simulated points), then summary.csv, <figure>.png, report.md, report.json
and summary.json.
Simulations run on a process pool, one spawned process per core, the largest networks first
(each simulation spawns its own SimGrid process: one Engine per process).
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import as_completed
from pathlib import Path
from typing import Any

from replays import figsummary
from replays.figure import FIGURES, REPO
from replays.keptpoints import KeptPoints, replay_provenance, stamp
from replays.pool import worker_pool
from replays.provenance import capture
from replays.schemefig import PointRef, compute_point, fold, load_scheme_figure, slug
from replays.schemefig_report import SCHEME_DEPENDS, write_scheme_report
from topologies.files import write_json_atomic

LOG = logging.getLogger(__name__)
#: what a simulation's numbers depend on: the module that computes it and what it reaches
POINT_DEPENDS = ["replays/schemefig.py", *figsummary.MODEL_DEPENDS, *SCHEME_DEPENDS, "topologies/"]


def run_file(out: Path, ref: PointRef, seed: int | None) -> Path:
    tail = "" if seed is None else f"-s{seed}"
    return out / "points" / f"{slug(ref.group)}-{slug(ref.series)}{tail}.json"


def _size(spec: dict[str, Any]) -> int:
    """A cost order: the network's hosts, squared (the flat schemes' messages), from the topology
    model itself (a build without routes is cheap)."""
    from runs.simulate import topology_for_simulation
    from topologies.build import build_network

    return len(build_network(topology_for_simulation(spec["topology"], "size")).hosts()) ** 2


def replay_scheme_figure(name: str, quick: bool = False, fresh: bool = False, results: Path = REPO / "results") -> Path:
    """Simulate (or reuse) every point of the figure, then write CSV, plot and report."""
    fig = load_scheme_figure(name)
    out = results / (f"{name}-quick" if quick else name)
    (out / "points").mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    started = capture(quick)  # the tree its points are computed on
    kept_points = KeptPoints(started, POINT_DEPENDS)
    refs = fig.points(quick)
    runs: dict[tuple[str, int | None], dict[str, Any]] = {}
    todo: list[tuple[PointRef, int | None, dict[str, Any]]] = []
    for ref in refs:
        for seed in fig.seeds(ref.g, quick):
            spec = ref.spec(seed)
            kept = None if fresh else kept_points.get(run_file(out, ref, seed), spec)
            if kept is not None:
                runs[(ref.id, seed)] = kept
            else:
                todo.append((ref, seed, spec))
    if todo:
        todo.sort(key=lambda t: _size(t[2]), reverse=True)
        procs = max(1, min(len(todo), os.cpu_count() or 1))
        LOG.info("%s: %d simulations over %d processes", name, len(todo), procs)
        source = str(FIGURES / f"{name}.yaml")
        with worker_pool(procs) as pool:
            futures = {
                pool.submit(compute_point, spec, f"{source} ({ref.group}, {ref.series})"): (ref, seed)
                for ref, seed, spec in todo
            }
            for done in as_completed(futures):
                ref, seed = futures[done]
                result = stamp(done.result(), started)
                write_json_atomic(run_file(out, ref, seed), result)
                runs[(ref.id, seed)] = result
                LOG.info("%s: %s %s%s: %.4f s in %.1f s", name, ref.group, ref.series,
                         "" if seed is None else f" seed {seed}", result["gst_s"], result["wall_s"])  # fmt: skip
    rows = []
    for ref in refs:
        folded = fold([runs[(ref.id, seed)] for seed in fig.seeds(ref.g, quick)])
        rows.append({"id": ref.id, "group": ref.group, "series": ref.series, "x": ref.x, **folded})
    wall = time.monotonic() - t0
    wall, started = replay_provenance(out, bool(todo), wall, started)
    write_scheme_report(fig, out, rows, quick, wall, started)
    return out
