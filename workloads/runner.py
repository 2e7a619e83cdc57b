"""Run one experiment: network up, TF PS job(s) inside the hosts, results written, all torn down.

Each PS task and each worker task is one `python -m workloads.psjob` process started inside its
Mininet host (so it binds and talks on the emulated address). Their JSON lines are collected by
reader threads into one queue; the event loop feeds them to their jobs, follows the first job's
chief with a progress bar and applies the experiment's timeline (workloads.inject) as it falls
due. A PS failed by the timeline restarts its job on a standby PS from the last checkpoint (a
new attempt; the old attempt's processes are killed and their lines ignored). Any other process
that exits early, reports an error or outlives the deadline ends the run with a message naming
the host and its last log lines; what was measured so far is written and marked incomplete.

Results go to results/<name>/: iterations.csv (per worker and step), events.jsonl (every line of
every process and the controller's events), summary.json (statistics, prediction, fidelity
verdict, restarts, per-job summaries), manifest.json (topology, parameters, scale, seeds,
versions) and, with a timeline or several jobs, timeline.csv, events.csv and timeline.png.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import platform
import queue
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from emulation.fidelity import Monitor
from emulation.measure import nic_bytes
from emulation.net import Testbed, clean_env
from topologies.build import build_network
from topologies.model import Role
from topologies.schema import TopologyError, TopologySpec
from workloads.experiment import ExperimentSpec, JobSpec, load_experiment
from workloads.inject import Injector, Unrecoverable, plan_timeline
from workloads.timeline import plot, recovery, steps_from_rows, write_csv

LOG = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parent.parent
PS_PORT = 2222
#: two-sided 95% t quantiles for n-1 degrees of freedom (beyond 30: normal)
_T95 = {
    1: 12.71,
    2: 4.30,
    3: 3.18,
    4: 2.78,
    5: 2.57,
    6: 2.45,
    7: 2.36,
    8: 2.31,
    9: 2.26,
    10: 2.23,
    12: 2.18,
    15: 2.13,
    20: 2.09,
    25: 2.06,
    30: 2.04,
}


class RunError(RuntimeError):
    """A job process failed; the message names the host and its last log lines."""


def t95(dof: int) -> float:
    """Two-sided 95% Student t quantile (table, conservative between entries)."""
    if dof <= 0:
        return math.nan
    if dof > 30:
        return 1.96
    return _T95[min(k for k in _T95 if k >= dof)]


def stats(values: list[float]) -> dict[str, float]:
    """mean, p50, p95 and the 95% confidence half-width of the mean."""
    if not values:
        return {"n": 0}
    v = sorted(values)
    n = len(v)
    sd = statistics.stdev(v) if n > 1 else 0.0
    return {
        "n": n,
        "mean": statistics.fmean(v),
        "p50": statistics.median(v),
        "p95": v[min(n - 1, math.ceil(0.95 * n) - 1)],
        "ci95": t95(n - 1) * sd / math.sqrt(n) if n > 1 else math.nan,
        "min": v[0],
        "max": v[-1],
    }


@dataclass
class Proc:
    host: str
    job: str
    task: int
    popen: subprocess.Popen
    owner: JobRun
    attempt: int = 0
    lines: list[dict] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)

    def tail(self, n: int = 5) -> str:
        return " | ".join(self.raw[-n:]) or "(no output)"

    def has(self, event: str) -> bool:
        return any(r["event"] == event for r in self.lines)

    @property
    def ready(self) -> bool:
        return self.has("ready")


@dataclass
class RunResult:
    name: str
    out_dir: Path
    complete: bool
    summary: dict


def _versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "kernel": platform.release()}
    for dist in ("tensorflow-cpu", "os-ken", "networkx", "mininet"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:  # apt's Mininet has no metadata in the venv
            out[dist] = "?"
    try:
        out["ovs"] = subprocess.run(["ovs-vswitchd", "--version"], capture_output=True, text=True).stdout.split()[-1]
        out["git"] = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        pass
    return out


class JobRun:
    """One job on a running testbed: its PS and worker processes, restarted on a standby PS when
    one of its PSs fails (each restart is an `attempt`; lines of older attempts are ignored)."""

    def __init__(
        self,
        tb: Testbed,
        spec: JobSpec,
        width: float,
        ps: list[str],
        workers: list[str],
        events: queue.Queue,
        checkpoint_dir: Path | None = None,
    ) -> None:
        self.tb = tb
        self.spec = spec
        self.width = width
        self.ps = list(ps)
        self.workers = list(workers)
        self.events = events
        self.checkpoint_dir = checkpoint_dir
        self.procs: list[Proc] = []
        self.attempt = 0
        self.restarts: list[dict] = []  # one per failover: failed PS, standby, steps lost

    @property
    def total_steps(self) -> int:
        return self.spec.iterations + self.spec.warmup

    def cluster(self) -> dict[str, list[str]]:
        nodes = self.tb.model.nodes
        return {
            job: [f"{nodes[h].ip}:{PS_PORT}" for h in hosts]
            for job, hosts in (("ps", self.ps), ("worker", self.workers))
        }

    def current(self) -> list[Proc]:
        return [p for p in self.procs if p.attempt == self.attempt]

    def _start(self, host: str, job: str, task: int) -> Proc:
        j = self.spec
        argv = [sys.executable, "-m", "workloads.psjob", "--cluster", json.dumps(self.cluster())]
        argv += ["--job", job, "--task", str(task), "--model", j.model, "--width", f"{self.width:.6g}"]
        argv += ["--batch-size", str(j.batch_size), "--iterations", str(self.total_steps), "--placement", j.placement]
        argv += ["--seed", str(j.seed), "--threads", str(j.threads), "--deadline-s", f"{j.deadline_s:g}"]
        if self.checkpoint_dir is not None:
            argv += ["--checkpoint-dir", str(self.checkpoint_dir), "--checkpoint-every", str(j.checkpoint_every)]
        p = self.tb.host(host).popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(), cwd=str(REPO)
        )
        proc = Proc(host, job, task, p, self, self.attempt)
        threading.Thread(target=self._read, args=(proc,), daemon=True).start()
        self.procs.append(proc)
        return proc

    def _read(self, proc: Proc) -> None:
        for line in proc.popen.stdout:
            line = line.rstrip()
            proc.raw.append(line)
            if line.startswith("{"):
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                rec.setdefault("host", proc.host)
                rec["attempt"] = proc.attempt
                proc.lines.append(rec)
                self.events.put((proc, rec))
        self.events.put((proc, {"event": "exit", "code": proc.popen.wait()}))

    def start(self) -> None:
        """Start the PSs; the workers follow once every PS is ready (see handle)."""
        for i, h in enumerate(self.ps):
            self._start(h, "ps", i)

    def handle(self, proc: Proc, rec: dict) -> None:
        """One line of one of this job's processes: start workers, or fail the run on an error."""
        if proc.attempt != self.attempt:
            return  # a process of an attempt given up (a failed PS's job, restarted)
        ev = rec["event"]
        if ev == "error" or (ev == "exit" and rec["code"] != 0 and proc.job == "worker"):
            raise RunError(
                f"{proc.host} ({self.spec.name} {proc.job} {proc.task}) failed: {rec.get('reason', rec)}; "
                f"last lines: {proc.tail()}"
            )
        if ev == "exit" and proc.job == "ps":
            raise RunError(
                f"{proc.host} ({self.spec.name} ps {proc.task}) exited with code {rec['code']}; "
                f"last lines: {proc.tail()}"
            )
        cur = self.current()
        if ev == "ready" and proc.job == "ps" and all(p.ready for p in cur if p.job == "ps"):
            self.tb.log("job-start", job=self.spec.name, attempt=self.attempt, workers=self.workers, ps=self.ps)
            for i, w in enumerate(self.workers):
                self._start(w, "worker", i)

    @property
    def done(self) -> bool:
        workers = [p for p in self.current() if p.job == "worker"]
        return len(workers) == len(self.workers) and all(p.has("done") for p in workers)

    def chief_step(self) -> int:
        """Highest global step the current attempt's chief has finished."""
        chief = [p for p in self.current() if p.job == "worker" and p.task == 0]
        return max((r["step"] for p in chief for r in p.lines if r["event"] == "iter"), default=0)

    def fail_ps(self, host: str, standby: str | None) -> str:
        """A PS of this job failed: kill it; restart the job with `standby` in its place from the
        last checkpoint, or raise Unrecoverable when there is no standby."""
        task = self.ps.index(host)
        reached = self.chief_step()
        for p in self.current():
            if p.host == host and p.popen.poll() is None:
                p.popen.kill()
        if standby is None:
            raise Unrecoverable(
                f"{host} (PS {task} of job {self.spec.name}) failed at global step {reached} and the topology "
                "has no standby PS left: not recoverable; add standby_ps: 1 to the topology file "
                "(and checkpoint_every to the job to lose fewer steps)"
            )
        self.stop()
        self.attempt += 1
        self.ps[task] = standby
        self.restarts.append({"failed": host, "standby": standby, "reached_step": reached, "attempt": self.attempt})
        self.start()
        ckpt = "its last checkpoint" if self.spec.checkpoint_every else "step 0 (checkpoint_every is 0)"
        return f"job {self.spec.name} restarted on standby {standby} from {ckpt}"

    def steps_lost(self) -> list[int]:
        """Per failover: global steps run before the failure and run again (the checkpoint was older)."""
        out = []
        for r in self.restarts:
            ready = [
                rec["global_step"]
                for p in self.procs
                if p.attempt == r["attempt"] and p.job == "worker" and p.task == 0
                for rec in p.lines
                if rec["event"] == "ready"
            ]
            out.append(r["reached_step"] - ready[0] if ready else r["reached_step"])
        return out

    def stop(self) -> None:
        for p in self.procs:
            if p.popen.poll() is None:
                p.popen.kill()
        for p in self.procs:
            try:
                p.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                LOG.warning("%s: job process did not exit", p.host)

    def first_measured_s(self) -> float | None:
        """Unix time the first measured (post-warm-up) step started, if any did."""
        starts = [r["t_start"] for r in self.iterations() if r["step"] > self.spec.warmup]
        return min(starts) if starts else None

    def iterations(self) -> list[dict]:
        rows = []
        for p in self.procs:
            if p.job == "worker":
                rows += [
                    {
                        "job": self.spec.name,
                        "attempt": p.attempt,
                        "host": p.host,
                        **{k: r[k] for k in ("task", "step", "global_step", "t_start", "t_end", "bct_s") if k in r},
                    }
                    for r in p.lines
                    if r["event"] == "iter"
                ]
        return rows


def choose_width(job: JobSpec, scale: float) -> tuple[float, float]:
    """Width multiplier giving S / scale bytes; returns (width, emulated bytes).

    An explicit width wins; at scale 1 with no model_bytes the real CIFAR architecture runs
    unchanged (width 1); otherwise the width is solved for the paper's S divided by the scale.
    """
    from workloads import models

    if job.width is not None or (scale == 1 and job.model_bytes is None):
        width = job.width or 1.0
        return width, models.param_bytes(job.model, width)
    target = job.paper_bytes / scale
    width = models.width_for_bytes(job.model, target)
    return width, models.param_bytes(job.model, width)


def prediction(net, job: JobSpec, width: float, model_bytes: float) -> dict:
    """The paper's model for this job (Eqs. 1-7), with P_w and P_s calibrated here and cached.
    The model covers one job on all of the topology's workers and PSs."""
    from workloads import bct_model, calibrate, models

    if job.workers is not None or job.ps is not None:
        return {"equation": None, "note": "the paper's model covers one job on all of the topology's hosts"}
    try:
        cal = calibrate.calibrate(
            lambda: models.build_model(job.model, width), f"{job.model}@w{width:.6g}", job.batch_size
        )
        pred = bct_model.predict(
            net, model_bytes, job.batch_size * len(net.workers()), cal.p_w_samples_per_s, cal.p_s_bytes_per_s
        )
    except ValueError as err:  # BCube, or a job over more than two modules
        return {"equation": None, "note": str(err)}
    return {
        **{k: v for k, v in pred.__dict__.items()},
        "t_comm_s": pred.t_comm_s,
        "p_w_samples_per_s": cal.p_w_samples_per_s,
        "p_s_bytes_per_s": cal.p_s_bytes_per_s,
    }


def placement_prediction(net, job: JobSpec, width: float, model_bytes: float, bytes_per_ps: dict | None) -> dict:
    """The model again with the PSs' real byte split: the equations take S/P per PS; TF places
    whole variables, so the busiest PS holds more (VGG-16's big FC kernel). Substituting
    P x (largest PS share) for S makes every (S/P)/rate term the busiest PS's transfer."""
    if not bytes_per_ps:
        return {}
    held = [float(b) for b in bytes_per_ps.values()]
    effective = len(net.pss()) * max(held)
    pred = prediction(net, job, width, effective)
    return {**pred, "largest_ps_share": max(held) / sum(held), "effective_bytes": effective}


def repredict(run_dir: Path) -> dict:
    """Recompute a finished run's model predictions with the current model code (no rerun)."""
    from topologies.schema import parse_spec

    manifest = json.loads((run_dir / "manifest.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    net = build_network(parse_spec(manifest["topology"], str(run_dir / "manifest.json")))
    job = JobSpec.model_validate(manifest["job"])
    summary["predicted"] = prediction(net, job, manifest["width"], manifest["model_bytes_emulated"])
    summary["predicted_placement"] = placement_prediction(
        net, job, manifest["width"], manifest["model_bytes_emulated"], summary.get("bytes_per_ps")
    )
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def run_experiment(path: str | Path, results: Path = REPO / "results", progress: bool = True) -> RunResult:
    """Run an experiment file; results in results/<name>/ (see `run_job`)."""
    exp, topo, topo_path = load_experiment(path)
    return run_job(exp, topo, str(topo_path), results / exp.name, progress, source=str(path))


def resolve_jobs(exp: ExperimentSpec, net, source: str) -> list[tuple[JobSpec, list[str], list[str]]]:
    """(job, its PS hosts, its worker hosts) for every job; hosts checked against the topology."""
    out = []
    for j in exp.all_jobs:
        ps = list(j.ps) if j.ps is not None else [n.name for n in net.pss()]
        workers = list(j.workers) if j.workers is not None else [n.name for n in net.workers()]
        for name, hosts, role in (("ps", ps, Role.PS), ("workers", workers, Role.WORKER)):
            for h in hosts:
                if h not in net.nodes or net.nodes[h].role != role:
                    have = ", ".join(n.name for n in net.by_role(role))
                    raise TopologyError(
                        f"{source}: jobs[{j.name}].{name}: {h} is not a {role.value} of the topology; use one of {have}"
                    )
        if not ps or not workers:
            raise TopologyError(f"{source}: jobs[{j.name}]: a job needs at least one PS and one worker")
        out.append((j, ps, workers))
    return out


def run_job(
    exp: ExperimentSpec, topo: TopologySpec, topo_source: str, out: Path, progress: bool = True, source: str = ""
) -> RunResult:
    """Build the network, run the job(s) with the timeline, write `out`, tear down. Raises
    RunError on failure (after writing what was measured, marked incomplete)."""
    net = build_network(topo, topo_source)
    where = source or exp.name
    plan = resolve_jobs(exp, net, where)
    planned = plan_timeline(net, exp.timeline, exp.random_failures, where)
    sizes = {j.name: choose_width(j, topo.scale * exp.compress) for j, _, _ in plan}
    out.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "checkpoints", ignore_errors=True)  # a new job: nothing to restore from
    main = exp.main
    width, model_bytes = sizes[main.name]
    manifest = {
        "experiment": source or exp.name,
        "topology_file": topo_source,
        "topology": topo.model_dump(),
        "job": main.model_dump(),
        "jobs": [j.model_dump() for j, _, _ in plan],
        "timeline": [e.model_dump(exclude_none=True) for e in exp.timeline],
        "random_failures": exp.random_failures.model_dump() if exp.random_failures else None,
        "scale": topo.scale,
        "compress": exp.compress,
        "width": width,
        "model_bytes_emulated": model_bytes,
        "model_bytes_paper_equivalent": model_bytes * topo.scale * exp.compress,
        "versions": _versions(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    predicted = {j.name: prediction(net, j, *sizes[j.name]) for j, _, _ in plan}
    complete, error, interrupted = False, "", False
    with Testbed(net) as tb:
        monitor = Monitor(net).start()
        lines: queue.Queue = queue.Queue()
        jobs = [
            JobRun(tb, j, sizes[j.name][0], ps, workers, lines, out / "checkpoints" / j.name) for j, ps, workers in plan
        ]
        injector = Injector(
            tb,
            planned,
            hosts=[h.name for h in net.hosts()],
            fail_ps=lambda host: _failover(jobs, tb.model, host),
        )
        try:
            complete = _run_loop(exp, jobs, injector, progress)
        except (RunError, Unrecoverable) as err:
            error = str(err)
        except KeyboardInterrupt:  # Ctrl-C / SIGTERM: stop cleanly, keep what was measured
            error, interrupted = "interrupted by the user", True
        finally:
            verdict = monitor.stop(since=jobs[0].first_measured_s())
            for jr in jobs:
                jr.stop()
            if injector.applied:
                injector.finish()
            events = tb.request("events")["events"]
            nics = {h: nic_bytes(tb, h) for jr in jobs for h in jr.ps}
            timings = dict(tb.timings)
    summaries = {}
    for jr in jobs:
        s = summarize(jr, net, sizes[jr.spec.name][1], verdict, jr.done and complete, error, exp.compress)
        s["predicted"] = predicted[jr.spec.name]
        s["predicted_placement"] = placement_prediction(net, jr.spec, *sizes[jr.spec.name], s.get("bytes_per_ps"))
        summaries[jr.spec.name] = s
    summary = {**summaries[main.name], "name": exp.name}
    if len(jobs) > 1:
        summary["jobs"] = summaries
    summary["timings"] = timings  # bring-up and time queued behind another emulation (lock)
    summary["ps_nic_bytes"] = {ps: {i: {"rx": rx, "tx": tx} for i, (rx, tx) in d.items()} for ps, d in nics.items()}
    rows = [r for jr in jobs for r in jr.iterations()]
    _write(out, rows, jobs, events)
    if exp.timeline or exp.random_failures or len(jobs) > 1:
        summary["timeline"] = _timeline_outputs(out, exp, jobs, injector)
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    if interrupted:
        raise KeyboardInterrupt
    if error:
        raise RunError(f"{error} (partial results kept in {out})")
    return RunResult(exp.name, out, complete, summary)


def _run_loop(exp: ExperimentSpec, jobs: list[JobRun], injector: Injector, progress: bool) -> bool:
    """Start every job, feed their lines to them, apply the timeline; True when all are done."""
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
                if proc.owner is main and proc.job == "worker" and proc.task == 0 and proc.attempt == main.attempt:
                    if injector.t0 is None and _measured_start(main, rec):
                        injector.start(rec["t_end"] if "t_end" in rec else rec["t"])
                    if rec["event"] == "iter":
                        injector.main_step = rec["step"]
                        bar.n = min(rec["step"], main.total_steps)
                        bar.refresh()
            injector.poll()
    finally:
        bar.close()
    return True


def _measured_start(main: JobRun, rec: dict) -> bool:
    """The chief's line that opens the measured steps: ready without warm-up, else the last warm-up step."""
    if main.spec.warmup == 0:
        return rec["event"] == "ready"
    return rec["event"] == "iter" and rec["step"] >= main.spec.warmup


def _next(lines: queue.Queue, deadline: float, wait_s: float, jobs: list[JobRun]):
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


def _failover(jobs: list[JobRun], net, host: str) -> str:
    """fail_ps: the PS's job restarts on the first standby PS no job uses, or cannot."""
    owners = [j for j in jobs if host in j.ps]
    if not owners:
        raise Unrecoverable(f"fail_ps: {host} is not a PS of any running job")
    jr = owners[0]
    used = {h for j in jobs for h in j.ps}
    any_module = not net.family.standby_in_module  # a PSNet PS is replaced within its module
    free = [n.name for n in net.standbys() if n.name not in used and (any_module or n.module == net.nodes[host].module)]
    jr.tb.set_node(host, up=False)  # the failed server's cables go dark with it
    detail = jr.fail_ps(host, free[0] if free else None)
    jr.tb.log("failover", failed=host, standby=free[0], job=jr.spec.name)
    return detail


def _timeline_outputs(out: Path, exp: ExperimentSpec, jobs: list[JobRun], injector: Injector) -> dict:
    """timeline.csv, events.csv, timeline.png and the per-event metrics (also returned)."""
    steps = {jr.spec.name: steps_from_rows(jr.iterations(), jr.spec.name) for jr in jobs}
    t0 = injector.t0 or min((s.t_start for ss in steps.values() for s in ss), default=time.time())
    main = jobs[0]
    metrics = recovery(steps[main.spec.name], injector.applied)
    lost = iter(main.steps_lost())
    for m, d in zip(metrics, injector.dropped() or [{}] * len(metrics), strict=True):
        m.update(d)
        if m["action"] == "fail_ps":
            m["steps_lost"] = next(lost, None)
    write_csv(out, steps, metrics, t0)
    plot(out, steps, metrics, t0, f"{exp.name}: BCT per iteration")
    missed = [e.model_dump(exclude_none=True) for e in injector.pending()]
    if missed:
        LOG.warning("%d timeline event(s) not applied: the job ended first (%s)", len(missed), missed[0])
    return {"t0": t0, "events": metrics, "not_applied": missed}


def _write(out: Path, rows: list[dict], jobs: list[JobRun], events: list[dict]) -> None:
    with (out / "iterations.csv").open("w", newline="") as f:
        fields = ["job", "attempt", "host", "task", "step", "global_step", "t_start", "t_end", "bct_s"]
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    with (out / "events.jsonl").open("w") as f:
        for jr in jobs:
            for p in jr.procs:
                for r in p.lines:
                    f.write(json.dumps({"job": jr.spec.name, **r}) + "\n")
        for e in events:
            f.write(json.dumps({"host": "controller", **e}) + "\n")


def summarize(jr: JobRun, net, model_bytes: float, verdict, complete: bool, error: str, compress: float) -> dict:
    """Per-step BCT (the slowest worker of each step) after warm-up, with the model beside it.
    A restarted job's repeated steps count once per attempt (they were really run twice)."""
    spec = jr.spec
    by_step: dict[tuple[int, int], float] = {}
    for r in jr.iterations():
        if r["step"] > spec.warmup:  # steps count from 1
            key = (r["attempt"], r["step"])
            by_step[key] = max(by_step.get(key, 0.0), r["bct_s"])
    done = [r for p in jr.current() for r in p.lines if r["event"] == "done"]
    return {
        "name": spec.name,
        "complete": complete,
        "compress": compress,
        "error": error,
        "scale": net.spec.scale,
        "model": spec.model,
        "workers": len(jr.workers),
        "ps": len(jr.ps),
        "ps_hosts": jr.ps,
        "worker_hosts": jr.workers,
        "batch_size": spec.batch_size,
        "model_bytes_emulated": model_bytes,
        "bct_s": stats(list(by_step.values())),
        "bytes_per_ps": done[0].get("bytes_per_ps") if done else None,
        "global_step": done[0].get("global_step") if done else None,
        "restarts": jr.restarts,
        "fidelity": verdict.as_dict(),
    }
