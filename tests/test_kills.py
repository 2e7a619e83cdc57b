"""SIGKILLed runs leave nothing once the next run starts or `testbed clean` runs.

The reduced kill test: one run of each kind (scheme engine, Open MPI, TF with
PSNET_FORKSERVER=0), each SIGKILLed at a seeded random moment just after its job's processes
started (they are in sessions of their own and outlive their owner), cleared alternately by the
next run's start and by `testbed clean`; then no process of the run, no bridge, no root interface
of its topology, no network namespace and no run folder may be left. `scripts/bench_kills.sh`
runs 20 kills at moments over the whole run (benchmarks/kills.py).

And the mechanism itself, with no network: a run's processes that leave its session and drop
its id from their environment are still found (by the run's cgroup).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import psutil
import pytest

from benchmarks import kills
from emulation import registry

pytestmark = pytest.mark.root
SEED = 28


@pytest.mark.parametrize(("kind", "via"), [("scheme", "next-start"), ("mpi", "clean"), ("tf", "next-start")])
def test_a_killed_run_leaves_nothing(kind: str, via: str, no_leftovers):
    delay = random.Random(f"{SEED}-{kind}").uniform(0.0, 1.5)
    rec = kills.kill_once(kind, via, delay, after_job=True)
    assert rec.run_id and rec.phase == "job" and rec.job_processes > 0, rec  # killed while its job ran
    assert rec.left == [], rec


OWNER = """
import os, subprocess, time
from emulation import registry
run_id, path = registry.new_run()
os.environ[registry.RUN_ENV] = run_id
env = {k: v for k, v in os.environ.items() if k != registry.RUN_ENV}  # a child that drops the run's id
away = subprocess.Popen(["setsid", "sh", "-c", "sleep 300 & sleep 300"], env=env)  # and its session
print(run_id, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(registry.cgroup_base() is None, reason="no writable cgroup v2 hierarchy here")
def test_processes_that_leave_the_session_and_drop_the_run_id_are_found():
    lock = registry.acquire_emulator(float(os.environ.get("PSNET_LOCK_WAIT_S", "0")))
    try:
        owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True)
        run_id = owner.stdout.readline().strip()
        cg = registry.cgroup_base() / run_id
        deadline = time.monotonic() + 10
        while len(registry.cgroup_pids(cg)) < 4 and time.monotonic() < deadline:  # owner, setsid sh, 2 sleeps
            time.sleep(0.05)
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        left = registry.cgroup_pids(cg)
        assert len(left) == 3, left  # a shell and two sleeps, none with the run's id, in a session of their own
        removed = registry.clean()
        assert not cg.exists() and f"cgroup {run_id}" in removed, removed
        assert not any(psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie" for pid in left)
    finally:
        registry.release_emulator(lock)
