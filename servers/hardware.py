"""Hardware mode: run an experiment's TF PS job on real servers (`testbed run EXP --hosts INV`).

The same job processes as an emulated run (tfjob.procs.JobRun), started over SSH on the
inventory's servers (servers.cluster) instead of inside Mininet hosts, with the same outputs in
results/<name>/ (iterations.csv, events.jsonl, summary.json, manifest.json). What differs:

- nothing is built: the topology file describes the real network, for the model's prediction;
  the summary says when that prediction applies (the real links at the topology's rates);
- the fidelity verdict is replaced by each server's data-plane NIC bytes and CPU
  (servers.hostload), under `hardware.servers`;
- a timeline can only fail a PS (its process is killed; the job restarts on a standby PS of the
  topology, which the inventory must place too); network events need the emulator and are
  refused in one line, as are random failures and scheme jobs;
- checkpoints go to results/<name>/checkpoints/<job> in the chief's server's checkout (TF's
  sharded saver has each PS write its part at that path on its own server: restoring on a
  standby needs that folder on a filesystem the PS servers share).
"""

from __future__ import annotations

import logging
import queue
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from runs.inject import Injector, plan_timeline
from runs.predict import choose_width, placement_prediction, prediction
from runs.results import manifest, run_summary, start_run_dir, summarize
from runs.runloop import RunResult, conclude, resolve_jobs, run_loop
from runs.stall import StallWatch
from schemes.registry import SCHEMES
from servers.cluster import HardwareCluster
from servers.inventory import Placement, load_inventory, place
from tfjob.procs import JobRun, failover
from topologies.build import build_network
from topologies.files import write_json_atomic
from topologies.model import Network
from topologies.schema import TopologySpec
from workloads.errors import RunError, Unrecoverable
from workloads.experiment import ExperimentError, ExperimentSpec, load_experiment

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class HardwareVerdict:
    """Stands where an emulated run's fidelity verdict goes: a real network needs none."""

    def as_dict(self) -> dict:
        return {
            "faithful": None,
            "reason": "real servers: no emulator to doubt; see hardware.servers (NIC bytes, CPU)",
        }


def check_hardware_timeline(exp: ExperimentSpec, where: str) -> None:
    """Only fail_ps can happen on real servers here; anything else is one line."""
    if exp.random_failures is not None:
        raise ExperimentError(
            f"{where}: random_failures: not on real servers (hardware mode); remove it or drop --hosts"
        )
    for i, e in enumerate(exp.timeline):
        if e.action != "fail_ps":
            raise ExperimentError(
                f"{where}: timeline.{i}.action: {e.action} needs the emulated network; on real servers (--hosts) "
                "only fail_ps applies: remove the event or drop --hosts"
            )


def needed_hosts(net: Network, plan: list, exp: ExperimentSpec) -> list[str]:
    """The topology hosts the run may start tasks on: every job's PSs and workers, and the
    standby PSs when the timeline fails a PS."""
    hosts = [h for _, ps, workers in plan for h in ps + workers]
    if any(e.action == "fail_ps" for e in exp.timeline):
        hosts += [n.name for n in net.standbys() if n.name not in hosts]
    return hosts


def applies(net: Network) -> str:
    """When the model's prediction is about this hardware: the rates it assumes for host links."""
    rates = sorted({ln.mbps for ln in net.links if net.nodes[ln.a].is_host or net.nodes[ln.b].is_host})
    shown = ", ".join(f"{r:g}" for r in rates)
    return (
        f"{net.name}'s at its emulated rates (host links {shown} Mbit/s, the paper's / scale "
        f"{net.spec.scale:g}): it applies when the real network is that topology at those rates"
    )


def run_hardware_experiment(path: str | Path, inventory: Path, results: Path, progress: bool = True) -> RunResult:
    """Run an experiment file on an inventory's real servers; results in results/<name>/."""
    exp, topo, topo_path = load_experiment(path)
    return run_hardware(exp, topo, str(topo_path), results / exp.name, inventory, progress, source=str(path))


def run_hardware(
    exp: ExperimentSpec,
    topo: TopologySpec,
    topo_source: str,
    out: Path,
    inventory: Path,
    progress: bool = True,
    source: str = "",
) -> RunResult:
    """Run the experiment's job(s) on the inventory's servers; write `out` as an emulated run
    does. Raises RunError on failure (after writing what was measured, marked incomplete)."""
    where = source or exp.name
    if any(j.engine for j in exp.all_jobs):
        tf = ", ".join(s.name for s in SCHEMES.values() if not s.engine)
        raise ExperimentError(f"{where}: job.scheme: hardware mode runs TF PS jobs only; use scheme {tf}")
    check_hardware_timeline(exp, where)
    net = build_network(topo, topo_source)
    plan = resolve_jobs(exp, net, where)
    planned = plan_timeline(net, exp.timeline, None, where)
    inv = load_inventory(inventory)
    placements = place(inv, net, needed_hosts(net, plan, exp), str(inventory))
    sizes = {j.name: choose_width(j, topo.scale * exp.compress) for j, _, _ in plan}
    start_run_dir(out, keep_previous=True)  # as `testbed run`: the previous run to <out>.prev/
    main = exp.main
    record = manifest(exp, topo, topo_source, [j for j, _, _ in plan], *sizes[main.name], source)
    record["hardware"] = {"inventory": str(inventory), "placements": _placements(placements)}
    write_json_atomic(out / "manifest.json", record)
    predicted = {j.name: prediction(net, j, *sizes[j.name], jobs=len(plan)) for j, _, _ in plan}
    complete, error, interrupted = False, "", False
    failure: type[RunError] = RunError
    with HardwareCluster(inv, placements) as cluster:
        load = cluster.load().start()
        for j, _, workers in plan:  # a new job: nothing to restore from
            cluster.remove_tree(cluster.checkpoint_dir(workers[0], exp.name, j.name))
        lines: queue.Queue = queue.Queue()
        jobs = [
            JobRun(
                cluster,
                j,
                sizes[j.name][0],
                ps,
                workers,
                lines,
                PurePosixPath(cluster.checkpoint_dir(workers[0], exp.name, j.name)),  # type: ignore[arg-type]
            )
            for j, ps, workers in plan
        ]
        injector = Injector(cluster, planned, hosts=[], fail_ps=lambda host: failover(jobs, net, host))  # type: ignore[arg-type]
        try:
            stall = StallWatch(jobs, lambda: [], max(j.stall_s for j, _, _ in plan))  # no link windows here
            complete = run_loop(exp, jobs, injector, progress, stall)
        except (RunError, Unrecoverable) as err:
            error = str(err)
            failure = type(err) if isinstance(err, RunError) else RunError
        except KeyboardInterrupt:
            error, interrupted = "interrupted by the user", True
        finally:
            servers = load.stop(since=jobs[0].first_measured_s())
            for jr in jobs:
                jr.stop()
            if injector.applied:
                injector.finish()
    summaries = {}
    for jr in jobs:
        s = summarize(jr, net, sizes[jr.spec.name][1], HardwareVerdict(), jr.done and complete, error, exp.compress)
        s["predicted"] = predicted[jr.spec.name]
        s["predicted_placement"] = placement_prediction(
            net, jr.spec, *sizes[jr.spec.name], s.get("bytes_per_ps"), jobs=len(plan)
        )
        summaries[jr.spec.name] = s
    summary = run_summary(summaries, main.name, exp.name, mode="hardware", run_id=record["run_id"])
    summary["prediction_applies"] = applies(net)
    summary["hardware"] = {
        "inventory": str(inventory),
        "placements": _placements(placements),
        "servers": servers,
    }
    return conclude(out, exp, jobs, injector, cluster.events, summary, complete, error, interrupted, failure)


def _placements(placements: dict[str, Placement]) -> dict[str, dict]:
    return {h: {"server": p.server.name, "address": p.address} for h, p in placements.items()}
