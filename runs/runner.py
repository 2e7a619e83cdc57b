"""Run one experiment: network up, TF PS job(s) inside the hosts, results written, all torn down.

This module is the orchestration only: it checks the jobs against the topology, sizes them, gets
the pad of a job in `host_time: full` (tfjob.hosttime: measured once, cached), asks the model
for its prediction (runs.predict), brings the network up with the fidelity
monitor beside it, starts the jobs (tfjob.procs) and runs the event loop, then has the
results written (runs.results). The event loop feeds each process line to its job, follows
the first job's chief with a progress bar and applies the experiment's timeline
(runs.inject) as it falls due. A PS failed by the timeline restarts its job on a standby PS
from the last checkpoint. Any other process that exits early, reports an error or outlives the
deadline ends the run with a message naming the host and its last log lines; what was measured
so far is written and marked incomplete.

Results go to results/<name>/: iterations.csv, events.jsonl, summary.json, manifest.json and,
with a timeline or several jobs, timeline.csv, events.csv and timeline.png. Each file is written
under a temporary name and renamed into place (topologies.files), summary.json last; once the
network is up and before the run writes anything, the previous run's files in the folder are
moved to results/<name>.prev/ (`testbed run`) or removed (a sweep's repetition:
runs.results.start_run_dir).
"""

from __future__ import annotations

import logging
import queue
from collections.abc import Sequence
from pathlib import Path

from emulation.measure import nic_bytes
from emulation.net import interrupt_reason, open_testbed
from emulation.phases import write_links_csv
from emulation.relaying import relay_load
from runs import rounds
from runs.inject import Injector, plan_timeline
from runs.predict import choose_width, placement_prediction, prediction
from runs.results import manifest, run_summary, start_run_dir, summarize
from runs.runloop import RunResult, conclude, resolve_jobs, run_loop
from runs.stall import StallWatch
from runs.steptime import step_split
from tfjob import hosttime
from tfjob.procs import JobRun, failover
from topologies.build import build_network
from topologies.files import write_json_atomic
from topologies.schema import TopologySpec
from workloads.budget import check_experiment
from workloads.errors import RunError, Unrecoverable
from workloads.experiment import ExperimentSpec, JobSpec, load_experiment

LOG = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parent.parent

__all__ = ["RunError", "RunResult", "resolve_jobs", "run_experiment", "run_job"]


def run_experiment(
    path: str | Path, results: Path = REPO / "results", progress: bool = True, budget: bool = True
) -> RunResult:
    """Run an experiment file in the emulator; results in results/<name>/ (see `run_job`). Real
    servers: servers.hardware.run_hardware_experiment. The resource budget (workloads.budget) is
    checked before anything is built, unless `budget=False` (`--no-budget`) or the file says off."""
    exp, topo, topo_path = load_experiment(path)
    if budget:
        check_experiment(exp, topo, path, topo_path)
    return run_job(exp, topo, str(topo_path), results / exp.name, progress, source=str(path), keep_previous=True)


def run_job(
    exp: ExperimentSpec,
    topo: TopologySpec,
    topo_source: str,
    out: Path,
    progress: bool = True,
    source: str = "",
    more_rounds: Sequence[Path] = (),
    keep_previous: bool = False,
    provenance: dict | None = None,
) -> RunResult:
    """Build the network, run the job(s) with the timeline, write `out`, tear down. Raises
    RunError on failure (after writing what was measured, marked incomplete). A job that names
    a synchronisation scheme runs through the scheme engine instead (runs.engine_job).
    `more_rounds`: run 1 + len(more_rounds) rounds of the job's iterations in one job, `out`
    holding round 1 and each of these folders the next (runs.rounds). The previous run's files in
    `out` (and in `more_rounds`) are moved to <out>.prev/ with `keep_previous`, else removed, once
    the network is up (this run holds the emulator lock) and before anything is written
    (runs.results.start_run_dir); a run that fails earlier leaves the folder as it was.
    `provenance`: the tree the run ran on (a sweep's replays.provenance block), recorded in the
    manifest and every summary so a resumed sweep can tell a point run on other code."""
    rnds = rounds.plan(exp.main.warmup, exp.main.iterations, 1 + len(more_rounds)) if more_rounds else []
    if rnds:
        exp = rounds.widen(exp, len(rnds))
    if exp.main.engine:
        from runs.engine_job import run_scheme_job

        summary = run_scheme_job(exp, topo, topo_source, out, source, keep_previous, provenance)
        return RunResult(exp.name, out, True, summary)
    net = build_network(topo, topo_source)
    where = source or exp.name
    plan = resolve_jobs(exp, net, where)
    planned = plan_timeline(net, exp.timeline, exp.random_failures, where)
    sizes = {j.name: choose_width(j, topo.scale * exp.compress) for j, _, _ in plan}
    host = _host_times(plan, sizes, topo.scale * exp.compress, where)
    main = exp.main
    record = manifest(exp, topo, topo_source, [j for j, _, _ in plan], *sizes[main.name], source)
    if provenance:
        record["provenance"] = provenance
    predicted = {j.name: prediction(net, j, *sizes[j.name], host[j.name], len(plan)) for j, _, _ in plan}
    complete, error, interrupted = False, "", False
    failure: type[RunError] = RunError  # the kind of failure raised at the end (Stalled: the sweep retries)
    with open_testbed(net) as tb:
        # the emulator is this run's now (its lock): no other run of the name still writes here
        start_run_dir(out, keep_previous)  # checkpoints too: a new job has nothing to restore from
        for d in more_rounds:
            start_run_dir(d)
        write_json_atomic(out / "manifest.json", record)
        pairs = [(w, p) for _, ps, workers in plan for w in workers for p in ps]
        monitor = tb.monitor(relay=relay_load(net, pairs)).start()
        flows = tb.flow_sampler().start()  # C on the busiest shared link
        lines: queue.Queue = queue.Queue()
        jobs = [
            JobRun(tb, j, sizes[j.name][0], ps, workers, lines, out / "checkpoints" / j.name, _pad(host[j.name]))
            for j, ps, workers in plan
        ]
        injector = Injector(
            tb,
            planned,
            hosts=[h.name for h in net.hosts()],
            fail_ps=lambda host: failover(jobs, tb.model, host),
        )
        try:
            stall = StallWatch(jobs, lambda: monitor.windows, max(j.stall_s for j, _, _ in plan))
            complete = run_loop(exp, jobs, injector, progress, stall)
        except (RunError, Unrecoverable) as err:
            error = str(err)
            failure = type(err) if isinstance(err, RunError) else RunError
        except KeyboardInterrupt:  # Ctrl-C / SIGTERM / SIGHUP: stop cleanly, keep what was measured
            error, interrupted = f"interrupted {interrupt_reason()}", True
        finally:
            verdict = monitor.stop(jobs[0].first_measured_s(), loopback_only=all(j.colocate_ps for j, _, _ in plan))
            busiest = flows.stop(since=jobs[0].first_measured_s())
            for jr in jobs:
                jr.stop()
            if injector.applied:
                injector.finish()
            events = tb.request("events")["events"]
            nics = {h: nic_bytes(tb, h) for jr in jobs for h in jr.ps}
            timings = dict(tb.timings)
    summaries = {}
    for jr in jobs:
        s = summarize(
            jr, net, sizes[jr.spec.name][1], verdict, jr.done and complete, error, exp.compress, busiest.as_dict()
        )
        s["predicted"] = predicted[jr.spec.name]
        ht = host[jr.spec.name]
        s["predicted_placement"] = placement_prediction(
            net, jr.spec, *sizes[jr.spec.name], s.get("bytes_per_ps"), ht, len(plan)
        )
        s["host_time_mode"], s["host_time_pad_s"] = jr.spec.host_time_mode, _pad(ht)
        s["host_time"] = ht.as_dict() if ht else hosttime.scaled_only()
        summaries[jr.spec.name] = s
    # measured communication vs the rest of each step (the links are shared: the main job's view)
    summaries[main.name]["step_split"] = step_split(jobs[0].iterations(), main.warmup, monitor.windows)
    write_links_csv(out / "links.csv", monitor.windows)
    summary = run_summary(summaries, main.name, exp.name, run_id=record["run_id"])
    summary["timings"] = timings  # bring-up and time queued behind another emulation (lock)
    if provenance:
        summary["provenance"] = provenance
    summary["ps_nic_bytes"] = {ps: {i: {"rx": rx, "tx": tx} for i, (rx, tx) in d.items()} for ps, d in nics.items()}
    per_round: dict[Path, dict] = {}
    rows = jobs[0].iterations()
    for rnd, d in zip(rnds, [out, *more_rounds] if rnds else [], strict=True):  # each round: own steps and verdict
        t_from, t_to = rounds.span(rows, rnd)
        ok = rounds.finished(rows, rnd, len(jobs[0].workers))
        v = monitor.verdict(t_from, loopback_only=main.colocate_ps, until=t_to) if t_from is not None else verdict
        # the run's summary (predictions, host time, NIC bytes) with the round's own steps and verdict
        mine = summarize(
            jobs[0], net, sizes[main.name][1], v, ok, "" if ok else error, exp.compress, busiest.as_dict(), rnd.steps
        )
        split = step_split([r for r in rows if rnd.has(r["step"])], rnd.after, monitor.windows)
        per_round[d] = {
            **summary,
            **mine,
            "step_split": split,
            "name": exp.name,
            "timings": timings if d == out else {},  # bring-up and lock wait counted once, in round 1
            "round": rnd.as_dict([out, *more_rounds]),
        }
    if per_round:
        summary = per_round[out]
    return conclude(out, exp, jobs, injector, events, summary, complete, error, interrupted, failure, per_round)


def _host_times(
    plan: list[tuple[JobSpec, list[str], list[str]]], sizes: dict, factor: float, where: str
) -> dict[str, hosttime.HostTime | None]:
    """Each job's full-size host time (measured once per size, cached), None in scaled mode."""
    try:
        return {j.name: hosttime.for_spec(j, sizes[j.name][0], len(w), len(ps), factor) for j, ps, w in plan}
    except hosttime.HostTimeError as err:
        raise RunError(f"{where}: job.host_time: {err}") from None


def _pad(host: hosttime.HostTime | None) -> float:
    return host.pad_s if host else 0.0
