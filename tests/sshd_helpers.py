"""What the SSH tests (test_remote.py, test_hardware.py) share to stand up real sshd servers: a
shell helper, throw-away keys and a lookup of the processes a server left (not a test module)."""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path

import psutil


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check)


def keygen(path: Path) -> Path:
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "psnet-test", "-f", str(path))
    return path


def processes(pids: list[int]) -> list[psutil.Process]:
    """The pids still alive as psutil processes (a pid that has gone is skipped)."""
    out = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            out.append(psutil.Process(pid))
    return out
