"""`python -m benchmarks.bct`: measured batch completion time (BCT) of real TF jobs against the model.

For the paper's two prototypes (topologies/psnet-testbed.yaml, topologies/fattree-testbed.yaml)
and two adjacent PSNet modules (topologies/psnet-2modules.yaml, Eq. 6; section 3 of the output
takes its gap to Eq. 6 apart against the one-module prototype at the same rate) at three worker
link rates (emulated 25, 50 and 100 Mbit/s, i.e. scale = paper rate / emulated rate), one
synchronous parameter-server job each: VGG-16 at one fixed width (the same model bytes
at every rate, so the communication time changes with the rate), BS = 1, 4 measured steps after
1 warm-up step. Each point is one `runs.runner.run_experiment` of a temporary experiment file
(written outside the repository, pointing at the topology file by absolute path); its results go
to OUT/bct-runs/<point>/.

Per point, printed with its target beside it (nothing is asserted):

- measured mean BCT (slowest worker per step, after warm-up) against the model's BCT_min (Eq. 2,
  full overlap) and BCT_max (Eq. 1, no overlap). The target is measured / BCT_max within
  0.95-1.10: the job is sequential (pull the variables, compute, push the gradients, wait for the
  sync token), so Eq. 1 is its model. The target applies only where the run is
  communication-bound (predicted T_push >= COMM_BOUND_FACTOR x T_compute) and the fidelity
  monitor calls the run faithful;
- the fidelity verdict: faithful?, ovs-vswitchd CPU p95 (share of a core), machine idle p5;
- TF start-up per process (`startup_s` of every "ready" line in events.jsonl): median and max;
- peak RSS per TF process: a sampler (emulation.sampler) follows every `python -m tfjob.psjob`
  process descended from this one (the larger of the kernel's high-water mark VmHWM and the
  sampled RSS).

Results go to OUT/bct.json (everything) and OUT/bct.md. Every emulation takes the testbed's
emulator lock (set PSNET_LOCK_WAIT_S to queue behind other runs); the time a point spent before
its network was up (queueing for the lock) is reported and left out of the emulation time.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.bct_measure import (
    COMM_BOUND_FACTOR,
    TARGET_HIGH,
    TARGET_LOW,
    job_account,
    job_sampler,
    judge,
    placed_bytes_bound,
    pre_emulation_s,
    read_events,
    startup,
)
from benchmarks.common import (
    TOP,
    begin,
    bench_parser,
    finish,
    fmt,
    lock_wait_s,
    maximum,
    md_table,
    median,
    meta,
    write_summary,
)
from runs.runner import RunResult, run_experiment
from topologies.files import write_text_atomic
from topologies.schema import load_spec

LOG = logging.getLogger(__name__)

PROTOTYPES = ("psnet-testbed", "fattree-testbed")  # the paper's two testbeds (Section 5)
#: two adjacent PSNet modules (Eq. 6): the same W = 6, P = 2, R = 3 as psnet-testbed, so Eq. 6's
#: per-flow rate equals Eq. 5's there and the one-module point at the same rate shows which part
#: of the gap is the second module's
TWO_MODULES = "psnet-2modules"
TOPOLOGIES = (*PROTOTYPES, TWO_MODULES)
RATES_MBPS = (25.0, 50.0, 100.0)  # emulated worker link rates
QUICK_RATES_MBPS = (50.0,)
MODEL = "vgg16"
#: VGG-16 width 0.22: 6.56 MB of float32 parameters. PSNet (Eq. 5, per-flow B_w/2) pushes it in
#: 1.05 s at 50 Mbit/s, FatTree (Eq. 7, a PS NIC shared by 6 workers, B_w/6) in 3.1 s.
WIDTH = 0.22
BATCH_SIZE = 1
ITERATIONS, WARMUP = 4, 1
#: the model assumes every PS holds S/P; TF's round-robin placement puts VGG-16's big dense
#: kernels unevenly, so the benchmark places variables by size
PLACEMENT = "balanced"
DEADLINE_S = 600.0


# --- one point ---------------------------------------------------------------------------------
def point_name(topology: str, mbps: float) -> str:
    return f"bct-{topology}-{mbps:g}mbps"


def write_experiment(topology: str, mbps: float, folder: Path, args: argparse.Namespace) -> tuple[Path, float]:
    """A temporary experiment file for one point; returns (path, scale)."""
    topo_path = (TOP / "topologies" / f"{topology}.yaml").resolve()
    paper_mbps = load_spec(topo_path).worker_mbps  # the files' rates are the paper's (1000)
    scale = paper_mbps / mbps
    data = {
        "name": point_name(topology, mbps),
        "topology": str(topo_path),
        "scale": scale,
        "job": {
            "model": MODEL,
            "batch_size": BATCH_SIZE,
            "iterations": args.iterations,
            "warmup": args.warmup,
            "placement": args.placement,
            "width": args.width,
            "deadline_s": DEADLINE_S,
        },
    }
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, scale


def run_point(topology: str, mbps: float, folder: Path, runs_dir: Path, args: argparse.Namespace) -> dict:
    """One experiment with memory sampling; the row of the table (and everything behind it)."""
    path, scale = write_experiment(topology, mbps, folder, args)
    name = point_name(topology, mbps)
    LOG.info(
        "%s: %g Mbit/s (scale %g), %s width %g, %d+%d steps",
        name,
        mbps,
        scale,
        MODEL,
        args.width,
        args.warmup,
        args.iterations,
    )
    sampler = job_sampler().start()
    t_call, t0 = time.time(), time.monotonic()
    error, result = "", None
    try:
        result = run_experiment(path, results=runs_dir, progress=sys.stderr.isatty())
    except KeyboardInterrupt:
        raise
    except Exception as err:  # one failed point must not lose the others
        error = f"{type(err).__name__}: {err}"
        LOG.error("%s failed: %s", name, error)
    finally:
        procs, cpu = job_account(sampler)
    wall_s = time.monotonic() - t0
    out_dir = result.out_dir if isinstance(result, RunResult) else runs_dir / name
    summary = result.summary.as_dict() if result else _read_summary(out_dir)  # the JSON, as the table keeps it
    events = read_events(out_dir)
    queued = pre_emulation_s(events, t_call)
    rss = [p["peak_rss"] / 1e6 for p in procs if p["peak_rss"]]
    row = {
        "topology": topology,
        "rate_mbps": mbps,
        "scale": scale,
        "name": name,
        "results": str(out_dir),
        "error": error or summary.get("error", ""),
        "complete": bool(summary.get("complete")),
        "wall_s": wall_s,
        "queued_s": queued,
        "emulation_wall_s": wall_s - queued if queued is not None else None,
        "model_bytes_emulated": summary.get("model_bytes_emulated"),
        "bytes_per_ps": summary.get("bytes_per_ps"),
        "bct_s": summary.get("bct_s"),
        "predicted": summary.get("predicted"),
        "predicted_placement": summary.get("predicted_placement"),
        "fidelity": summary.get("fidelity"),
        "startup": startup(events),
        "cpu": cpu,
        "rss_mb": {
            "processes": len(rss),
            "median": median(rss),
            "max": maximum(rss),
            "ps_max": maximum([p["peak_rss"] / 1e6 for p in procs if p["job"] == "ps"]),
            "worker_max": maximum([p["peak_rss"] / 1e6 for p in procs if p["job"] == "worker"]),
            "per_process": procs,
        },
    }
    bpp = row["bytes_per_ps"] or {}
    row["largest_ps_share"] = max(bpp.values()) / sum(bpp.values()) if bpp and sum(bpp.values()) else None
    row |= judge(summary)
    row |= placed_bytes_bound(row)
    return row


def _read_summary(out_dir: Path) -> dict:
    try:
        return json.loads((out_dir / "summary.json").read_text())
    except (OSError, ValueError):
        return {}


def warm_calibration(width: float) -> float:
    """Calibrate P_w and P_s for the job's model once, before any emulation (seconds taken).

    run_experiment's prediction reads the same cache entry (key "<model>@w<width>"); measuring it
    here keeps the first point's queue time clean and the calibration off a running emulation.
    """
    from tfjob import calibrate, dnn

    t = time.monotonic()
    cal = calibrate.calibrate(lambda: dnn.build_model(MODEL, width), f"{MODEL}@w{width:.6g}", BATCH_SIZE)
    LOG.info(
        "calibration %s@w%g: P_w %.1f samples/s, P_s %.3g B/s", MODEL, width, cal.p_w_samples_per_s, cal.p_s_bytes_per_s
    )
    return time.monotonic() - t


# --- tables ------------------------------------------------------------------------------------
def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def format_tables(rows: list[dict]) -> str:
    t1, t2, notes = [], [], []
    for r in rows:
        pred = r.get("predicted") or {}
        bct = r.get("bct_s") or {}
        fid = r.get("fidelity") or {}
        mean = bct.get("mean")
        ci = bct.get("ci95")
        if mean is None:
            measured = "failed"
        elif ci is not None and ci == ci:  # NaN with one step
            measured = f"{mean:.2f} ± {ci:.2f}"
        else:
            measured = f"{mean:.2f}"
        if r["target_applies"]:
            target = f"{TARGET_LOW:.2f}-{TARGET_HIGH:.2f}: {'yes' if r['within_target'] else 'NO'}"
        else:
            target = f"- ({r['target_not_applied_because']})"
        comm = "-" if r["comm_ratio"] is None else f"{'yes' if r['comm_bound'] else 'no'} ({r['comm_ratio']:.0f}x)"
        t1.append(
            [
                r["topology"],
                f"{r['rate_mbps']:g}",
                f"{r['scale']:g}",
                fmt((r.get("model_bytes_emulated") or 0) / 1e6 or None),
                str(pred.get("equation") or "-"),
                f"{bct.get('n', 0)}",
                measured,
                fmt(pred.get("bct_min_s")),
                fmt(pred.get("bct_max_s")),
                fmt(r["ratio_min"]),
                fmt(r["ratio_max"]),
                target,
                comm,
                f"{fmt(r.get('bct_max_placed_s'))} / {fmt(r.get('ratio_max_placed'))}",
            ]
        )
        st, mem, cpu = r["startup"], r["rss_mb"], r.get("cpu") or {}
        t2.append(
            [
                r["topology"],
                f"{r['rate_mbps']:g}",
                ("yes" if fid.get("faithful") else "NO") if fid else "-",
                _pct(fid.get("ovs_cpu_p95")),
                _pct(fid.get("idle_p5")),
                _pct(fid.get("busiest_utilisation")) if fid.get("busiest_link") else "-",
                f"{fmt(st.get('all_median_s'), '.1f')} / {fmt(st.get('all_max_s'), '.1f')}",
                f"{fmt(st.get('ps_max_s'), '.1f')} / {fmt(st.get('worker_max_s'), '.1f')}",
                f"{fmt(mem.get('median'), '.0f')} / {fmt(mem.get('max'), '.0f')} ({mem.get('processes', 0)})",
                _pct(r.get("largest_ps_share")),
                f"{fmt(cpu.get('ours_cores'))} / {fmt(cpu.get('other_cores'))}",
                fmt(r.get("emulation_wall_s"), ".0f"),
                fmt(r.get("queued_s"), ".0f"),
            ]
        )
        label = f"{r['topology']} @ {r['rate_mbps']:g} Mbit/s"
        if r.get("error"):
            notes.append(f"- {label}: FAILED: {r['error'][:300]}")
        if fid and not fid.get("faithful"):
            notes.append(f"- {label}: not faithful: {fid.get('reason')}")
    head1 = [
        "topology",
        "worker rate (Mbit/s)",
        "scale",
        "model (MB emul.)",
        "eq.",
        "steps",
        "measured BCT mean ± 95% CI (s)",
        "BCT_min (s)",
        "BCT_max (s)",
        "meas/BCT_min",
        "meas/BCT_max",
        "target meas/BCT_max (Eq. 1: sequential job)",
        f"comm-bound (T_push/T_compute >= {COMM_BOUND_FACTOR:g})",
        "diagnostic: BCT_max at the heaviest PS's bytes (s) / meas/it",
    ]
    head2 = [
        "topology",
        "worker rate (Mbit/s)",
        "faithful",
        "ovs-vswitchd CPU p95 (of a core)",
        "idle p5",
        "busiest link peak / rate",
        "TF start-up median / max (s)",
        "start-up max PS / worker (s)",
        "peak RSS per TF process median / max (MB) (procs)",
        "largest PS byte share",
        "CPU cores, mean: this run / other work",
        "emulation wall (s)",
        "queued (s)",
    ]
    text = "### 1. BCT against the model (Eqs. 1-7)\n\n" + md_table(head1, t1)
    text += "\n\n### 2. Fidelity and TF processes\n\n" + md_table(head2, t2)
    text += format_two_modules(rows)
    if notes:
        text += "\n\n" + "\n".join(notes)
    return text + "\n"


def _eq6_terms(row: dict) -> dict[str, float]:
    """Eq. 6's per-flow rates of a two-module point, at its emulated rates."""
    from models.bct_model import two_modules_terms_of
    from topologies.build import build_network
    from topologies.schema import parse_spec

    topo = TOP / "topologies" / f"{row['topology']}.yaml"
    data = yaml.safe_load(topo.read_text()) | {"scale": row["scale"]}
    return two_modules_terms_of(build_network(parse_spec(data, str(topo))))


def format_two_modules(rows: list[dict]) -> str:
    """Section 3: each two-module point against Eq. 6, its gap taken apart.

    The gap is read in three steps, each from numbers of this run: (1) Eq. 6's binding term
    (which link the model says limits each flow); (2) the PSs' real byte split (TF places whole
    variables, so the busiest PS holds more than S/P: BCT_max at its bytes); (3) the one-module
    point at the same rate (psnet-testbed: the same W, P, R, so the same per-flow rate by Eq. 5):
    what is left beyond it is what the second module costs (longer paths through 2 SuperNodes),
    the rest is the per-step overhead every job on this machine has (TF's gRPC and sync-token
    round trips, 8 processes on 2 cores), not modelled by the equations (T_sync = 0)."""
    two = [r for r in rows if r["topology"] == TWO_MODULES]
    if not two:
        return ""
    one = {r["rate_mbps"]: r for r in rows if r["topology"] == "psnet-testbed"}
    table, lines, crossing = [], [], []
    for r in two:
        pred = r.get("predicted") or {}
        mean = (r.get("bct_s") or {}).get("mean")
        terms = _eq6_terms(r)
        low = min(terms.values())
        binding = " = ".join(k for k, v in terms.items() if v == low)  # ties: every term that binds
        if any(k.startswith("modules") and v == low for k, v in terms.items()):
            crossing.append(f"{r['rate_mbps']:g} Mbit/s")
        ref = one.get(r["rate_mbps"]) or {}
        ref_mean = (ref.get("bct_s") or {}).get("mean")
        table.append(
            [
                f"{r['rate_mbps']:g}",
                f"{binding} = {low:.1f} Mbit/s",
                fmt(pred.get("bct_max_s")),
                fmt(mean),
                fmt(r["ratio_max"]),
                fmt(r.get("bct_max_placed_s")),
                fmt(r.get("ratio_max_placed")),
                fmt(ref_mean),
                fmt(mean / ref_mean if mean and ref_mean else None),
            ]
        )
        if mean and pred.get("bct_max_s"):
            placed = r.get("bct_max_placed_s") or pred["bct_max_s"]
            extra = mean - placed
            step = f"{r['rate_mbps']:g} Mbit/s: measured {mean:.2f} s = Eq. 6 BCT_max {pred['bct_max_s']:.2f} s"
            step += f" + {placed - pred['bct_max_s']:.2f} s for the PSs' real byte split + {extra:.2f} s more"
            if ref_mean:
                ref_placed = ref.get("bct_max_placed_s") or (ref.get("predicted") or {}).get("bct_max_s") or 0.0
                step += (
                    f"; one module at this rate has {ref_mean - ref_placed:.2f} s beyond its own bound, so the"
                    f" second module adds {mean - ref_mean:+.2f} s"
                )
            lines.append(f"- {step}.")
    head = [
        "worker rate (Mbit/s)",
        "Eq. 6 binding term (per flow)",
        "Eq. 6 BCT_max (s)",
        "measured (s)",
        "meas/BCT_max",
        "BCT_max at the PSs' real split (s)",
        "meas/it",
        "one module, same W/P/R, measured (s)",
        "two / one module",
    ]
    overhead = (
        "the one-module column's time beyond its own bound is the per-step overhead every job here has and the"
        " equations leave out (T_sync = 0: TF's gRPC and sync-token round trips, 8 TF processes on 2 cores)"
    )
    if crossing:
        why = (
            f"An inter-module term of Eq. 6 binds at {', '.join(crossing)}: there the SuperNode links, not the"
            f" NICs, set the per-flow rate; {overhead}."
        )
    else:
        why = (
            "Eq. 6's inter-module terms do not bind at any rate here, so it gives the per-flow rate of Eq. 5 on"
            f" the one-module prototype (same W, P, R); {overhead}. What the two-module point adds beyond that is"
            " not in the model (its cross-module paths pass through more switches of the one datapath thread)."
        )
    return f"\n\n### 3. Two modules (Eq. 6): the gap\n\n{md_table(head, table)}\n\n{why}\n\n" + "\n".join(lines)


# --- entry point -------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench_parser("bench_bct", __doc__, "reduced run: every topology at 50 Mbit/s only")
    p.add_argument("--topology", choices=TOPOLOGIES, action="append", help="run only these topologies")
    p.add_argument("--rates", type=float, nargs="+", help="emulated worker rates in Mbit/s (default 25 50 100)")
    p.add_argument("--width", type=float, default=WIDTH, help=f"VGG-16 width multiplier (default {WIDTH})")
    p.add_argument("--iterations", type=int, default=ITERATIONS, help=f"measured steps (default {ITERATIONS})")
    p.add_argument("--warmup", type=int, default=WARMUP, help=f"warm-up steps (default {WARMUP})")
    p.add_argument("--placement", choices=["balanced", "round-robin"], default=PLACEMENT, help="variable placement")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir = begin(args)
    runs_dir = out_dir / "bct-runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    topologies = args.topology or list(TOPOLOGIES)
    rates = args.rates or list(QUICK_RATES_MBPS if args.quick else RATES_MBPS)
    res: dict = {
        "meta": meta(args)
        | {
            "lock_wait_s_allowed": lock_wait_s(),
            "model": MODEL,
            "width": args.width,
            "batch_size": BATCH_SIZE,
            "iterations": args.iterations,
            "warmup": args.warmup,
            "placement": args.placement,
            "target": [TARGET_LOW, TARGET_HIGH],
            "target_of": "measured mean BCT / BCT_max (Eq. 1)",
            "comm_bound_factor": COMM_BOUND_FACTOR,
        },
        "points": [],
    }
    t0 = time.monotonic()
    res["meta"]["calibration_s"] = warm_calibration(args.width)
    interrupted = False
    with tempfile.TemporaryDirectory(prefix="psnet-bench-bct-") as tmp:
        try:
            for topo in topologies:
                for mbps in rates:
                    res["points"].append(run_point(topo, mbps, Path(tmp), runs_dir, args))
        except KeyboardInterrupt:
            interrupted = True
            LOG.warning("interrupted: writing the %d points measured so far", len(res["points"]))
    m = res["meta"]
    m["wall_s"] = time.monotonic() - t0
    m["queued_s"] = sum(p["queued_s"] or 0.0 for p in res["points"])
    m["interrupted"] = interrupted
    table = format_tables(res["points"])
    finish(res)
    write_text_atomic(out_dir / "bct.json", json.dumps(res, indent=1))
    mode = "quick" if args.quick else "full"
    write_text_atomic(
        out_dir / "bct.md",
        f"# BCT benchmark ({mode}{', interrupted' if interrupted else ''}, {m['started']}, commit "
        f"{m['git_commit'][:10]}{' + local changes' if m['git_dirty'] else ''}, {m['wall_s']:.0f} s of which "
        f"{m['queued_s']:.0f} s queued for the emulator, machine {m['idle_before_pct']:.0f}% idle before the run)\n\n"
        f"{MODEL} width {args.width:g}, BS {BATCH_SIZE} per worker, {args.iterations} measured steps after "
        f"{args.warmup} warm-up, placement {args.placement}. Target: measured/BCT_max in "
        f"{TARGET_LOW:.2f}-{TARGET_HIGH:.2f} where communication-bound and faithful.\n\n{table}",
    )
    write_summary(out_dir, "bct", "BCT benchmark", res, args.quick)
    print(f"machine idle before the run: {m['idle_before_pct']:.0f}% (other work skews every figure)")
    print(table)
    print(
        f"wall time: {m['wall_s']:.1f} s ({mode}; {m['queued_s']:.0f} s queued for the emulator); written: "
        f"{out_dir / 'bct.json'}, {out_dir / 'bct.md'}"
    )
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
