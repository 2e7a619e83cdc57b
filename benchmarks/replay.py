"""Is the main figure's headline stable? Fig. 13 replayed twice from scratch, both headlines side by
side and their difference (goal: within 5%).

Why a benchmark: one replay's speed-up moved ~20% between runs when points had 1 repetition x 2
steps; with 3 x 5 and full-size host time it should not. Each run goes into its own folder
(`results/bench/replay-run1/fig13`, `replay-run2/...`, resumable with --keep), so the two are
independent sweeps of the same code on the same machine. Per group the table gives the headline
as the claim computes it (`host_time: full`; in paper-equivalent seconds, replays.decomposition, as the
figure is compressed) and the ratio of the BCTs as run, each against the paper, with how many
points were faithful and each sweep's wall time.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from benchmarks.common import TOP, begin, bench_parser, depends_on, fmt, md_table, meta, write_results
from replays import sweep
from replays.claims import AS_RUN
from replays.report import headlines, load_report

LOG = logging.getLogger("bench_replay")
FIGURE = "fig13"
GOAL = 0.05  # the two headlines within 5% of each other


def difference(a: float | None, b: float | None) -> float | None:
    """|a - b| relative to their mean (None when either is missing)."""
    if a is None or b is None or a + b == 0:
        return None
    return abs(a - b) / ((a + b) / 2)


def compare(runs: list[dict]) -> list[dict]:
    """One row per group over the runs' headlines: each run's ratios and the spread between the
    first two (the benchmark's figure)."""
    groups = list(dict.fromkeys(g for r in runs for g in r["headlines"]))
    rows = []
    for g in groups:
        hs = [r["headlines"].get(g, {}) for r in runs]
        measured = [h.get("measured") for h in hs]
        as_run = [h.get("as_run") for h in hs]
        rows.append(
            {
                "group": g,
                "paper": next((h["paper"] for h in hs if h), None),
                "measured": measured,
                "unit": next((h["unit"] for h in hs if h.get("unit")), AS_RUN),
                "as_run": as_run,
                "verdicts": [h.get("verdict", "not measured") for h in hs],
                "difference": difference(*measured[:2]) if len(measured) >= 2 else None,
                "difference_as_run": difference(*as_run[:2]) if len(as_run) >= 2 else None,
            }
        )
    return rows


def format_table(res: dict) -> str:
    rows = []
    for r in res["groups"]:
        d = r["difference"]
        rows.append(
            [
                r["group"],
                fmt(r["paper"]),
                *(fmt(x) + "x" if x is not None else "-" for x in r["measured"]),
                fmt(None if d is None else d * 100, ".1f") + ("%" if d is not None else ""),
                "-" if d is None else ("yes" if d <= GOAL else "no"),
                " / ".join(fmt(x) for x in r["as_run"]),
            ]
        )
    n = len(res["runs"])
    head = ["group", "paper", *(f"run {i + 1}" for i in range(n)), "difference", "within 5%", "as run"]
    runs = md_table(
        ["run", "folder", "wall (min)", "faithful points", "claims not judged"],
        [
            [
                str(i + 1),
                r["folder"],
                fmt(r["wall_s"] / 60, ".1f"),
                f"{r['faithful']}/{r['points']}",
                str(sum(h["verdict"].startswith("not judged") for h in r["headlines"].values())),
            ]
            for i, r in enumerate(res["runs"])
        ],
    )
    return (
        f"Fig. 13 speed-up (PSNet vs FatTree r=1), replayed {n} times"
        f"{' (quick path: 1 repetition, 2 points per run; not the headline)' if res['quick'] else ''}; "
        "'run i' is the headline as `testbed replay fig13` prints it: in paper-equivalent seconds "
        "(communication x compress + host time, so compress cancels) where the figure is compressed; "
        "'as run' the ratio of the BCTs as emulated.\n\n"
        f"{md_table(head, rows)}\n\n{runs}\n"
    )


def replay_once(folder: Path, quick: bool, keep: bool, progress: bool) -> dict:
    """One sweep of the figure into `folder` (fresh unless `keep`), with its headline."""
    t0 = time.monotonic()
    out = sweep.run_figure(FIGURE, quick=quick, fresh=not keep, results=folder, progress=progress)
    wall = time.monotonic() - t0
    rep = load_report(out)
    if rep is None:
        raise RuntimeError(f"{out}: no report.json written")
    return {
        "folder": str(out.relative_to(TOP) if out.is_relative_to(TOP) else out),
        "wall_s": wall,
        "points": len(rep.points),
        "faithful": rep.faithful_points,
        "headlines": headlines(rep),
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench_parser("bench_replay", __doc__, "Fig. 13's quick path twice (~5 min; a smoke run)")
    p.add_argument("--runs", type=int, default=2, help="how many replays (default 2)")
    p.add_argument("--keep", action="store_true", help="resume the runs' folders instead of starting them afresh")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir = begin(args)
    res: dict = {"meta": meta(args), "quick": args.quick, "runs": []}
    t0 = time.monotonic()
    stem = "replay-quick" if args.quick else "replay"
    for i in range(1, args.runs + 1):
        LOG.info("replay %d of %d", i, args.runs)
        res["runs"].append(replay_once(out_dir / f"{stem}-run{i}", args.quick, args.keep, not args.no_progress))
    res["groups"] = compare(res["runs"])
    res["meta"]["wall_s"] = time.monotonic() - t0
    title = "Replay stability benchmark (Fig. 13 twice)"
    write_results(out_dir, stem, title, res, format_table(res), args.quick, depends_on("replay", "replays/"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
