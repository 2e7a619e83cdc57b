"""Where a job's processes run: the `Hosts` a JobRun starts its PS and worker tasks on.

Two kinds: `MininetHosts` (the emulated hosts of a running Testbed, each task at its host's
emulated address) and servers.cluster.HardwareCluster (real servers over SSH, from an
inventory). JobRun only needs to start a process on a topology host, to know the address its
task listens on, to log an event and, on a PS failure, to take the host out; so the same job code
runs emulated and real.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from emulation.env import clean_env
from emulation.net import Testbed
from tfjob import forkserver

REPO = Path(__file__).resolve().parent.parent
#: the first task port on a server (a second task there takes the next one, and so on); in the
#: emulation every task has a host of its own and listens on this one
PS_PORT = 2222


def proc_state(pid: int) -> str:
    """What a process is doing, from /proc (no py-spy): its state, and where its threads wait
    in the kernel (wchan, most common first): e.g. "S (sleeping), 41 threads: futex_wait_queue x38,
    do_epoll_wait x3"."""
    try:
        state = next(
            ln.split(":", 1)[1].strip()
            for ln in Path(f"/proc/{pid}/status").read_text().splitlines()
            if ln.startswith("State:")
        )
    except (OSError, StopIteration):
        return "gone"
    waits: dict[str, int] = {}
    tasks = list(Path(f"/proc/{pid}/task").glob("*"))
    for t in tasks:
        try:
            w = (t / "wchan").read_text().strip() or "running"
        except OSError:
            continue
        waits[w if w != "0" else "running"] = waits.get(w if w != "0" else "running", 0) + 1
    top = ", ".join(f"{w} x{n}" for w, n in sorted(waits.items(), key=lambda kv: -kv[1])[:3])
    return f"{state}, {len(tasks)} threads: {top}" if top else state


class HostProcess(Protocol):
    """What JobRun uses of a running task: subprocess.Popen's reading and ending part."""

    stdout: Iterable[str]
    pid: int | None
    returncode: int | None

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def kill(self) -> None: ...


@runtime_checkable
class Hosts(Protocol):
    """Starts job tasks on topology hosts and says where they listen."""

    def popen(self, host: str, argv: list[str]) -> HostProcess:
        """Start `argv` (a `python -m tfjob.psjob ...` command line) as `host`; its stdout
        carries stderr too, as text lines."""
        ...

    def address(self, host: str) -> str:
        """'ip:port' of the task on `host`, as the TF cluster spec names it."""
        ...

    def log(self, event: str, **fields: Any) -> None:
        """Add a timestamped event to the run's event log."""
        ...

    def state(self, proc: HostProcess) -> str:
        """One line on what a running task is doing (for stall messages)."""
        ...

    def fail(self, host: str) -> None:
        """A PS on `host` was failed (its process is killed by the caller): take the host out."""
        ...


class MininetHosts:
    """The emulated hosts of a running Testbed: each task in its Mininet host, at its address."""

    def __init__(self, tb: Testbed) -> None:
        self.tb = tb

    def popen(self, host: str, argv: list[str]) -> HostProcess:
        """A psjob task is forked from the fork server, which imported TensorFlow once
        (tfjob.forkserver); anything else, or PSNET_FORKSERVER=0, is its own interpreter."""
        node = self.tb.host(host)
        if forkserver.enabled(argv):
            return forkserver.start_task(node.pid, argv, clean_env(), str(REPO))
        return node.popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env(), cwd=str(REPO)
        )

    def address(self, host: str) -> str:
        return f"{self.tb.model.nodes[host].ip}:{PS_PORT}"

    def log(self, event: str, **fields: Any) -> None:
        self.tb.log(event, **fields)

    def state(self, proc: HostProcess) -> str:
        return proc_state(proc.pid) if proc.pid is not None else "?"

    def fail(self, host: str) -> None:
        self.tb.set_node(host, up=False)  # the failed server's cables go dark with it


def as_hosts(where: Testbed | Hosts) -> Hosts:
    """A Testbed's hosts, or `where` itself when it already is a Hosts (a hardware cluster)."""
    return MininetHosts(where) if isinstance(where, Testbed) else where
