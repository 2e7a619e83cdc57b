"""Fidelity monitor: is this run's emulation faithful? Measured, not assumed.

While a run goes on, a thread samples the machine's CPU idle, ovs-vswitchd's CPU (the userspace
datapath is one busy thread: near a full core it may fall behind), and the transmitted bytes of
every shaped switch-side interface. At the end each link's busiest window is set against its
configured rate.

ovs-vswitchd's CPU alone is no verdict: measured here (scripts/bench_network.sh) it sits near a
full core from ~150 Mbit/s aggregate upward while links still carry 99.9% of their rate. The
sign of an unfaithful run is a starved machine (ovs-vswitchd saturated, or no idle CPU left)
*and* a busiest link that never reached its configured rate: then the emulator, not the
emulated network, set the pace. The verdict names its numbers either way.

Packets lost inside ovs-vswitchd are counted too, exactly (emulation/datapath.py): on send, when
its one AF_PACKET socket's buffer is full of switch-side queues (no OVS, tc or interface counter
shows them; its log only a rate-limited fraction), and on receive, when it reads a port too
late. A run with any is not faithful: the emulated network lost packets a real one would not.
Beside them, each host's TCP retransmissions over the run (/proc/PID/net/snmp of its shell).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from emulation import datapath
from topologies.model import Network

#: ovs-vswitchd above this share of one core: it may be what limits the traffic
OVS_CPU_LIMIT = 0.90
#: below this machine-wide idle share, TF processes and the datapath compete for the CPU
IDLE_LIMIT = 0.05
#: a busiest link that peaked at or above this share of its rate was carried faithfully
LINK_FULL = 0.90
#: a sample window (s); the busiest-window rate of a link is taken over this
WINDOW_S = 1.0


def _ovs_process() -> psutil.Process | None:
    for p in psutil.process_iter(["name"]):
        if p.info["name"] == "ovs-vswitchd":
            return p
    return None


def _host_pids(net: Network) -> dict[str, int]:
    """Mininet host shells (`bash ... mininet:<name>`) of the model's hosts: their /proc/PID/net
    is the host's namespace, readable from here without a round trip through the shell."""
    want = {f"mininet:{h.name}": h.name for h in net.hosts()}
    out = {}
    for p in psutil.process_iter(["cmdline"]):
        cmd = p.info["cmdline"] or []
        if cmd and cmd[-1] in want:
            out[want[cmd[-1]]] = p.pid
    return out


def tcp_segments(pid: int) -> tuple[int, int]:
    """(RetransSegs, OutSegs) of the network namespace of process `pid`; (0, 0) if it is gone."""
    try:
        lines = [ln.split() for ln in Path(f"/proc/{pid}/net/snmp").read_text().splitlines() if ln.startswith("Tcp:")]
        row = dict(zip(lines[0], lines[1], strict=True))
        return int(row["RetransSegs"]), int(row["OutSegs"])
    except (OSError, IndexError, KeyError, ValueError):
        return 0, 0


def _tx_bytes(intf: str) -> int:
    try:
        return int(Path(f"/sys/class/net/{intf}/statistics/tx_bytes").read_text())
    except OSError:
        return 0


@dataclass
class Verdict:
    faithful: bool
    reason: str
    ovs_cpu_p95: float
    idle_p5: float
    busiest_link: str = ""
    busiest_utilisation: float = 0.0
    samples: int = 0
    links: dict[str, float] = field(default_factory=dict)
    #: packets ovs-vswitchd dropped silently on send (exact), and on receive (kernel-exact)
    datapath_drops: int = 0
    datapath_rx_drops: int = 0
    #: the details: per-port worst, tc's own drops, logged failed sends, inexact ports
    datapath: dict = field(default_factory=dict)
    #: host -> [TCP segments retransmitted, segments sent] over the run
    retrans: dict[str, list[int]] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return self.__dict__.copy()


class Monitor:
    """Samples in a thread between start() and stop(); stop() returns the Verdict."""

    def __init__(self, net: Network, interval_s: float = WINDOW_S) -> None:
        self.net = net
        self.interval_s = interval_s
        # switch-side ends are in the root namespace, so /sys shows them; their tx is the
        # traffic entering the cable from the switch, shaped at the cable's rate
        self.intfs = {ln.intf(end): ln.mbps for ln in net.links for end in (ln.a, ln.b) if not net.nodes[end].is_host}
        self.ovs = _ovs_process()
        self.bridges = [s.name for s in net.switches()]
        self.hosts = _host_pids(net)
        self.drops: datapath.Drops | None = None
        self.send_buffer: int | None = None  # bytes of ovs-vswitchd's send socket at the end
        self.retrans: dict[str, list[int]] = {}
        self._counters0: datapath.Snapshot | None = None
        self._tcp0: dict[str, tuple[int, int]] = {}
        # (time, machine idle share, ovs-vswitchd share of a core, {intf: Mbit/s}) per window
        self.samples: list[tuple[float, float, float, dict[str, float]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Monitor:
        self._counters0 = datapath.Snapshot.take(self.bridges)
        self._tcp0 = {h: tcp_segments(pid) for h, pid in self.hosts.items()}
        self._thread.start()
        return self

    def _count_drops(self) -> None:
        """Datapath drops and TCP retransmissions since start() (once, at stop)."""
        if self._counters0 is None or self.drops is not None:
            return
        self.drops = datapath.compare(self._counters0, datapath.Snapshot.take(self.bridges))
        sock = datapath.send_socket()
        self.send_buffer = sock.sndbuf if sock else None
        for h, pid in self.hosts.items():
            r, o = tcp_segments(pid)
            r0, o0 = self._tcp0.get(h, (0, 0))
            if o > o0:
                self.retrans[h] = [r - r0, o - o0]

    def _run(self) -> None:
        psutil.cpu_times_percent(None)
        if self.ovs:
            self.ovs.cpu_percent(None)
        last = {i: _tx_bytes(i) for i in self.intfs}
        t_last = time.monotonic()
        while not self._stop.wait(self.interval_s):
            now = time.monotonic()
            dt = now - t_last
            idle = psutil.cpu_times_percent(None).idle / 100.0
            cpu = 0.0
            if self.ovs:
                try:
                    cpu = self.ovs.cpu_percent(None) / 100.0
                except psutil.Error:
                    self.ovs = None
            rates = {}
            for i in self.intfs:
                b = _tx_bytes(i)
                rates[i] = (b - last[i]) * 8 / dt / 1e6
                last[i] = b
            self.samples.append((time.time(), idle, cpu, rates))
            t_last = now

    def stop(self, since: float | None = None) -> Verdict:
        """End sampling; judge the windows after `since` (unix time), e.g. the first measured step."""
        self._stop.set()
        self._thread.join(timeout=5)
        self._count_drops()
        return self.verdict(since)

    def verdict(self, since: float | None = None) -> Verdict:
        windows = [w for w in self.samples if since is None or w[0] >= since] or self.samples
        cpu = sorted(w[2] for w in windows) or [0.0]
        idle = sorted(w[1] for w in windows) or [1.0]
        ovs_p95 = cpu[int(0.95 * (len(cpu) - 1))]
        idle_p5 = idle[int(0.05 * (len(idle) - 1))]
        peak = {i: max((w[3][i] for w in windows), default=0.0) for i in self.intfs}
        util = {i: peak[i] / rate for i, rate in self.intfs.items() if peak[i] > 0.05 * rate}
        busiest = max(util, key=util.get) if util else ""
        starved = []
        if ovs_p95 > OVS_CPU_LIMIT:
            starved.append(f"ovs-vswitchd at {ovs_p95:.0%} of a core")
        if idle_p5 < IDLE_LIMIT:
            starved.append(f"machine idle down to {idle_p5:.0%}")
        peak_util = util.get(busiest, 0.0)
        reasons = []
        if starved and peak_util < LINK_FULL:
            reasons.append(
                f"{' and '.join(starved)} while the busiest link peaked at {peak_util:.0%} of its rate "
                f"(< {LINK_FULL:.0%}): the emulator set the pace"
            )
        drops = self.drops
        sent_drops = drops.silent if drops else 0
        rx_drops = drops.received_dropped if drops else 0
        retrans = sum(r for r, _ in self.retrans.values())
        segs = sum(o for _, o in self.retrans.values())
        tcp = f"TCP retransmitted {retrans} of {segs} segments ({retrans / segs:.2%})" if segs else ""
        if sent_drops or rx_drops:
            worst = ", ".join(f"{i} {n}" for i, n in drops.worst(3).items())
            reasons.append(
                f"ovs-vswitchd dropped {sent_drops + rx_drops} packets silently "
                f"({sent_drops} on send{f': {worst}' if worst else ''}; {rx_drops} on receive)"
                + (f"; {tcp}" if tcp else "")
                + (": its send buffer is too small (testbed doctor)" if sent_drops else "")
            )
        detail = f"ovs-vswitchd p95 {ovs_p95:.0%} of a core, idle p5 {idle_p5:.0%}" + (
            f", busiest link {busiest} peaked at {peak_util:.0%} of its rate" if busiest else ", no link was busy"
        )
        if drops is not None:
            detail += ", no datapath drops" + (f", {tcp}" if tcp else "")
        top = dict(sorted(util.items(), key=lambda kv: -kv[1])[:10])
        return Verdict(
            not reasons,
            "; ".join(reasons) or detail,
            ovs_p95,
            idle_p5,
            busiest,
            util.get(busiest, 0.0),
            len(windows),
            {k: round(v, 3) for k, v in top.items()},
            sent_drops,
            rx_drops,
            (drops.as_dict() | {"send_buffer": self.send_buffer}) if drops else {},
            dict(self.retrans),
        )
