"""The fidelity monitor of a run over several servers: emulation.fidelity's verdict, from counters
each server reads of itself.

On one machine the monitor reads /proc, /sys, Open vSwitch and tc here. Over several servers:

- **CPU, ovs-vswitchd's CPU and the switch-side interfaces' bytes**: emulation.remote_sampler's
  agent on each server, merged round by round (the least idle server, the busiest ovs-vswitchd,
  every server's interfaces).
- **Packets the datapath lost**: emulation.datapath's own snapshot at the start and its comparison
  at the end, run on each server by the repository's Python there (a server holds the checkout
  at the same path, as it must to run the job's processes); the snapshot stays in a file on the
  server between the two, and only the comparison (JSON) comes back. The servers' losses add up.
- **Each host's TCP retransmissions**: its namespace's /proc/net/snmp, read in its shell.

The verdict is the same pure function of the same inputs (emulation.fidelity.judge): a run over
several servers is judged as one on this machine is.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any, Protocol

from emulation import datapath
from emulation.cluster import Cluster
from emulation.fidelity import Monitor, Verdict, tcp_counts
from emulation.phases import Window
from emulation.placement import Placement
from emulation.relaying import RelayLoad
from emulation.remote_sampler import RemoteSampler
from emulation.sampler import Sample
from topologies.model import Network

#: the checkout, at the same path on every server
REPO = Path(__file__).resolve().parents[1]


class Servers(Protocol):
    """What the monitor reads a running testbed over several servers through (ClusterTestbed)."""

    model: Network
    placement: Placement
    run_id: str

    @property
    def cluster(self) -> Cluster: ...

    def server_of(self, node: str) -> str: ...

    def host(self, name: str) -> Any: ...


#: runs on a server (the repository's Python, from the checkout): the datapath snapshot of `bridges`
#: into `path` at the start; at the end, the comparison with a new one, printed as JSON
_SNAPSHOT = """import pickle, sys
from emulation import datapath
pickle.dump(datapath.Snapshot.take(sys.argv[2:]), open(sys.argv[1], "wb"))
"""
_COMPARE = """import dataclasses, json, os, pickle, sys
from emulation import datapath
before = pickle.load(open(sys.argv[1], "rb"))
os.unlink(sys.argv[1])
drops = datapath.compare(before, datapath.Snapshot.take(sys.argv[2:]))
sock = datapath.send_socket()
print(json.dumps({"drops": dataclasses.asdict(drops), "sndbuf": sock.sndbuf if sock else None}))
"""


def _drops(d: dict) -> datapath.Drops:
    """A Drops from its JSON (dataclasses.asdict) form."""
    return datapath.Drops([datapath.PortLoss(**p) for p in d["ports"]], dict(d["rx_dropped"]), dict(d["send_errors"]))


def merge_drops(each: list[datapath.Drops]) -> datapath.Drops:
    """The cluster's losses: every server's ports; received drops and logged send errors added."""
    errors: dict[str, int] = {}
    for d in each:
        for k, n in d.send_errors.items():
            errors[k] = errors.get(k, 0) + n
    return datapath.Drops(
        [p for d in each for p in d.ports], {i: n for d in each for i, n in d.rx_dropped.items()}, errors
    )


class ClusterMonitor(Monitor):
    """A Monitor whose counters come from the servers (module doc); the same start/stop/verdict."""

    def __init__(self, tb: Servers, relay: RelayLoad | None = None) -> None:
        super().__init__(tb.model, relay=relay)
        self.tb = tb
        self.hosts = {}  # no local host shells: retransmissions are read in each host's shell
        on: dict[str, list[str]] = {s: [] for s in tb.placement.servers}
        for ln in self.net.veth_links():
            for end in (ln.a, ln.b):
                if ln.intf(end) in self.intfs:
                    on[tb.server_of(end)].append(ln.intf(end))
        self.bridges_on = {s: [b for b in self.bridges if tb.server_of(b) == s] for s in on}
        self.remote = RemoteSampler(tb.cluster.config, on, period_s=self.sampler.period_s / 4)
        self._snap = {s: f"/tmp/psnet-{tb.run_id}-{s}.snapshot" for s in on}

    def _python(self, server: str, code: str, *args: str) -> str:
        """Run `code` with the repository's Python on `server`, in the checkout (module doc)."""
        line = f"cd {shlex.quote(str(REPO))} && {shlex.join([sys.executable, '-c', code, *args])}"
        return self.tb.cluster.run(server, line).stdout

    def _snmp(self, host: str) -> tuple[int, ...]:
        return tcp_counts(self.tb.host(host).cmd("cat /proc/net/snmp /proc/net/netstat"))

    @property
    def samples(self) -> list[Sample]:
        return self.remote.samples()

    @property
    def windows(self) -> list[Window]:
        """The servers' rounds merged (each round once: the stall watch reads them every tick)."""
        return self.remote.windows(self.intfs)

    def start(self) -> ClusterMonitor:
        for server, bridges in self.bridges_on.items():
            self._python(server, _SNAPSHOT, self._snap[server], *bridges)
        self._tcp0 = {h.name: self._snmp(h.name) for h in self.net.hosts()}
        self.remote.start()
        return self

    def _count_drops(self) -> None:
        if self.drops is not None:
            return
        each, buffers = [], []
        for server, bridges in self.bridges_on.items():
            out = json.loads(self._python(server, _COMPARE, self._snap[server], *bridges))
            each.append(_drops(out["drops"]))
            buffers.append(out["sndbuf"])
        self.drops = merge_drops(each)
        known = [b for b in buffers if b is not None]
        self.send_buffer = min(known) if known else None
        for h, then in self._tcp0.items():
            now = self._snmp(h)
            if now[1] > then[1]:
                self.retrans[h] = [a - b for a, b in zip(now, then, strict=True)]

    def stop(self, since: float | None = None, loopback_only: bool = False) -> Verdict:
        self.remote.stop()
        self._count_drops()
        return self.verdict(since, loopback_only)


__all__ = ["ClusterMonitor", "merge_drops"]
