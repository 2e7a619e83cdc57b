"""What the SSH tests (test_remote.py, test_hardware.py, test_cluster.py) share to stand up real sshd servers: a
shell helper, throw-away keys and a lookup of the processes a server left (not a test module)."""

from __future__ import annotations

import contextlib

import psutil

from servers.local import keygen, processes, sh

__all__ = ["LEFTOVER_PATTERNS", "clear_dead_runs_leftovers", "keygen", "processes", "sh"]

#: the namespaces and root-side veths the SSH tests make, each ending in the pid of the run that made it
#: (servers/local.py's servers, used by the hardware and cluster tests; test_remote.py's own)
LEFTOVER_PATTERNS = (
    r"psnet-cs\d-(\d+)", r"psnet-cssw-(\d+)", r"pcsm\d(\d+)", r"psnet-ssh-(\d+)", r"pssh(\d+)",
)  # fmt: skip


def clear_dead_runs_leftovers() -> list[str]:
    """Delete the namespaces and veths an earlier, killed test run left (its pid is gone).

    A run SIGKILLed mid-test (a CI job cut off) never reaches its finalizer: its namespaces outlive it
    (`ip netns add` pins them) and so do its root-side veths with the same fixed management addresses,
    whose routes then win over the next run's: the next sshd listens but is never reached. Only
    leftovers whose owner pid is dead are touched, so a concurrent run keeps its own. Returns what was
    deleted."""
    import re

    patterns = [re.compile(p) for p in LEFTOVER_PATTERNS]

    def dead(name: str) -> bool:
        for p in patterns:
            m = p.fullmatch(name)
            if m:
                return not psutil.pid_exists(int(m.group(1)))
        return False

    gone = []
    for ns in sh("ip", "netns", "list", check=False).stdout.split("\n"):
        name = ns.split(" ")[0]
        if name and dead(name):
            pids = sh("ip", "netns", "pids", name, check=False).stdout.split()
            for proc in processes([int(p) for p in pids]):
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
            sh("ip", "netns", "del", name, check=False)
            gone.append(name)
    for line in sh("ip", "-o", "link", "show", check=False).stdout.splitlines():
        name = line.split(":")[1].strip().split("@")[0]
        if dead(name):
            sh("ip", "link", "del", name, check=False)
            gone.append(name)
    return gone
