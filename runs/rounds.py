"""A point's repetitions as rounds of one job: one network, one set of TF processes, R x n steps.

A figure point repeats its run (3 times by default) so its BCT has a 95% CI over repetitions. Run
as separate jobs, every repetition pays the network's bring-up, the TF processes' start-up (graph
builds, session creation), a warm-up step and the tear-down again: ~30-40% of a sweep's wall time
(Fig. 10: start-up and tear-down 2.9 of its runs' 6.9 min). The issue that set the 45-min budget
for the PSNet replays asks for exactly this: one network and one TF process set per point.

Here the job runs warm-up + R x n steps; round k is steps warm-up + (k-1)n + 1 .. warm-up + kn.
Each round gets its own summary (BCT over its n steps, a fidelity verdict over its own span, the
step split of its own steps) in its own repetition folder, so the report, the claims and the
sweep's retries read it as they read a separate run. What the rounds share, and every summary
says so (`round`): the network, the processes, the placement, the warm-up, and the run's datapath
drop and TCP retransmission counts (taken over the whole run). The spread over rounds therefore
leaves out what varies between start-ups (process placement on the cores, a TCP connection's
first ramp); `repeat_as: runs` in a figure file (or `testbed replay --repeat-as runs`) runs
separate jobs instead.

Only a single TF PS job without a timeline runs as rounds: a timeline's events are placed in one
run's time, and scheme jobs have their own engine.
"""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from runs.summary import write_summary
from topologies.files import atomic_path
from workloads.experiment import ExperimentSpec

#: files of the run that every round's folder gets a copy of (tools read them beside summary.json)
SHARED_FILES = ("manifest.json", "iterations.csv", "events.jsonl", "links.csv")


@dataclass(frozen=True)
class Round:
    """Round `index` (1-based) of `of`: the job's steps after `after`, up to `upto` (inclusive)."""

    index: int
    of: int
    after: int
    upto: int

    @property
    def steps(self) -> tuple[int, int]:
        """(after, up to): what `runs.results.summarize` takes to count the round's steps only."""
        return self.after, self.upto

    def has(self, step: int) -> bool:
        return self.after < step <= self.upto

    def as_dict(self, dirs: Sequence[Path]) -> dict:
        return {
            "index": self.index,
            "of": self.of,
            "steps": [self.after + 1, self.upto],
            "shared_with": [d.name for d in dirs],
            "shares": "network, TF processes, placement, warm-up, datapath drop and TCP retransmission counts",
        }


def eligible(exp: ExperimentSpec) -> str:
    """'' when the experiment can run as rounds, else why not (one phrase)."""
    if len(exp.all_jobs) > 1:
        return "several jobs"
    if exp.timeline or exp.random_failures:
        return "a timeline"
    if exp.main.engine:
        return f"scheme {exp.main.scheme}"
    return ""


def widen(exp: ExperimentSpec, rounds: int) -> ExperimentSpec:
    """The experiment whose one job runs `rounds` x its iterations (and as many times its deadline)."""
    why = eligible(exp)
    if why:
        raise ValueError(f"{exp.name}: cannot run its repetitions as rounds of one job ({why})")
    job = exp.main
    wide = job.model_copy(update={"iterations": job.iterations * rounds, "deadline_s": job.deadline_s * rounds})
    return exp.model_copy(update={"job": wide, "jobs": None})


def plan(warmup: int, iterations: int, rounds: int) -> list[Round]:
    """The rounds of a job that runs `iterations` measured steps per round after `warmup`."""
    return [Round(k + 1, rounds, warmup + k * iterations, warmup + (k + 1) * iterations) for k in range(rounds)]


def span(rows: Sequence[dict], rnd: Round) -> tuple[float | None, float | None]:
    """(first start, last end) of the round's steps over all workers; (None, None) if none ran."""
    mine = [r for r in rows if rnd.has(r["step"]) and "t_start" in r]
    if not mine:
        return None, None
    return min(r["t_start"] for r in mine), max(r["t_end"] for r in mine)


def finished(rows: Sequence[dict], rnd: Round, workers: int) -> bool:
    """Every step of the round ended on every worker (of the last attempt)."""
    attempt = max((r.get("attempt", 0) for r in rows), default=0)
    done = Counter(r["step"] for r in rows if r.get("attempt", 0) == attempt and rnd.has(r["step"]))
    return all(done[s] >= workers for s in range(rnd.after + 1, rnd.upto + 1))


def write_rounds(out: Path, summaries: dict[Path, dict]) -> None:
    """Each other round's folder: a copy of the run's files (from `out`) and its own summary.json."""
    for d, s in summaries.items():
        if d == out:
            continue
        d.mkdir(parents=True, exist_ok=True)
        for name in SHARED_FILES:
            if (out / name).exists():
                with atomic_path(d / name) as tmp:
                    shutil.copyfile(out / name, tmp)
        write_summary(d / "summary.json", s)  # last, as in the run's own folder
