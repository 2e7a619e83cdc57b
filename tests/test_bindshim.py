"""tfjob.bindshim: TensorFlow's gRPC server binds 0.0.0.0 whatever its cluster spec says; the
preloaded shim turns a wildcard bind into the task's own address. Real processes, real sockets
(on loopback addresses: 127.0.0.0/8 is all this machine's)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tfjob import bindshim

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import errno, socket, sys
from tfjob import bindshim
print(bindshim.preloaded())
print(bindshim.bind_to(sys.argv[1]))
s = socket.socket()
s.bind(("0.0.0.0", 0))  # what TensorFlow's gRPC server asks for
print(s.getsockname()[0])
n = socket.socket(socket.AF_INET)
n.bind(("127.0.0.1", 0))  # a named address is left alone
print(n.getsockname()[0])
six = socket.socket(socket.AF_INET6)
try:
    six.bind(("::", 0))  # gRPC tries the IPv6 wildcard first; refused, it falls back to 0.0.0.0
    print("bound", six.getsockname()[0])
except OSError as err:
    print(errno.errorcode[err.errno])
"""


def probe(env: dict[str, str], address: str = "127.0.0.3") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PROBE, address], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60
    )


def test_the_shim_turns_a_wildcard_bind_into_the_tasks_address():
    path = bindshim.build()
    assert path.is_file() and path.parent == bindshim.cache_dir()
    r = probe(bindshim.with_preload(dict(os.environ)))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "127.0.0.3", "127.0.0.3", "127.0.0.1", "EADDRNOTAVAIL"]


def test_without_the_shim_binding_is_refused_not_silently_everywhere():
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    r = probe(env)
    assert r.returncode == 1 and r.stdout.split() == ["False"]
    assert "BindShimError: the bind shim is not loaded: TensorFlow would listen on every address, not 127.0.0.3" in (
        r.stderr
    )


def test_a_missing_compiler_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))  # nothing built there yet
    monkeypatch.setenv("PATH", str(tmp_path))  # and no cc on the path
    monkeypatch.delenv("CC", raising=False)
    with pytest.raises(bindshim.BindShimError) as info:
        bindshim.build()
    assert str(info.value) == (
        f"{bindshim.SOURCE}: no C compiler (cc) to build the shim that keeps TensorFlow's gRPC servers on their own "
        "address; install gcc (scripts/setup.sh does)"
    )


def test_an_ipv6_task_address_takes_the_ipv6_wildcard():
    code = (
        "import socket\nfrom tfjob import bindshim\nbindshim.bind_to('::1')\n"
        "s = socket.socket(socket.AF_INET6); s.bind(('::', 0)); print(s.getsockname()[0])\n"
        "t = socket.socket()\ntry:\n    t.bind(('0.0.0.0', 0)); print('bound')\n"
        "except OSError as e:\n    print(e.errno)\n"
    )
    env = bindshim.with_preload(dict(os.environ))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["::1", str(errno.EADDRNOTAVAIL)]
