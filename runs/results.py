"""What a run writes to results/<name>/: manifest.json, iterations.csv, events.jsonl, the
per-job summaries in summary.json and, with a timeline or several jobs, timeline.csv, events.csv
and timeline.png (workloads/README.md documents every file)."""

from __future__ import annotations

import csv
import json
import logging
import platform
import shutil
import subprocess
import time
import uuid
from importlib import metadata
from pathlib import Path

from runs.inject import Injector
from runs.recovery import recovery, steps_from_rows
from runs.stats import describe
from runs.timeline_out import plot, write_csv
from tfjob.procs import JobRun
from topologies.files import atomic_open
from topologies.model import Network
from topologies.schema import TopologySpec
from workloads.experiment import ExperimentSpec, JobSpec

LOG = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parent.parent
ITERATION_FIELDS = ["job", "attempt", "host", "task", "step", "global_step", "t_start", "t_end", "bct_s"]
#: what a run writes into its folder (workloads/README.md; "engine": a scheme run's per-host logs),
#: and so all that start_run_dir moves or removes: a user's own files in the folder are left alone
RUN_FILES = (
    "summary.json",
    "manifest.json",
    "iterations.csv",
    "events.jsonl",
    "links.csv",
    "timeline.csv",
    "events.csv",
    "timeline.png",
    "checkpoints",
    "engine",
)
#: `testbed run` keeps the previous finished run of results/NAME/ in results/NAME.prev/
PREVIOUS = ".prev"


def start_run_dir(out: Path, keep_previous: bool = False) -> None:
    """Make `out` ready for a new run, so that no file of an earlier run is left beside the new
    run's (a killed re-run once left a new manifest.json beside the old complete summary.json,
    and `testbed compare` read the old numbers as new). With `keep_previous` (`testbed run`), an
    earlier run that wrote its summary.json is moved whole to <out>.prev/ (whose own run files it
    replaces); otherwise (a sweep's repetition, or leftovers without a summary: a killed run) the
    run's files are removed. Only RUN_FILES are touched."""
    out.mkdir(parents=True, exist_ok=True)
    _remove(leftover_temporaries(out))  # of a write killed before its rename: never a whole file
    found = [out / name for name in RUN_FILES if (out / name).exists()]
    if not found:
        return
    if keep_previous and (out / "summary.json").exists():
        prev = out.with_name(out.name + PREVIOUS)
        prev.mkdir(exist_ok=True)
        _remove([prev / name for name in RUN_FILES])
        for f in found:
            f.rename(prev / f.name)
        LOG.info("%s: the previous run's files moved to %s (the new run writes into %s)", out, prev, out)
        return
    _remove(found)
    LOG.info("%s: the previous run's files removed (%s) before the new run", out, ", ".join(f.name for f in found))


def leftover_temporaries(out: Path) -> list[Path]:
    """Temporary files (topologies.files.temporary_beside) of the run files in `out` whose writer
    was killed before the rename."""
    stems = {Path(name).stem for name in RUN_FILES}
    return [p for p in out.glob(".*.tmp*") if p.name[1:].split(".", 1)[0] in stems and p.is_file()]


def _remove(paths: list[Path]) -> None:
    for p in paths:
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)


def versions() -> dict[str, str]:
    """Versions of what produced the numbers: Python, kernel, TF, os-ken, networkx, Mininet, OVS, git."""
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


def new_run_id() -> str:
    """An id for one run, written into its manifest.json and its summary.json: a summary whose
    run_id differs from the manifest's beside it is another run's (testbed.compare refuses it)."""
    return time.strftime("%Y%m%d-%H%M%S-") + uuid.uuid4().hex[:8]


def manifest(
    exp: ExperimentSpec,
    topo: TopologySpec,
    topo_source: str,
    jobs: list[JobSpec],
    width: float,
    model_bytes: float,
    source: str,
) -> dict:
    """manifest.json: the topology, the jobs, the timeline, the scale, sizes, seeds and versions;
    `run_id`, which the run's summary.json repeats (a reader tells a summary of another run)."""
    return {
        "run_id": new_run_id(),
        "experiment": source or exp.name,
        "topology_file": topo_source,
        "topology": topo.model_dump(),
        "job": exp.main.model_dump(),
        "jobs": [j.model_dump() for j in jobs],
        "timeline": [e.model_dump(exclude_none=True) for e in exp.timeline],
        "random_failures": exp.random_failures.model_dump() if exp.random_failures else None,
        "scale": topo.scale,
        "compress": exp.compress,
        "width": width,
        "model_bytes_emulated": model_bytes,
        "model_bytes_paper_equivalent": model_bytes * topo.scale * exp.compress,
        "versions": versions(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_lines(out: Path, jobs: list[JobRun], events: list[dict]) -> None:
    """iterations.csv (per worker and step) and events.jsonl (every process line, then the controller's)."""
    with atomic_open(out / "iterations.csv", newline="") as f:
        w = csv.DictWriter(f, fieldnames=ITERATION_FIELDS)
        w.writeheader()
        w.writerows(r for jr in jobs for r in jr.iterations())
    with atomic_open(out / "events.jsonl") as f:
        for jr in jobs:
            for p in jr.procs:
                for r in p.lines:
                    f.write(json.dumps({"job": jr.spec.name, **r}) + "\n")
        for e in events:
            f.write(json.dumps({"host": "controller", **e}) + "\n")


def summarize(
    jr: JobRun,
    net: Network,
    model_bytes: float,
    verdict,
    complete: bool,
    error: str,
    compress: float,
    flows: dict | None = None,
    steps: tuple[int, int] | None = None,
) -> dict:
    """Per-step BCT (the slowest worker of each step) after warm-up, with the model beside it.
    A restarted job's repeated steps count once per attempt (they were really run twice).
    `flows`: C measured on the busiest shared link (emulation.flows.Busiest.as_dict). `steps`:
    (after, up to) a round's steps only (runs.rounds), else every step after warm-up."""
    spec = jr.spec
    lo, hi = steps or (spec.warmup, None)
    by_step: dict[tuple[int, int], float] = {}
    for r in jr.iterations():
        if lo < r["step"] and (hi is None or r["step"] <= hi):  # steps count from 1
            key = (r["attempt"], r["step"])
            by_step[key] = max(by_step.get(key, 0.0), r["bct_s"])
    done = [r for p in jr.current() for r in p.lines if r["event"] == "done"]
    return {
        "name": spec.name,
        "complete": complete,
        "compress": compress,
        "error": error,
        "scale": net.spec.scale,
        "routing": net.spec.routing,  # ecmp: the switches hash each connection (C varies per run)
        "mtu": net.spec.mtu,
        "flows_on_busiest_link": flows,
        "model": spec.model,
        "workers": len(jr.workers),
        "ps": len(jr.ps),
        "ps_hosts": jr.ps,
        "worker_hosts": jr.workers,
        "batch_size": spec.batch_size,
        "model_bytes_emulated": model_bytes,
        "bct_s": describe(list(by_step.values())),
        "bytes_per_ps": done[0].get("bytes_per_ps") if done else None,
        "global_step": done[0].get("global_step") if done else None,
        "restarts": jr.restarts,
        "fidelity": verdict.as_dict(),
    }


def run_summary(summaries: dict[str, dict], main: str, name: str, **extra: object) -> dict:
    """The run's summary as TF runs and hardware runs both write it: the main job's, named after
    the experiment, then `extra` (hardware: its mode), then every job's under `jobs` when there are
    several. One place, so the emulated and the real run's files keep one shape."""
    summary = {**summaries[main], "name": name, **extra}
    if len(summaries) > 1:
        summary["jobs"] = summaries
    return summary


def timeline_outputs(out: Path, exp: ExperimentSpec, jobs: list[JobRun], injector: Injector) -> dict:
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
