"""Commands that shape links and fix offloads: pure argv builders (tested without root).

HTB with an explicit quantum (one MTU-sized packet) and a burst of one timer tick at the rate, so
HTB neither warns that its quantum is big nor overshoots at tens of Mbit/s; a pfifo leaf with a
fixed queue in packets (as many bytes at any MTU). netem (delay) is optional: this kernel may not
have it, so callers ask `doctor.has_netem()` first.
"""

from __future__ import annotations

from emulation.wire import ETH_HEADER
from topologies.spec import DEFAULT_MTU

QUANTUM_BYTES = DEFAULT_MTU + ETH_HEADER
QUEUE_PKTS = 1000  # at the default MTU: 1.5 MB
HZ = 250  # kernel timer ticks per second: HTB releases at most about one burst per tick


def queue_pkts_for(mtu: int) -> int:
    """The leaf queue in packets holding the bytes QUEUE_PKTS full frames hold at MTU 1500: jumbo
    frames with 1000 packets would queue 6x the bytes (seconds of delay at tens of Mbit/s)."""
    return max(16, QUEUE_PKTS * QUANTUM_BYTES // (mtu + ETH_HEADER))


def burst_bytes(mbps: float) -> int:
    """One timer tick's worth of bytes at `mbps`, at least 15 kB (Mininet's default)."""
    return max(15000, int(mbps * 1e6 / 8 / HZ))


def htb_class_cmd(
    intf: str,
    mbps: float,
    mtu: int = DEFAULT_MTU,
    parent: str = "5:",
    classid: str = "5:1",
    share_mbps: float | None = None,
    quantum: int | None = None,
) -> list[str]:
    """One HTB class of `intf` capped at `mbps`: guaranteed `share_mbps` (default all of it), a
    burst of one timer tick at `mbps` (at least two frames), a quantum of one frame unless given."""
    b = f"{max(burst_bytes(mbps), 2 * (mtu + ETH_HEADER))}b"
    rate, ceil = f"{(mbps if share_mbps is None else share_mbps):.6g}mbit", f"{mbps:.6g}mbit"
    q = str(mtu + ETH_HEADER if quantum is None else quantum)
    return ["tc", "class", "replace", "dev", intf, "parent", parent, "classid", classid, "htb",
            "rate", rate, "ceil", ceil, "burst", b, "cburst", b, "quantum", q]  # fmt: skip


def leaf_qdisc(queue_pkts: int, mtu: int = DEFAULT_MTU, tso: bool = False) -> list[str]:
    """A class's FIFO holding `queue_pkts` frames of `mtu`: counted in packets, or with userspace
    TSO (emulation.tso) in those frames' bytes, since a GSO packet of up to 64 kB is one packet."""
    if tso:
        return ["bfifo", "limit", str(queue_pkts * (mtu + ETH_HEADER))]
    return ["pfifo", "limit", str(queue_pkts)]


def htb_cmds(
    intf: str,
    mbps: float,
    queue_pkts: int | None = None,
    delay_ms: float = 0.0,
    mtu: int = DEFAULT_MTU,
    tso: bool = False,
) -> list[list[str]]:
    """tc commands limiting egress of `intf` to `mbps` Mbit/s (and adding delay if asked); the
    quantum is one frame at `mtu`, the queue `queue_pkts` frames (default: queue_pkts_for(mtu);
    in bytes with `tso`, leaf_qdisc)."""
    queue_pkts = queue_pkts_for(mtu) if queue_pkts is None else queue_pkts
    cmds = [
        ["tc", "qdisc", "replace", "dev", intf, "root", "handle", "5:", "htb", "default", "1"],
        htb_class_cmd(intf, mbps, mtu),
    ]
    if delay_ms > 0:
        cmds.append(
            [
                "tc",
                "qdisc",
                "replace",
                "dev",
                intf,
                "parent",
                "5:1",
                "handle",
                "10:",
                "netem",
                "delay",
                f"{delay_ms:g}ms",
                "limit",
                str(queue_pkts),
            ]
        )
    else:
        cmds.append(
            ["tc", "qdisc", "replace", "dev", intf, "parent", "5:1", "handle", "10:", *leaf_qdisc(queue_pkts, mtu, tso)]
        )
    return cmds


#: at most this many source classes per relay NIC (a power of two: u32 hashes the address's low bits)
FAIR_BUCKETS_MAX = 64
#: bytes a source class may send per turn of a relay NIC's fair queue: one GSO packet (this
#: kernel's TCP hands the qdisc packets of up to 64 kB, cut into frames after it)
FAIR_QUANTUM = 65536


def fair_buckets(n_sources: int) -> int:
    """Classes of a relay NIC's fair queue: the next power of two >= the hosts that may send through
    it, at most FAIR_BUCKETS_MAX (hosts are numbered in their address's last bits, so up to that
    many hosts each get their own class; beyond it, hosts share by those bits, as SFQ's hash)."""
    return min(FAIR_BUCKETS_MAX, 1 << max(0, n_sources - 1).bit_length())


def fair_htb_cmds(
    intf: str,
    mbps: float,
    n_sources: int,
    own_ip: str,
    mtu: int = DEFAULT_MTU,
    delay_ms: float = 0.0,
    tso: bool = False,
) -> list[list[str]]:
    """tc commands limiting egress of a relaying server's `intf` to `mbps`, shared fairly among the
    hosts whose packets leave by it (the server's own and those it forwards).

    Why: with one FIFO, TCP Small Queues let the relay's own socket keep only a couple of packets
    queued while forwarded packets fill the queue, so the relay's own flow got 0.12-1.0 of 5
    Mbit/s beside a forwarded one (BCube(4,1), docs/measurements.md). A real server's usual qdisc
    (fq_codel) shares by flow; this kernel has no fq_codel, sfq or fq, so the fair queue is HTB's
    own: one class per source bucket (rate mbps/buckets, ceil mbps: idle buckets lend to busy
    ones), chosen by a u32 hash of the source address's low bits; frames that are not IPv4 go to
    the server's own class. Each class sends up to FAIR_QUANTUM bytes a turn: HTB serves at least
    one packet per turn, and the relay's own TCP hands it GSO packets of tens of kB against
    forwarded single frames, so with a one-frame quantum the own flow took 4.3 of 5 Mbit/s
    instead (measured); with 64 kB turns the two took 2.2-2.3 and 2.4. Each class has the FIFO
    (or netem, with a delay) a plain NIC has."""
    buckets = fair_buckets(n_sources)
    own = int(own_ip.rsplit(".", 1)[1]) & (buckets - 1)
    filt = ["tc", "filter", "replace", "dev", intf, "parent", "5:", "prio", "1"]
    fifo = leaf_qdisc(queue_pkts_for(mtu), mtu, tso)
    leaf = ["netem", "delay", f"{delay_ms:g}ms", "limit", str(queue_pkts_for(mtu))] if delay_ms > 0 else fifo
    cmds = [
        ["tc", "qdisc", "replace", "dev", intf, "root", "handle", "5:", "htb", "default", f"{0x100 + own:x}"],
        *fair_class_cmds(intf, mbps, buckets, mtu),
        [*filt, "handle", "2:", "protocol", "ip", "u32", "divisor", str(buckets)],
        [*filt, "handle", "800::1", "protocol", "ip", "u32", "ht", "800::", "match", "u32", "0", "0",
         "hashkey", "mask", f"0x{buckets - 1:08x}", "at", "12", "link", "2:"],
    ]  # fmt: skip
    for i in range(buckets):
        cid = f"{0x100 + i:x}"
        cmds += [
            ["tc", "qdisc", "replace", "dev", intf, "parent", f"5:{cid}", "handle", f"{cid}:", *leaf],
            [*filt, "handle", f"2:{i:x}:1", "protocol", "ip", "u32", "ht", f"2:{i:x}:", "match", "u32", "0", "0",
             "flowid", f"5:{cid}"],
        ]  # fmt: skip
    return cmds


def fair_class_cmds(intf: str, mbps: float, buckets: int, mtu: int = DEFAULT_MTU) -> list[list[str]]:
    """The HTB class lines of `fair_htb_cmds` (the NIC's class, then one per bucket, each with a
    turn of FAIR_QUANTUM bytes): what a rate change replaces."""
    share = mbps / buckets
    return [
        htb_class_cmd(intf, mbps, mtu),
        *(htb_class_cmd(intf, mbps, mtu, "5:1", f"5:{0x100 + i:x}", share, FAIR_QUANTUM) for i in range(buckets)),
    ]


def mtu_cmd(intf: str, mtu: int) -> list[str]:
    """Set `intf`'s MTU: both ends of a veth, and every interface of a path, must agree."""
    return ["ip", "link", "set", intf, "mtu", str(mtu)]


def offload_cmd(intf: str, tso: bool = False) -> list[str]:
    """Checksum and segmentation offloads: off, as OVS's userspace datapath needs them unless it
    takes GSO packets (userspace TSO, emulation.tso), then on. GRO stays off here (a host's
    receiving end turns it on: rx_napi_cmds)."""
    state = "on" if tso else "off"
    return ["ethtool", "-K", intf, "tx", state, "rx", state, "tso", state, "gso", state, "gro", "off"]


def rx_napi_cmds(intfs: list[str]) -> list[list[str]]:
    """Commands, run in a host's namespace, that give each of its interfaces GRO and a NAPI thread.

    Why: a packet ovs-vswitchd sends into a host's veth is received (IP, TCP, the application's
    wake-up) in a softirq that runs in ovs-vswitchd's own thread, so the one datapath thread also
    paid for every receiving host's TCP stack (perf: ~26% of its time at 600 Mbit/s). With GRO on
    the host end, the veth takes NAPI, and a threaded NAPI moves that work to a kernel thread the
    scheduler can put on the other core; GRO also hands the host's TCP fewer, larger packets.
    Measured with 6 flows through ECS and ToR (benchmarks/network.py's shaping figure, idle
    machine): wire/configured at 600 Mbit/s aggregate 0.86-0.88 -> 0.996-0.998, at 1,200 Mbit/s
    0.48-0.50 -> 0.85-0.92. Only the host ends: GRO on a switch-side end would hand
    ovs-vswitchd packets larger than the MTU. Hosts that relay (BCube, Torus servers) segment what
    they forward again in software (their transmit offloads stay off). The `threaded` switch is in
    sysfs only, which shows the root namespace's devices unless sysfs is mounted from inside the
    host's: hence a private mount namespace for the one shell that writes it, with sysfs on /mnt
    (mount refuses a second sysfs on /sys under Mininet's mnexec; nothing leaves that namespace).
    """
    cmds = [["ethtool", "-K", x, "gro", "on"] for x in intfs]
    if intfs:
        writes = " && ".join(f"echo 1 > /mnt/class/net/{x}/threaded" for x in intfs)
        cmds.append(["unshare", "-m", "sh", "-c", f"mount -t sysfs sysfs /mnt && {writes}"])
    return cmds


def tc_batch(cmds: list[list[str]]) -> str:
    """Lines for `tc -batch` (the same commands without the leading `tc`)."""
    return "".join(" ".join(c[1:]) + "\n" for c in cmds if c and c[0] == "tc")
