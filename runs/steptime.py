"""Each measured step split into communication and the rest, both measured, so they add up.

The model's communication time (T_push + T_pull) is no part of this: the FatTree r=1 VGG-16 step
measured 17.36 s against a modelled 19.53 s of communication, and "BCT minus the model" left a
negative rest. Here the communication of a step is *measured*, as the links' busy time within the
step's slowest worker's [t_start, t_end]: per transfer-sampler window (emulation.phases, 0.25 s)
that moved bytes, the time its bottleneck link needed for what it carried (bytes / rate), clipped
to the step. It is a lower bound where links ran below their rate (a TCP ramp, a starved
emulator: that time lands in the rest), and coarse for steps of a few windows.
The rest (compute, serialisation, PS update, TF overhead: this machine's host time at the run's
model size) is the step's BCT minus that. Both are scaled to the step's BCT by the share of its
wall interval the links were busy, so comm + rest = BCT exactly and neither is negative.

Beside it, `link_s`: the busy time of the one link that was busy longest in the step (per link,
bytes / rate summed over the windows), what a model with one bottleneck counts. Where parallel
links take turns being the busiest (PSNet: 24 links, none the bottleneck throughout) the
communication exceeds it; with one shared bottleneck (FatTree) the two agree.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from emulation.phases import PHASE_S, Window, busy_s, link_busy_s, read_links_csv
from runs.stats import describe
from runs.summary import RunSummary, read_summary, summary_of

METHOD = (
    "communication = the links' busy time in each measured step (its slowest worker's interval): per "
    f"{PHASE_S:g}-s window moving bytes, bytes / rate of its busiest link; rest = BCT - communication"
)


def split_step(t_start: float, t_end: float, bct_s: float, windows: Sequence[Window]) -> tuple[float, float]:
    """(communication s, rest s) of one step; they add up to bct_s."""
    span = t_end - t_start
    if span <= 0:
        return 0.0, bct_s
    share = min(1.0, busy_s(windows, t_start, t_end) / span)
    return share * bct_s, (1 - share) * bct_s


def step_split(iterations: Sequence[dict], warmup: int, windows: Sequence[Window]) -> dict:
    """Per measured step (the slowest worker's row, as the BCT takes it): communication and rest,
    described (mean, CI...) over the steps; {} when no transfer window was sampled."""
    if not windows:
        return {}
    slowest: dict[tuple[int, int], dict] = {}
    for r in iterations:
        if r["step"] > warmup and "t_start" in r:
            key = (r.get("attempt", 0), r["step"])
            if key not in slowest or r["bct_s"] > slowest[key]["bct_s"]:
                slowest[key] = r
    parts = [split_step(r["t_start"], r["t_end"], r["bct_s"], windows) for r in slowest.values()]
    if not parts:
        return {}
    return {
        "comm_s": describe([c for c, _ in parts]),
        "rest_s": describe([x for _, x in parts]),
        "link_s": describe([link_busy_s(windows, r["t_start"], r["t_end"]) for r in slowest.values()]),
        "method": METHOD,
    }


def resplit(run_dir: Path, summary: RunSummary | None = None) -> RunSummary | None:
    """Recompute a finished run's step split from its iterations.csv and links.csv with the current
    code (no rerun): its summary (`summary`, else its summary.json) with the new split, returned and
    never written back (`--report-only` redraws the report from it; summary.json stays what the run
    measured); None for a run without links.csv."""
    links, summary_path = run_dir / "links.csv", run_dir / "summary.json"
    if not links.exists() or not summary_path.exists():
        return None
    manifest = json.loads((run_dir / "manifest.json").read_text())
    job = manifest["job"]
    with (run_dir / "iterations.csv").open(newline="") as f:
        rows = [r for r in csv.DictReader(f) if r.get("job", job["name"]) == job["name"]]
    iterations = [
        {
            "attempt": int(r.get("attempt") or 0),
            "step": int(r["step"]),
            "t_start": float(r["t_start"]),
            "t_end": float(r["t_end"]),
            "bct_s": float(r["bct_s"]),
        }
        for r in rows
    ]
    summary = (summary if summary is not None else read_summary(summary_path)).as_dict()
    after, upto = int(job.get("warmup", 0)), None
    if "round" in summary:  # one round of a job that ran a point's repetitions (runs.rounds)
        after, upto = summary["round"]["steps"][0] - 1, summary["round"]["steps"][1]
    iterations = [r for r in iterations if upto is None or r["step"] <= upto]
    summary["step_split"] = step_split(iterations, after, read_links_csv(links))
    return summary_of(summary, str(summary_path))
