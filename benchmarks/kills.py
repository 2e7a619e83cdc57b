"""`python -m benchmarks.kills`: SIGKILL runs at random moments, then look for anything left.

A run killed with SIGKILL tears nothing down. What it started must still go: the next run's
start clears what dead runs left (emulation/registry.py), and so does `testbed clean`. This
benchmark starts runs of three kinds, each in a process of its own as `testbed run` would be:

- `scheme`: a ring allreduce by the scheme engine (`runs.engine_job`: one engine process per
  host, started with `mnexec` into the hosts, each in a session of its own);
- `mpi`: Open MPI's allreduce (`engine.mpi`: mpirun in one host, orted daemons in the others,
  started by the `mnrsh` agent; orted outlives mpirun's process group);
- `tf`: a TF parameter-server job with `PSNET_FORKSERVER=0` (every task an interpreter of its
  own, `Host.popen`; no fork server to take them down with it).

It SIGKILLs each run's owner at a random moment (seeded; measured from when the run holds the
emulator, so a kill can land in the bring-up, the job or the teardown), then clears it the one
way or the other (alternately: the next run's start, `testbed clean`) and looks, holding the
emulator lock, for what is left: a process of the run (its id in the environment, or in its
cgroup), an OVS bridge of the testbed, a root-namespace interface of the topology, a network
namespace made since the kill began, the run's folder. Results: OUT/kills.json, OUT/kills.md;
nothing is asserted here (tests/test_kills.py asserts on a reduced set).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from benchmarks.common import TOP, begin, bench_parser, fmt, lock_wait_s, md_table, meta, write_results
from emulation import registry
from emulation.net import Testbed
from topologies.build import load_network

LOG = logging.getLogger(__name__)

#: the run kinds: topology, how the owner process runs it, the words of a job process's command
#: line (to tell bring-up from job when the kill lands), seconds after the run holds the emulator
#: within which the benchmark's kills land (bring-up, job, and for `tf` its slow start)
KINDS: dict[str, dict] = {
    "scheme": {
        "topology": "topologies/leafspine-2rack.yaml",
        "job": {"model": "resnet50", "scheme": "ring", "compute": "calibrated", "iterations": 500, "warmup": 1},
        "job_words": ("engine.host",),
        "span_s": 15.0,
    },
    "mpi": {
        "topology": "topologies/leafspine-2rack.yaml",
        "job_words": ("mpirun", "orted", "engine.mpi_allreduce"),
        "span_s": 15.0,
    },
    "tf": {
        "topology": "topologies/psnet-1tor.yaml",
        # a tiny step takes ~50 ms: enough of them that no run ends before its kill
        "job": {"model": "tiny", "batch_size": 1, "iterations": 20_000, "warmup": 1, "deadline_s": 900},
        "env": {"PSNET_FORKSERVER": "0"},
        "job_words": ("tfjob.psjob",),
        "span_s": 30.0,
    },
}
#: how a kill is cleared: the next run's start (self-heal), or `testbed clean`
VIAS = ("next-start", "clean")

RUN_EXPERIMENT = """
import sys
from pathlib import Path
from runs.runner import run_experiment
run_experiment(sys.argv[1], results=Path(sys.argv[2]), progress=False)
"""
RUN_MPI = """
import sys
from pathlib import Path
from emulation.net import Testbed
from engine.mpi import run_mpi_allreduce
with Testbed(sys.argv[1]) as tb:
    workers = [h.name for h in tb.model.hosts()]
    run_mpi_allreduce(tb, workers, 250_000, "ring", Path(sys.argv[2]), warmup=0, iterations=100_000, timeout_s=600)
"""


@dataclass
class Kill:
    """One kill and what was found after its clean-up."""

    kind: str
    via: str
    delay_s: float
    run_id: str = ""
    phase: str = ""  # what the run was doing when killed: bring-up, job, or ended (before the kill)
    job_processes: int = 0  # processes of its job alive at the kill
    clean_s: float = 0.0  # seconds the clean-up took (the next start's bring-up included)
    left: list[str] = field(default_factory=list)


def net_namespaces() -> set[str]:
    """Every network namespace a process is in now ("net:[inode]")."""
    found = set()
    for d in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError):
            found.add(os.readlink(d / "ns" / "net"))
    return found


def run_processes(run_id: str) -> list[psutil.Process]:
    """Processes of run `run_id`: its id in their environment, or in its cgroup."""
    found = {}
    for p in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error):
            if p.pid != os.getpid() and p.environ().get(registry.RUN_ENV) == run_id:
                found[p.pid] = p
    base = registry.cgroup_base()
    for pid in registry.cgroup_pids(base / run_id) if base is not None and run_id else []:
        with contextlib.suppress(psutil.Error):
            found.setdefault(pid, psutil.Process(pid))
    return list(found.values())


def job_processes(run_id: str, words: tuple[str, ...]) -> list[psutil.Process]:
    """The run's processes whose command line names its job (engine hosts, mpirun, TF tasks)."""
    out = []
    for p in run_processes(run_id):
        with contextlib.suppress(psutil.Error):
            cmd = " ".join(p.cmdline())
            if any(w in cmd for w in words):
                out.append(p)
    return out


def leftovers(run_id: str, topology: str, namespaces_before: set[str]) -> list[str]:
    """What is left of a killed run (call it holding the emulator lock: no run is up then)."""
    left = []
    for p in run_processes(run_id) if run_id else []:
        with contextlib.suppress(psutil.Error):
            left.append(f"process {p.pid} ({' '.join(p.cmdline())[:80]})")
    base = registry.cgroup_base()
    if base is not None and run_id and (base / run_id).exists():
        left.append(f"cgroup {base / run_id}")
    left += [f"bridge {b}" for b in registry.own_bridges()]
    model = load_network(TOP / topology)
    intfs = sorted({ln.intf(end) for ln in model.links for end in (ln.a, ln.b)})
    left += [f"interface {i}" for i in intfs if Path(f"/sys/class/net/{i}").exists()]
    left += [f"namespace {ns}" for ns in sorted(net_namespaces() - namespaces_before)]
    if run_id and (registry.RUN_ROOT / run_id).exists():
        left.append(f"run folder {registry.RUN_ROOT / run_id}")
    return left


@contextlib.contextmanager
def emulator() -> Iterator[None]:
    """Hold the emulator lock (queueing like a run): no other run starts, or clears, meanwhile."""
    lock = registry.acquire_emulator(max(lock_wait_s(), 1800.0))
    try:
        yield
    finally:
        registry.release_emulator(lock)


def start_owner(kind: str, work: Path) -> subprocess.Popen:
    """The run's owner: a process of its own, as `testbed run` is (it queues on the emulator lock)."""
    k = KINDS[kind]
    topo = TOP / k["topology"]
    if "job" in k:
        exp = work / f"kill-{kind}.yaml"
        exp.write_text(json.dumps({"name": f"kill-{kind}", "topology": str(topo), "job": k["job"]}))
        argv = [sys.executable, "-c", RUN_EXPERIMENT, str(exp), str(work / "results")]
    else:
        argv = [sys.executable, "-c", RUN_MPI, str(topo), str(work / "mpi")]
    env = {**os.environ, "PSNET_LOCK_WAIT_S": str(max(lock_wait_s(), 1800.0)), **k.get("env", {})}
    log = (work / f"owner-{kind}.log").open("w")
    return subprocess.Popen(argv, cwd=TOP, env=env, stdout=log, stderr=subprocess.STDOUT)


def run_of(pid: int, p: subprocess.Popen, timeout_s: float = 1800.0) -> str:
    """The id of the run owned by process `pid`, once its folder records it ("" if it ended first)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and p.poll() is None:
        for d in registry.RUN_ROOT.iterdir() if registry.RUN_ROOT.exists() else []:
            if d.is_dir() and registry.load(d).get("owner_pid") == pid:
                return d.name
        time.sleep(0.01)
    return ""


def kill_once(kind: str, via: str, delay_s: float, after_job: bool = False) -> Kill:
    """Start a run of `kind`, SIGKILL its owner `delay_s` after it holds the emulator (after its
    job's processes appear, with `after_job`), clear it `via` the next start or `testbed clean`,
    and list what is left."""
    k = KINDS[kind]
    rec = Kill(kind, via, round(delay_s, 3))
    before = net_namespaces()
    with tempfile.TemporaryDirectory(prefix=f"psnet-kill-{kind}-") as tmp:
        work = Path(tmp)
        p = start_owner(kind, work)
        rec.run_id = run_of(p.pid, p)
        if after_job:
            deadline = time.monotonic() + 300
            while not job_processes(rec.run_id, k["job_words"]) and p.poll() is None:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
        time.sleep(delay_s)
        jobs = job_processes(rec.run_id, k["job_words"]) if rec.run_id else []
        rec.job_processes = len(jobs)
        rec.phase = "ended" if p.poll() is not None else "job" if jobs else "bring-up"
        if rec.phase == "ended":
            tail = (work / f"owner-{kind}.log").read_text()[-500:]
            LOG.warning("%s run ended (exit code %s) before its kill: %s", kind, p.returncode, tail or "no output")
        p.send_signal(signal.SIGKILL)
        p.wait()
        t0 = time.monotonic()
        if via == "next-start":  # a run of the same topology clears what the dead run left
            with Testbed(TOP / k["topology"]):
                pass
            with emulator():
                rec.clean_s = round(time.monotonic() - t0, 2)
                rec.left = leftovers(rec.run_id, k["topology"], before)
        else:
            with emulator():  # held, so that no other run clears it first
                subprocess.run([sys.executable, "-m", "testbed.cli", "clean"], cwd=TOP, capture_output=True, check=True)
                rec.clean_s = round(time.monotonic() - t0, 2)
                rec.left = leftovers(rec.run_id, k["topology"], before)
    LOG.info(
        "kill %s (%s) %.2f s in, %s, %d job process(es): cleared via %s in %.1f s, left: %s",
        kind,
        rec.run_id or "no run yet",
        delay_s,
        rec.phase,
        rec.job_processes,
        via,
        rec.clean_s,
        ", ".join(rec.left) or "nothing",
    )
    return rec


def plan(n: int, seed: int, kinds: list[str]) -> list[tuple[str, str, float]]:
    """n kills over the kinds in turn, cleared alternately each way, at seeded random moments."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        kind = kinds[i % len(kinds)]
        out.append((kind, VIAS[(i // len(kinds)) % 2], rng.uniform(0.0, KINDS[kind]["span_s"])))
    return out


def table(kills: list[Kill]) -> str:
    rows = [
        [
            str(i + 1),
            k.kind,
            fmt(k.delay_s),
            k.phase,
            str(k.job_processes),
            k.via,
            fmt(k.clean_s, ".1f"),
            "; ".join(k.left) or "nothing",
        ]
        for i, k in enumerate(kills)
    ]
    head = ["#", "kind", "killed at (s)", "phase", "job processes", "cleared via", "clean-up (s)", "left"]
    clean = sum(not k.left for k in kills)
    return md_table(head, rows) + f"\n\n{clean} of {len(kills)} kills left nothing\n"


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("benchmarks.kills", __doc__, "3 kills, one per kind, each just after its job started")
    p.add_argument("--kills", type=int, default=20, help="how many kills (default 20)")
    p.add_argument("--seed", type=int, default=1, help="seed of the kill moments (default 1)")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"run kinds, in turn (default {','.join(KINDS)})")
    args = p.parse_args(argv)
    out = begin(args)
    kinds = args.kinds.split(",")
    res: dict = {"meta": meta(args)}
    t0 = time.monotonic()
    n = len(kinds) if args.quick else args.kills
    kills = []
    for kind, via, delay in plan(n, args.seed, kinds):
        if args.quick:  # just after the job started: where processes outlive their owner
            delay = delay / KINDS[kind]["span_s"] * 2.0
        kills.append(kill_once(kind, via, delay, after_job=args.quick))
    res["meta"]["wall_s"] = time.monotonic() - t0
    res["kills"] = [asdict(k) for k in kills]
    res["clean"] = sum(not k.left for k in kills)
    stem = "kills-quick" if args.quick else "kills"
    write_results(out, stem, "Kill test: what SIGKILLed runs leave", res, table(kills), args.quick)
    return 0 if res["clean"] == len(kills) else 1


if __name__ == "__main__":
    sys.exit(main())
