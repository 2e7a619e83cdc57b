"""Open MPI's allreduce between emulated hosts, one rank per host, over the hosts' emulated addresses.

How (measured in an earlier probe on this machine, docs/schemes.md "Open MPI as the reference"):
`mpirun` runs inside the first host; the `mnrsh` agent starts the other ranks inside their hosts'
namespaces with `mnexec -a PID`; the TCP BTL is restricted to the 10.x addresses, so every byte
crosses the emulated links. The tuned component's dynamic rules select the algorithm, so our
`ring` and `halving-doubling` can be set beside Open MPI's ring (4) and Rabenseifner's
reduce-scatter + all-gather (6).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

from emulation.net import Testbed, clean_env
from engine.mpi_allreduce import LAUNCHED

REPO = Path(__file__).resolve().parents[1]
AGENT = Path(__file__).with_name("mnrsh")
#: our scheme -> Open MPI 4.1 coll_tuned_allreduce_algorithm
ALGORITHMS = {"ring": 4, "halving-doubling": 6, "recursive-doubling": 3, "default": 0}
#: seconds mpirun waits for every host's daemon before giving up (on 2 busy cores one may be slow)
STARTUP_TIMEOUT_S = 60
#: seconds from mpirun's start to every rank's first barrier (LAUNCHED) before the launch is
#: stopped and tried again: mpirun's own startup timeout, and time for the ranks' imports
LAUNCH_TIMEOUT_S = STARTUP_TIMEOUT_S + 30
LOG = logging.getLogger(__name__)


class MpiError(RuntimeError):
    """Open MPI is missing or its run failed (the message quotes its last lines)."""


def run_mpi_allreduce(
    tb: Testbed,
    hosts: Sequence[str],
    n_elems: int,
    algorithm: str,
    run_dir: Path,
    warmup: int = 1,
    iterations: int = 3,
    timeout_s: float = 300.0,
) -> dict:
    """Times of Open MPI's allreduce of `n_elems` float32 across `hosts` (slowest rank per call).

    A launch where a host's daemon never reports (seen under load: 6 of 7 daemons up, mpirun
    waiting until the run's timeout) is stopped once no rank is up after LAUNCH_TIMEOUT_S, not
    `timeout_s`, and tried once more; nothing of a failed attempt is left running."""
    if shutil.which("mpirun") is None:
        raise MpiError("mpirun not found: install openmpi-bin (scripts/setup.sh does)")
    if algorithm not in ALGORITHMS:
        raise MpiError(f"unknown MPI algorithm {algorithm!r}; choose from {', '.join(ALGORITHMS)}")
    run_dir.mkdir(parents=True, exist_ok=True)
    ips = [tb.model.nodes[h].ip for h in hosts]
    hostmap = run_dir / "hostmap"
    hostmap.write_text("".join(f"{ip} {tb.host(h).pid}\n" for h, ip in zip(hosts, ips, strict=True)))
    hostfile = run_dir / "hostfile"
    hostfile.write_text("".join(f"{ip} slots=1\n" for ip in ips))
    nets = sorted({".".join(ip.split(".")[:1]) + ".0.0.0/8" for ip in ips})
    argv = [
        "mpirun", "--allow-run-as-root", "-np", str(len(hosts)), "--hostfile", str(hostfile),
        "--map-by", "node", "--bind-to", "none",
        "--mca", "plm", "rsh", "--mca", "plm_rsh_agent", str(AGENT), "--mca", "plm_rsh_no_tree_spawn", "1",
        "--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca", "osc", "^ucx",
        "--mca", "btl_tcp_if_include", ",".join(nets), "--mca", "oob_tcp_if_include", ",".join(nets),
        "-x", "PYTHONPATH", "--mca", "orte_startup_timeout", str(STARTUP_TIMEOUT_S),
    ]  # fmt: skip
    if ALGORITHMS[algorithm]:
        argv += ["--mca", "coll_tuned_use_dynamic_rules", "1"]
        argv += ["--mca", "coll_tuned_allreduce_algorithm", str(ALGORITHMS[algorithm])]
    argv += [sys.executable, "-m", "engine.mpi_allreduce", str(n_elems), str(warmup), str(iterations)]
    env = {**clean_env(), "PSNET_MPI_HOSTMAP": str(hostmap), "PYTHONPATH": os.environ.get("PYTHONPATH", str(REPO))}
    for attempt in (1, 2):
        out, code = _mpirun(tb, hosts[0], argv, env, str(hostmap), timeout_s)
        (run_dir / f"mpirun-{attempt}.log").write_text(out)
        lines = [ln for ln in out.splitlines() if ln.startswith("{")]
        if code == 0 and lines:
            res = json.loads(lines[-1])
            res["algorithm"] = algorithm
            res["attempts"] = attempt
            return res
        tail = " | ".join(out.strip().splitlines()[-3:])
        if attempt == 1:
            LOG.warning("mpirun failed (exit %s: %s); trying once more", code, tail)
            continue
        raise MpiError(f"mpirun exited {code}: {tail} (log in {run_dir})")
    raise AssertionError("unreachable")


def _mpirun(
    tb: Testbed,
    host: str,
    argv: list[str],
    env: dict[str, str],
    hostmap: str,
    timeout_s: float,
    launch_s: float = LAUNCH_TIMEOUT_S,
) -> tuple[str, int]:
    """Run mpirun in `host`: (its output, its exit code, -9 if stopped). Stopped when its ranks
    are not all up (no LAUNCHED line) after `launch_s`, or it has no result after `timeout_s`;
    then it and every daemon it started are killed (orted daemonizes into the other hosts'
    namespaces, so it outlives mpirun's process group), found by our hostmap in their environment."""
    p = tb.host(host).popen(argv, env=env, cwd=str(REPO), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines: list[str] = []
    launched = threading.Event()

    def read() -> None:  # the output as it comes, so the launch is seen while mpirun runs
        for line in p.stdout:  # type: ignore[union-attr]
            lines.append(line)
            if line.strip() == LAUNCHED:
                launched.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    t0, note, launch_wait = time.monotonic(), "", min(launch_s, timeout_s)
    try:
        if not launched.wait(launch_wait) and p.poll() is None:
            note = f"(not every rank up after {launch_wait:g} s: stopped)"
        else:
            try:
                p.wait(timeout=max(0.0, timeout_s - (time.monotonic() - t0)))
            except subprocess.TimeoutExpired:
                note = f"(no result after {timeout_s:g} s: stopped)"
        if note:
            p.kill()
            p.wait()
        reader.join(10)
        return "".join(lines) + (f"\n{note}" if note else ""), -9 if note else p.returncode
    finally:
        for proc in psutil.process_iter(["name", "environ"]):
            try:
                if (proc.info["environ"] or {}).get("PSNET_MPI_HOSTMAP") == hostmap:
                    proc.kill()
            except psutil.Error:
                pass
