"""Keep a TF task's gRPC server on its own address, not on every address of its machine.

TensorFlow's GrpcServer listens on "0.0.0.0:PORT" whatever address the cluster spec gives the
task (grpc_server_lib.cc, still so in TF 2.21), and it runs any graph it is sent: TensorFlow's
security guidance keeps such servers on trusted networks. In the emulation a host's namespace
holds only its own address; on real servers (hardware mode) the wildcard is every interface,
the management network's too. Neither TF nor gRPC has an option for the address (ServerDef has
a port only), and no packaged tool rewrites the address a process binds (a firewall restricts
who reaches a port; the socket would still listen everywhere), hence this small shim:
tfjob/bindaddr.c wraps bind() and, once `bind_to(address)` has named the task's address,
turns a wildcard bind into a bind to that address.

It is compiled once per machine and source version with the system's C compiler into
~/.cache/psnet-testbed/ (scripts/setup.sh builds it: `python -m tfjob.bindshim`), and
preloaded (LD_PRELOAD) into every TF task: the fork server starts with it, so every task it
forks has it; a task started as its own interpreter (PSNET_FORKSERVER=0, hardware mode's
`python -m tfjob.psjob` over SSH) re-executes itself with it before TensorFlow is imported
(`ensure_preloaded`).
"""

from __future__ import annotations

import ctypes
import hashlib
import ipaddress
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

from topologies.spec import cache_dir

SOURCE = Path(__file__).with_name("bindaddr.c")
#: the symbol the shim exports, looked up to tell whether this process has it
MARK = "psnet_bind_shim_version"


class BindShimError(RuntimeError):
    """The shim cannot be built or loaded; the message is one line saying what to install."""


def shim_path() -> Path:
    """Where this source version's shim is built for this machine's architecture."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    return cache_dir() / f"bindaddr-{digest}-{platform.machine()}.so"


def build() -> Path:
    """The shim's path, compiling it first when this version is not built yet (to a temporary
    name, then renamed: tasks starting at once never load half a file)."""
    out = shim_path()
    if out.is_file():
        return out
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise BindShimError(
            f"{SOURCE}: no C compiler (cc) to build the shim that keeps TensorFlow's gRPC servers on their "
            "own address; install gcc (scripts/setup.sh does)"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=out.name, suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        done = subprocess.run(
            [cc, "-shared", "-fPIC", "-O2", "-o", tmp, str(SOURCE), "-ldl"], capture_output=True, text=True
        )
        if done.returncode != 0:
            first = (done.stderr.strip().splitlines() or ["no message"])[0]
            raise BindShimError(f"{SOURCE}: {cc} failed ({first}); install gcc and libc6-dev (scripts/setup.sh does)")
        os.chmod(tmp, 0o755)
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


def preloaded() -> bool:
    """Whether this process has the shim (it was in LD_PRELOAD when the process started)."""
    return hasattr(ctypes.CDLL(None), MARK)


def with_preload(env: dict[str, str]) -> dict[str, str]:
    """`env` with the shim (built if needed) first in LD_PRELOAD, for a process to start."""
    shim = str(build())
    rest = [p for p in env.get("LD_PRELOAD", "").split() if p and p != shim]
    return {**env, "LD_PRELOAD": " ".join([shim, *rest])}


def ensure_preloaded() -> None:
    """Re-execute this process (a `python -m tfjob.psjob` started as its own interpreter) with the
    shim preloaded, unless it has it already; call it before TensorFlow is imported. A second
    attempt that still lacks it (a loader that ignores LD_PRELOAD) is an error, not a loop."""
    if preloaded():
        return
    if os.environ.get("PSNET_BIND_SHIM_EXEC") == "1":
        raise BindShimError(
            f"LD_PRELOAD={os.environ.get('LD_PRELOAD', '')} did not load the bind shim; the task would listen on "
            "every address: refused"
        )
    env = {**with_preload(dict(os.environ)), "PSNET_BIND_SHIM_EXEC": "1"}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, env)  # the same command line: ps and pgrep -f see no change


def bind_to(host: str) -> str:
    """Make every later wildcard bind of this process bind to `host` (an address, or a name
    resolved here) instead; returns the address. BindShimError without the shim."""
    try:
        address = str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        try:
            address = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]
        except OSError as err:
            raise BindShimError(f"{host}: cannot resolve the task's address ({err.strerror}); fix --cluster") from None
    if not preloaded():
        raise BindShimError(f"the bind shim is not loaded: TensorFlow would listen on every address, not {address}")
    if ctypes.CDLL(None).psnet_set_bind_address(address.encode()) != 0:
        raise BindShimError(f"{address}: the bind shim does not take this address")
    return address


def main() -> None:
    """`python -m tfjob.bindshim`: build the shim now (scripts/setup.sh) and say where it is."""
    try:
        print(f"bind shim for TensorFlow's gRPC servers: {build()}")
    except BindShimError as err:
        print(f"bind shim: {err}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
