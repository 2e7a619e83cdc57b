"""What each server of a cluster run does, sampled there and streamed here: the counters the
fidelity monitor reads on one machine (emulation.sampler's machine CPU, ovs-vswitchd's CPU and the
switch-side interfaces' bytes; emulation.phases' transfer windows), for servers whose /proc and
/sys this machine cannot read.

Each server runs AGENT (standard library only: a server needs no venv for it) through the run's
ssh_config: every `period_s` it prints one JSON line of cumulative counters (its clock, /proc/stat's
CPU, ovs-vswitchd's CPU ticks, /proc/net/dev's rx and tx bytes of the named interfaces). It ends when
its standard input closes (the session ends with the run, whatever kills it). Here a reader thread
per server keeps the lines; `samples()` and `windows()` difference them into emulation.sampler's
Samples and emulation.phases' Windows of the whole cluster, round by round (the agents start
together and tick with the same period): the least idle server, the busiest ovs-vswitchd, every
server's interfaces; a window's time is the latest server's (servers' clocks must agree, as NTP
keeps them). emulation.cluster_monitor judges a run with them.
"""

from __future__ import annotations

import json
import logging
import shlex
import subprocess
import threading
from collections.abc import Mapping, Sequence
from itertools import pairwise
from pathlib import Path

from emulation.phases import Window, window
from emulation.sampler import Sample

LOG = logging.getLogger(__name__)

AGENT = r"""
import json, os, sys, threading, time
period = float(sys.argv[1]); intfs = set(sys.argv[2:]); tick = os.sysconf("SC_CLK_TCK")
def stop():
    sys.stdin.read(); os._exit(0)
threading.Thread(target=stop, daemon=True).start()
def ovs_ticks():
    for f in ("/run/openvswitch/ovs-vswitchd.pid", "/var/run/openvswitch/ovs-vswitchd.pid"):
        try:
            pid = open(f).read().strip()
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            return int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            continue
    return None
while True:
    cpu = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    dev = {}
    for line in open("/proc/net/dev").read().splitlines()[2:]:
        name, _, rest = line.partition(":")
        name = name.strip()
        if name in intfs:
            f = rest.split()
            dev[name] = [int(f[0]), int(f[8])]
    print(json.dumps({"t": time.time(), "cpu": cpu, "ovs": ovs_ticks(), "tick": tick, "dev": dev}), flush=True)
    time.sleep(period)
"""


class RemoteSampler:
    """AGENT on each server (`intfs`: the switch-side interfaces there), read here."""

    def __init__(self, config: Path, intfs: Mapping[str, Sequence[str]], period_s: float = 0.25) -> None:
        self.config = config
        self.intfs = {s: list(v) for s, v in intfs.items()}
        self.period_s = period_s
        self.lines: dict[str, list[dict]] = {s: [] for s in intfs}
        self._procs: dict[str, subprocess.Popen] = {}
        self._threads: list[threading.Thread] = []
        self._windows: list[Window] = []
        self._merging = threading.Lock()  # the stall watch's thread and the verdict both read windows

    def start(self) -> RemoteSampler:
        for server, names in self.intfs.items():
            remote = shlex.join(["python3", "-c", AGENT, str(self.period_s), *names])
            p = subprocess.Popen(
                ["ssh", "-F", str(self.config), server, remote],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
            self._procs[server] = p
            t = threading.Thread(target=self._read, args=(server, p), daemon=True, name=f"sampler-{server}")
            t.start()
            self._threads.append(t)
        return self

    def _read(self, server: str, p: subprocess.Popen) -> None:
        assert p.stdout is not None
        for line in p.stdout:
            try:
                self.lines[server].append(json.loads(line))
            except ValueError:
                LOG.debug("%s: not a sample: %r", server, line[:80])

    def stop(self) -> None:
        """Close every agent's input (it exits) and wait for the readers."""
        for p in self._procs.values():
            if p.stdin:
                p.stdin.close()
        for p in self._procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for t in self._threads:
            t.join(5)

    def _rounds(self, every: int = 1) -> list[dict[str, dict]]:
        """Every `every`-th line of all servers together, index by index (the agents start
        together and tick with the same period), as far as every server has one."""
        n = min((len(v) for v in self.lines.values()), default=0)
        return [{s: self.lines[s][k] for s in self.lines} for k in range(0, n, every)]

    def samples(self, every: int = 4) -> list[Sample]:
        """The cluster's windows of `every` agent lines (4 x 0.25 s: the monitor's 1-s windows):
        the least idle server's CPU, the busiest ovs-vswitchd, every server's interfaces."""
        out = []
        for a, b in pairwise(self._rounds(every)):
            each = [_sample(a[s], b[s]) for s in b]
            ovs = [x.ovs_cpu for x in each if x.ovs_cpu is not None]
            tx = {i: n for x in each for i, n in x.tx_bytes.items()}
            out.append(
                Sample(
                    t=max(x.t for x in each),
                    dt_s=max(x.dt_s for x in each),
                    idle=min(x.idle for x in each),
                    busy_s=max(x.busy_s for x in each),
                    ovs_cpu=max(ovs) if ovs else None,
                    procs_cpu_s=0.0,
                    tx_bytes=tx,
                )
            )
        return out

    def windows(self, rate_mbps: Mapping[str, float]) -> list[Window]:
        """The cluster's transfer windows (emulation.phases.window), one per round of agent lines.
        Each is merged once and kept: the stall watch reads them every tick while the run goes on
        (`rate_mbps` is the run's, the same on every call)."""
        with self._merging:
            for a, b in pairwise(self._rounds()[len(self._windows) :]):
                moved = {}
                for s in b:
                    da, db = a[s]["dev"], b[s]["dev"]
                    moved.update({i: (db[i][0] - da[i][0], db[i][1] - da[i][1]) for i in db if i in da})
                t = max(b[s]["t"] for s in b)
                dt = max(b[s]["t"] - a[s]["t"] for s in b)
                self._windows.append(window(t, dt, moved, rate_mbps))
            return list(self._windows)


def _sample(a: dict, b: dict) -> Sample:
    """One server's window between two of its agent's lines."""
    dt = b["t"] - a["t"]
    d = [y - x for x, y in zip(a["cpu"], b["cpu"], strict=False)]
    total = sum(d[:8]) or 1  # user nice system idle iowait irq softirq steal (guest is inside user)
    idle = (d[3] + (d[4] if len(d) > 4 else 0)) / total
    ovs = None
    if a["ovs"] is not None and b["ovs"] is not None and dt > 0:
        ovs = (b["ovs"] - a["ovs"]) / b["tick"] / dt
    tx = {i: b["dev"][i][1] - a["dev"][i][1] for i in b["dev"] if i in a["dev"]}
    busy_s = (d[0] + d[1] + d[2]) / b["tick"]
    return Sample(t=b["t"], dt_s=dt, idle=idle, busy_s=busy_s, ovs_cpu=ovs, procs_cpu_s=0.0, tx_bytes=tx)


__all__ = ["AGENT", "RemoteSampler"]
