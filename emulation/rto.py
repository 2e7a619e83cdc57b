"""TCP's retransmission-timeout floor in the emulated hosts (the topology file's `rto_min_ms`).

Why: rates scaled down stretch a full queue's delay by the scale (the testbed's FIFO of 1,000
full frames, 1.5 MB, drains in 3 s at 4 Mbit/s and in 12 ms at 1 Gbit/s), but Linux's RTO floor
stays 200 ms. Where an incast fills a queue at once, TCP's timers then fire on segments that are
only queued: at 64 hosts and 4 Mbit/s a plain-TCP all-to-all took 16,052 timeouts and its
receivers reported 11,763 duplicates, and its rounds took 2.0-7.0 s over two runs, against
2.3-2.6 s with the floor at the drain time (docs/measurements.md, Schemes). A real data centre's
200 ms is thousands of its queue delays, so
its timers fire on losses only. `auto` (the default) keeps that relation: each host's floor is
one full FIFO's drain time on the network's slowest shaped cable when that is above the kernel's
200 ms, and the kernel's otherwise; a number sets the floor (ms); `kernel` leaves it.

Per network namespace through net.ipv4.tcp_rto_min_us (Linux 6.11+). An older kernel has no
such sysctl: `auto` then keeps the kernel's floor (the fidelity verdict counts the timeouts and
the duplicates received either way), a number is refused in one line.
"""

from __future__ import annotations

from pathlib import Path

from emulation.shaping import queue_pkts_for
from emulation.wire import ETH_HEADER
from topologies.model import Network
from topologies.spec import InputError

#: the per-namespace sysctl (Linux 6.11+), in microseconds
RTO_MIN_SYSCTL = "net.ipv4.tcp_rto_min_us"
#: Linux's own floor (TCP_RTO_MIN)
KERNEL_RTO_MIN_MS = 200.0


def has_rto_floor() -> bool:
    """Whether this kernel lets each network namespace set its RTO floor (Linux 6.11+)."""
    return Path("/proc/sys/" + RTO_MIN_SYSCTL.replace(".", "/")).exists()


def drain_ms(mbps: float, mtu: int) -> float:
    """How long a full FIFO of the testbed's (emulation.shaping) takes to drain at `mbps`: the
    longest a segment waits in one queue, so a floor at least this long never fires on a segment
    that is only queued there."""
    return queue_pkts_for(mtu) * (mtu + ETH_HEADER) * 8 / (mbps * 1e3)


def floor_ms(net: Network) -> float | None:
    """The floor the hosts of `net` get, in ms (whole ms); None: the kernel's, left alone."""
    want = net.spec.rto_min_ms
    if want == "kernel":
        return None
    if want != "auto":
        return float(want)
    shaped = [ln.mbps for ln in net.veth_links()]
    if not shaped or not has_rto_floor():
        return None
    ms = round(drain_ms(min(shaped), net.spec.mtu))
    return float(ms) if ms > KERNEL_RTO_MIN_MS else None


def sysctl_arg(net: Network) -> list[str]:
    """`name=value` for the hosts' sysctl call, or nothing (the kernel's floor). A number on a
    kernel without the sysctl is an InputError naming the field."""
    ms = floor_ms(net)
    if ms is None:
        return []
    if not has_rto_floor():
        raise InputError(
            f"{net.spec.name or 'topology'}: rto_min_ms: {ms:g} needs {RTO_MIN_SYSCTL} (Linux 6.11+), which this "
            "kernel lacks; set rto_min_ms: auto or kernel"
        )
    return [f"{RTO_MIN_SYSCTL}={int(ms * 1000)}"]
