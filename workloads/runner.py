"""Run one experiment: network up, TF PS job inside the hosts, results written, all torn down.

Each PS task and each worker task is one `python -m workloads.psjob` process started inside its
Mininet host (so it binds and talks on the emulated address). Their JSON lines are collected by
reader threads; a progress bar follows the chief's steps. Any process that exits early, reports
an error or outlives the deadline ends the run with a message naming the host and its last log
lines; what was measured so far is written and marked incomplete.

Results go to results/<name>/: iterations.csv (per worker and step), events.jsonl (every line of
every process), summary.json (statistics, prediction, fidelity verdict) and manifest.json
(topology, parameters, scale, seeds, versions).
"""

from __future__ import annotations

import csv
import json
import logging
import math
import platform
import queue
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

from testbed.fidelity import Monitor
from testbed.measure import nic_bytes
from testbed.net import Testbed, clean_env
from topologies.build import build_network
from topologies.schema import TopologySpec
from workloads.experiment import ExperimentSpec, load_experiment

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
    lines: list[dict] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)

    def tail(self, n: int = 5) -> str:
        return " | ".join(self.raw[-n:]) or "(no output)"


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
    """One job on a running testbed."""

    def __init__(self, tb: Testbed, exp: ExperimentSpec, width: float) -> None:
        self.tb = tb
        self.exp = exp
        self.width = width
        self.procs: list[Proc] = []
        self.events: queue.Queue = queue.Queue()

    def cluster(self) -> dict[str, list[str]]:
        m = self.tb.model
        return {"ps": [f"{n.ip}:{PS_PORT}" for n in m.pss()], "worker": [f"{n.ip}:{PS_PORT}" for n in m.workers()]}

    def _start(self, host: str, job: str, task: int) -> Proc:
        j = self.exp.job
        argv = [
            sys.executable,
            "-m",
            "workloads.psjob",
            "--cluster",
            json.dumps(self.cluster()),
            "--job",
            job,
            "--task",
            str(task),
            "--model",
            j.model,
            "--width",
            f"{self.width:.6g}",
            "--batch-size",
            str(j.batch_size),
            "--iterations",
            str(j.iterations + j.warmup),
            "--placement",
            j.placement,
            "--seed",
            str(j.seed),
            "--threads",
            str(j.threads),
            "--deadline-s",
            f"{j.deadline_s:g}",
        ]
        p = self.tb.host(host).popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(), cwd=str(REPO)
        )
        proc = Proc(host, job, task, p)
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
                proc.lines.append(rec)
                self.events.put((proc, rec))
        self.events.put((proc, {"event": "exit", "code": proc.popen.wait()}))

    def run(self, progress: bool = True) -> bool:
        """Start PSs, then workers; wait for every worker's done line. True if complete."""
        from tqdm import tqdm

        m = self.tb.model
        deadline = time.monotonic() + self.exp.job.deadline_s
        for i, ps in enumerate(m.pss()):
            self._start(ps.name, "ps", i)
        self._wait_for(
            lambda: all(any(r["event"] == "ready" for r in p.lines) for p in self.procs), deadline, "PS start"
        )
        self.tb.log("job-start", workers=len(m.workers()), ps=len(m.pss()))
        for i, w in enumerate(m.workers()):
            self._start(w.name, "worker", i)
        workers = [p for p in self.procs if p.job == "worker"]
        total = self.exp.job.iterations + self.exp.job.warmup
        bar = tqdm(total=total, desc=f"{self.exp.name} steps", unit="step", disable=not progress, leave=False)
        try:
            while not all(any(r["event"] == "done" for r in p.lines) for p in workers):
                proc, rec = self._next(deadline)
                if rec["event"] == "error" or (rec["event"] == "exit" and rec["code"] != 0 and proc.job == "worker"):
                    raise RunError(
                        f"{proc.host} ({proc.job} {proc.task}) failed: {rec.get('reason', rec)}; "
                        f"last lines: {proc.tail()}"
                    )
                if rec["event"] == "exit" and proc.job == "ps":
                    raise RunError(
                        f"{proc.host} (ps {proc.task}) exited with code {rec['code']}; last lines: {proc.tail()}"
                    )
                if rec["event"] == "iter" and proc.task == 0 and proc.job == "worker":
                    bar.update(1)
        finally:
            bar.close()
        return True

    def _next(self, deadline: float):
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                slow = [p for p in self.procs if p.job == "worker" and not any(r["event"] == "done" for r in p.lines)]
                who = slow[0] if slow else self.procs[0]
                raise RunError(
                    f"deadline of {self.exp.job.deadline_s:g} s passed; {who.host} ({who.job} {who.task}) "
                    f"still running; last lines: {who.tail()}"
                )
            try:
                return self.events.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue

    def _wait_for(self, cond, deadline: float, what: str) -> None:
        while not cond():
            proc, rec = self._next(deadline)
            if rec["event"] in ("error", "exit"):
                raise RunError(
                    f"{proc.host} ({proc.job} {proc.task}) failed during {what}: "
                    f"{rec.get('reason', rec)}; last lines: {proc.tail()}"
                )

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
        starts = [r["t_start"] for r in self.iterations() if r["step"] > self.exp.job.warmup]
        return min(starts) if starts else None

    def iterations(self) -> list[dict]:
        rows = []
        for p in self.procs:
            if p.job == "worker":
                rows += [
                    {
                        "host": p.host,
                        **{k: r[k] for k in ("task", "step", "global_step", "t_start", "t_end", "bct_s") if k in r},
                    }
                    for r in p.lines
                    if r["event"] == "iter"
                ]
        return rows


def choose_width(exp: ExperimentSpec, scale: float) -> tuple[float, float]:
    """Width multiplier giving S / scale bytes; returns (width, emulated bytes).

    An explicit width wins; at scale 1 with no model_bytes the real CIFAR architecture runs
    unchanged (width 1); otherwise the width is solved for the paper's S divided by the scale.
    """
    from workloads import models

    if exp.job.width is not None or (scale == 1 and exp.job.model_bytes is None):
        width = exp.job.width or 1.0
        return width, models.param_bytes(exp.job.model, width)
    target = exp.job.paper_bytes / scale
    width = models.width_for_bytes(exp.job.model, target)
    return width, models.param_bytes(exp.job.model, width)


def prediction(net, exp: ExperimentSpec, width: float, model_bytes: float) -> dict:
    """The paper's model for this job (Eqs. 1-7), with P_w and P_s calibrated here and cached."""
    from workloads import bct_model, calibrate, models

    try:
        cal = calibrate.calibrate(
            lambda: models.build_model(exp.job.model, width), f"{exp.job.model}@w{width:.6g}", exp.job.batch_size
        )
        pred = bct_model.predict(
            net, model_bytes, exp.job.batch_size * len(net.workers()), cal.p_w_samples_per_s, cal.p_s_bytes_per_s
        )
    except ValueError as err:  # BCube, or a job over more than two modules
        return {"equation": None, "note": str(err)}
    return {
        **{k: v for k, v in pred.__dict__.items()},
        "t_comm_s": pred.t_comm_s,
        "p_w_samples_per_s": cal.p_w_samples_per_s,
        "p_s_bytes_per_s": cal.p_s_bytes_per_s,
    }


def placement_prediction(net, exp: ExperimentSpec, width: float, model_bytes: float, bytes_per_ps: dict | None) -> dict:
    """The model again with the PSs' real byte split: the equations take S/P per PS; TF places
    whole variables, so the busiest PS holds more (VGG-16's big FC kernel). Substituting
    P x (largest PS share) for S makes every (S/P)/rate term the busiest PS's transfer."""
    if not bytes_per_ps:
        return {}
    held = [float(b) for b in bytes_per_ps.values()]
    effective = len(net.pss()) * max(held)
    pred = prediction(net, exp, width, effective)
    return {**pred, "largest_ps_share": max(held) / sum(held), "effective_bytes": effective}


def repredict(run_dir: Path) -> dict:
    """Recompute a finished run's model predictions with the current model code (no rerun)."""
    from topologies.schema import parse_spec

    manifest = json.loads((run_dir / "manifest.json").read_text())
    summary = json.loads((run_dir / "summary.json").read_text())
    net = build_network(parse_spec(manifest["topology"], str(run_dir / "manifest.json")))
    exp = ExperimentSpec(
        name=summary["name"],
        topology=manifest["topology_file"],
        compress=manifest.get("compress", 1.0),
        job=manifest["job"],
    )
    summary["predicted"] = prediction(net, exp, manifest["width"], manifest["model_bytes_emulated"])
    summary["predicted_placement"] = placement_prediction(
        net, exp, manifest["width"], manifest["model_bytes_emulated"], summary.get("bytes_per_ps")
    )
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=1))
    return summary


def run_experiment(path: str | Path, results: Path = REPO / "results", progress: bool = True) -> RunResult:
    """Run an experiment file; results in results/<name>/ (see `run_job`)."""
    exp, topo, topo_path = load_experiment(path)
    return run_job(exp, topo, str(topo_path), results / exp.name, progress, source=str(path))


def run_job(
    exp: ExperimentSpec, topo: TopologySpec, topo_source: str, out: Path, progress: bool = True, source: str = ""
) -> RunResult:
    """Build the network, run the job, write `out`, tear down. Raises RunError on failure (after
    writing what was measured, marked incomplete)."""
    net = build_network(topo, topo_source)
    width, model_bytes = choose_width(exp, topo.scale * exp.compress)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "experiment": source or exp.name,
        "topology_file": topo_source,
        "topology": topo.model_dump(),
        "job": exp.job.model_dump(),
        "scale": topo.scale,
        "compress": exp.compress,
        "width": width,
        "model_bytes_emulated": model_bytes,
        "model_bytes_paper_equivalent": model_bytes * topo.scale * exp.compress,
        "versions": _versions(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1))
    predicted = prediction(net, exp, width, model_bytes)
    complete, error, interrupted = False, "", False
    with Testbed(net) as tb:
        monitor = Monitor(net).start()
        job = JobRun(tb, exp, width)
        try:
            complete = job.run(progress)
        except RunError as err:
            error = str(err)
        except KeyboardInterrupt:  # Ctrl-C / SIGTERM: stop cleanly, keep what was measured
            error, interrupted = "interrupted by the user", True
        finally:
            verdict = monitor.stop(since=job.first_measured_s())
            job.stop()
            events = tb.request("events")["events"]
            nics = {ps.name: nic_bytes(tb, ps.name) for ps in net.pss()}
            timings = dict(tb.timings)
    rows = job.iterations()
    _write(out, rows, job, events)
    summary = summarize(exp, net, rows, job, model_bytes, verdict, complete, error)
    summary["predicted"] = predicted
    summary["timings"] = timings  # bring-up and time queued behind another emulation (lock)
    summary["predicted_placement"] = placement_prediction(net, exp, width, model_bytes, summary.get("bytes_per_ps"))
    summary["ps_nic_bytes"] = {ps: {i: {"rx": rx, "tx": tx} for i, (rx, tx) in d.items()} for ps, d in nics.items()}
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    if interrupted:
        raise KeyboardInterrupt
    if error:
        raise RunError(f"{error} (partial results kept in {out})")
    return RunResult(exp.name, out, complete, summary)


def _write(out: Path, rows: list[dict], job: JobRun, events: list[dict]) -> None:
    with (out / "iterations.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["host", "task", "step", "global_step", "t_start", "t_end", "bct_s"])
        w.writeheader()
        w.writerows(rows)
    with (out / "events.jsonl").open("w") as f:
        for p in job.procs:
            for r in p.lines:
                f.write(json.dumps(r) + "\n")
        for e in events:
            f.write(json.dumps({"host": "controller", **e}) + "\n")


def summarize(exp, net, rows, job, model_bytes, verdict, complete, error) -> dict:
    """Per-step BCT (the slowest worker of each step) after warm-up, with the model beside it."""
    by_step: dict[int, float] = {}
    for r in rows:
        if r["step"] > exp.job.warmup:  # steps count from 1
            by_step[r["step"]] = max(by_step.get(r["step"], 0.0), r["bct_s"])
    done = [r for p in job.procs for r in p.lines if r["event"] == "done"]
    bct = stats(list(by_step.values()))
    scale = net.spec.scale
    out = {
        "name": exp.name,
        "complete": complete,
        "compress": exp.compress,
        "error": error,
        "scale": scale,
        "model": exp.job.model,
        "workers": len(net.workers()),
        "ps": len(net.pss()),
        "batch_size": exp.job.batch_size,
        "model_bytes_emulated": model_bytes,
        "bct_s": bct,
        "bytes_per_ps": done[0].get("bytes_per_ps") if done else None,
        "global_step": done[0].get("global_step") if done else None,
        "fidelity": verdict.as_dict(),
    }
    return out
