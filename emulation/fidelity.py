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
Beside them, each host's TCP retransmissions over the run (/proc/PID/net/snmp of its shell), and
how many of them TCP's timer sent and how many reached a receiver twice (/proc/PID/net/netstat:
TCPTimeouts, TCPDSACKRecv). Many timeouts with duplicates and no drops are spurious ones: a queue
held a segment longer than the RTO floor (emulation.rto); the verdict names them, not judges them.

The busiest 1-s window alone under-reads short transfers (a ResNet50 push is shorter than a
window) and over-reads a run that hit its rate once and crawled otherwise. So the monitor also
samples the transfer phases (emulation.phases: 0.25-s windows in which some link moved bytes)
and, where it has them, the link side of the verdict is their bottleneck utilisation: over each
phase's interior windows, the most any one link carried as a share of its rate, averaged over
the phases by duration. That must reach PHASE_FULL for a starved machine's run to be faithful.

Where servers relay (BCube, Torus) the emulated network can lose time with none of these signs: a
plain-TCP all-to-all ends later the higher the rate, with the machine idle and nothing dropped.
`scripts/bench_alltoall.sh` measures up to which rate per cable it does not (emulation.relaying);
a job whose traffic a server relays above that rate is not faithful.

The verdict is a pure function of its inputs (`judge(FidelityInputs)`): the monitor only samples
(emulation.sampler, emulation.phases), counts the drops once at the end, and condenses all of it
into those inputs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from emulation import datapath
from emulation.phases import Phase, TrafficSampler, Window, phases
from emulation.relaying import RelayLoad
from emulation.sampler import Sample, Sampler, after
from topologies.model import Network

#: ovs-vswitchd above this share of one core: it may be what limits the traffic
OVS_CPU_LIMIT = 0.90
#: below this machine-wide idle share, TF processes and the datapath compete for the CPU
IDLE_LIMIT = 0.05
#: a busiest link that peaked at or above this share of its rate was carried faithfully
LINK_FULL = 0.90
#: a sample window (s); the busiest-window rate of a link is taken over this
WINDOW_S = 1.0
#: a link counts as used when its busiest window reached this share of its rate
LINK_USED = 0.05
#: the transfer phases' bottleneck utilisation (duration-weighted mean over their interior
#: windows) at or above this: the network, not the emulator, paced the transfers. Lower than
#: LINK_FULL because a mean, unlike a peak, includes TCP's ramp and the W flows' staggered ends.
PHASE_FULL = 0.75


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
    #: host -> [TCP segments retransmitted, segments sent, timeouts, duplicates received] over the run
    retrans: dict[str, list[int]] = field(default_factory=dict)
    #: transfer phases judged (long enough to have interior windows), their seconds, and their
    #: duration-weighted bottleneck utilisation (None: no phase sampled, the peak rule judged)
    transfer_phases: int = 0
    transfer_s: float = 0.0
    transfer_util: float | None = None
    #: the job's relaying servers against the kind's measured ceiling (emulation.relaying; "": none relay)
    relay: str = ""
    #: the datapath carried GSO packets whole (userspace TSO, emulation.tso)
    tso: bool = False

    def as_dict(self) -> dict:
        return self.__dict__.copy()


@dataclass(frozen=True)
class FidelityInputs:
    """What the verdict is judged on, per sample window of the run's measured part."""

    ovs_cpu: Sequence[float]  # ovs-vswitchd's share of one core
    idle: Sequence[float]  # the machine's idle share
    peak_mbps: Mapping[str, float]  # per switch-side interface: its busiest window's rate
    rate_mbps: Mapping[str, float]  # per switch-side interface: its configured (emulated) rate
    drops: datapath.Drops | None = None  # ovs-vswitchd's silent losses over the run (None: not counted)
    #: host -> [retransmitted, sent, timeouts, duplicates received] (tcp_counts)
    retrans: Mapping[str, Sequence[int]] = field(default_factory=dict)
    send_buffer: int | None = None  # bytes of ovs-vswitchd's send socket at the end
    phases: Sequence[Phase] | None = None  # the transfer phases (None: not sampled; the peak rule judges)
    #: every task of the job shares one host (colocate_ps): its traffic never crosses an emulated link
    loopback_only: bool = False
    #: servers relay the job's traffic (BCube, Torus): their cables' rate against the kind's ceiling
    relay: RelayLoad | None = None

    @classmethod
    def from_samples(
        cls, samples: Sequence[Sample], rate_mbps: Mapping[str, float], **counted: object
    ) -> FidelityInputs:
        """Condense sampler windows (ovs-vswitchd not running counts as 0% of a core)."""
        return cls(
            ovs_cpu=[s.ovs_cpu or 0.0 for s in samples],
            idle=[s.idle for s in samples],
            peak_mbps={i: max((s.rate_mbps(i) for s in samples), default=0.0) for i in rate_mbps},
            rate_mbps=dict(rate_mbps),
            **counted,  # type: ignore[arg-type]
        )


def transfer_utilisation(ps: Sequence[Phase]) -> tuple[int, float, float | None]:
    """(phases judged, their seconds, their duration-weighted bottleneck utilisation or None)."""
    judged = [p for p in ps if p.judged]
    secs = sum(p.duration_s for p in judged)
    if not judged or secs <= 0:
        return 0, 0.0, None
    return len(judged), secs, sum(p.util * p.duration_s for p in judged) / secs


def judge(inputs: FidelityInputs) -> Verdict:
    """Faithful unless the machine was starved (ovs-vswitchd p95 over OVS_CPU_LIMIT of a core, or
    idle p5 under IDLE_LIMIT) while the links did not carry their rate: with transfer phases,
    their bottleneck utilisation under PHASE_FULL (the busiest window alone does not decide);
    without, the busiest link's busiest window under LINK_FULL. A job on one host's loopback
    (`loopback_only`) is judged on datapath drops alone: no emulated link carried it. Where servers
    relay the job's traffic above the rate at which this machine carried an all-to-all on that
    kind faithfully (`relay`, emulation.relaying), the run is not faithful either: the loss it
    measured there shows in none of the other signs."""
    cpu = sorted(inputs.ovs_cpu) or [0.0]
    idle = sorted(inputs.idle) or [1.0]
    ovs_p95 = cpu[int(0.95 * (len(cpu) - 1))]
    idle_p5 = idle[int(0.05 * (len(idle) - 1))]
    peak = inputs.peak_mbps
    util = {i: peak.get(i, 0.0) / rate for i, rate in inputs.rate_mbps.items() if peak.get(i, 0.0) > LINK_USED * rate}
    busiest = max(util, key=util.get) if util else ""  # type: ignore[arg-type]
    starved = []
    if ovs_p95 > OVS_CPU_LIMIT:
        starved.append(f"ovs-vswitchd at {ovs_p95:.0%} of a core")
    if idle_p5 < IDLE_LIMIT:
        starved.append(f"machine idle down to {idle_p5:.0%}")
    peak_util = util.get(busiest, 0.0)
    n_phases, phase_s, phase_util = transfer_utilisation(inputs.phases or [])
    in_phases = (
        f"its {n_phases} transfer phases ({phase_s:.0f} s) kept the busiest link at {phase_util:.0%} of its rate "
        "on average"
        if phase_util is not None
        else ""
    )
    reasons = []
    if inputs.loopback_only:  # no emulated link can have set the pace: a busy CPU is the job's own
        starved = []
    if starved and phase_util is not None and phase_util < PHASE_FULL:
        reasons.append(f"{' and '.join(starved)} while {in_phases} (< {PHASE_FULL:.0%}): the emulator set the pace")
    elif starved and phase_util is None and peak_util < LINK_FULL:
        reasons.append(
            f"{' and '.join(starved)} while the busiest link peaked at {peak_util:.0%} of its rate "
            f"(< {LINK_FULL:.0%}): the emulator set the pace"
        )
    if inputs.relay is not None and inputs.relay.over and not inputs.loopback_only:
        reasons.append(inputs.relay.text)
    drops = inputs.drops
    sent_drops = drops.hidden if drops else 0  # a full queue's batch tails are tail drops in effect
    rx_drops = drops.received_dropped if drops else 0
    tcp = tcp_text(inputs.retrans.values())
    if drops and (sent_drops or rx_drops):
        worst = ", ".join(f"{i} {n}" for i, n in drops.worst(3, hidden=True).items())
        reasons.append(
            f"ovs-vswitchd dropped {sent_drops + rx_drops} packets silently "
            f"({sent_drops} on send{f': {worst}' if worst else ''}; {rx_drops} on receive)"
            + (f"; {tcp}" if tcp else "")
            + (": its send buffer is too small (testbed doctor)" if sent_drops else "")
        )
    detail = f"ovs-vswitchd p95 {ovs_p95:.0%} of a core, idle p5 {idle_p5:.0%}" + (
        f", busiest link {busiest} peaked at {peak_util:.0%} of its rate" if busiest else ", no link was busy"
    )
    if in_phases:
        detail += f", {in_phases}"
    if inputs.loopback_only:
        detail = "colocate_ps: worker and PS talk over one host's loopback, no emulated link paces them; " + detail
    if drops is not None:
        tails = (
            f" ({drops.batch_tails} packets freed with the rest of a send batch at a full queue: tail drops in effect)"
            if drops.batch_tails
            else ""
        )
        detail += f", no datapath drops{tails}" + (f", {tcp}" if tcp else "")
    top = dict(sorted(util.items(), key=lambda kv: -kv[1])[:10])
    return Verdict(
        not reasons,
        "; ".join(reasons) or detail,
        ovs_p95,
        idle_p5,
        busiest,
        peak_util,
        len(inputs.idle),
        {k: round(v, 3) for k, v in top.items()},
        sent_drops,
        rx_drops,
        (drops.as_dict() | {"send_buffer": inputs.send_buffer}) if drops else {},
        {h: list(v) for h, v in inputs.retrans.items()},
        n_phases,
        round(phase_s, 3),
        None if phase_util is None else round(phase_util, 3),
        inputs.relay.text if inputs.relay is not None else "",
    )


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


#: the counters tcp_counts reads: (line prefix, name) in /proc/net/snmp (Tcp:) and netstat (TcpExt:)
TCP_COUNTERS = (("Tcp:", "RetransSegs"), ("Tcp:", "OutSegs"), ("TcpExt:", "TCPTimeouts"), ("TcpExt:", "TCPDSACKRecv"))


def tcp_text(counts: Iterable[Sequence[int]]) -> str:
    """The verdict's TCP clause over hosts' tcp_counts differences ("" when nothing was sent)."""
    rows = list(counts)
    retrans, segs = sum(v[0] for v in rows), sum(v[1] for v in rows)
    if not segs:
        return ""
    timers, dups = sum(v[2] for v in rows), sum(v[3] for v in rows)
    share = f"{retrans / segs:.2%}; {timers} timeouts, {dups} duplicates received"
    return f"TCP retransmitted {retrans} of {segs} segments ({share})"


def namespace_counts(pid: int) -> tuple[int, ...]:
    """tcp_counts of the network namespace of process `pid`; zeros if it is gone."""
    try:
        return tcp_counts(Path(f"/proc/{pid}/net/snmp").read_text() + Path(f"/proc/{pid}/net/netstat").read_text())
    except OSError:
        return (0,) * len(TCP_COUNTERS)


def tcp_counts(text: str) -> tuple[int, ...]:
    """(RetransSegs, OutSegs, TCPTimeouts, TCPDSACKRecv) from /proc/net/snmp's text followed by
    /proc/net/netstat's (either may be missing: its counters read 0). Each file has a header line
    and a value line per prefix."""
    rows: dict[str, dict[str, str]] = {}
    for prefix in {p for p, _ in TCP_COUNTERS}:
        lines = [ln.split() for ln in text.splitlines() if ln.startswith(prefix + " ")]
        if len(lines) >= 2 and len(lines[0]) == len(lines[1]):
            rows[prefix] = dict(zip(lines[0], lines[1], strict=True))
    out = []
    for prefix, name in TCP_COUNTERS:
        try:
            out.append(int(rows.get(prefix, {}).get(name, 0)))
        except ValueError:
            out.append(0)
    return tuple(out)


class Monitor:
    """Samples in a thread between start() and stop(); stop() returns the Verdict."""

    def __init__(
        self, net: Network, interval_s: float = WINDOW_S, relay: RelayLoad | None = None, tso: bool = False
    ) -> None:
        """`relay`: the job's relaying servers (emulation.relaying.relay_load), judged with the run;
        `tso`: the testbed runs with userspace TSO (the verdict says so)."""
        self.net = net
        self.relay = relay
        self.tso = tso
        # switch-side ends are in the root namespace, so /sys shows them; their tx is the
        # traffic entering the cable from the switch, shaped at the cable's rate
        # (patch cables have none: their traffic is bounded, and counted, by a shaped cable beside them)
        self.intfs = {
            ln.intf(end): ln.mbps for ln in net.veth_links() for end in (ln.a, ln.b) if not net.nodes[end].is_host
        }
        self.sampler = Sampler(interval_s, intfs=self.intfs, mtu=net.spec.mtu)
        self.traffic = TrafficSampler(self.intfs, mtu=net.spec.mtu)
        self.bridges = [s.name for s in net.switches()]
        self.hosts = _host_pids(net)
        self.drops: datapath.Drops | None = None
        self.send_buffer: int | None = None
        self.retrans: dict[str, list[int]] = {}
        self._counters0: datapath.Snapshot | None = None
        self._tcp0: dict[str, tuple[int, ...]] = {}

    @property
    def samples(self) -> list[Sample]:
        return self.sampler.samples

    def start(self) -> Monitor:
        self._counters0 = datapath.Snapshot.take(self.bridges)
        self._tcp0 = {h: namespace_counts(pid) for h, pid in self.hosts.items()}
        self.sampler.start()
        self.traffic.start()
        return self

    @property
    def windows(self) -> list[Window]:
        """The transfer-phase sampler's windows so far (read while the run goes on, e.g. for stalls)."""
        return self.traffic.windows

    def _count_drops(self) -> None:
        """Datapath drops and TCP retransmissions since start() (once, at stop)."""
        if self._counters0 is None or self.drops is not None:
            return
        self.drops = datapath.compare(self._counters0, datapath.Snapshot.take(self.bridges))
        sock = datapath.send_socket()
        self.send_buffer = sock.sndbuf if sock else None
        for h, pid in self.hosts.items():
            now, then = namespace_counts(pid), self._tcp0.get(h, (0,) * len(TCP_COUNTERS))
            if now[1] > then[1]:
                self.retrans[h] = [a - b for a, b in zip(now, then, strict=True)]

    def stop(self, since: float | None = None, loopback_only: bool = False) -> Verdict:
        """End sampling; judge the windows after `since` (unix time), e.g. the first measured step;
        `loopback_only`: the job never crossed an emulated link (FidelityInputs.loopback_only)."""
        self.sampler.stop()
        self.traffic.stop()
        self._count_drops()
        return self.verdict(since, loopback_only)

    def verdict(self, since: float | None = None, loopback_only: bool = False, until: float | None = None) -> Verdict:
        """Judge the windows between `since` and `until` (unix times; None: open-ended), e.g. one
        round of a job that runs a point's repetitions as rounds. Datapath drops and TCP
        retransmissions are counted over the whole run (start() to stop()), whatever the span."""
        counted = {"drops": self.drops, "retrans": self.retrans, "send_buffer": self.send_buffer}
        counted["loopback_only"] = loopback_only
        counted["relay"] = self.relay
        windows = [w for w in self.windows if (since is None or w.t >= since) and (until is None or w.t <= until)]
        windows = windows or self.windows
        counted["phases"] = phases(windows) if windows else None
        v = judge(FidelityInputs.from_samples(after(self.samples, since, until), self.intfs, **counted))
        v.tso = self.tso
        return v
