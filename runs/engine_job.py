"""An experiment whose job names a scheme (`scheme: ring`, ...): the network up, one engine process
per host, the fidelity monitor beside them, the results written, all torn down.

What it writes to results/<name>/ (as the PS job does, with the scheme's own columns):
- iterations.csv: per host and measured iteration, compute/sync/apply seconds and payload bytes;
- summary.json: per-iteration GST (the slowest worker's synchronisation time) and BCT (its compute
  + synchronisation + apply), the schedule's own expectation (bytes on the busiest cable over its
  rate), HiPS Table 3's GST where the topology and scheme have one (`gst_formula_s`), bytes per
  host, cross-region bytes per level, the dependency-chain length, the fidelity verdict, and,
  with `check`, the sums verified;
- manifest.json: the experiment, topology, sizes and seeds;
- with a timeline: timeline.csv, events.csv, timeline.png (runs.engine_timeline);
- PLink (a scheme that needs clusters): its groups; with `plink_groups: probe` the bandwidth probes
  measured before the first iteration, probes.json and probes.png (runs.plink_groups), else
  groups.json; the summary's `plink` entry (groups, AMI against the racks, PAIA).
"""

from __future__ import annotations

import csv
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from emulation.measure import nic_bytes
from emulation.net import Testbed, open_testbed
from emulation.relaying import relay_load
from engine.dvf import SUFFICIENT_SHARE, verify_dvf
from engine.emulated import run_in_testbed
from engine.host import verify_sums
from engine.npmodels import LEARNING_RATES
from engine.processes import read_rows
from runs import plink_groups
from runs.autotune import Autotune
from runs.engine_timeline import SchemeTimeline
from runs.plink_groups import Grouped
from runs.predict import choose_width
from runs.probe import probe
from runs.results import new_run_id, start_run_dir
from runs.stall import ProgressWatch
from runs.stats import describe
from runs.summary import RunSummary, write_summary
from schemes.count import busiest_s, cable_load_gbps, link_loads
from schemes.plink import initial_plan
from schemes.registry import Need, SchemeInputs, gather
from schemes.registry import get as get_scheme
from schemes.schedule import (
    ELEM_BYTES,
    Schedule,
    ScheduleError,
    chain_length,
    cross_region_bytes,
    host_bytes,
    pair_bytes,
)
from topologies.build import build_network
from topologies.files import atomic_open, write_json_atomic
from topologies.model import Network
from topologies.schema import TopologySpec
from workloads.errors import RunError, Unrecoverable
from workloads.experiment import BYTES_ONLY, ExperimentError, ExperimentSpec, JobSpec

LOG = logging.getLogger(__name__)
_COUNT = {2: "two", 3: "three"}
ROW_FIELDS = [
    "iteration",
    "host",
    "role",
    "compute_s",
    "barrier_s",
    "sync_s",
    "sync_cpu_s",
    "apply_s",
    "sent_bytes",
    "raw_sent_bytes",
    "received_bytes",
    "loss",
]


def calibrated_compute_s(job: JobSpec, width: float) -> float:
    """Seconds one worker step computes here: the batch over P_w measured for this model (cached)."""
    from tfjob import calibrate, dnn

    cal = calibrate.calibrate(lambda: dnn.build_model(job.model, width), f"{job.model}@w{width:.6g}", job.batch_size)
    return job.batch_size / cal.p_w_samples_per_s


@dataclass
class Prepared:
    """A scheme job ready to run on its network: hosts, sizes, schedule and the engine's config."""

    net: Network
    workers: list[str]
    servers: list[str]
    width: float
    model_bytes: float
    sched: Schedule
    cfg: dict[str, Any]
    inputs: SchemeInputs | None = None  # what the schedule was compiled from (schemes.registry.gather)
    grouped: Grouped | None = None  # PLink's groups (runs.plink_groups), where the scheme groups hosts

    @property
    def hosts(self) -> list[str]:
        return self.workers + self.servers


def job_hosts(job: JobSpec, net: Network, where: str) -> tuple[list[str], list[str]]:
    """(workers, servers) of a scheme job: the job's, else the scheme's defaults (HiPS: every
    server of the address grid), checked against the network; ExperimentError names what does not
    fit. `testbed run` and `testbed simulate` both take a scheme job's hosts from here."""
    scheme = get_scheme(job.scheme)
    workers = list(job.workers) if job.workers is not None else scheme.default_workers(net)
    servers: list[str] = []
    if Need.PS_HOSTS in scheme.needs:
        servers = list(job.ps) if job.ps is not None else scheme.default_servers(net)
    for h in workers + servers:
        if h not in net.nodes or not net.nodes[h].is_host:
            raise ExperimentError(f"{where}: job.workers: {h} is not a host of the topology")
    if Need.PS_HOSTS in scheme.needs and not servers:
        raise ExperimentError(
            f"{where}: job.scheme: {job.scheme} needs PS hosts; give job.ps or use a topology with PSs"
        )
    if len(workers) < scheme.min_workers > 1:  # no worker is a schedule error of its own (ps)
        least = _COUNT.get(scheme.min_workers, scheme.min_workers)
        raise ExperimentError(f"{where}: job.workers: {job.scheme} needs at least {least} workers")
    return workers, servers


def scheme_options(job: JobSpec) -> dict[str, Any]:
    """The job's options a schedule compiles from (schemes.registry.gather's `options`)."""
    segment = round(job.segment_kb * 1024) if job.engine else 0  # TF's PS job moves its own tensors
    return {
        "hips_stages": job.hips_stages,
        "hips_parallel": job.hips_parallel,
        "segment_bytes": segment or None,
        "pf_tree": job.pf_tree,
        "pf_degree": job.pf_degree,
        "pf_depth": job.pf_depth,
    }


def prepare(job: JobSpec, net: Network, scale: float, where: str, grouped: Grouped | None = None) -> Prepared:
    """Check the job's hosts against the network, size the gradient (paper bytes / scale), compile
    the schedule and write the engine's config; ExperimentError names what does not fit.
    `grouped`: PLink's groups (runs.plink_groups); a job that needs clusters and is given none
    gets its `racks` or `random` groups here, and `probe` jobs the racks until the probes are in
    (run_scheme_job probes once the network is up and prepares again)."""
    scheme = get_scheme(job.scheme)
    workers, servers = job_hosts(job, net, where)
    width, model_bytes = choose_width(job, scale)
    n_elems = int(model_bytes) // ELEM_BYTES
    options = scheme_options(job)
    if Need.CLUSTERS in scheme.needs:
        if grouped is None and plink_groups.mode(job) != "probe":
            grouped = plink_groups.without_probes(job, net, workers)
        if grouped is not None:
            options.update(grouped.options())
    inputs = gather(net, scheme, n_elems, workers, servers, **options)
    try:
        sched = scheme.compile(inputs)
    except ScheduleError as err:
        raise ExperimentError(f"{where}: job.scheme: {err}") from None
    compute_s = 0.0
    if job.compute == "calibrated":
        compute_s = job.compute_s if job.compute_s is not None else calibrated_compute_s(job, width)
    cfg = {
        "scheme": job.scheme,
        "workers": workers,
        "servers": servers,
        "regions": {w: list(r) for w, r in inputs.regions.items()},
        "n_elems": n_elems,
        "mode": job.compute,
        "compute_s": compute_s,
        "model": job.model,
        "width": width,
        "batch_size": job.batch_size,
        "lr": LEARNING_RATES.get(job.model, 0.01),
        "step_decay": job.model in BYTES_ONLY,  # Parameter Flow's models: updates at eta / sqrt(t)
        "seed": job.seed,
        "warmup": job.warmup,
        "iterations": job.iterations,
        "check": job.check,
        "digits": {w: list(d) for w, d in inputs.digits.items()},
        "both_ways": inputs.both_ways,
        "streams": job.streams,
        "barrier": job.barrier,
        "staleness": job.staleness,
        "costs": [[a, b, c] for (a, b), c in (inputs.costs or {}).items()],
        "dvf": dvf_config(job, net, workers),
        "replan": bool(job.autotune),  # PLink's Autotune: the hosts take new plans between iterations
        **options,
        **inputs.config(),
    }
    return Prepared(net, workers, servers, width, model_bytes, sched, cfg, inputs, grouped)


def probe_and_prepare(
    tb: Testbed, job: JobSpec, prep: Prepared, scale: float, where: str, out: Path, title: str
) -> Prepared:
    """PLink's `probe` grouping: bandwidth probes between the workers over the live network, before
    the first iteration; ProbeEmbed's groups; probes.json and probes.png into `out`; the job
    prepared again on those groups (the schedule, the config)."""
    t0 = time.monotonic()
    p = probe(tb, prep.workers, "bandwidth", seconds=plink_groups.probe_seconds(job))
    grouped = plink_groups.from_probes(p, prep.net, job.seed, "emulated", time.monotonic() - t0)
    plink_groups.write(out, grouped, title)
    return prepare(job, prep.net, scale, where, grouped)


def autotuner(job: JobSpec, prep: Prepared, run_dir: Path) -> Autotune | None:
    """PLink's Autotune daemon for a job with `autotune: true` (runs.autotune), on the plan the job
    starts with (schemes.plink.initial_plan, as the registry compiled it)."""
    if not job.autotune or prep.inputs is None or prep.inputs.clusters is None:
        return None
    i = prep.inputs
    groups = dict(i.clusters)  # type: ignore[arg-type]
    start = initial_plan(i.workers, groups, i.n_elems, i.bandwidth_mbps)
    return Autotune(run_dir, i.workers, groups, i.n_elems, i.segment_bytes, start, i.bandwidth_mbps)


def _moved(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> dict[str, int]:
    """What a host's interfaces carried between two reads (emulation.measure.nic_bytes): rx and tx
    bytes summed over its interfaces, headers and the run's set-up and warm-up included."""
    rx = sum(a[0] - before.get(i, (0, 0))[0] for i, a in after.items())
    tx = sum(a[1] - before.get(i, (0, 0))[1] for i, a in after.items())
    return {"rx": rx, "tx": tx}


def dvf_config(job: JobSpec, net: Network, workers: list[str]) -> dict[str, Any]:
    """The engine's DVF settings (engine.dvf.DvfSettings): the mode, delta_low and delta_up, and
    the emulated rate a link must measure to be "sufficient": the job's paper-equivalent rate over
    the topology's scale, or the paper's 50 Mbit/s at 1 Gbit/s (5% of the workers' link rate, the
    slowest worker's link, emulated)."""
    if job.dvf_sufficient_mbps is not None:
        sufficient = net.spec.emulated(job.dvf_sufficient_mbps)
    else:
        sufficient = SUFFICIENT_SHARE * min(ln.mbps for w in workers for ln in net.links_of(w))
    return {
        "mode": job.dvf,
        "delta_low": job.dvf_delta_low or 0.0,
        "delta_up": job.dvf_delta_up or 0.0,
        "sufficient_mbps": sufficient,
    }


def ssp_steps(rows: list[dict]) -> dict[int, float]:
    """Per measured iteration under SSP: from the last worker starting its compute of that clock to
    the last starting the next (the last clock: to the last worker's final broadcast received), so
    the steps add up to the measured iterations' wall time, as BSP's do."""
    ws = [r for r in rows if r["role"] == "worker"]
    its = sorted({r["iteration"] for r in ws})
    start = {t: max(r["started"] for r in ws if r["iteration"] == t) for t in its}
    end = max(r["sync_done"] for r in ws if r["iteration"] == its[-1]) if its else 0.0
    return {t: (start[its[i + 1]] if i + 1 < len(its) else end) - start[t] for i, t in enumerate(its)}


def broadcast_s(rows: list[dict]) -> list[float]:
    """Per measured iteration, the time a worker took to receive all aggregated updates (the
    paper's Fig. 11): from the servers' first send of the iteration to each worker's last receive,
    the mean over the workers (monotonic clocks: the hosts share this machine)."""
    out = []
    for it in sorted({r["iteration"] for r in rows}):
        rs = [r for r in rows if r["iteration"] == it]
        starts = [r["first_send_t"] for r in rs if r["role"] == "server" and r.get("first_send_t")]
        ends = [r["last_recv_t"] for r in rs if r["role"] == "worker" and r.get("last_recv_t")]
        if starts and ends:
            out.append(sum(e - min(starts) for e in ends) / len(ends))
    return out


def dvf_summary(rows: list[dict], job: JobSpec, servers: list[str], model_bytes: float) -> dict[str, Any]:
    """What DVF put on the wire per measured iteration (clock = iteration + 1), by the engine's
    own count: the pushes (workers to servers) and the broadcasts (servers and relaying workers to
    workers), each against the raw float32 bytes the same messages carry without DVF (every worker
    pushes S and receives S), as the paper's Fig. 9 reduces traffic; and the thresholds used."""
    workers = sorted({r["host"] for r in rows if r["role"] == "worker"})
    out: dict[str, Any] = {"mode": job.dvf, "delta_low": job.dvf_delta_low, "delta_up": job.dvf_delta_up}
    clocks = []
    for it in sorted({r["iteration"] for r in rows}):
        rs = [r for r in rows if r["iteration"] == it]
        push = sum(n for r in rs if r["role"] == "worker" for p, n in r.get("sent_by_peer", {}).items() if p in servers)
        wire = sum(r["sent_bytes"] for r in rs)
        raw = len(workers) * model_bytes
        clocks.append(
            {
                "clock": it + 1,
                "push_bytes": push,
                "broadcast_bytes": wire - push,
                "raw_push_bytes": raw,
                "raw_broadcast_bytes": raw,
                "push_reduced": 1 - push / raw,
                "broadcast_reduced": 1 - (wire - push) / raw,
                "reduced": 1 - wire / (2 * raw),
                "deltas": sorted({r["dvf"]["delta"] for r in rs if "dvf" in r}),
                "sent_share": sum(r["dvf"]["sent_entries"] for r in rs if "dvf" in r)
                / max(1, sum(r["dvf"]["originated"] for r in rs if "dvf" in r)),
            }
        )
    out["clocks"] = clocks
    out["reduced_mean"] = sum(c["reduced"] for c in clocks) / len(clocks) if clocks else None
    return out


def engine_cpu_per_gb(its: list[dict]) -> float | None:
    """CPU seconds the engine's processes spent in synchronisations per GB they sent (measured
    iterations, every host): CPU the emulated network's datapath could not have on 2 cores.
    None where the rows predate the count or nothing was sent."""
    sent = sum(i["sent_bytes"] for i in its)
    cpu = sum(i.get("sync_cpu_s", 0.0) for i in its)
    return round(cpu / (sent / 1e9), 3) if sent and cpu else None


def load_slowdown(load_gbps: float, pairs: int) -> float | None:
    """What this machine's flow-model calibration expects the emulator to add at this cable load
    and this many connections: GST over max-min x (1 + a L^q P^j) (models.flow.simgrid's load
    term); None where the calibration has no load term. A faithful run can be that much slower
    than its schedule allows: the verdict's checks (idle CPU, the busiest link's utilisation,
    drops) do not see it."""
    from models.flow.simgrid import load_multiplier, load_shape, sim_config

    a, q, j = load_shape(sim_config()[0])
    return round(load_multiplier(a, load_gbps, pairs, q, j), 3) if a > 0 else None


def progress_watch(run_dir: Path, hosts: list[str], windows, limit_s: float) -> ProgressWatch:
    """A stall watch over the engine's hosts: armed when every host is connected (its ready line),
    progress is any host finishing an iteration or a link moving bytes."""

    def lines(h: str) -> list[dict]:
        return read_rows(run_dir / f"{h}.jsonl")

    def doing() -> str:
        parts = []
        for h in hosts:
            its = [r["iteration"] for r in lines(h) if "iteration" in r]
            parts.append(f"{h}: " + (f"iteration {its[-1]} done" if its else "no iteration done"))
        return "; ".join(parts)

    return ProgressWatch(
        ready=lambda: all(lines(h) for h in hosts),
        count=lambda: sum(1 for h in hosts for r in lines(h) if "iteration" in r),
        windows=windows,
        doing=doing,
        limit_s=limit_s,
    )


def run_scheme_job(
    exp: ExperimentSpec,
    topo: TopologySpec,
    topo_source: str,
    out: Path,
    source: str = "",
    keep_previous: bool = False,
    provenance: dict | None = None,
) -> RunSummary:
    """Run the experiment's scheme job; returns its summary (also written, last). Raises RunError.
    `keep_previous`, `provenance`: as runs.runner.run_job's."""
    job = exp.main
    net = build_network(topo, topo_source)
    where = source or exp.name
    prep = prepare(job, net, topo.scale * exp.compress, where)
    workers, servers, sched, cfg = prep.workers, prep.servers, prep.sched, prep.cfg
    width, model_bytes = prep.width, prep.model_bytes
    regions = net.family.regions(net)
    run_id = new_run_id()
    manifest = {
        "run_id": run_id,
        "experiment": source or exp.name,
        "topology_file": topo_source,
        "topology": topo.model_dump(),
        "job": job.model_dump(),
        "width": width,
        "model_bytes_emulated": model_bytes,
        "engine": cfg,
    }
    if provenance:
        manifest["provenance"] = provenance
    hosts = workers + servers
    timeline = SchemeTimeline(net, exp, hosts, where, horizon_s=job.deadline_s, out_dir=out)
    error = ""
    with open_testbed(net) as tb:
        start_run_dir(out, keep_previous)  # the emulator is this run's now: no other run writes here
        if Need.CLUSTERS in get_scheme(job.scheme).needs and plink_groups.mode(job) == "probe":
            prep = probe_and_prepare(tb, job, prep, topo.scale * exp.compress, where, out, exp.name)
            sched, cfg = prep.sched, prep.cfg
            manifest["engine"] = cfg
        write_json_atomic(out / "manifest.json", manifest, default=str)
        monitor = tb.monitor(relay=relay_load(net, pair_bytes(sched))).start()
        flows = tb.flow_sampler().start()  # C on the busiest shared link
        timeline.attach(tb, out / "engine" / f"{workers[0]}.jsonl", job.warmup)
        stall = progress_watch(out / "engine", hosts, lambda: monitor.windows, job.stall_s)

        tuner = autotuner(job, prep, out / "engine")

        def tick() -> None:
            timeline.tick()
            if tuner is not None:
                tuner.tick()
            stall.check()

        counted = hosts + timeline.background_hosts  # the shuffles' hosts too: their bytes on the wire
        nics_before = {h: nic_bytes(tb, h) for h in counted}
        try:
            run = run_in_testbed(
                tb, cfg, hosts, out / "engine", job.deadline_s, timeline.per_host(), on_tick=tick, schedule=sched
            )
        except (RuntimeError, Unrecoverable) as err:
            error = str(err)
            run = None
        finally:
            verdict = monitor.stop()
            busiest = flows.stop()
            timeline.finish()
            nics = {h: _moved(nics_before[h], nic_bytes(tb, h)) for h in counted}
    if run is None:
        raise RunError(f"{where}: {error}")
    with atomic_open(out / "iterations.csv", newline="") as f:
        w = csv.DictWriter(f, fieldnames=ROW_FIELDS, extrasaction="ignore")
        w.writeheader()
        w.writerows(run.rows)
    its = run.iterations()
    by_it = {}
    for r in run.rows:
        if r["role"] == "worker":
            t = r["compute_s"] + r.get("barrier_s", 0.0) + r["sync_s"] + r["apply_s"]
            by_it[r["iteration"]] = max(by_it.get(r["iteration"], 0.0), t)
    if job.staleness:  # SSP: iterations overlap, a step is the time from one clock's start to the next's
        by_it = ssp_steps(run.rows)
    problems: list[str] = []
    if job.check:  # DVF holds entries back: then applied + residual = computed over the run instead
        held = job.dvf in ("low", "up", "dynamic")
        problems = verify_dvf(out / "engine", workers, hosts) if held else verify_sums(out / "engine", workers)
    loads = link_loads(net, sched)  # routed once: the bound and the load on the veth cables from one count
    expected, load = busiest_s(loads), cable_load_gbps(net, loads)
    connections = len(pair_bytes(sched))
    nic_mbps = min(ln.mbps for w in workers for ln in net.links_of(w))
    gst_formula_s = get_scheme(job.scheme).formula_s(prep.inputs, model_bytes, nic_mbps)  # type: ignore[arg-type]
    summary: dict[str, Any] = {
        "name": exp.name,
        "run_id": run_id,
        "complete": True,
        "scheme": job.scheme,
        "compute": job.compute,
        "staleness": job.staleness,
        "compute_s_per_step": cfg["compute_s"],
        "model": job.model,
        "workers": len(workers),
        "ps": len(servers),
        "worker_hosts": workers,
        "ps_hosts": servers,
        "batch_size": job.batch_size,
        "scale": topo.scale,
        "compress": exp.compress,
        "model_bytes_emulated": model_bytes,
        "gst_s": describe([i["sync_s"] for i in its]),
        "wire_mb": describe([i["sent_bytes"] / 1e6 for i in its]),
        "engine_cpu_s_per_gb": engine_cpu_per_gb(its),
        "gst_iterations_s": [round(i["sync_s"], 4) for i in its],  # per measured iteration, in order
        "bct_s": describe(list(by_it.values())),
        "expected_sync_s": expected,
        "cable_load_gbps": round(load, 4),
        "connections": connections,
        "load_slowdown": load_slowdown(load, connections),
        "predicted": {"gst_s": expected},  # what a figure's report sets beside the measured GST
        "gst_formula_s": gst_formula_s,
        "bytes_per_host": {h: {"sent": s, "received": r} for h, (s, r) in host_bytes(sched).items()},
        "nic_bytes": nics,
        "cross_region_bytes": cross_region_bytes(sched, regions),
        "chain_length": chain_length(sched),
        "loss": [i["loss"] for i in its] if job.compute in ("tf", "numpy") else None,
        "sums_checked": job.check,
        "sum_problems": problems,
        "fidelity": verdict.as_dict(),
        "routing": net.spec.routing,
        "mtu": net.spec.mtu,
        "flows_on_busiest_link": busiest.as_dict(),
        "streams": job.streams,
        "segment_kb": job.segment_kb,
        "barrier": job.barrier,
    }
    if servers:
        summary["bcast_s"] = describe(broadcast_s(run.rows))
    if job.dvf != "off":
        summary["dvf"] = dvf_summary(run.rows, job, servers, model_bytes)
    if tuner is not None:
        tuner.tick()  # the last iterations' rows
        summary["autotune"] = tuner.record()
    if prep.grouped is not None:
        summary["plink"] = prep.grouped.record()
        if prep.grouped.probes is None:
            plink_groups.write(out, prep.grouped, exp.name)
    if timeline.active:
        summary["timeline"] = timeline.outputs(out, [r for r in run.rows if r["role"] == "worker"])
    if provenance:
        summary["provenance"] = provenance
    written = write_summary(out / "summary.json", summary)  # last: a summary.json means the run's files are all there
    if problems:
        raise RunError(f"{where}: sums wrong: {problems[0]} (results in {out})")
    return written
