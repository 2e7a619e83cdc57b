"""Flow-model calibration: the emulator's communication time beside the flow model's, the factors
fitted, stored, and the table.

    scripts/bench_flowmodel.sh [--quick] [--emulated FILE]

For every shipped topology (topologies/*.yaml but the *-standby files, which are their base
network plus an idle standby PS) and every scheme the engine can run on it (ps where the file
has PSs, mesh, ring, halving-doubling, rat, hips where the topology has an address grid), at two
gradient sizes (the schedule's busiest cable busy for SIZES_S seconds at the emulated rate):
1. emulated: the scheme engine's measured GST (slowest worker's synchronisation, compute 0), mean
   over the measured iterations, with the fidelity monitor's verdict;
2. simulated on the same file, schedule and bytes (models.flow): exact max-min (CM02,
   uncalibrated), and under every value of the candidate forms' grid (models.flow.fit:
   TCP headers, a per-message latency, LV08's RTT-weighted sharing by a latency per cable,
   weight-S or a standing queue, the datapath's capacity), in forked SimGrid processes;
3. every form fitted on the faithful points the network paced (`network_paced`: the verdict's
   transfer phases at >= PACED_SHARE of what the schedule allows) and judged with each topology
   left out; the form with
   the best held-out error (`models.flow.fit.rank_key`) is fitted on all of them and written to
   results/calibration/flowmodel-factors.json (the file the flow model reads); the choice of
   form is itself judged held out (nested: chosen without the left-out topology);
4. every point simulated again with the fitted settings (the calibrated column) and each faithful
   point with the fit its topology was left out of (the held-out column).

5. besides the refit, the factors file it replaces judged on this run's points (`judge_unseen`):
   points that file was never fitted on, the first truly unseen test of a calibration (the
   held-out columns have seen every point once: the form's ranking was chosen by reading them);
   and the emulator against itself, point by point against the previous emulation of the same
   code where one is given (`--previous-emulated`, by default the emulated points this run
   replaces): how far the emulator repeats itself bounds how close any model can come. Where
   the replaced factors predict these points better than the refit does held out (the same
   points, `keep_replaced`), they are written back unchanged and the report says so.

`--emulated FILE` refits from the points of an earlier run (no emulation; the TF points only
with `--tf-emulated`; no unseen judgment unless `--prior-factors` names the factors to judge).
`--emulated FILE FILE ...` (repeats of the same code, this emulation first) refits on each
point's median over its faithful repeats (`merge_repeats`): the emulator's run-to-run spread is
the floor under any model's error, and the median of repeats lowers it; the replaced factors
are still judged on the first file's own times, and the emulator against itself is the first
file against the second. A run that emulates first keeps the emulation it replaces, gzipped, as
flowmodel-emulated-<commit>.json.gz (and its TF points likewise; `archive_emulations`), the
files a refit on repeats names after the new one.

The TF PS job (tf-ps) is never fitted on: its measured communication is the links' busy time in
0.25-s windows (runs.steptime) and TF splits the model by whole variables, not S/P, so its
error is partly the measurement's and the split's; a few shipped TF files (TF_EXPERIMENTS) are
run short and judged against `testbed simulate` with the fitted settings, as held-out points.
Writes results/bench/flowmodel.{json,md}.
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import platform as py_platform
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import TOP, begin, bench_parser, depends_on, fmt, md_table, meta, write_results
from replays import staleness
from replays.benchdata import read_data_bytes
from schemes import registry
from topologies.files import atomic_path, write_text_atomic

LOG = logging.getLogger("bench.flowmodel")


def _first_per_title() -> tuple[str, ...]:
    """One engine scheme per paper's scheme, in registry order (HiPS once: its variants only fix
    every stage's method)."""
    first: dict[str, str] = {}
    for s in registry.SCHEMES.values():
        if s.engine:
            first.setdefault(s.title, s.name)
    return tuple(first.values())


SCHEMES = _first_per_title()
#: the busiest cable's seconds at the emulated rate (schemes.count) of each point's bytes
SIZES_S = (0.5, 2.0)
QUICK = {"topologies": ("leafspine-2rack.yaml",), "schemes": ("mesh", "ring"), "sizes": (0.4,), "iterations": 2}
#: a point within this of the emulated time is "within 5%"
GOAL = 0.05
#: message latency of the probe simulation that measures each point's critical-path length (s)
PROBE_S = 0.01
#: simulations at once (each its own process)
SIM_PARALLEL = 2
#: the fit's bar beside the verdict: a faithful point is fitted on, and judged by, only where its
#: transfer phases kept the busiest link at >= this share of what its own schedule lets a perfect
#: network keep it at (the busiest cable's time over the schedule's exact max-min time: 1 for a
#: ring, 0.88 for halving-doubling on fattree-testbed). The verdict's own bar (emulation.fidelity
#: PHASE_FULL, 75%) passes runs that two starved cores paced at 75-90% (stop 50 found it lenient
#: before these points were read); a model of the network is fitted on runs the network paced.
#: The points left out stay in the table, with their reason and their error.
PACED_SHARE = 0.90
#: the verdict's phrase for the transfer phases' utilisation (emulation.fidelity.judge's detail)
PHASE_UTIL = re.compile(r"kept the busiest link at (\d+)% of its rate on average")
FACTORS = TOP / "results" / "calibration" / "flowmodel-factors.json"


def shipped_topologies() -> list[str]:
    return sorted(p.name for p in (TOP / "topologies").glob("*.yaml") if "standby" not in p.name)


@dataclass
class Case:
    """One point's network, schedule and engine job, sized (see `cases`)."""

    topology: str
    scheme: str
    size_s: float
    scale: float
    net: object
    job: object
    prep: object
    #: how the file's network was changed for the run ("": as the file says)
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.topology} {self.scheme} {self.size_s:g}s"


def _job(scheme: str, model_bytes: float, iterations: int):
    from workloads.experiment import JobSpec

    return JobSpec(
        model="tiny", scheme=scheme, compute="calibrated", compute_s=0.0, iterations=iterations, warmup=1,
        model_bytes=model_bytes, deadline_s=600,
    )  # fmt: skip


def within_relay_ceiling(spec, topology: str) -> tuple[object, str]:
    """The file's spec and a note, slowed where its servers relay above this machine's measured ceiling for the
    kind (emulation.relaying): there the emulated network itself loses time a network would not,
    which no flow model should be fitted on or judged by. Bytes follow the scale, so the points'
    seconds stay the same."""
    from emulation.relaying import relay_load
    from topologies.build import build_network
    from topologies.schema import parse_spec

    net = build_network(spec)
    hosts = [h.name for h in net.hosts()]
    load = relay_load(net, [(a, b) for a in hosts for b in hosts if a < b])
    if load is None or not load.over or load.ceiling is None:
        return spec, ""
    scale = spec.scale * load.cable_mbps / load.ceiling.mbps
    note = f"at {load.ceiling.mbps:g} Mbit/s per cable (the {load.kind}'s relay ceiling here)"
    LOG.info("%s: servers relay: run %s", topology, note)
    return parse_spec({**spec.model_dump(), "scale": scale}, topology), note


def cases(
    topology: str, schemes: tuple[str, ...], sizes: tuple[float, ...], iterations: int, scale: float | None = None
) -> list[Case]:
    """The points of one topology file: each applicable scheme at each size. A scheme the file
    cannot run (no PSs for ps, no address grid for hips, too few hosts) is skipped with a log line.
    At `scale` when given (a refit: the scale the points were emulated at), else at the file's
    within this machine's relay ceiling (`within_relay_ceiling`)."""
    from runs.engine_job import prepare
    from schemes.count import expected_sync_s
    from topologies.build import build_network
    from topologies.schema import load_spec, parse_spec
    from workloads.experiment import ExperimentError

    spec, note = within_relay_ceiling(load_spec(TOP / "topologies" / topology), topology)
    if scale is not None and scale != spec.scale:
        spec = parse_spec({**spec.model_dump(), "scale": scale}, topology)
        note = f"at {spec.worker_mbps / scale:g} Mbit/s per cable"
    net = build_network(spec)
    out = []
    for scheme in schemes:
        try:  # 1 MB emulated, then scaled so that the busiest cable is busy size_s
            probe = prepare(_job(scheme, 1e6 * spec.scale, iterations), net, spec.scale, topology)
        except (ExperimentError, ValueError) as err:
            LOG.info("%s: %s does not apply (%s)", topology, scheme, err)
            continue
        per_mb = expected_sync_s(net, probe.sched)
        for size in sizes:
            job = _job(scheme, size / per_mb * 1e6 * spec.scale, iterations)
            prep = prepare(job, net, spec.scale, topology)
            out.append(Case(topology, scheme, size, spec.scale, net, job, prep, note))
    return out


def emulate(todo: list[Case], tmp: Path, save: Path) -> list[dict]:
    """Each case on the emulator: one testbed per topology, the scheme engine per case. The rows
    so far go to `save` after each topology (`--emulated` refits from a run stopped midway)."""
    from benchmarks.schemes import _scheme_run
    from emulation.net import Testbed

    rows = []
    for topology in dict.fromkeys(c.topology for c in todo):
        mine = [c for c in todo if c.topology == topology]
        t0 = time.monotonic()
        with Testbed(mine[0].net) as tb:
            LOG.info("%s up in %.0f s: %d points", topology, time.monotonic() - t0, len(mine))
            for c in mine:
                row = {"topology": c.topology, "scheme": c.scheme, "size_s": c.size_s, "bytes": c.prep.model_bytes,
                       "scale": c.scale, "note": c.note}  # fmt: skip
                try:
                    r = _scheme_run(tb, c.net, c.job, c.scale, tmp / topology / f"{c.scheme}-{c.size_s:g}")
                    row.update(emulated_s=r["gst"]["mean"], gst=r["gst"], expected_s=r["expected_s"],
                               faithful=r["faithful"], fidelity=r["fidelity"], hosts=r["hosts"], error="")  # fmt: skip
                    LOG.info("%s: GST %.3f s (busiest cable %.3f s)", c.name, r["gst"]["mean"], r["expected_s"])
                except (RuntimeError, OSError) as err:
                    row.update(emulated_s=None, faithful=False, fidelity="", hosts=len(c.prep.hosts), error=str(err))
                    LOG.warning("%s: %s", c.name, err)
                rows.append(row)
        write_text_atomic(save, json.dumps({"points": rows}, indent=1))
    return rows


def simulate_case(c: Case, config: dict[str, str]) -> float:
    """The flow model's time for the case's own schedule and bytes on its own network."""
    from models.flow.schedule_time import schedule_time_s

    return schedule_time_s(c.net, c.prep.sched, config)


def _inputs(c: Case):
    """The case's SimGrid platform and traffic (built once, simulated under many settings)."""
    from models.flow.demands import from_schedule
    from models.flow.links import platform
    from models.flow.routes import flow_routes

    traffic = from_schedule(c.prep.sched)
    return platform(c.net, flow_routes(c.net, traffic.pairs()), False), traffic


def simulate_pairs(pairs: list[tuple[Case, dict[str, str]]], inputs: dict[str, tuple] | None = None) -> list[float]:
    """Each (case, configuration) pair simulated (models.flow.simgrid.simulate_many: SIM_PARALLEL
    forked processes; each case's platform and traffic built once, or taken from `inputs` by case
    name): seconds, nan where a simulation failed."""
    from models.flow.simgrid import simulate_many

    inputs = {} if inputs is None else inputs
    for c, _ in pairs:
        if c.name not in inputs:
            inputs[c.name] = _inputs(c)
    jobs = [(*inputs[c.name], cfg) for c, cfg in pairs]
    t0 = time.monotonic()
    got = simulate_many(jobs, SIM_PARALLEL)
    LOG.info("%d simulations (%d cases): %.0f s", len(jobs), len(inputs), time.monotonic() - t0)
    return [r.iteration_s if r is not None else float("nan") for r in got]


def fit_rows(rows: list[dict]) -> list[bool]:
    """Which rows the fit uses: the faithful emulated points (every emulated point where fewer than
    2 were faithful: a loaded machine, said in the factors file)."""
    faithful = [bool(r["faithful"] and r["emulated_s"]) for r in rows]
    return faithful if sum(faithful) >= 2 else [bool(r["emulated_s"]) for r in rows]


def phase_utilisation(fidelity: str) -> float | None:
    """The share of its rate the busiest link carried over the run's transfer phases, as the
    verdict's text says it (None: no transfer phases were judged). Read from the text because the
    emulated points keep the verdict as text (benchmarks.schemes._scheme_run), and a field there
    would stale every committed scheme result for a number the text already has."""
    m = PHASE_UTIL.search(fidelity or "")
    return int(m.group(1)) / 100 if m else None


def network_paced(row: dict, maxmin_s: float) -> bool:
    """Whether the network paced this emulated point: its transfer phases kept the busiest link
    at >= PACED_SHARE of what the schedule allows (the busiest cable's time over its exact max-min
    time); a point without judged phases counts as paced (the verdict's peak rule judged it). A
    point that is the median of repeats (merge_repeats) is paced where every faithful repeat was:
    one run the CPU paced moves the median as much as it moves a single run."""
    if not maxmin_s or not row.get("expected_s"):
        return True
    allows = PACED_SHARE * min(1.0, row["expected_s"] / maxmin_s)
    utils = [phase_utilisation(text) for text in row.get("repeat_fidelity") or [row.get("fidelity", "")]]
    return all(u is None or u >= allows for u in utils)


def merge_repeats(runs: list[list[dict]], key, value: str = "emulated_s") -> list[dict]:
    """Several emulations of the same code as one set of points, each the median of its faithful
    repeats: the emulator moves 18-40% between two runs of the same code on the incasts and the
    relaying schemes (2026-12-02), so a single run is a noisy target for any model, and the median
    of repeats the better estimate of what the emulator does. `runs[0]` is this emulation (its
    points and their order; a point only the others have is left out); `key(row)` matches a point
    across runs, `value` is the time field (emulated_s, or comm_s for the TF job's rows).

    Each merged row is a copy of this emulation's row, or of its first faithful repeat where this
    emulation's was not faithful, with `value` the median of the faithful repeats, `faithful`
    where any repeat was, `repeats_s` (each run's time, None where not faithful), `this_s` and
    `this_faithful` (this emulation's own, which the unseen judgment scores), `repeat_fidelity`
    (the faithful repeats' verdicts, for network_paced) and `repeat_spread` (the slowest faithful
    repeat over the fastest, where two or more were). statistics.median is the whole method."""

    def ok(r: dict | None) -> bool:
        return bool(r is not None and r.get("faithful") and r.get(value))

    others = [{key(r): r for r in run} for run in runs[1:]]
    merged = []
    for row in runs[0]:
        reps = [row, *(o.get(key(row)) for o in others)]
        good = [r for r in reps if ok(r)]
        out = dict(good[0] if good else row)
        times = [r[value] if ok(r) else None for r in reps]
        out.update(this_s=row.get(value), this_faithful=bool(row.get("faithful") and row.get(value)), repeats_s=times)
        if good:
            secs = [r[value] for r in good]
            out.update({value: statistics.median(secs)}, faithful=True)
            out["repeat_fidelity"] = [r.get("fidelity", "") for r in good]
            out["repeat_spread"] = max(secs) / min(secs) if len(secs) > 1 else None
        merged.append(out)
    return merged


def point_key(row: dict) -> tuple[str, str, float]:
    """A scheme point across emulations: (topology, scheme, size)."""
    return row["topology"], row["scheme"], row["size_s"]


def repeats_summary(rows: list[dict], runs: list[dict]) -> dict:
    """What merged rows (merge_repeats) are the median of: the runs (`runs`: file, start, commit
    and faithful points of each), how many faithful repeats each point had, and the repeats'
    spread (the slowest faithful repeat over the fastest, where two or more were)."""
    counts: dict[str, int] = {}
    for r in rows:
        n = sum(t is not None for t in r["repeats_s"])
        counts[str(n)] = counts.get(str(n), 0) + 1
    spreads = [r["repeat_spread"] - 1 for r in rows if r.get("repeat_spread")]
    spread = {
        "median": statistics.median(spreads) if spreads else None,
        "within_10pct": sum(x <= 0.10 for x in spreads) / len(spreads) if spreads else None,
        "points": len(spreads),
    }
    return {"runs": runs, "faithful_repeats": counts, "spread": spread}


#: a full run's emulated points (out_dir/<name>.json), and its TF PS job's
EMULATED, TF_EMULATED = "flowmodel-emulated", "flowmodel-tf-emulated"


def read_json(path: Path) -> dict:
    """An emulation's json, or a kept one gzipped (`.json.gz`: archive_emulations, or the table
    itself when big, benchdata.write_bench_data)."""
    return json.loads(read_data_bytes(path))


def archive_emulations(out_dir: Path, names: tuple[str, ...] = (EMULATED, TF_EMULATED)) -> dict[str, Path]:
    """Keep the emulations a new run is about to overwrite: each out_dir/<name>.json moved aside,
    gzipped, as <name>-<commit>.json.gz, the commit its flowmodel-emulated.json says it ran on (a
    run stopped midway, whose file has no meta: its time), so that a refit can take every point's
    median over the runs of the same code (`--emulated NEW KEPT...`). Gzipped: each full emulation
    is ~130 KB of json, most of it fidelity sentences, which compress ~8x, and results/ stays a
    few MB with the repeats kept. Returns name -> where it went."""
    main = out_dir / f"{EMULATED}.json"
    if not main.is_file():
        return {}
    meta = read_json(main).get("meta") or {}
    tag = (meta.get("git_commit") or "")[:7] or time.strftime("%Y%m%dT%H%M", time.gmtime(main.stat().st_mtime))
    moved = {}
    for name in names:
        src = out_dir / f"{name}.json"
        if not src.is_file():
            continue
        dest, n = out_dir / f"{name}-{tag}.json.gz", 2
        while dest.exists():  # the same commit emulated twice
            dest, n = out_dir / f"{name}-{tag}-{n}.json.gz", n + 1
        with atomic_path(dest) as tmp:
            tmp.write_bytes(gzip.compress(src.read_bytes(), mtime=0))
        src.unlink()
        moved[name] = dest
        LOG.info("%s kept as %s", src.name, dest)
    return moved


def read_repeats(files: list[str], points: str = "points") -> tuple[list[list[dict]], list[dict], list[dict]]:
    """The emulated points of each file (one --emulated or --tf-emulated file each), what each file
    says of its run (file, start, commit, faithful points; for merge_repeats and the report) and
    each file's whole meta record."""
    runs, about, metas = [], [], []
    for f in files:
        path = Path(f)
        if not path.is_file():
            raise SystemExit(f"{f}: no such file; name an earlier run's flowmodel-emulated.json")
        data = read_json(path)
        m = data.get("meta") or {}
        runs.append(data[points])
        metas.append(m)
        about.append({"file": f, "started": m.get("started"), "commit": m.get("git_commit"),
                      "faithful": sum(1 for r in data[points] if r.get("faithful"))})  # fmt: skip
    return runs, about, metas


def simulate_points(todo: list[Case], rows: list[dict], grid: list) -> list:
    """Per case: exact max-min and the legacy form's probe (b = 1, c = PROBE_S: its growth with c,
    the critical path's messages); per case the fit uses (fit_rows), every other Sharing value of
    the grid too (a point the fit never reads is not simulated on it)."""
    from models.flow.fit import MAX_MIN, Point, Sharing
    from models.flow.simgrid import cable_load_gbps

    def key(c: Case, cfg: dict[str, str]) -> tuple[str, str]:
        return c.name, json.dumps(cfg, sort_keys=True)

    probe = Sharing(message_s=PROBE_S, headers=False).settings()
    others = [s for s in grid if s != MAX_MIN]
    pairs = [(c, cfg) for c in todo for cfg in (MAX_MIN.settings(), probe)]
    pairs += [(c, s.settings()) for c, use in zip(todo, fit_rows(rows), strict=True) if use for s in others]
    inputs = {c.name: _inputs(c) for c in todo}
    secs = dict(zip((key(c, cfg) for c, cfg in pairs), simulate_pairs(pairs, inputs), strict=True))
    points = []
    for c, row in zip(todo, rows, strict=True):
        sims = {s.label: secs[key(c, s.settings())] for s in grid if key(c, s.settings()) in secs}
        base = sims[MAX_MIN.label]
        slope = (secs[key(c, probe)] - base) / PROBE_S
        plat, traffic = inputs[c.name]
        fan_in, load, pairs = traffic.fan_in(), cable_load_gbps(plat, traffic), len(traffic.pairs())
        row.update(uncalibrated_s=base, critical_messages=slope, fan_in=fan_in, cable_load_gbps=load, connections=pairs)
        points.append(Point(c.name, row["emulated_s"] or float("nan"), base, slope, fan_in, sims, load, pairs))
    return points


def _errors(errs: list[float]) -> dict:
    """Median |error|, the shares within 5% and 10%, and the count (None but the count where there
    is no error to judge: numpy's median of nothing warns and gives nan)."""
    import numpy as np

    if not errs:
        return {"median_abs_error": None, "within_5pct": None, "within_10pct": None, "points": 0}
    a = np.abs(np.array(errs))
    return {
        "median_abs_error": float(np.median(a)),
        "within_5pct": float(np.mean(a <= 0.05)),
        "within_10pct": float(np.mean(a <= 0.10)),
        "points": len(errs),
    }


def judge_forms(used: list, forms: list) -> list[dict]:
    """Every form fitted on all points (the fitted errors, from its formula) and judged with each
    topology left out (the held-out errors): the table of forms, in `forms`' order."""
    from dataclasses import asdict

    from models.flow.fit import fit, held_out

    out = []
    for form in forms:
        f = fit(used, form)
        cv = held_out(used, point_topology, form)
        out.append(
            {
                "form": form.name,
                "fit": asdict(f),
                "fitted": _errors([f.model_s(p) / p.emulated_s - 1 for p in used]),
                "held_out": {**_errors(list(cv.errors.values())), "errors": cv.errors},
            }
        )
        LOG.info(
            "%s: fitted median %.1f%%, held out %.1f%% (%.0f%% within 10%%)",
            form.name,
            out[-1]["fitted"]["median_abs_error"] * 100,
            cv.median_abs * 100,
            cv.within(0.10) * 100,
        )
    return out


def calibrate(todo: list[Case], rows: list[dict], out_factors: Path, res_meta: dict) -> dict:
    """Simulate every point on the forms' grid, judge every form held out, choose the form with
    the best held-out error, fit it on all faithful points, write the factors file, and simulate
    every point again with them (the calibrated column) and every faithful point with the fit
    its own topology was left out of (the held-out column, SimGrid's, not the formula's)."""
    from dataclasses import asdict

    from models.flow.fit import candidate_forms, fit, grid_of, held_out, rank_key, select_held_out, settings
    from models.flow.fit import write_factors as write

    forms = candidate_forms()
    points = simulate_points(todo, rows, grid_of(forms))
    uses = fit_rows(rows)
    faithful = [p for p, use in zip(points, uses, strict=True) if use]
    for p, row in zip(points, rows, strict=True):
        row["network_paced"] = network_paced(row, p.base_s)
    used = [p for p, row, use in zip(points, rows, uses, strict=True) if use and row["network_paced"]]
    fitted_on = (
        "faithful points of benchmarks/flowmodel.py (scheme engine GST, compute 0) whose transfer phases kept "
        f"the busiest link at >= {PACED_SHARE:.0%} of what their schedule allows (network-paced; "
        f"{len(faithful) - len(used)} faithful points left out)"
    )
    if len(used) < 2:  # every faithful point, paced or not
        used = faithful
        fitted_on = "faithful points of benchmarks/flowmodel.py (scheme engine GST, compute 0)"
    if sum(1 for r in rows if r["faithful"] and r["emulated_s"]) < 2:  # a loaded machine: say so
        fitted_on = "every emulated point (fewer than 2 were faithful: the machine was loaded)"
        LOG.warning("fewer than 2 faithful points: fitting on all %d emulated points", len(used))
    several = len({point_topology(p) for p in used}) > 1
    table = judge_forms(used, forms) if several else []
    cv = None
    if several:
        cvs = {fm.name: held_out(used, point_topology, fm) for fm in forms}
        chosen = min(forms, key=lambda fm: rank_key(cvs[fm.name]))
        cv = cvs[chosen.name]
    else:  # one topology: nothing to judge held out; the physical part alone
        chosen = next(fm for fm in forms if fm.name == "headers")
    final = fit(used, chosen)
    nested = select_held_out(used, point_topology, forms) if several else None
    validation = None
    if cv is not None:
        validation = {
            "method": f"leave one topology out ({cv.groups} topologies): the form's grid value and factors "
            "fitted on the other topologies' points",
            **_errors(list(cv.errors.values())),
            "errors": cv.errors,
            "nested": {
                "method": "the form too chosen without the left-out topology (by its held-out error on the others)",
                **_errors(list(nested.errors.values())),
                "forms": nested.forms,
            },
        }
    record = {
        "date": res_meta["started"],
        "machine": f"{py_platform.node()}, {res_meta['cpus']} cores, kernel {res_meta['kernel']}, "
        f"{res_meta['idle_before_pct']:.0f}% idle before the run",
        "commit": res_meta["git_commit"],
        "fitted_on": fitted_on,
        "emulated": res_meta.get("emulated_from") or "this run (date and machine above)",
        "form": chosen.name,
        "held_out": validation,
    }
    write(out_factors, final, record, used)
    cfg = settings(final)
    # the calibrated column: every case with the final fit; the held-out column: each faithful
    # case once more with the fit its own topology was left out of
    # (the faithful points the fit left out too, each with its topology's fit where it has one)
    fold_of = {p.name: point_topology(p) for p in faithful if point_topology(p) in cv.fits} if cv is not None else {}
    held = [c for c in todo if c.name in fold_of]
    secs = simulate_pairs([(c, cfg) for c in todo] + [(c, settings(cv.fits[fold_of[c.name]])) for c in held])
    held_s = dict(zip((c.name for c in held), secs[len(todo) :], strict=True))
    for c, row, calibrated in zip(todo, rows, secs[: len(todo)], strict=True):
        row["calibrated_s"] = calibrated
        emu = row["emulated_s"]
        row["ratio"] = row["calibrated_s"] / emu if emu else None
        row["within_goal"] = row["ratio"] is not None and abs(row["ratio"] - 1) <= GOAL
        if c.name in held_s:
            row["held_out_s"] = held_s[c.name]
            row["held_out_ratio"] = row["held_out_s"] / emu
        row["why"] = why_not(row)
    if validation is not None:  # the goal judged on SimGrid's own held-out times
        judged = [r for r in rows if r.get("held_out_ratio") is not None]
        validation["simulated"] = _errors([r["held_out_ratio"] - 1 for r in judged if r.get("network_paced", True)])
        validation["simulated_all_faithful"] = _errors([r["held_out_ratio"] - 1 for r in judged])
    return {
        "form": chosen.name,
        "fit": asdict(final),
        "forms": table,
        "held_out": validation,
        "settings": cfg,
        "fitted_on": fitted_on,
    }


def factors_settings(path: Path) -> dict[str, str]:
    """The SimGrid settings a factors file gives, read by the flow model's own reader
    (models.flow.simgrid.sim_config, pointed at `path` through its PSNET_FLOWMODEL_FACTORS
    override): one reader of the format, whatever file it is."""
    from models.flow.simgrid import sim_config

    saved = os.environ.get("PSNET_FLOWMODEL_FACTORS")
    os.environ["PSNET_FLOWMODEL_FACTORS"] = str(path)
    try:
        cfg, _ = sim_config()
    finally:
        if saved is None:
            os.environ.pop("PSNET_FLOWMODEL_FACTORS", None)
        else:
            os.environ["PSNET_FLOWMODEL_FACTORS"] = saved
    return cfg


def prior_record(path: Path) -> dict:
    """What the factors file being judged says of itself (its form, when, where and at which
    commit it was fitted, on how many points): the report names the calibration it judged."""
    text = path.read_text()
    data = json.loads(text)
    fit = data.get("fit") or {}
    return {
        "text": text,  # written back unchanged where keep_replaced keeps it
        "file": str(path),
        "form": data.get("form") or fit.get("form"),
        "date": data.get("date"),
        "commit": data.get("commit"),
        "machine": data.get("machine"),
        "fitted_points": fit.get("points"),
        "held_out": {k: v for k, v in (data.get("held_out") or {}).items() if k != "errors" and k != "nested"},
        "settings": factors_settings(path),
    }


def _by_scheme(rows: list[dict], key: str) -> dict[str, float]:
    """Median |error| of `key` (a ratio) per scheme, over the rows that have it."""
    per: dict[str, list[float]] = {}
    for r in rows:
        if r.get(key) is not None:
            per.setdefault(r["scheme"], []).append(abs(r[key] - 1))
    return {k: statistics.median(v) for k, v in sorted(per.items())}


def _this(r: dict, value: str = "emulated_s") -> tuple[float | None, bool]:
    """This emulation's own time of a row and whether it was faithful: a merged row's
    (merge_repeats) `this_s`, not the median of the repeats (the other runs may be ones the judged
    factors were fitted on)."""
    if "this_s" in r:
        return r["this_s"], r["this_faithful"]
    return r.get(value), bool(r.get("faithful"))


def judge_unseen(todo: list[Case], rows: list[dict], tf_rows: list[dict], prior: dict | None, previous: dict) -> dict:
    """The calibration this run replaces (`prior`, from prior_record) on this run's emulated points,
    which it was never fitted on, and this emulation against the `previous` one of the same code
    ((topology, scheme, size) -> row): per row `prior_s` / `prior_ratio` (the old factors' time over
    this emulation's) and `repeat_ratio` (this emulation over the previous, both faithful).

    Judged as the held-out columns are: on the faithful network-paced points (`network_paced`,
    set by calibrate) and, apart, on every faithful point; the TF PS job's rows too. The repeat
    says how far the emulator itself moves between two runs of the same code: a point that moves
    10% between runs cannot be predicted within 10% by any model, however fitted. Where the rows
    are medians of repeats (merge_repeats), the old factors are also judged on the medians
    (`paced_median`, the refit's own targets, which keep_replaced compares), though they may
    have been fitted on one of the repeats (which favours them)."""
    out: dict = {}
    if prior is not None:
        cfg = prior["settings"]
        secs = simulate_pairs([(c, cfg) for c in todo])
        for r, t in zip(rows, secs, strict=True):
            mine, _ = _this(r)
            r["prior_s"] = t
            r["prior_ratio"] = t / mine if mine and t == t else None
            if "this_s" in r and r["faithful"] and t == t:
                r["prior_median_ratio"] = t / r["emulated_s"]
        judged = [r for r in rows if r.get("prior_ratio") is not None and _this(r)[1]]
        for r in rows:  # the figure draws these as the replaced factors' unseen points: the same set
            r["prior_judged"] = False
        for r in judged:
            r["prior_judged"] = r.get("network_paced", True)
        paced = [r for r in judged if r["prior_judged"]]
        out["prior"] = {
            **{k: v for k, v in prior.items() if k not in ("settings", "text")},
            "paced": _errors([r["prior_ratio"] - 1 for r in paced]),
            "all_faithful": _errors([r["prior_ratio"] - 1 for r in judged]),
            "by_scheme": _by_scheme(paced, "prior_ratio"),
        }
        paced_medians = [r for r in rows if "prior_median_ratio" in r and r.get("network_paced", True)]
        medians = [r["prior_median_ratio"] - 1 for r in paced_medians]
        if medians:
            out["prior"]["paced_median"] = _errors(medians)
        if tf_rows:
            from runs.simulate import run

            for r in tf_rows:
                r["prior_s"] = run(_tf_plan(r), config=cfg).result.iteration_s
                mine, _ = _this(r, "comm_s")
                r["prior_ratio"] = r["prior_s"] / mine if mine else None
            tf = [r for r in tf_rows if r.get("prior_ratio") is not None and _this(r, "comm_s")[1]]
            out["prior"]["tf"] = _errors([r["prior_ratio"] - 1 for r in tf]) if tf else None
    if previous:
        for r in rows:
            old, (mine, ok) = previous.get(point_key(r)), _this(r)
            if old and old.get("faithful") and old.get("emulated_s") and mine and ok:
                r["previous_emulated_s"] = old["emulated_s"]
                r["repeat_ratio"] = mine / old["emulated_s"]
        again = [r for r in rows if r.get("repeat_ratio") is not None]
        steady = [r for r in again if abs(r["repeat_ratio"] - 1) <= 0.05 and r.get("prior_ratio") is not None]
        out["repeat"] = {
            **_errors([r["repeat_ratio"] - 1 for r in again]),
            "by_scheme": _by_scheme(again, "repeat_ratio"),
            # the old factors where the emulator repeated itself within 5%: the model's part of the error
            "prior_where_steady": _errors([r["prior_ratio"] - 1 for r in steady]) if steady else None,
        }
    return out


def goal_key(e: dict) -> tuple[bool, float, float]:
    """The goal's order (models.flow.fit.goal_rank, as forms are ranked) on an `_errors` record."""
    from models.flow.fit import goal_rank

    return goal_rank(e["median_abs_error"], e["within_10pct"])


def keep_replaced(cal: dict, unseen: dict) -> dict | None:
    """Whether the factors this run replaces predicted its points better than the refit does held
    out, on the same points (faithful, network-paced): both are errors on points the factors were
    not fitted on, so the better one is the calibration to use. A refit is no better for being
    newer: a noisier emulation fits worse terms. Returns the comparison where the replaced factors
    win (main then writes them back unchanged), None where the refit wins or nothing compares.
    Where the points are medians of repeats, both are judged on the medians (the refit's targets;
    the replaced factors may have been fitted on one repeat, so a refit that wins wins clearly).
    The refit is scored by the less favourable of its two held-out figures: leave one topology
    out (SimGrid's times), and nested (the form too chosen without the left-out topology), since
    the first chose its form having seen every topology and the replaced factors saw none of
    this run's."""
    prior = unseen.get("prior")
    held = cal.get("held_out") or {}
    theirs = prior and (prior.get("paced_median") or prior["paced"])
    if not theirs or not theirs["points"]:
        return None
    figures = [e for e in (held.get("simulated"), held.get("nested")) if e and e["points"] == theirs["points"]]
    if not figures:
        return None
    refit = max(figures, key=goal_key)
    if goal_key(theirs) >= goal_key(refit):
        return None
    medians = "paced_median" in prior
    return {"replaced": theirs, "refit_held_out": refit, "file": prior["file"], "form": prior["form"],
            "medians": medians, "nested": refit is held.get("nested")}  # fmt: skip


def kept_line(kept: dict) -> str:
    a, b = kept["replaced"], kept["refit_held_out"]
    return (
        f"**Written: the factors this run replaced, kept** (form {kept['form']}). On this run's {a['points']} "
        + (
            "network-paced faithful points (medians of the repeats, one of which they may have been fitted on)"
            if kept.get("medians")
            else "network-paced faithful points, which neither was fitted on"
        )
        + ", they predict better than the refit does "
        + ("held out, its form chosen held out too" if kept.get("nested") else "held out")
        + f": {a['median_abs_error'] * 100:.1f}% median, {a['within_10pct'] * 100:.0f}% within 10% against "
        f"{b['median_abs_error'] * 100:.1f}%, {b['within_10pct'] * 100:.0f}% (`keep_replaced`). The refit below "
        "and its columns 'simulated, calibrated' and 'held out' are reported for the comparison, not written."
    )


def _pct(e: dict, fives: bool = False) -> str:
    """An `_errors` record as the report says it: "2.8%, 84% within 10%" (", 68% within 5%")."""
    text = f"{e['median_abs_error'] * 100:.1f}%, {e['within_10pct'] * 100:.0f}% within 10%"
    return text + (f", {e['within_5pct'] * 100:.0f}% within 5%" if fives else "")


def _schemes(by: dict[str, float]) -> str:
    return ", ".join(f"{k} {v * 100:.1f}%" for k, v in by.items())


def unseen_lines(unseen: dict) -> str:
    """The report's paragraph on the unseen judgment (judge_unseen): the replaced factors on new
    points, and the emulator against its previous run."""
    parts = []
    p = unseen.get("prior")
    if p and p["paced"]["points"]:
        e, a, ho, tf = p["paced"], p["all_faithful"], p.get("held_out") or {}, p.get("tf")
        was = f" (their own held-out figure when fitted: {_pct(ho)})" if ho.get("median_abs_error") is not None else ""
        med = p.get("paced_median")
        parts.append(
            f"**The factors this run replaces, on points they never saw** ({p['file']}: form {p['form']}, fitted "
            f"{(p.get('date') or '?')[:10]} at commit {(p.get('commit') or '?')[:10]} on {p.get('fitted_points')} "
            f"points; the column 'replaced factors / emulated', against this emulation's own times): median |error| "
            f"{_pct(e, True)} of {e['points']} network-paced faithful points{was}; on every faithful point "
            f"({a['points']}): {_pct(a)}. Per scheme (median): {_schemes(p['by_scheme'])}."
            + (f" The TF PS job: {_pct(tf)} of {tf['points']}." if tf else "")
            + (
                f" On the medians of the repeats (the refit's targets; one repeat may be one they were fitted on): "
                f"{_pct(med, True)} of {med['points']}."
                if med
                else ""
            )
        )
    r = unseen.get("repeat")
    if r and r["points"]:
        steady = r.get("prior_where_steady")
        parts.append(
            f"**The emulator against itself** (this emulation over the previous one of the same code, points "
            f"faithful in both; the column 'this / previous emulation'): median |change| {_pct(r, True)} of "
            f"{r['points']} points. Per scheme (median): {_schemes(r['by_scheme'])}."
            + (
                f" Where it repeated itself within 5% ({steady['points']} points), the replaced factors: "
                f"{_pct(steady)}."
                if steady
                else ""
            )
        )
    return "\n\n".join(parts)


def repeats_line(repeats: dict) -> str:
    """The report's paragraph on the merged repeats (repeats_summary): what each point's emulated
    time is the median of, and how much the repeats spread."""
    runs = "; ".join(f"{m['file']} ({(m.get('started') or '?')[:16]}, commit {(m.get('commit') or '?')[:8]}, "
                     f"{m['faithful']} faithful)" for m in repeats["runs"])  # fmt: skip
    n = repeats["faithful_repeats"]
    counts = ", ".join(f"{k} of {len(repeats['runs'])}: {v} points" for k, v in sorted(n.items(), reverse=True))
    sp = repeats["spread"]
    return (
        f"**Each point the median of {len(repeats['runs'])} emulations of the same code** (`merge_repeats`; the "
        f"column 'repeats, slowest / fastest'): {runs}. Faithful repeats per point: {counts}. A point is faithful "
        "where one repeat was and network-paced where every faithful repeat was. The repeats' spread (slowest "
        f"over fastest, points with two or more): median {sp['median'] * 100:.1f}%, {sp['within_10pct'] * 100:.0f}% "
        f"within 10% of {sp['points']} points. The fit, the held-out columns and the goal below are judged on "
        "the medians."
    )


def point_topology(p) -> str:
    """The topology a point ran on (its name's first word, Case.name): the held-out groups."""
    return p.name.split()[0]


def why_not(row: dict) -> str:
    """A short reason where the calibrated point misses the goal, from its own numbers: how much
    slower than exact max-min the emulator ran, against the calibrated model."""
    if row["emulated_s"] is None:
        return f"emulation failed: {row['error']}"
    if row["within_goal"]:
        return ""
    if not row["faithful"]:
        return f"emulation not faithful ({row['fidelity']})"
    slower = row["emulated_s"] / row["uncalibrated_s"]
    model = row["calibrated_s"] / row["uncalibrated_s"]
    side = "slower" if slower > model else "faster"
    why = f"emulated {slower:.2f}x max-min, the model {model:.2f}x: the emulator ran {side} than the fitted terms say"
    if row.get("network_paced", True):
        return why
    allows = min(1.0, row["expected_s"] / row["uncalibrated_s"])
    return (
        f"left out of the fit: its transfer phases kept the busiest link at "
        f"{phase_utilisation(row['fidelity']):.0%} (< {PACED_SHARE:.0%} of the {allows:.0%} its schedule allows: "
        f"the CPU set the pace); {why}"
    )


# ------------------------------------------------------------------ the TF PS job, held out

#: the shipped experiment files of the TF PS job that the calibration is judged on (never fitted
#: on): one topology kind each where the job fits the emulator (psnet-failures is left out: its
#: timeline's failures are no steady step; smoke-psnet: the tiny model moves nothing to time)
TF_EXPERIMENTS = (
    "psnet-vgg16.yaml",
    "fattree-vgg16.yaml",
    "psnet-2modules-resnet50.yaml",
    "psnet-4modules-resnet50.yaml",
)
#: measured steps of each TF run (after one warm-up step): a short run, not the file's own count
TF_ITERATIONS = 3


def tf_experiment(name: str):
    """An experiment file of TF_EXPERIMENTS with TF_ITERATIONS measured steps: (spec, topology,
    topology path, file path)."""
    from workloads.experiment import load_experiment

    path = TOP / "workloads" / "experiments" / name
    exp, topo, topo_path = load_experiment(path)
    job = exp.main.model_copy(update={"iterations": TF_ITERATIONS, "warmup": 1})
    return exp.model_copy(update={"job": job}), topo, topo_path, path


def emulate_tf(names: tuple[str, ...], tmp: Path) -> list[dict]:
    """Each TF experiment on the emulator (runs.runner.run_job, one short run each): the measured
    communication per step (its step split, runs.steptime: the links' busy time in each step),
    the BCT and the fidelity verdict."""
    from runs.runner import run_job

    rows = []
    for name in names:
        exp, topo, topo_path, path = tf_experiment(name)
        row: dict = {"experiment": name, "topology": Path(topo_path).name, "iterations": TF_ITERATIONS}
        try:
            res = run_job(exp, topo, str(topo_path), tmp / exp.name, progress=False, source=str(path))
            s = res.summary
            split = s.step_split
            row.update(
                comm_s=split.comm_s.mean if split else None,
                comm=split.comm_s.as_dict() if split else None,
                link_s=split.link_s.mean if split else None,
                bct=s.bct_s.as_dict(),
                model_bytes=s.model_bytes_emulated,
                bytes_per_ps=s.bytes_per_ps,
                workers=s.workers,
                ps=s.ps,
                faithful=bool(s.faithful),
                fidelity=s.fidelity_reason,
                complete=res.complete,
                error="",
            )
            LOG.info("%s: communication %.3f s per step (BCT %.3f s)", name, row["comm_s"] or 0, s.bct_s.mean or 0)
        except (RuntimeError, OSError, ValueError) as err:
            row.update(comm_s=None, faithful=False, fidelity="", error=str(err))
            LOG.warning("%s: %s", name, err)
        rows.append(row)
    return rows


def _tf_plan(row: dict):
    """`testbed simulate`'s plan (runs.simulate) of a TF row's file, the same short job."""
    from runs.simulate import plan

    return plan(TOP / "workloads" / "experiments" / row["experiment"], [f"iterations={TF_ITERATIONS}"])


def simulate_tf(rows: list[dict], config: dict[str, str]) -> None:
    """`testbed simulate` of the same files (runs.simulate, the same short job) beside each TF
    row: exact max-min, the calibrated model, and the busiest cable's bound; the error is the
    calibrated model's against the measured communication (these points are never fitted on)."""
    from models.flow.simgrid import BASE_CONFIG
    from runs.simulate import run

    for row in rows:
        p = _tf_plan(row)
        exact = run(p, config=dict(BASE_CONFIG))
        calibrated = run(p, config=config)
        row.update(
            uncalibrated_s=exact.result.iteration_s,
            calibrated_s=calibrated.result.iteration_s,
            busiest_cable_s=exact.bound_s,
            simulated_bytes=p.model_bytes,
        )
        comm = row.get("comm_s")
        row["ratio"] = calibrated.result.iteration_s / comm if comm else None


def tf_line(rows: list[dict]) -> str:
    judged = [r for r in rows if r.get("ratio") is not None and r.get("faithful")]
    if not judged:
        return "**The TF PS job, held out**: no faithful TF point."
    e = _errors([r["ratio"] - 1 for r in judged])
    return (
        f"**The TF PS job, held out** (never fitted on; {e['points']} faithful runs): median |error| "
        f"{e['median_abs_error'] * 100:.1f}%, {e['within_10pct'] * 100:.0f}% within 10%."
    )


def held_out_line(cal: dict, rows: list[dict]) -> str:
    """The fitted and the held-out errors side by side (the goal: held-out median <= 5%, 90%
    within 10%); never the fitted ones alone."""
    fitted = [
        abs(r["ratio"] - 1)
        for r in rows
        if r.get("ratio") is not None and r.get("faithful") and r.get("network_paced", True)
    ]
    line = "**Fitted** (the chosen form scored on the points it was fitted on, SimGrid's times): "
    if fitted:
        median = statistics.median(fitted)
        within = sum(1 for e in fitted if e <= 0.10) / len(fitted)
        line += f"median |error| {median * 100:.1f}%, {within * 100:.0f}% within 10% ({len(fitted)} points). "
    cv = cal.get("held_out")
    if cv is None:
        return line + "**Held out**: not judged (points from fewer than two topologies)."
    sim = cv.get("simulated") or cv
    nested = cv["nested"]
    met = sim["median_abs_error"] <= 0.05 and sim["within_10pct"] >= 0.9
    return line + (
        f"**Held out** ({cv['method']}; the column 'held out / emulated', SimGrid's times with the left-out "
        f"topology's fit): median |error| {sim['median_abs_error'] * 100:.1f}%, {sim['within_10pct'] * 100:.0f}% "
        f"within 10%, {sim['within_5pct'] * 100:.0f}% within 5% of {sim['points']} points (from the fit's formula: "
        f"{cv['median_abs_error'] * 100:.1f}%, {cv['within_10pct'] * 100:.0f}%). With the form chosen held out too "
        f"({nested['method']}): {nested['median_abs_error'] * 100:.1f}%, {nested['within_10pct'] * 100:.0f}% within "
        f"10%. Goal: median <= 5% and 90% within 10%: " + ("met." if met else "not met.") + _all_faithful(cv, sim)
    )


def _all_faithful(cv: dict, sim: dict) -> str:
    """The held-out errors on every faithful point, the ones the fit left out (not network-paced)
    included, each scored with its topology's held-out fit: what a user of any faithful run sees."""
    every = cv.get("simulated_all_faithful")
    if not every or every["points"] == sim["points"]:
        return ""
    return (
        f" On every faithful point ({every['points']}: the {every['points'] - sim['points']} the fit left out as "
        f"paced by the CPU included, each with its topology's held-out fit): median |error| "
        f"{every['median_abs_error'] * 100:.1f}%, {every['within_10pct'] * 100:.0f}% within 10%."
    )


def forms_table(forms: list[dict]) -> str:
    head = ["form", "fitted: median", "within 10%", "held out: median", "within 10%", "within 5%", "fitted values"]
    rows = []
    for f in forms:
        v = f["fit"]
        parts = [f"b {v['bandwidth_factor']:.3f}" if v["bandwidth_factor"] != 1 else "",
                 f"c {v['message_latency_s'] * 1e3:.2g} ms" if v["message_latency_s"] else "",
                 f"per cable {v['hop_latency_s'] * 1e3:.2g} ms" if v["hop_latency_s"] else "",
                 f"weight-S {v['weight_s']:g}" if v["weight_s"] else "",
                 f"queue {v['queue_bytes']:g} B" if v.get("queue_bytes") else "",
                 f"datapath {v['datapath_bps'] * 8e-6:g} Mbit/s x cables" if v.get("datapath_bps") else "",
                 f"k {v['fan_in_factor']:.3f}" if v["fan_in_factor"] else "",
                 f"a {v['load_factor']:.3f} per Gbit/s" if v.get("load_factor") else "",
                 f"q {v['load_power']:.2f}, j {v['pairs_power']:.2f}" if v.get("pairs_power") else ""]  # fmt: skip
        fi, ho = f["fitted"], f["held_out"]
        rows.append([f["form"], f"{fi['median_abs_error'] * 100:.1f}%", f"{fi['within_10pct'] * 100:.0f}%",
                     f"{ho['median_abs_error'] * 100:.1f}%", f"{ho['within_10pct'] * 100:.0f}%",
                     f"{ho['within_5pct'] * 100:.0f}%", ", ".join(x for x in parts if x) or "-"])  # fmt: skip
    return md_table(head, rows)


def _spread(row: dict) -> str:
    """A merged row's repeats as the table says them: "3: 1.084" (faithful repeats: slowest over
    fastest), "1: -" (one faithful), "-" (not merged)."""
    if "repeats_s" not in row:
        return "-"
    n = sum(t is not None for t in row["repeats_s"])
    return f"{n}: {fmt(row.get('repeat_spread'), '.3f')}"


def _where(row: dict) -> str:
    """A point's topology as the table names it, with how it was run where not as its file says."""
    return row["topology"].removesuffix(".yaml") + (f" {row['note']}" if row.get("note") else "")


def format_tables(res: dict) -> str:
    head = ["topology", "traffic", "hosts", "busiest cable (s)", "veth cables (Gbit/s)", "emulated GST (s)",
            "simulated, max-min (s)", "simulated, calibrated (s)", "calibrated / emulated", "within 5%?",
            "held out / emulated", "replaced factors / emulated", "this / previous emulation",
            "repeats, slowest / fastest", "why not"]  # fmt: skip
    rows = [
        [_where(r), f"{r['scheme']} ({r['bytes'] / 1e6:.2f} MB)", str(r["hosts"]),
         fmt(r.get("expected_s"), ".3f"), fmt(r.get("cable_load_gbps"), ".2f"), fmt(r["emulated_s"], ".3f"),
         fmt(r.get("uncalibrated_s"), ".3f"),
         fmt(r.get("calibrated_s"), ".3f"), fmt(r.get("ratio"), ".3f"), "yes" if r.get("within_goal") else "no",
         fmt(r.get("held_out_ratio"), ".3f"), fmt(r.get("prior_ratio"), ".3f"), fmt(r.get("repeat_ratio"), ".3f"),
         _spread(r), r.get("why", "") or "-"]
        for r in res["points"]
    ]  # fmt: skip
    parts = ["### Simulated against emulated communication time\n\n" + md_table(head, rows)]
    if res.get("repeats"):
        parts.append(repeats_line(res["repeats"]))
    if res.get("kept"):
        parts.append(kept_line(res["kept"]))
    if "calibration" in res:
        cal = res["calibration"]
        f = cal["fit"]
        within = sum(1 for r in res["points"] if r.get("within_goal"))
        parts.append(
            f"Chosen by its held-out error: **{cal['form']}** (b {f['bandwidth_factor']:.3f} on top of the "
            f"headers' {'on' if f['headers'] else 'off'}, message latency {f['message_latency_s'] * 1e3:.3g} ms, "
            f"latency per cable {f['hop_latency_s'] * 1e3:.3g} ms, weight-S {f['weight_s']:g}, queue "
            f"{f.get('queue_bytes', 0):g} B, datapath {f.get('datapath_bps', 0) * 8e-6:g} Mbit/s x cables (0: none), "
            f"fan-in k {f['fan_in_factor']:.3f}, load term {f.get('load_factor', 0):.4f} "
            f"L^{f.get('load_power', 1):.2f} P^{f.get('pairs_power', 0):.2f}, L in Gbit/s over the veth cables, "
            "P the connections), "
            f"fitted on {f['points']} points. Within 5%: {within} of "
            f"{len(res['points'])} points. Fitted on {cal['fitted_on']}."
        )
        parts.append(held_out_line(cal, res["points"]))
    if res.get("unseen"):
        parts.append(unseen_lines(res["unseen"]))
    if "calibration" in res:
        cal = res["calibration"]
        if cal.get("forms"):
            parts.append(
                "### Every form tried: fitted and held-out errors\n\nFitted: on all faithful points; held out: each "
                "topology left out in turn (grid value and factors fitted on the others), from the form's formula "
                "(SimGrid's times at the grid value, times the closed-form factors).\n\n" + forms_table(cal["forms"])
            )
    if res.get("tf"):
        head = ["experiment", "TF job", "measured communication per step (s)", "BCT (s)", "simulated, max-min (s)",
                "simulated, calibrated (s)", "calibrated / measured", "replaced factors / measured",
                "faithful"]  # fmt: skip
        rows = [
            [r["experiment"].removesuffix(".yaml"), f"W={r.get('workers')} P={r.get('ps')} "
             f"({(r.get('model_bytes') or 0) / 1e6:.2f} MB)", fmt(r.get("comm_s"), ".3f"),
             fmt((r.get("bct") or {}).get("mean"), ".3f"), fmt(r.get("uncalibrated_s"), ".3f"),
             fmt(r.get("calibrated_s"), ".3f"), fmt(r.get("ratio"), ".3f"), fmt(r.get("prior_ratio"), ".3f"),
             "yes" if r.get("faithful") else f"no ({r.get('fidelity') or r.get('error')})"]
            for r in res["tf"]
        ]  # fmt: skip
        parts.append(
            "### The TF PS job (held out: never fitted on)\n\nEach shipped file run short on the emulator (`testbed "
            f"run`'s job, {TF_ITERATIONS} measured steps), its communication per step measured as the links' busy "
            "time (runs.steptime), beside `testbed simulate` of the same file with the calibrated factors.\n\n"
            + md_table(head, rows)
            + "\n\n"
            + tf_line(res["tf"])
            + (
                f" Each measured time the median of {len(res['tf_repeats']['runs'])} runs of the same code "
                f"({', '.join(m['file'] for m in res['tf_repeats']['runs'])})."
                if res.get("tf_repeats")
                else ""
            )
        )
    return "\n\n".join(parts) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench_parser("bench_flowmodel", __doc__, "one topology, mesh and ring, one small size, no TF (~2 min)")
    p.add_argument("--topologies", nargs="+", help="topology file names (default: every shipped one)")
    p.add_argument("--sizes", type=float, nargs="+", help=f"busiest-cable seconds per point (default {SIZES_S})")
    p.add_argument(
        "--emulated",
        nargs="+",
        metavar="FILE",
        help="reuse the emulated points of an earlier flowmodel-emulated.json (no emulation); several files "
        "(repeats of the same code): each point the median of its faithful repeats, the first file this emulation",
    )
    p.add_argument(
        "--tf-emulated",
        nargs="+",
        metavar="FILE",
        help="reuse the TF points of an earlier flowmodel-tf-emulated.json (no TF emulation); several: medians",
    )
    p.add_argument("--no-tf", action="store_true", help="leave the TF PS job out (no TF run, no TF point)")
    p.add_argument(
        "--emulate-only",
        action="store_true",
        help="stop once the emulated points are written (fit later with --emulated/--tf-emulated, off the CPU lock)",
    )
    p.add_argument(
        "--factors", help=f"factors file to write (default {FACTORS}; --quick: OUT/flowmodel-factors-quick.json)"
    )
    p.add_argument(
        "--prior-factors",
        help="factors file to judge on these points before the refit, as points it never saw (default: the "
        "factors file this run replaces, where this run emulated)",
    )
    p.add_argument(
        "--previous-emulated",
        help="an earlier flowmodel-emulated.json of the same code: the emulator against itself, point by point "
        "(default: OUT's, where this run emulated)",
    )
    return p.parse_args(argv)


def _file_scale(topology: str) -> float:
    """The scale a topology file sets (points emulated before runs recorded theirs ran at it)."""
    from topologies.schema import load_spec

    return load_spec(TOP / "topologies" / topology).scale


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir = begin(args)
    if args.quick:
        files, schemes, sizes, iterations = QUICK["topologies"], QUICK["schemes"], QUICK["sizes"], QUICK["iterations"]
    else:
        files, schemes, sizes, iterations = shipped_topologies(), SCHEMES, SIZES_S, 3
    files, sizes = tuple(args.topologies or files), tuple(args.sizes or sizes)
    res: dict = {"meta": meta(args)}
    t0 = time.monotonic()
    # the TF PS job's points are emulated (and the kept ones archived) only by a run that emulates
    # and is neither reduced nor told to read them
    emulates_tf = not (args.emulated or args.quick or args.no_tf or args.tf_emulated)
    runs, about, metas = read_repeats(args.emulated) if args.emulated else ([], [], [])
    loaded = {"points": runs[0], "meta": metas[0]} if runs else {}
    if loaded:  # only what was emulated (a topology or scheme added since has no point to fit)
        files = tuple(f for f in files if f in {r["topology"] for r in loaded["points"]})
        schemes = tuple(x for x in schemes if x in {r["scheme"] for r in loaded["points"]})
        sizes = tuple(sorted({r["size_s"] for r in loaded["points"]}))
    emulated_at = {r["topology"]: r.get("scale") or _file_scale(r["topology"]) for r in loaded.get("points", [])}
    todo = [c for f in files for c in cases(f, schemes, sizes, iterations, emulated_at.get(f))]
    todo.sort(key=lambda c: len(c.net.hosts()))  # small networks first: a stopped run keeps most points
    quick_factors = out_dir / "flowmodel-factors-quick.json"
    factors = Path(args.factors) if args.factors else quick_factors if args.quick else FACTORS
    # what the unseen judgment compares with, read before this run overwrites either file
    prior_path = Path(args.prior_factors) if args.prior_factors else None if args.emulated else factors
    prior = prior_record(prior_path) if prior_path is not None and prior_path.is_file() else None
    if args.prior_factors and prior is None:
        raise SystemExit(f"--prior-factors {args.prior_factors}: no such file; name a factors file to judge")
    prev_path = (
        Path(args.previous_emulated)
        if args.previous_emulated
        else None
        if args.emulated
        else out_dir / "flowmodel-emulated.json"
    )
    previous = {}
    if prev_path is not None and prev_path.is_file():
        previous = {point_key(r): r for r in read_json(prev_path)["points"]}
        res["meta"]["previous_emulated"] = str(prev_path)
    elif args.previous_emulated:
        raise SystemExit(f"--previous-emulated {args.previous_emulated}: no such file; name a flowmodel-emulated.json")
    elif len(runs) > 1:  # repeats merged: the emulator against itself is this emulation against the next file
        previous = {point_key(r): r for r in runs[1]}
        res["meta"]["previous_emulated"] = args.emulated[1]
    if args.emulated:
        res["meta"]["emulated_from"] = f"{' '.join(args.emulated)} (refit: date and machine above are the refit's)"
        res["meta"]["emulation"] = loaded.get("meta", {})  # when, where and at which commit they were emulated
        old = {point_key(r): r for r in loaded["points"]}
        todo = [c for c in todo if (c.topology, c.scheme, c.size_s) in old]
        rows = [dict(old[(c.topology, c.scheme, c.size_s)]) for c in todo]
        if len(runs) > 1:
            rows = merge_repeats([rows, *runs[1:]], point_key)
            res["repeats"] = repeats_summary(rows, about)
    else:
        kept = archive_emulations(out_dir, (EMULATED, TF_EMULATED) if emulates_tf else (EMULATED,))
        if EMULATED in kept and prev_path == out_dir / f"{EMULATED}.json":
            res["meta"]["previous_emulated"] = str(kept[EMULATED])
        with tempfile.TemporaryDirectory(prefix="bench-flowmodel-") as tmp:
            rows = emulate(todo, Path(tmp), out_dir / f"{EMULATED}.json")
    tf_rows: list[dict] = []
    if args.emulated and not (args.tf_emulated or args.no_tf):
        LOG.info("--emulated without --tf-emulated: no TF point (a refit never emulates)")
    elif args.tf_emulated and not (args.quick or args.no_tf):
        tf_runs, tf_about, _ = read_repeats(args.tf_emulated)
        tf_rows = [dict(r) for r in tf_runs[0]]
        if len(tf_runs) > 1:
            tf_rows = merge_repeats(tf_runs, lambda r: r["experiment"], "comm_s")
            res["tf_repeats"] = repeats_summary(tf_rows, tf_about)
        res["meta"]["tf_emulated_from"] = " ".join(args.tf_emulated)
    elif emulates_tf:
        with tempfile.TemporaryDirectory(prefix="bench-flowmodel-tf-") as tmp:
            tf_rows = emulate_tf(TF_EXPERIMENTS, Path(tmp))
        tf_file = {"meta": res["meta"], "points": tf_rows}
        write_text_atomic(out_dir / f"{TF_EMULATED}.json", json.dumps(tf_file, indent=1))
    res["meta"]["emulated_wall_s"] = time.monotonic() - t0
    res["points"] = rows
    if not args.emulated:  # the measurements first, so that a failed fit loses nothing (--emulated reads this file)
        write_text_atomic(out_dir / f"{EMULATED}.json", json.dumps(res, indent=1))
    if args.emulate_only:
        LOG.info("emulated points written to %s; no fit (--emulate-only)", out_dir)
        return 0
    res["calibration"] = calibrate(todo, rows, factors, res["meta"])
    if tf_rows:
        simulate_tf(tf_rows, res["calibration"]["settings"])
        res["tf"] = tf_rows
    if prior is not None or previous:
        res["unseen"] = judge_unseen(todo, rows, tf_rows, prior, previous)
        res["kept"] = keep_replaced(res["calibration"], res["unseen"])
        if res["kept"]:
            write_text_atomic(factors, prior["text"])
            LOG.info("%s: the replaced factors kept (they predict this run's points better than the refit)", factors)
    res["meta"]["factors_file"] = str(factors)
    res["meta"]["wall_s"] = time.monotonic() - t0
    write_results(
        out_dir,
        "flowmodel",
        "Flow-model calibration",
        res,
        format_tables(res),
        args.quick,
        depends_on("flowmodel", staleness.TOPOLOGY_FILES),
    )  # it runs every topology file
    return 0


if __name__ == "__main__":
    sys.exit(main())
