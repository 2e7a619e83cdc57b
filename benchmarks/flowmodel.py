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
   uncalibrated), and again with a probe message latency (how many messages the critical path has);
3. the fit (models.flow.fit): LV08's bandwidth factor and a per-message latency, least
   squares on the log ratio over the faithful points; written to
   results/calibration/flowmodel-factors.json (the file the flow model reads);
4. every point simulated again with the fitted factors: the table's calibrated column.

The TF PS job (tf-ps) is not a point: its measured communication is the links' busy time in
0.25-s windows (runs.steptime) and TF splits the model by whole variables, not S/P, so its
error would be the measurement's and the split's, not the network model's; the engine's `ps` is
the same push-then-pull pattern with exact bytes. Writes results/bench/flowmodel.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform as py_platform
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import TOP, begin, bench_parser, fmt, md_table, meta, write_results
from schemes import registry
from topologies.files import write_text_atomic

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

    @property
    def name(self) -> str:
        return f"{self.topology} {self.scheme} {self.size_s:g}s"


def _job(scheme: str, model_bytes: float, iterations: int):
    from workloads.experiment import JobSpec

    return JobSpec(
        model="tiny", scheme=scheme, compute="calibrated", compute_s=0.0, iterations=iterations, warmup=1,
        model_bytes=model_bytes, deadline_s=600,
    )  # fmt: skip


def cases(topology: str, schemes: tuple[str, ...], sizes: tuple[float, ...], iterations: int) -> list[Case]:
    """The points of one topology file: each applicable scheme at each size. A scheme the file
    cannot run (no PSs for ps, no address grid for hips, too few hosts) is skipped with a log line."""
    from runs.engine_job import prepare
    from schemes.count import expected_sync_s
    from topologies.build import build_network
    from topologies.schema import load_spec
    from workloads.experiment import ExperimentError

    spec = load_spec(TOP / "topologies" / topology)
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
            out.append(Case(topology, scheme, size, spec.scale, net, job, prepare(job, net, spec.scale, topology)))
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
                row = {"topology": c.topology, "scheme": c.scheme, "size_s": c.size_s, "bytes": c.prep.model_bytes}
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


def simulate_all(todo: list[Case], config: dict[str, str]) -> list[float]:
    """Every case with one configuration, two at a time (one SimGrid process each; 2 cores)."""
    with ThreadPoolExecutor(max_workers=SIM_PARALLEL) as pool:
        return list(pool.map(lambda c: simulate_case(c, config), todo))


def simulate_points(todo: list[Case], rows: list[dict]) -> list:
    """Per case: exact max-min, and the probe (b = 1, c = PROBE_S) for the critical path's length."""
    from models.flow.demands import from_schedule
    from models.flow.fit import Fit, Point, settings
    from models.flow.simgrid import BASE_CONFIG

    probe = settings(Fit(1.0, PROBE_S, 0.0, 0.0, 0))
    bases = simulate_all(todo, dict(BASE_CONFIG))
    probes = simulate_all(todo, probe)
    points = []
    for c, row, base, probed in zip(todo, rows, bases, probes, strict=True):
        slope = (probed - base) / PROBE_S
        fan_in = from_schedule(c.prep.sched).fan_in()
        row.update(uncalibrated_s=base, critical_messages=slope, fan_in=fan_in)
        points.append(Point(c.name, row["emulated_s"] or float("nan"), base, slope, fan_in))
    return points


def calibrate(todo: list[Case], rows: list[dict], out_factors: Path, res_meta: dict) -> dict:
    """Fit on the faithful points, write the factors file, simulate every point with them."""
    from dataclasses import asdict

    from models.flow.fit import fit, held_out, settings, write_factors

    points = simulate_points(todo, rows)
    used = [p for p, r in zip(points, rows, strict=True) if r["faithful"] and r["emulated_s"]]
    fitted_on = "faithful points of benchmarks/flowmodel.py (scheme engine GST, compute 0)"
    if len(used) < 2:  # a loaded machine: fit what was measured, and say so
        used = [p for p, r in zip(points, rows, strict=True) if r["emulated_s"]]
        fitted_on = "every emulated point (fewer than 2 were faithful: the machine was loaded)"
        LOG.warning("fewer than 2 faithful points: fitting on all %d emulated points", len(used))
    full = fit(used)
    bw_only = fit(used, message_latency=False, fan_in=False)
    cv = held_out(used, point_topology) if len({point_topology(p) for p in used}) > 1 else None
    validation = None
    if cv is not None:
        validation = {
            "method": f"leave one topology out ({cv.groups} topologies): factors fitted on the others' points",
            "median_abs_error": cv.median_abs,
            "within_5pct": cv.within(0.05),
            "within_10pct": cv.within(0.10),
            "points": len(cv.errors),
            "errors": cv.errors,
        }
    record = {
        "date": res_meta["started"],
        "machine": f"{py_platform.node()}, {res_meta['cpus']} cores, kernel {res_meta['kernel']}, "
        f"{res_meta['idle_before_pct']:.0f}% idle before the run",
        "commit": res_meta["git_commit"],
        "fitted_on": fitted_on,
        "emulated": res_meta.get("emulated_from") or "this run (date and machine above)",
        "bandwidth_factor_only": asdict(bw_only),
        "held_out": validation,
    }
    write_factors(out_factors, full, record, used)
    cfg = settings(full)
    for c, row, calibrated in zip(todo, rows, simulate_all(todo, cfg), strict=True):
        row["calibrated_s"] = calibrated
        emu = row["emulated_s"]
        row["ratio"] = row["calibrated_s"] / emu if emu else None
        row["within_goal"] = row["ratio"] is not None and abs(row["ratio"] - 1) <= GOAL
        row["why"] = why_not(row, asdict(full))
        if cv is not None and c.name in cv.errors:
            row["held_out_ratio"] = 1 + cv.errors[c.name]
    return {
        "fit": asdict(full),
        "bandwidth_factor_only": asdict(bw_only),
        "held_out": validation,
        "settings": cfg,
        "fitted_on": fitted_on,
    }


def point_topology(p) -> str:
    """The topology a point ran on (its name's first word, Case.name): the held-out groups."""
    return p.name.split()[0]


def why_not(row: dict, f: dict) -> str:
    """A short reason where the calibrated point misses the goal, from its own numbers: how much
    slower than exact max-min the emulator was, against what the fitted factors give a point of its
    fan-in (1/b x (1 + k ln F), the message latency aside)."""
    from models.flow.simgrid import fan_in_multiplier

    if row["emulated_s"] is None:
        return f"emulation failed: {row['error']}"
    if row["within_goal"]:
        return ""
    if not row["faithful"]:
        return f"emulation not faithful ({row['fidelity']})"
    slower = row["emulated_s"] / row["uncalibrated_s"]
    fan_in = row.get("fan_in", 1)
    fitted = fan_in_multiplier(f.get("fan_in_factor", 0.0), fan_in) / f["bandwidth_factor"]
    side = "above" if slower > fitted else "below"
    return (
        f"emulated {slower:.2f}x max-min, {side} the {fitted:.2f}x the factors give a fan-in of {fan_in}: "
        + ("its flows share their cables worse than the other points of its fan-in" if side == "above"
           else "its flows run closer to the shaped rate than the other points of its fan-in")
    )  # fmt: skip


def held_out_line(cv: dict | None, rows: list[dict]) -> str:
    """The fitted and the held-out errors side by side (the goal: held-out median <= 5%, 90%
    within 10%); never the fitted ones alone."""
    fitted = [abs(r["ratio"] - 1) for r in rows if r.get("ratio") is not None and r.get("faithful")]
    line = "**Fitted** (scored on the points it was fitted on): "
    if fitted:
        median = statistics.median(fitted)
        within = sum(1 for e in fitted if e <= 0.10) / len(fitted)
        line += f"median |error| {median * 100:.1f}%, {within * 100:.0f}% within 10% ({len(fitted)} faithful points). "
    if cv is None:
        return line + "**Held out**: not judged (points from fewer than two topologies)."
    return line + (
        f"**Held out** ({cv['method']}; the column 'held out / emulated', from the fit's formula): median |error| "
        f"{cv['median_abs_error'] * 100:.1f}%, {cv['within_10pct'] * 100:.0f}% within 10%, "
        f"{cv['within_5pct'] * 100:.0f}% within 5% of {cv['points']} points. Goal: median <= 5% and 90% within 10%: "
        + ("met." if cv["median_abs_error"] <= 0.05 and cv["within_10pct"] >= 0.9 else "not met.")
    )


def format_tables(res: dict) -> str:
    head = ["topology", "traffic", "hosts", "busiest cable (s)", "emulated GST (s)", "simulated, max-min (s)",
            "simulated, calibrated (s)", "calibrated / emulated", "within 5%?", "held out / emulated",
            "why not"]  # fmt: skip
    rows = [
        [r["topology"].removesuffix(".yaml"), f"{r['scheme']} ({r['bytes'] / 1e6:.2f} MB)", str(r["hosts"]),
         fmt(r.get("expected_s"), ".3f"), fmt(r["emulated_s"], ".3f"), fmt(r.get("uncalibrated_s"), ".3f"),
         fmt(r.get("calibrated_s"), ".3f"), fmt(r.get("ratio"), ".3f"), "yes" if r.get("within_goal") else "no",
         fmt(r.get("held_out_ratio"), ".3f"), r.get("why", "") or "-"]
        for r in res["points"]
    ]  # fmt: skip
    parts = ["### Simulated against emulated communication time\n\n" + md_table(head, rows)]
    if "calibration" in res:
        f, b = res["calibration"]["fit"], res["calibration"]["bandwidth_factor_only"]
        within = sum(1 for r in res["points"] if r.get("within_goal"))
        parts.append(
            f"Fitted on {f['points']} points: bandwidth factor {f['bandwidth_factor']:.3f}, message "
            f"latency {f['message_latency_s'] * 1e3:.2f} ms, fan-in factor k {f.get('fan_in_factor', 0.0):.3f} "
            f"(times x (1 + k ln F)) (rms log error {f['rms_log_error']:.3f}, worst "
            f"{f['max_abs_error'] * 100:.1f}%). Bandwidth factor alone: {b['bandwidth_factor']:.3f} (rms "
            f"{b['rms_log_error']:.3f}, worst {b['max_abs_error'] * 100:.1f}%). Within 5%: {within} of "
            f"{len(res['points'])} points. Fitted on {res['calibration']['fitted_on']}."
        )
        parts.append(held_out_line(res["calibration"].get("held_out"), res["points"]))
    return "\n\n".join(parts) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench_parser("bench_flowmodel", __doc__, "one topology, mesh and ring, one small size (~2 min)")
    p.add_argument("--topologies", nargs="+", help="topology file names (default: every shipped one)")
    p.add_argument("--sizes", type=float, nargs="+", help=f"busiest-cable seconds per point (default {SIZES_S})")
    p.add_argument("--emulated", help="reuse the emulated points of an earlier flowmodel.json (no emulation)")
    p.add_argument(
        "--factors", help=f"factors file to write (default {FACTORS}; --quick: OUT/flowmodel-factors-quick.json)"
    )
    return p.parse_args(argv)


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
    todo = [c for f in files for c in cases(f, schemes, sizes, iterations)]
    todo.sort(key=lambda c: len(c.net.hosts()))  # small networks first: a stopped run keeps most points
    if args.emulated:
        earlier = json.loads(Path(args.emulated).read_text())["points"]
        res["meta"]["emulated_from"] = f"{args.emulated} (refit: date and machine above are the refit's)"
        old = {(r["topology"], r["scheme"], r["size_s"]): r for r in earlier}
        todo = [c for c in todo if (c.topology, c.scheme, c.size_s) in old]
        rows = [dict(old[(c.topology, c.scheme, c.size_s)]) for c in todo]
    else:
        with tempfile.TemporaryDirectory(prefix="bench-flowmodel-") as tmp:
            rows = emulate(todo, Path(tmp), out_dir / "flowmodel-emulated.json")
    res["meta"]["emulated_wall_s"] = time.monotonic() - t0
    res["points"] = rows
    # the measurements first, so that a failed fit loses nothing (--emulated reads this file)
    write_text_atomic(out_dir / "flowmodel-emulated.json", json.dumps(res, indent=1))
    quick_factors = out_dir / "flowmodel-factors-quick.json"
    factors = Path(args.factors) if args.factors else quick_factors if args.quick else FACTORS
    res["calibration"] = calibrate(todo, rows, factors, res["meta"])
    res["meta"]["factors_file"] = str(factors)
    res["meta"]["wall_s"] = time.monotonic() - t0
    write_results(out_dir, "flowmodel", "Flow-model calibration", res, format_tables(res), args.quick)
    return 0


if __name__ == "__main__":
    sys.exit(main())
