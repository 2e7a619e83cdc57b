"""`python -m benchmarks.failures`: what each failure or reconfiguration costs a running job.

The paper claims (Sections 3.1, 3.4, 6) that PSNet's ECS re-circuits workers around a failed
cable or ToR, that a standby PS replaces a failed one, and that an ECS reconfiguration is fast
enough to be transparent; it chose an ECS over an optical switch for its short dark period. This
benchmark measures those claims on real TF jobs and puts FatTree beside them:

- PSNet prototype + one standby PS (topologies/psnet-standby.yaml), once per ECS dark period
  (0, 0.01, 1, 10 and 100 ms: an ECS switches in micro-seconds, an optical switch in milli-seconds);
- FatTree prototype + a standby PS in a third pod (topologies/fattree-standby.yaml).

Each run is one VGG-16 job (BS 1, balanced placement, S/B 1/8 of the paper's so a step takes
about 2 s on PSNet) with a timeline of every event type, one every GAP steps (`at_step`, so
the events land inside the run at any machine speed): a cable to a PS's ToR (PSNet: ToR-PS;
FatTree: the PSs' ToR to an aggregation switch) down and up, a switch (PSNet: a ToR; FatTree:
an aggregation switch) failed and repaired, a worker moved to another ToR and back (PSNet), a
worker's cable at half rate and restored, and finally a PS failure (the job restarts on the
standby from its last checkpoint, saved every 2 steps).

Per event (runs.recovery.recovery): the time the testbed took to apply it (controller,
ECS dark period, host routes), recovery time (event -> BCT back within 10% of before), the BCT
overhead (extra seconds over the slow steps), steps lost and the bytes TCP had to retransmit.
Results: OUT/failures.json, OUT/failures.md, runs under OUT/failures-runs/. Nothing is asserted.
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

from benchmarks.common import TOP, begin, bench_parser, finish, fmt, lock_wait_s, md_table, meta, write_summary
from runs.runner import run_experiment
from runs.summary import RunSummary, read_summary
from topologies.files import write_text_atomic
from workloads.errors import RunError

LOG = logging.getLogger(__name__)
#: ECS dark periods: none, an ECS's micro-seconds, and milli-seconds as optical circuit switches
#: (100 ms: a MEMS optical switch, where the cost starts to show)
DARK_MS = (0.0, 0.01, 1.0, 10.0, 100.0)
GAP = 4  # steps between events: enough to see the effect and the recovery
QUICK_GAP = 3
JOB = {"model": "vgg16", "batch_size": 1, "warmup": 1, "placement": "balanced", "checkpoint_every": 2}
#: S/B 1/8 of the paper's: PSNet steps of ~2 s, long enough that transfers, not TF's fixed
#: per-step overhead, set the pace (at 1/16 the links peaked at 65%: the run was CPU-bound)
SCALE, COMPRESS = 40, 8

#: (action, fields) of each run's events, in order; the last is always the PS failure
PSNET_EVENTS: list[dict] = [
    {"action": "link_down", "link": ["ps1_1", "t1_1"]},
    {"action": "link_up", "link": ["ps1_1", "t1_1"]},
    {"action": "fail_switch", "node": "t1_2"},
    {"action": "repair_switch", "node": "t1_2"},
    {"action": "reconfigure", "worker": "w1_1_1", "tor": "t1_3"},
    {"action": "reconfigure", "worker": "w1_1_1", "tor": "t1_1"},
    {"action": "set_rate", "link": ["w1_1_1", "ecs1"], "mbps": 500},
    {"action": "set_rate", "link": ["w1_1_1", "ecs1"], "mbps": 1000},
    {"action": "fail_ps", "node": "ps1_2"},
]
FATTREE_EVENTS: list[dict] = [
    {"action": "link_down", "link": ["e0_0", "a0_2"]},
    {"action": "link_up", "link": ["e0_0", "a0_2"]},
    {"action": "fail_switch", "node": "a0_3"},
    {"action": "repair_switch", "node": "a0_3"},
    {"action": "set_rate", "link": ["h0_1_2", "e0_1"], "mbps": 500},
    {"action": "set_rate", "link": ["h0_1_2", "e0_1"], "mbps": 1000},
    {"action": "fail_ps", "node": "h0_0_2"},
]


def experiment(topology: str, events: list[dict], gap: int, dark_ms: float | None, folder: Path, name: str) -> Path:
    """A temporary experiment file: the job and its events, one every `gap` steps."""
    timeline = [{"at_step": gap * (i + 1), **e} for i, e in enumerate(events)]
    data = {
        "name": name,
        "topology": str(TOP / "topologies" / f"{topology}.yaml"),
        "scale": SCALE,
        "compress": COMPRESS,
        "job": {**JOB, "iterations": gap * (len(events) + 1), "deadline_s": 1200},
        "timeline": timeline,
    }
    if dark_ms is not None:
        data["dark_ms"] = dark_ms
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def run_one(topology: str, events: list[dict], gap: int, dark_ms: float | None, tmp: Path, runs: Path) -> dict:
    name = f"{topology}" + (f"-dark{dark_ms:g}ms" if dark_ms is not None else "")
    t0 = time.monotonic()
    row: dict = {"topology": topology, "dark_ms": dark_ms, "run": name}
    s: RunSummary | None = None
    try:
        res = run_experiment(experiment(topology, events, gap, dark_ms, tmp, name), runs, progress=False)
        s = res.summary
    except RunError as err:
        row["error"] = str(err)
        s = read_summary(runs / name / "summary.json") if (runs / name / "summary.json").exists() else None
    row["wall_s"] = time.monotonic() - t0
    row["complete"] = bool(s and s.complete)
    row["bct_s"] = s.bct_s.p50 if s else None
    row["fidelity"] = s.faithful if s else None
    row["events"] = s.timeline.events if s and s.timeline else []
    row["not_applied"] = s.timeline.not_applied if s and s.timeline else []
    LOG.info(
        "%s: %s in %.0f s, %d events",
        name,
        "complete" if row["complete"] else "FAILED",
        row["wall_s"],
        len(row["events"]),
    )
    return row


def format_tables(rows: list[dict]) -> str:
    """Per topology: one line per event type, each dark period a column group."""
    parts = []
    for topo in dict.fromkeys(r["topology"] for r in rows):
        runs = [r for r in rows if r["topology"] == topo]
        darks = [r["dark_ms"] for r in runs]
        head = ["event"] + [
            f"{'dark ' + format(d, 'g') + ' ms: ' if d is not None else ''}applied ms / recovery s / extra s / lost"
            for d in darks
        ]
        actions = list(dict.fromkeys(f"{e['action']} {e['target']}" for r in runs for e in r["events"]))
        lines = []
        for a in actions:
            cells = [a]
            for r in runs:
                e = next((e for e in r["events"] if f"{e['action']} {e['target']}" == a), None)
                if e is None:
                    cells.append("-")
                    continue
                rec = fmt(e["recovery_s"])
                if e["recovery_s"] is None and e["slow_steps"]:
                    rec = f"not back (x{fmt(e['after_ratio'])})"
                lost = "-" if e.get("steps_lost") is None else str(e["steps_lost"])
                cells.append(f"{e['took_ms']:.0f} / {rec} / {fmt(e['extra_s'])} / {lost}")
            lines.append(cells)
        base = " / ".join(f"{fmt(r['bct_s'])} s" for r in runs)
        faithful = " / ".join("yes" if r["fidelity"] else "no" for r in runs)
        parts.append(f"### {topo} (median BCT {base}; faithful: {faithful})\n\n{md_table(head, lines)}")
        for r in runs:
            if r.get("error") or r["not_applied"]:
                parts.append(f"- {r['run']}: {r.get('error', '')} not applied: {r['not_applied']}")
    return "\n\n".join(parts)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench_parser("bench_failures", __doc__, f"reduced run: dark 0 only, an event every {QUICK_GAP} steps")
    p.add_argument("--dark-ms", type=float, nargs="+", help="PSNet dark periods (default 0 0.01 1 10 100)")
    p.add_argument("--gap", type=int, help=f"steps between events (default {GAP})")
    p.add_argument("--topology", choices=["psnet", "fattree"], action="append", help="run only these")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir = begin(args)
    runs = out_dir / "failures-runs"
    runs.mkdir(parents=True, exist_ok=True)
    gap = args.gap or (QUICK_GAP if args.quick else GAP)
    darks = args.dark_ms or ([0.0] if args.quick else list(DARK_MS))
    kinds = args.topology or ["psnet", "fattree"]
    res: dict = {"meta": meta(args) | {"lock_wait_s_allowed": lock_wait_s(), "gap_steps": gap, "job": JOB}, "runs": []}
    t0 = time.monotonic()
    interrupted = False
    with tempfile.TemporaryDirectory(prefix="psnet-bench-failures-") as tmp:
        try:
            if "psnet" in kinds:
                for d in darks:
                    res["runs"].append(run_one("psnet-standby", PSNET_EVENTS, gap, d, Path(tmp), runs))
            if "fattree" in kinds:
                res["runs"].append(run_one("fattree-standby", FATTREE_EVENTS, gap, None, Path(tmp), runs))
        except KeyboardInterrupt:
            interrupted = True
            LOG.warning("interrupted: writing the %d runs measured so far", len(res["runs"]))
    m = res["meta"]
    m["wall_s"] = time.monotonic() - t0
    m["interrupted"] = interrupted
    table = format_tables(res["runs"])
    finish(res)
    write_text_atomic(out_dir / "failures.json", json.dumps(res, indent=1))
    mode = "quick" if args.quick else "full"
    write_text_atomic(
        out_dir / "failures.md",
        f"# Failure and reconfiguration benchmark ({mode}{', interrupted' if interrupted else ''}, {m['started']}, "
        f"commit {m['git_commit'][:10]}{' + local changes' if m['git_dirty'] else ''}, {m['wall_s']:.0f} s)\n\n"
        f"VGG-16, BS 1, scale {SCALE}, compress {COMPRESS}, an event every {gap} steps. Each cell: time to apply "
        "the event (ms, dark period included) / recovery time (s, event -> BCT within 10% of before; 'not back "
        "(xR)' while the change lasts, R = BCT then / before) / BCT overhead (s, extra time of the slow steps "
        "until the next event) / steps lost.\n\n"
        f"{table}\n",
    )
    write_summary(out_dir, "failures", "Failure and reconfiguration benchmark", res, args.quick)
    print(table)
    print(f"wall time: {m['wall_s']:.1f} s ({mode}); written: {out_dir / 'failures.json'}, {out_dir / 'failures.md'}")
    return 130 if interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
