"""`testbed doctor`: is this machine able to emulate? Each check says what is missing in plain words.

Kernel features are probed, not assumed: a veth pair in the root namespace takes an HTB,
a TBF and a netem qdisc in turn (netem is absent on some kernels, and then delays are refused).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from emulation import datapath, tso
from emulation.sampler import ovs_process
from topologies.schema import InputError, TopologySpec

#: the fix for whatever set-up installs, said "as root": a root shell (a VM console, a container)
#: often has no privilege-raising command, and root is all that is needed
SETUP = "run scripts/setup.sh as root"
OVS_START = "/usr/share/openvswitch/scripts/ovs-ctl --system-id=random --no-monitor start"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    blocking: bool = True  # an emulation cannot start without it


def _run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=20)


@cache
def qdisc_supported(kind: str) -> bool:
    """Can this kernel attach qdisc `kind` (htb, tbf, netem)? Probed on a throwaway veth pair
    (this kernel has no dummy interfaces)."""
    dev = "psnt-probe"
    _run("ip", "link", "del", dev)
    if _run("ip", "link", "add", dev, "type", "veth", "peer", "name", dev + "p").returncode:
        return False
    args = {
        "htb": ["htb", "default", "1"],
        "tbf": ["tbf", "rate", "10mbit", "burst", "15k", "latency", "10ms"],
        "netem": ["netem", "delay", "1ms"],
    }[kind]
    try:
        return _run("tc", "qdisc", "add", "dev", dev, "root", *args).returncode == 0
    finally:
        _run("ip", "link", "del", dev)


def has_netem() -> bool:
    return qdisc_supported("netem")


def send_buffer_check() -> Check:
    """Does ovs-vswitchd's send socket hold the switch-side queues? With the kernel's 208 KB
    default it drops packets silently once ~90 frames wait in all switch-side HTB queues
    together (emulation/datapath.py). Not blocking: emulations run, but lose packets."""
    fix = f"{SETUP} (it raises net.core.wmem_default and enlarges the running daemon's socket in place)"
    sock = datapath.send_socket()
    if sock is None:
        default = datapath.wmem_default()
        ok = default >= datapath.MIN_SNDBUF
        detail = f"not created yet; it will take net.core.wmem_default = {default} bytes" + (
            "" if ok else f": too small, {fix}"
        )
        return Check("ovs send buffer", ok, detail, blocking=False)
    ok = sock.sndbuf >= datapath.MIN_SNDBUF
    detail = (
        f"{sock.sndbuf} bytes (ovs-vswitchd pid {sock.pid})"
        if ok
        else f"only {sock.sndbuf} bytes: switch-side queues lose packets silently; {fix}"
    )
    return Check("ovs send buffer", ok, detail, blocking=False)


def tso_check() -> Check:
    """Whether runs here carry GSO packets whole (emulation.tso): not blocking, a slower datapath."""
    try:
        m = tso.mode()
    except InputError as err:
        return Check("ovs userspace TSO", False, str(err), blocking=False)
    if not tso.daemon_has_tso():
        return Check(
            "ovs userspace TSO",
            False,
            f"ovs-vswitchd runs without it (a packet per frame: a lower ceiling); {SETUP} "
            "(sets it, restarts the daemon)",
            blocking=False,
        )
    detail = {
        "on": f"on: GSO packets of at most {tso.GSO_BURST_MS:g} ms of the slowest link cross the datapath whole "
        "(PSNET_TSO=0 turns it off)",
        "off": "available, off (PSNET_TSO=0)",
    }[m]
    return Check("ovs userspace TSO", True, detail, blocking=False)


def checks() -> list[Check]:
    """Every check, blocking ones first."""
    out = [Check("root", os.geteuid() == 0, "Mininet and OVS need root: run testbed as root")]
    for tool, pkg in (
        ("mnexec", "mininet"),
        ("ovs-vsctl", "openvswitch-switch"),
        ("tc", "iproute2"),
        ("ethtool", "ethtool"),
        ("iperf3", "iperf3"),
    ):
        path = shutil.which(tool)
        out.append(Check(tool, bool(path), path or f"`{tool}` not found: apt-get install {pkg} ({SETUP})"))
    vswitchd = ovs_process()
    ovs = vswitchd is not None and bool(shutil.which("ovs-vsctl"))
    ovs = ovs and _run("ovs-vsctl", "--timeout=3", "show").returncode == 0
    if ovs:
        detail = f"ovs-vswitchd (pid {vswitchd.pid}) and its database answer"  # type: ignore[union-attr]
    elif vswitchd is None:
        detail = f"ovs-vswitchd is not running: {OVS_START}"
    else:
        detail = f"Open vSwitch's database does not answer (ovs-vsctl show): {OVS_START}"
    out.append(Check("ovs running", bool(ovs), detail))
    if ovs:
        types = _run("ovs-vsctl", "get", "Open_vSwitch", ".", "datapath_types").stdout.strip()
        out.append(Check("ovs userspace datapath", "netdev" in types, f"datapath types {types or '?'} (need netdev)"))
        kmod = os.path.exists("/sys/module/openvswitch")
        out.append(
            Check(
                "ovs kernel datapath",
                kmod,
                "kernel module loaded"
                if kmod
                else "no openvswitch kernel module: the userspace datapath is used (one busy thread; "
                f"keep aggregate load within {tso.ceiling(1500)[0]:g} Mbit/s, "
                f"{tso.ceiling(9000)[0]:g} with mtu: 9000)",
                blocking=False,
            )
        )
        if os.geteuid() == 0 and shutil.which("ss"):
            out.append(send_buffer_check())
        out.append(tso_check())
    if os.geteuid() == 0 and shutil.which("tc"):
        for q in ("htb", "tbf"):
            out.append(
                Check(f"qdisc {q}", qdisc_supported(q), "available" if qdisc_supported(q) else f"kernel lacks sch_{q}")
            )
        netem = has_netem()
        out.append(
            Check(
                "qdisc netem",
                netem,
                "available: delay_ms works"
                if netem
                else "no netem in this kernel: delay_ms must stay 0 (rates are still shaped)",
                blocking=False,
            )
        )
    cc = os.environ.get("CC") or shutil.which("cc")
    out.append(
        Check(
            "C compiler",
            bool(cc),
            f"{cc}: builds the shim that keeps TF tasks' gRPC servers on their own address (tfjob/bindshim.py)"
            if cc
            else f"no cc: TF tasks cannot start (their gRPC servers would listen on every address): {SETUP}",
            blocking=False,
        )
    )
    in_venv = sys.prefix != sys.base_prefix
    out.append(
        Check("venv", in_venv, sys.prefix if in_venv else f"not running in the project venv: {SETUP}", blocking=False)
    )
    for mod in ("mininet", "os_ken", "networkx", "tensorflow"):
        found = importlib.util.find_spec(mod) is not None
        out.append(
            Check(
                f"python: {mod}",
                found,
                "importable" if found else f"cannot import {mod}: {SETUP}",
                blocking=mod != "tensorflow",
            )
        )
    return out


def allowed_congestion_controls() -> set[str]:
    """The TCP congestion controls a network namespace may take (the kernel lets only the root
    namespace choose one outside this list; scripts/setup.sh adds cubic)."""
    try:
        return set(Path("/proc/sys/net/ipv4/tcp_allowed_congestion_control").read_text().split())
    except OSError:
        return set()


def blocking_problems(spec: TopologySpec | None = None) -> list[str]:
    """One-line messages for everything that prevents bringing up `spec` here."""
    probs = [f"{c.name}: {c.detail}" for c in checks() if c.blocking and not c.ok]
    if spec is not None and spec.tcp not in allowed_congestion_controls():
        probs.append(
            f"{spec.name}: tcp: {spec.tcp} is not in net.ipv4.tcp_allowed_congestion_control "
            f"({' '.join(sorted(allowed_congestion_controls()))}), so an emulated host may not take it: {SETUP}"
        )
    if spec is not None and spec.delay_ms > 0 and os.geteuid() == 0 and not has_netem():
        probs.append(f"{spec.name}: delay_ms: {spec.delay_ms:g} needs netem, which this kernel lacks; set delay_ms: 0")
    return probs
