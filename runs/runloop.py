"""The event loop of a TF PS run and what it shares with hardware runs (servers.hardware): the
jobs' hosts checked against the topology, the loop that starts the processes, feeds them their
lines, applies the timeline and watches for stalls, and the result record. Emulated runs
(runs.runner) and runs on real servers both drive their jobs through it.
"""

from __future__ import annotations

import queue
import time
from dataclasses import dataclass
from pathlib import Path

from runs.inject import Injector
from runs.predict import job_host_names
from runs.results import timeline_outputs, write_lines
from runs.rounds import write_rounds
from runs.stall import StallWatch
from runs.summary import RunSummary, write_summary
from tfjob.procs import JobRun, Proc
from topologies.model import Network, Role
from workloads.errors import RunError
from workloads.experiment import ExperimentError, ExperimentSpec, JobSpec


@dataclass
class RunResult:
    """What every orchestrator returns (runs.runner, runs.engine_job, servers.hardware): the
    run's typed summary, as written to out_dir/summary.json."""

    name: str
    out_dir: Path
    complete: bool
    summary: RunSummary


def resolve_jobs(exp: ExperimentSpec, net: Network, source: str) -> list[tuple[JobSpec, list[str], list[str]]]:
    """(job, its PS hosts, its worker hosts) for every job; hosts checked against the topology."""
    out = []
    for j in exp.all_jobs:
        ps, workers = job_host_names(net, j)
        for name, hosts, role in (("ps", ps, Role.PS), ("workers", workers, Role.WORKER)):
            for h in hosts:
                if h not in net.nodes or net.nodes[h].role != role:
                    have = ", ".join(n.name for n in net.by_role(role))
                    raise ExperimentError(
                        f"{source}: jobs[{j.name}].{name}: {h} is not a {role.value} of the topology; use one of {have}"
                    )
        if not ps or not workers:
            raise ExperimentError(f"{source}: jobs[{j.name}]: a job needs at least one PS and one worker")
        if j.colocate_ps and len(workers) != 1:
            raise ExperimentError(
                f"{source}: jobs[{j.name}].colocate_ps: the PSs run in one worker's host, the topology gives "
                f"{len(workers)} workers; set workers: [one of them]"
            )
        out.append((j, ps, workers))
    return out


def run_loop(
    exp: ExperimentSpec, jobs: list[JobRun], injector: Injector, progress: bool, stall: StallWatch | None = None
) -> bool:
    """Start every job, feed their lines to them, apply the timeline; True when all are done.
    With `stall`, raises Stalled when the jobs made no progress for a minute (runs.stall)."""
    from tqdm import tqdm

    main = jobs[0]
    deadline = time.monotonic() + max(j.spec.deadline_s for j in jobs)
    for jr in jobs:
        jr.start()
    bar = tqdm(total=main.total_steps, desc=f"{exp.name} steps", unit="step", disable=not progress, leave=False)
    try:
        while not all(jr.done for jr in jobs):
            got = _next(main.events, deadline, min(injector.wait_s(), 1.0), jobs)
            if got is not None:
                proc, rec = got
                proc.owner.handle(proc, rec)
                if stall is not None:
                    stall.saw(rec)
                if proc.owner is main and proc.job == "worker" and proc.task == 0 and proc.attempt == main.attempt:
                    if injector.t0 is None and _measured_start(main, rec):
                        injector.start(rec["t_end"] if "t_end" in rec else rec["t"])
                    if rec["event"] == "iter":
                        injector.main_step = rec["step"]
                        bar.n = min(rec["step"], main.total_steps)
                        bar.refresh()
            injector.poll()
            if stall is not None:
                stall.check()
    finally:
        bar.close()
    return True


def _measured_start(main: JobRun, rec: dict) -> bool:
    """The chief's line that opens the measured steps: ready without warm-up, else the last warm-up step."""
    if main.spec.warmup == 0:
        return rec["event"] == "ready"
    return rec["event"] == "iter" and rec["step"] >= main.spec.warmup


def _next(lines: queue.Queue, deadline: float, wait_s: float, jobs: list[JobRun]) -> tuple[Proc, dict] | None:
    """The next process line, or None after `wait_s`; RunError once the deadline has passed."""
    if time.monotonic() > deadline:
        slow = [p for jr in jobs for p in jr.current() if p.job == "worker" and not p.has("done")]
        who = slow[0] if slow else jobs[0].procs[0]
        raise RunError(
            f"deadline of {max(j.spec.deadline_s for j in jobs):g} s passed; {who.host} ({who.job} {who.task}) "
            f"still running; last lines: {who.tail()}"
        )
    try:
        return lines.get(timeout=max(wait_s, 0.01))
    except queue.Empty:
        return None


def conclude(
    out: Path,
    exp: ExperimentSpec,
    jobs: list[JobRun],
    injector: Injector,
    events: list,
    summary: dict,
    complete: bool,
    error: str,
    interrupted: bool,
    failure: type[RunError] = RunError,
    per_round: dict[Path, dict] | None = None,
) -> RunResult:
    """Write what a run measured (lines, timeline outputs, summary.json; with `per_round`, each
    other round's folder: runs.rounds), then end it as it ended: KeyboardInterrupt if the
    user stopped it, `failure` (RunError or a kind of it the sweep tells apart) if it failed, else
    its result."""
    write_lines(out, jobs, events)
    if exp.timeline or exp.random_failures or len(jobs) > 1:
        summary["timeline"] = timeline_outputs(out, exp, jobs, injector)
    written = write_summary(out / "summary.json", summary)  # last: a summary.json means the run's files are all there
    if per_round:
        write_rounds(out, per_round)
    if interrupted:
        raise KeyboardInterrupt
    if error:
        raise failure(f"{error} (partial results kept in {out})")
    return RunResult(exp.name, out, complete, written)
