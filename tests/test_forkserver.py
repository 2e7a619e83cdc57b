"""psjob tasks forked from the fork server (tfjob.forkserver): each runs as its Mininet host
(its network namespace, its address), shows the command line it would have had, ends with its own
exit code when killed, and dies with a run killed by SIGKILL. Whole jobs through it are
tests/test_jobs.py's and test_failures.py's (every emulated job starts its tasks this way)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from emulation import registry
from emulation.net import Testbed
from tfjob import forkserver
from tfjob.hosts import PS_PORT, MininetHosts

pytestmark = pytest.mark.root
ROOT = Path(__file__).resolve().parent.parent
TOPO = "topologies/psnet-testbed.yaml"


def ps_argv(address: str, deadline_s: float = 120) -> list[str]:
    """A PS task of a one-PS, one-worker cluster (it serves until killed or its deadline)."""
    cluster = json.dumps({"ps": [address], "worker": ["127.0.0.1:1"]})
    return [sys.executable, "-m", "tfjob.psjob", "--cluster", cluster, "--job", "ps", "--task", "0"] + [
        "--deadline-s",
        f"{deadline_s:g}",
    ]


def first_event(stdout, event: str) -> dict:
    for line in stdout:
        if line.startswith("{") and json.loads(line)["event"] == event:
            return json.loads(line)
    pytest.fail(f"the task ended without a {event!r} line")


def listening(tb: Testbed, host: str) -> set[str]:
    """The local addresses of the TCP sockets listening inside `host` (`ss -ltn` there)."""
    out = tb.host(host).cmd("ss -Hltn")
    return {line.split()[3] for line in out.splitlines() if line.strip()}


def test_a_forked_task_runs_as_its_host(no_leftovers):
    with Testbed(TOPO) as tb:
        hosts = MininetHosts(tb)
        ip = tb.model.nodes["ps1_1"].ip
        task = hosts.popen("ps1_1", ps_argv(f"{ip}:{PS_PORT}"))
        assert isinstance(task, forkserver.ForkedTask)
        ready = first_event(task.stdout, "ready")
        assert ready["job"] == "ps" and task.poll() is None
        proc = psutil.Process(task.pid)
        assert proc.parent().cmdline()[1:3] == ["-m", "tfjob.forkserver"]  # forked, not exec'd
        argv = forkserver.argv_words(proc.cmdline())  # what ps, pgrep -f and the benchmarks' sampler see
        assert argv[1:3] == ["-m", "tfjob.psjob"] and argv[argv.index("--job") + 1] == "ps"
        shell = tb.host("ps1_1").pid
        assert os.stat(f"/proc/{task.pid}/ns/net").st_ino == os.stat(f"/proc/{shell}/ns/net").st_ino
        assert os.stat(f"/proc/{task.pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
        # it listens on the host's emulated address, reached from another host over the network
        probe = f"import socket; socket.create_connection(('{ip}', {PS_PORT}), timeout=5); print('connected')"
        assert tb.host("w1_1_1").cmd(f'{sys.executable} -c "{probe}"').strip().endswith("connected")
        assert listening(tb, "ps1_1") == {f"{ip}:{PS_PORT}"}  # its address only: TF asked for 0.0.0.0
        assert os.getsid(task.pid) == task.pid  # a session of its own, as mnexec -d gives
        task.kill()
        assert task.wait(timeout=10) == -signal.SIGKILL == task.returncode
        assert task.stdout.read() == ""  # its end of the pipe closed with it


def test_the_old_way_stays_a_switch_away(no_leftovers, monkeypatch):
    """PSNET_FORKSERVER=0: each task its own interpreter (Host.popen through mnexec)."""
    monkeypatch.setenv(forkserver.ENV_SWITCH, "0")
    with Testbed(TOPO) as tb:
        ip = tb.model.nodes["ps1_1"].ip
        task = MininetHosts(tb).popen("ps1_1", ps_argv(f"{ip}:{PS_PORT}"))
        assert isinstance(task, subprocess.Popen)
        assert first_event(task.stdout, "ready")["job"] == "ps"
        assert listening(tb, "ps1_1") == {f"{ip}:{PS_PORT}"}  # re-exec'd with the bind shim (tfjob.bindshim)
        task.kill()
        task.wait(timeout=10)


RUN = f"""
import sys
from emulation.net import Testbed
from tfjob.hosts import MininetHosts
from tests.test_forkserver import ps_argv
with Testbed({TOPO!r}) as tb:
    task = MininetHosts(tb).popen("ps1_1", ps_argv(tb.model.nodes["ps1_1"].ip + ":2222", deadline_s=600))
    for line in task.stdout:
        if '"ready"' in line:
            print(task.pid, flush=True)
            break
    import time; time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_tasks_die_with_a_run_killed_by_sigkill(no_leftovers):
    """No teardown runs on SIGKILL: the fork server sees its parent gone and ends, and each task
    has PR_SET_PDEATHSIG, so none serves on until its deadline."""
    run = subprocess.Popen([sys.executable, "-c", RUN], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(run.stdout.readline())
        assert psutil.Process(pid).is_running()
    finally:
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
    deadline = time.monotonic() + 20
    while alive(pid):
        assert time.monotonic() < deadline, f"task {pid} outlived its killed run by 20 s"
        time.sleep(0.1)
    lock = registry.acquire_emulator(1800)  # the dead run's network: what the next run would clear
    try:
        registry.clean()
    finally:
        registry.release_emulator(lock)
