"""Packets ovs-vswitchd loses inside itself, counted exactly, and the send buffer that stops it.

Why this exists: the userspace datapath sends on every `system` port (all our switch-side veths)
through one AF_PACKET socket. A packet waiting in a switch-side HTB queue is charged to that
socket's send buffer (`net.core.wmem_default`, 208 KB by default: ~90 full-size frames for all
queues together). When the buffer is full, sendmmsg() fails with EAGAIN and ovs-vswitchd drops
the packet *and the rest of its batch* (lib/netdev-linux.c, netdev_linux_sock_batch_send: it
breaks out of the loop and frees the batch). A tc tail drop (ENOBUFS) ends a batch the same way,
without a log line: those batch tails met a full queue and are tail drops in effect, so the
verdict (emulation.fidelity) counts against a run only the silent drops that no tail drop on the
same port explains (`PortLoss.hidden`: at most SEND_BATCH - 1 tails per counted tail drop; Fig.
13's FatTree r=2 and r=5 VGG-16 points lost 168-347 so, on the aggregation ports into the PSs'
edge switch: 198 of them beside 1,350 tc tail drops on one r=5 run, and they stayed with a
90 MiB send buffer). TCP repairs both, so the only symptom is retransmissions and lost
throughput.

Which count is exact (measured on OVS 3.1.0 here, 2- and 6-flow runs through two switch-side
HTB queues; OVS's own code checked in lib/netdev-linux.c, lib/netdev.c, lib/dpif-netdev.c):

- `ovs-appctl coverage/show`: no counter for failed sends. `netdev_sent` counts successful
  send *calls* (batches) only; `datapath_drop_*` counters cover other causes.
- Interface statistics (`ovs-vsctl get interface X statistics`, /sys tx_dropped): 0. netdev-linux
  raises tx_dropped only for tap devices that are down; the kernel never saw the packet.
- tc: counts the pfifo's own tail drops only, not the socket's.
- The log (`netdev_linux|WARN|error sending Ethernet packet on X: Resource temporarily
  unavailable`): one line per failed send *call*, rate-limited to 5 a minute (the suppressed
  number appears later in a "Dropped N log messages" line, if ever). With the rate limit off it
  still counted 15 calls for 45 lost packets and 162 calls for 810: a lower bound only.
- Exact: conservation at each switch-side port. Every packet an OpenFlow rule outputs to a port
  either left it (the interface's transmitted packets), still waits in its queue (`backlog`), or
  was lost at the egress. So lost = rule packets - sent - backlog, exactly, and lost - tc drops
  = what ovs-vswitchd dropped silently. (The interface's count, not the qdisc's: a qdisc counts a
  GSO packet that came with a virtio-net header, as userspace TSO sends them, as 0 packets.)
  Conditions: counters read when traffic has stopped (the reading order below biases towards
  zero while it flows), nothing else transmits on the port (the testbed turns IPv6 off on
  switch-side ports: otherwise the kernel's own router solicitations and MLD reports count as
  sent), and the port's rules were not re-installed during the window (a replaced rule's
  counter restarts; such ports, and ports whose carrier changed (failed cables), are reported
  but marked inexact and not flagged).

Receive side: each port's own AF_PACKET receive socket drops what ovs-vswitchd does not read in
time (a CPU-starved datapath); the kernel counts those exactly (`ss -0 -m`, skmem `d`). The
socket is made when the port is added and takes net.core.rmem_default: scripts/setup.sh raises
it to 8 MiB, which took a scheme's 8-host mesh incast on leafspine-2rack from 2,373 receive drops
to none.
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from emulation.sampler import tx_counters
from emulation.wire import ETH_HEADER
from topologies.spec import DEFAULT_MTU

LOG = logging.getLogger(__name__)

#: the send buffer the datapath's socket should have: room for about 14 full switch-side
#: queues of 1000 frames (a 1514-byte frame is charged ~2.3 kB); the 6-flow benchmark peaked at
#: a few hundred kB, one fully queued PS NIC takes ~2.3 MB
WANT_SNDBUF = 32 * 1024 * 1024
#: what it should have at least: below this a single full queue can overflow it
MIN_SNDBUF = 4 * 1024 * 1024
#: packets ovs-vswitchd hands the kernel per send call at most (OVS's NETDEV_MAX_BURST)
SEND_BATCH = 32
#: the most a testbed asks for (the kernel holds a socket's buffer in an int, doubled)
MAX_SNDBUF = 1 << 30
#: what the kernel charges a queued frame beyond its bytes: sk_buff and skb_shared_info, headroom
SKB_OVERHEAD = 384


def frame_charge_bytes(mtu: int = DEFAULT_MTU) -> int:
    """Bytes a queued frame of `mtu` costs the socket's buffer: its data rounded up to the
    allocator's power of two, plus the sk_buff (2,304 at 1500, the ~2.3 kB measured)."""
    return (1 << (mtu + ETH_HEADER + SKB_OVERHEAD - 1).bit_length()) + 256


def sndbuf_for(queues: int, queue_pkts: int, mtu: int = DEFAULT_MTU) -> int:
    """A send buffer with room for `queues` switch-side queues all full at once (at least
    WANT_SNDBUF, at most MAX_SNDBUF): the socket can then never be what drops a packet. 32 MiB
    holds ~14 full queues at MTU 1500, fewer than many networks here have (a precaution: the
    silent drops Fig. 13's FatTree points showed were batch tails, PortLoss.batch_tails)."""
    return max(WANT_SNDBUF, min(MAX_SNDBUF, queues * queue_pkts * frame_charge_bytes(mtu)))


OVS_LOG = Path("/var/log/openvswitch/ovs-vswitchd.log")

_SEND_ERR = re.compile(r"netdev_linux.*error sending Ethernet packet on (\S+): (.*)$")
_SUPPRESSED = re.compile(r"netdev_linux.*Dropped (\d+) log messages")
_RULE = re.compile(r"duration=([\d.]+)s.*n_packets=(\d+).*?(priority=\S*?)\s+actions=output:(\d+)$")


def _out(*argv: str) -> str:
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, check=False, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired) as err:
        LOG.warning("%s: %s", argv[0], err)
        return ""


# --- the send socket ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SendSocket:
    """ovs-vswitchd's AF_PACKET send socket, as `ss -0 -m -p` shows it."""

    pid: int
    fd: int
    sndbuf: int  # bytes it may hold (skmem tb)
    queued: int  # bytes charged to it now (skmem t)


def packet_sockets() -> list[tuple[str, int, int, dict[str, int]]]:
    """(local address, pid, fd, skmem fields) of every ovs-vswitchd packet socket.

    The send socket is the one bound to no interface (`[0]:*`: protocol 0, receives nothing);
    each port's receive socket shows `*:<interface>`.
    """
    out = []
    for line in _out("ss", "-0", "-m", "-p", "-n").splitlines():
        if '"ovs-vswitchd"' not in line:
            continue
        fields = line.split()
        pid = re.search(r"pid=(\d+),fd=(\d+)", line)
        mem = re.search(r"skmem:\(([^)]*)\)", line)
        if len(fields) < 5 or not pid or not mem:
            continue
        skmem = {m.group(1): int(m.group(2)) for m in re.finditer(r"([a-z]+)(\d+)", mem.group(1))}
        out.append((fields[3], int(pid.group(1)), int(pid.group(2)), skmem))
    return out


def send_socket() -> SendSocket | None:
    """The datapath's send socket, None if ovs-vswitchd has not created it yet (it does so on the
    first packet it sends; it then takes `net.core.wmem_default` as its buffer)."""
    for addr, pid, fd, mem in packet_sockets():
        if addr == "[0]:*":
            return SendSocket(pid, fd, mem.get("tb", 0), mem.get("t", 0))
    return None


def wmem_default() -> int:
    return int(Path("/proc/sys/net/core/wmem_default").read_text())


_SYS_PIDFD_GETFD = 438  # x86-64 and arm64 (Linux >= 5.6)
_SO_SNDBUFFORCE = 32


def force_send_buffer(size: int = WANT_SNDBUF) -> int:
    """Give the running daemon's send socket `size` bytes of buffer in place; returns what it has.

    No restart and nothing lost: a copy of the daemon's descriptor (pidfd_getfd) takes
    SO_SNDBUFFORCE (root may exceed wmem_max), which acts on the one socket both share. Raises
    OSError when that is impossible (older kernel, no ptrace rights) and LookupError when the
    socket does not exist yet (it then takes net.core.wmem_default when it is made).
    """
    sock = send_socket()
    if sock is None:
        raise LookupError("ovs-vswitchd has no send socket yet")
    libc = ctypes.CDLL(None, use_errno=True)
    pidfd = os.pidfd_open(sock.pid)
    try:
        fd = libc.syscall(_SYS_PIDFD_GETFD, pidfd, sock.fd, 0)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"pidfd_getfd on ovs-vswitchd: {os.strerror(err)}")
        with socket.socket(fileno=fd) as s:
            s.setsockopt(socket.SOL_SOCKET, _SO_SNDBUFFORCE, size // 2)  # the kernel doubles it
            return s.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    finally:
        os.close(pidfd)


def receive_drops() -> dict[str, int]:
    """Packets each port's receive socket dropped since the port was added (kernel-exact)."""
    return {addr.split(":", 1)[1]: mem.get("d", 0) for addr, _, _, mem in packet_sockets() if addr.startswith("*:")}


# --- exact egress accounting -----------------------------------------------------------------
@dataclass(frozen=True)
class Rule:
    bridge: str
    key: str  # priority and match: a rule re-installed with the same key restarts its counter
    out_port: int
    packets: int
    age_s: float


def rules(bridges: list[str]) -> list[Rule]:
    """Every single-output rule of the bridges with its packet counter, current to now (the
    userspace datapath credits rules only when a revalidator runs: wait for one round). ECMP's
    buckets are such rules (controller.ofctl); select-group buckets, if a bridge has any, count
    as rules too (a bucket outputs to one port)."""
    _out("ovs-appctl", "revalidator/wait")
    out = []
    for br in bridges:
        for line in _out("ovs-ofctl", "-O", "OpenFlow13", "dump-flows", br).splitlines():
            m = _RULE.search(line.strip())
            if m:
                out.append(Rule(br, m.group(3), int(m.group(4)), int(m.group(2)), float(m.group(1))))
        out += group_buckets(
            br,
            _out("ovs-ofctl", "-O", "OpenFlow13", "dump-groups", br),
            _out("ovs-ofctl", "-O", "OpenFlow13", "dump-group-stats", br),
        )
    return out


def group_buckets(bridge: str, desc: str, stats: str) -> list[Rule]:
    """Buckets of `dump-groups` that output to one port, with their `dump-group-stats` packets."""
    ports: dict[tuple[str, int], int] = {}
    for gid, body in re.findall(r"group_id=(\d+),type=select,(\S+)", desc):
        for i, bucket in enumerate(body.split("bucket=")[1:]):
            m = re.search(r"actions=output:(\d+),?$", bucket)
            if m:
                ports[(gid, i)] = int(m.group(1))
    out = []
    for gid, age, body in re.findall(r"group_id=(\d+),duration=([\d.]+)s,\S*?((?:bucket\d+:\S+)+)", stats):
        for i, n in re.findall(r"bucket(\d+):packet_count=(\d+)", body):
            if (gid, int(i)) in ports:
                out.append(Rule(bridge, f"group={gid},bucket={i}", ports[(gid, int(i))], int(n), float(age)))
    return out


def ofports(bridges: list[str]) -> dict[tuple[str, int], str]:
    """(bridge, OpenFlow port number) -> interface name."""
    out = {}
    for br in bridges:
        for line in _out("ovs-ofctl", "-O", "OpenFlow13", "show", br).splitlines():
            m = re.match(r"\s*(\d+)\((\S+)\):", line)
            if m:
                out[(br, int(m.group(1)))] = m.group(2)
    return out


def qdiscs() -> dict[str, tuple[int, int, int]]:
    """Interface -> (sent packets, dropped packets, backlog packets) of its root qdisc, for every
    interface of the root namespace (one `tc` call; the root HTB sums its leaf's drops)."""
    out = {}
    for block in re.split(r"\n(?=qdisc )", _out("tc", "-s", "qdisc", "show")):
        head = re.match(r"qdisc \S+ \S+ dev (\S+) root", block)
        sent = re.search(r"Sent \d+ bytes (\d+) pkt \(dropped (\d+)", block)
        backlog = re.search(r"backlog \S+ (\d+)p", block)
        if head and sent:
            out[head.group(1)] = (int(sent.group(1)), int(sent.group(2)), int(backlog.group(1)) if backlog else 0)
    return out


def carrier_changes(intf: str) -> int:
    try:
        return int(Path(f"/sys/class/net/{intf}/carrier_changes").read_text())
    except (OSError, ValueError):
        return -1


@dataclass
class Snapshot:
    """Counters of every switch-side port at one moment (see `take`)."""

    time_s: float
    rules: list[Rule]
    ports: dict[tuple[str, int], str]
    qdiscs: dict[str, tuple[int, int, int]]  # interface -> (packets sent by it, its qdisc's drops, backlog)
    carrier: dict[str, int]
    rx_drops: dict[str, int]
    log_offset: int

    @staticmethod
    def take(bridges: list[str]) -> Snapshot:
        """Rules first, then qdiscs: a packet in flight between the two readings makes `sent`
        larger, never smaller, so a snapshot during traffic errs towards no loss."""
        t = time.monotonic()
        rs = rules(bridges)
        ports = ofports(bridges)
        names = sorted(set(ports.values()))
        tc = qdiscs()
        sent = {i: tx_counters(i)[1] for i in names if i in tc}  # after the backlog: errs towards no loss
        try:
            offset = OVS_LOG.stat().st_size
        except OSError:
            offset = 0
        return Snapshot(
            t,
            rs,
            ports,
            {i: (sent[i], tc[i][1], tc[i][2]) for i in names if i in tc},
            {i: carrier_changes(i) for i in names},
            receive_drops(),
            offset,
        )


@dataclass(frozen=True)
class PortLoss:
    intf: str
    attempted: int  # packets ovs-vswitchd's rules sent out of this port
    sent: int  # packets that left by the veth (its interface's count)
    backlog_change: int
    tc_dropped: int  # the qdisc's own tail drops
    exact: bool  # rules unchanged and carrier stable over the window

    @property
    def lost(self) -> int:
        """Every packet lost at this egress: tc tail drops and ovs-vswitchd's silent ones."""
        return self.attempted - self.sent - self.backlog_change

    @property
    def silent(self) -> int:
        """Packets ovs-vswitchd dropped that no counter shows (>= 0)."""
        return max(0, self.lost - self.tc_dropped)

    @property
    def batch_tails(self) -> int:
        """Silent drops a full queue explains: when the queue tail-drops one packet of a send batch,
        the kernel answers ENOBUFS, ovs-vswitchd (netdev_linux_sock_batch_send) stops there and
        frees the rest of the batch without a log line (netdev_linux_send turns ENOBUFS into a
        silent EAGAIN). They met the same full queue microseconds later: tail drops in effect, up
        to SEND_BATCH - 1 per counted tail drop."""
        return min(self.silent, (SEND_BATCH - 1) * self.tc_dropped)

    @property
    def hidden(self) -> int:
        """Silent drops no full queue explains: the datapath's own losses (a full send socket)."""
        return self.silent - self.batch_tails


@dataclass
class Drops:
    """What the datapath lost between two snapshots."""

    ports: list[PortLoss]
    rx_dropped: dict[str, int] = field(default_factory=dict)
    send_errors: dict[str, int] = field(default_factory=dict)  # log lines (failed send calls) by error

    @property
    def silent(self) -> int:
        """Exact: packets ovs-vswitchd dropped on send, on ports whose count is exact."""
        return sum(p.silent for p in self.ports if p.exact)

    @property
    def silent_inexact(self) -> int:
        return sum(p.silent for p in self.ports if not p.exact)

    @property
    def batch_tails(self) -> int:
        """Exact: silent drops that were the rest of a send batch at a full queue (PortLoss)."""
        return sum(p.batch_tails for p in self.ports if p.exact)

    @property
    def hidden(self) -> int:
        """Exact: silent drops no full queue explains (what makes a run unfaithful)."""
        return sum(p.hidden for p in self.ports if p.exact)

    @property
    def tc_dropped(self) -> int:
        return sum(p.tc_dropped for p in self.ports)

    @property
    def received_dropped(self) -> int:
        return sum(self.rx_dropped.values())

    def worst(self, n: int = 5, hidden: bool = False) -> dict[str, int]:
        """Ports with the most silent drops (`hidden`: counting only those no full queue explains)."""
        lost = {p.intf: (p.hidden if hidden else p.silent) for p in self.ports if p.exact}
        lost = {i: x for i, x in lost.items() if x > 0}
        return dict(sorted(lost.items(), key=lambda kv: -kv[1])[:n])

    def as_dict(self) -> dict:
        return {
            "silent": self.silent,
            "batch_tails": self.batch_tails,
            "hidden": self.hidden,
            "silent_inexact": self.silent_inexact,
            "tc_dropped": self.tc_dropped,
            "received_dropped": self.received_dropped,
            "send_errors_logged": self.send_errors,
            "worst_ports": self.worst(),
        }


def send_errors_since(offset: int) -> dict[str, int]:
    """Failed send calls ovs-vswitchd logged since byte `offset` of its log, by error text
    (suppressed lines included where the log says how many; still a lower bound)."""
    out: dict[str, int] = {}
    try:
        with OVS_LOG.open(errors="replace") as f:
            f.seek(offset)
            for line in f:
                m = _SEND_ERR.search(line)
                if m:
                    out[m.group(2).strip()] = out.get(m.group(2).strip(), 0) + 1
                    continue
                m = _SUPPRESSED.search(line)
                if m:
                    out["(suppressed)"] = out.get("(suppressed)", 0) + int(m.group(1))
    except OSError:
        pass
    return out


def compare(before: Snapshot, after: Snapshot) -> Drops:
    """Per switch-side port: rule packets out of it, qdisc sent, backlog change, tc drops."""
    window = after.time_s - before.time_s
    old = {(r.bridge, r.key, r.out_port): r for r in before.rules}
    attempted: dict[tuple[str, int], int] = {}
    exact: dict[tuple[str, int], bool] = {}
    for r in after.rules:
        port = (r.bridge, r.out_port)
        prev = old.pop((r.bridge, r.key, r.out_port), None)
        kept = prev is not None and r.age_s >= window - 1.0 and r.packets >= prev.packets
        # a rule (re)installed in the window restarted its counter: count what it has, inexact
        attempted[port] = attempted.get(port, 0) + r.packets - (prev.packets if kept else 0)
        exact[port] = exact.get(port, True) and kept
    for r in old.values():  # deleted during the window: its last packets are unknown
        exact[(r.bridge, r.out_port)] = False
    ports = []
    for port, intf in sorted(after.ports.items()):
        if intf not in after.qdiscs or port[1] > 0xFFFFFF00:
            continue
        s0, d0, b0 = before.qdiscs.get(intf, (0, 0, 0))
        s1, d1, b1 = after.qdiscs[intf]
        same_carrier = before.carrier.get(intf) == after.carrier.get(intf)
        ports.append(
            PortLoss(
                intf,
                attempted.get(port, 0),
                s1 - s0,
                b1 - b0,
                d1 - d0,
                exact.get(port, True) and same_carrier and intf in before.qdiscs,
            )
        )
    rx = {i: after.rx_drops[i] - before.rx_drops.get(i, 0) for i in after.rx_drops if i in after.qdiscs}
    return Drops(ports, {i: n for i, n in rx.items() if n > 0}, send_errors_since(before.log_offset))


def ensure_send_buffer(size: int = WANT_SNDBUF) -> str:
    """Make the running daemon's send socket at least `size` bytes, in place; says what it did.
    (scripts/setup.sh raises net.core.wmem_default first, for sockets made later.)"""
    sock = send_socket()
    if sock is None:
        return f"ovs-vswitchd has no send socket yet; it will take net.core.wmem_default = {wmem_default()}"
    if sock.sndbuf >= size:
        return f"ovs-vswitchd's send socket has {sock.sndbuf} bytes of buffer"
    got = force_send_buffer(size)
    return f"ovs-vswitchd's send socket: {sock.sndbuf} -> {got} bytes of buffer (in place, no restart)"


def main(argv: list[str] | None = None) -> int:
    """`python -m emulation.datapath ensure`: what scripts/setup.sh runs (root)."""
    p = argparse.ArgumentParser(prog="python -m emulation.datapath", description=ensure_send_buffer.__doc__)
    p.add_argument("action", choices=["ensure", "show"])
    p.add_argument("--bytes", type=int, default=WANT_SNDBUF)
    args = p.parse_args(argv)
    try:
        if args.action == "ensure":
            print(ensure_send_buffer(args.bytes))
        else:
            print(send_socket() or "no send socket yet", f"wmem_default={wmem_default()}")
    except (OSError, LookupError) as err:
        print(f"cannot enlarge ovs-vswitchd's send socket in place: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
