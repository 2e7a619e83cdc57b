"""The processes of a job inside the emulated hosts: start them, follow their lines, kill them.

Each PS task and each worker task is one `python -m tfjob.psjob` process started inside its
Mininet host (so it binds and talks on the emulated address). A reader thread per process puts
its JSON lines on one queue shared by all jobs; the runner's event loop hands each line back to
its job (`JobRun.handle`). A PS failed by the timeline restarts its job on a standby PS from the
last checkpoint: a new attempt, whose processes replace the old attempt's (killed, their lines
ignored).
"""

from __future__ import annotations

import json
import logging
import queue
import re
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from emulation.net import Testbed
from tfjob.hosts import PS_PORT, Hosts, as_hosts, proc_state
from topologies.model import Network
from workloads.errors import RunError, Unrecoverable
from workloads.experiment import JobSpec

LOG = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parent.parent
LOOPBACK_WORKER = f"127.0.0.1:{PS_PORT}"  # colocate_ps: the worker's address; its PSs take the next ports
__all__ = ["JobRun", "Proc", "RunError", "failover", "own_lines", "proc_state"]


#: TensorFlow's start-up banner (stderr, merged into the process's lines): never "what the job
#: was doing", so failure messages quote the lines after it
TF_BANNER = re.compile(
    r"^(WARNING: All log messages before absl::InitializeLog\(\) is called"
    r"|[IW]\d{4} [\d:. ]+\d+ (port|cpu_feature_guard|cpu_allocator_impl|grpc_server_lib)\.cc:\d+\]"
    r"|This TensorFlow binary is optimized|To enable the following instructions"
    r"|\S+ \S+ [IW] tensorflow/core/(util/port|platform/cpu_feature_guard)\.cc)"
)


def own_lines(raw: list[str]) -> list[str]:
    """A process's lines without TensorFlow's start-up banner (see TF_BANNER)."""
    return [ln for ln in raw if ln.strip() and not TF_BANNER.match(ln)]


@dataclass
class Proc:
    """One PS or worker process of one attempt of a job, with what it printed."""

    host: str
    job: str
    task: int
    popen: subprocess.Popen  # or a tfjob.hosts.HostProcess (a task on another machine)
    owner: JobRun
    attempt: int = 0
    lines: list[dict] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)

    def tail(self, n: int = 5) -> str:
        """The process's own last lines (TensorFlow's start-up banner left out)."""
        own = own_lines(self.raw)
        if own:
            return " | ".join(own[-n:])
        return "(only TensorFlow's start-up banner)" if self.raw else "(no output)"

    def doing(self) -> str:
        """One line: who, what the kernel says it is doing, and its own last lines."""
        if self.popen.poll() is not None:
            state = f"exited ({self.popen.returncode})"
        elif isinstance(self.popen, subprocess.Popen):
            state = proc_state(self.popen.pid)
        else:  # a task on another machine (servers.cluster)
            state = self.owner.hosts.state(self.popen)
        return f"{self.host} ({self.owner.spec.name} {self.job} {self.task}): {state}; last lines: {self.tail(3)}"

    def has(self, event: str) -> bool:
        return any(r["event"] == event for r in self.lines)

    @property
    def ready(self) -> bool:
        return self.has("ready")


class JobRun:
    """One job on a running testbed (or on real servers: `tb` is then a tfjob.hosts.Hosts):
    its PS and worker processes, restarted on a standby PS when one of its PSs fails (each restart
    is an `attempt`; lines of older attempts are ignored)."""

    def __init__(
        self,
        tb: Testbed | Hosts,
        spec: JobSpec,
        width: float,
        ps: list[str],
        workers: list[str],
        events: queue.Queue,
        checkpoint_dir: Path | None = None,
        pad_s: float = 0.0,
    ) -> None:
        self.tb = tb
        self.hosts = as_hosts(tb) if tb is not None else None  # None: tests that start nothing
        self.spec = spec
        self.width = width
        self.ps = list(ps)
        self.workers = list(workers)
        self.events = events
        self.checkpoint_dir = checkpoint_dir
        self.pad_s = pad_s  # workers sleep this long per step (host_time: full, tfjob.hosttime)
        self.procs: list[Proc] = []
        self.attempt = 0
        self.restarts: list[dict] = []  # one per failover: failed PS, standby, steps lost

    @property
    def total_steps(self) -> int:
        return self.spec.iterations + self.spec.warmup

    def cluster(self) -> dict[str, list[str]]:
        if self.spec.colocate_ps:  # one host: every task on its loopback, one port each
            return {"ps": [f"127.0.0.1:{PS_PORT + 1 + i}" for i in range(len(self.ps))], "worker": [LOOPBACK_WORKER]}
        return {
            job: [self.hosts.address(h) for h in hosts] for job, hosts in (("ps", self.ps), ("worker", self.workers))
        }

    def host_of(self, host: str, job: str) -> str:
        """The host a task named `host` runs in: its own, or with colocate_ps the worker's for a PS."""
        return self.workers[0] if job == "ps" and self.spec.colocate_ps else host

    def current(self) -> list[Proc]:
        return [p for p in self.procs if p.attempt == self.attempt]

    def _start(self, host: str, job: str, task: int) -> Proc:
        j = self.spec
        argv = [sys.executable, "-m", "tfjob.psjob", "--cluster", json.dumps(self.cluster())]
        argv += ["--job", job, "--task", str(task), "--model", j.model, "--width", f"{self.width:.6g}"]
        argv += ["--batch-size", str(j.batch_size), "--iterations", str(self.total_steps), "--placement", j.placement]
        argv += ["--seed", str(j.seed), "--threads", str(j.threads), "--deadline-s", f"{j.deadline_s:g}"]
        if self.checkpoint_dir is not None:
            argv += ["--checkpoint-dir", str(self.checkpoint_dir), "--checkpoint-every", str(j.checkpoint_every)]
        if job == "worker" and self.pad_s > 0:
            argv += ["--pad-s", f"{self.pad_s:.6g}"]
        where = self.host_of(host, job)
        p = self.hosts.popen(where, argv)
        proc = Proc(where, job, task, p, self, self.attempt)
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
        # A PS's ready line reaches `lines` (reader thread) before its event is handled here, so two
        # PSs ready within milliseconds both see "all ready": start the workers once per attempt.
        started = any(p.job == "worker" for p in cur)
        if ev == "ready" and proc.job == "ps" and not started and all(p.ready for p in cur if p.job == "ps"):
            self.hosts.log("job-start", job=self.spec.name, attempt=self.attempt, workers=self.workers, ps=self.ps)
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


def failover(jobs: list[JobRun], net: Network, host: str) -> str:
    """fail_ps: the PS's job restarts on the first standby PS no job uses, or cannot."""
    owners = [j for j in jobs if host in j.ps]
    if not owners:
        raise Unrecoverable(f"fail_ps: {host} is not a PS of any running job")
    jr = owners[0]
    used = {h for j in jobs for h in j.ps}
    any_module = not net.family.standby_in_module  # a PSNet PS is replaced within its module
    free = [n.name for n in net.standbys() if n.name not in used and (any_module or n.module == net.nodes[host].module)]
    jr.hosts.fail(host)  # emulated: the failed server's cables go dark with it
    detail = jr.fail_ps(host, free[0] if free else None)
    jr.hosts.log("failover", failed=host, standby=free[0], job=jr.spec.name)
    return detail
