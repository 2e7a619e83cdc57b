"""Userspace TSO: the datapath carries a TCP sender's 64 kB segments whole, not cut into frames.

Why: ovs-vswitchd's userspace datapath is one thread paying a fixed cost per packet, which capped
this machine at 600-900 Mbit/s of shaped traffic at MTU 1500 (six flows at 1,200 Mbit/s reached
0.85-0.90 of their rate, at 1,800 0.59). With `other_config:userspace-tso-enable=true` (read once,
when ovs-vswitchd starts) its AF_PACKET sockets carry a virtio-net header, so a GSO packet of up
to 64 kB crosses the datapath as one packet and is cut into frames only where a host receives
it (or never: GRO hands it on whole). Measured with the six flows of scripts/bench_network.sh on
an idle machine: 1,200 and 1,800 Mbit/s at 0.999 of their wire rate, the machine 38-46% idle
(without: 0.90 and 0.59, 11-14% idle). The interfaces must then keep their checksum and
segmentation offloads on (emulation.shaping.offload_cmd): with them off no GSO packet is made,
and the datapath behaves as before.

What it changes, and where the testbed allows for it:
- HTB shapes a GSO packet by its frames' bytes (the kernel counts each frame's headers), so rates
  hold; its leaf queue is bounded in bytes, not packets (emulation.shaping.leaf_qdisc): a
  thousand 64 kB packets would queue 64 MB.
- A qdisc counts a GSO packet that came through a virtio-net header as 0 packets (its gso_segs is
  not set), so the datapath's drop accounting counts what left a port by the interface's own
  packet counter (emulation.datapath).
- An interface's byte counter counts a GSO packet's headers once, not once per frame: `wire_bytes`
  puts the frames' headers back for the fidelity monitor's link utilisation.

Chosen per run (`PSNET_TSO`, default `auto`): a run whose network could offer the datapath more
than this machine's datapath of frames carries faithfully (`demand_mbps` against its measured
ceiling) gets TSO; a run that fits gets frames. Why not TSO always: at low rates frames are the
more faithful of the two (single flows at 10-25 Mbit/s: 100.0% of their rate, with TSO 99.3-99.8%,
scripts/bench_network.sh), and the first clean-clone CI with TSO on for every run failed two
emulation tests at 10-20 Mbit/s per link that pass with frames (HRS on BCube(3,1): GST with both
NICs at once 0.85 of one NIC's where alone 0.58-0.68; PLink's probed groups AMI 0.71 for >= 0.85).
Measured here at 10 Mbit/s, HRS with both NICs takes 4.59 s with TSO and 4.40 s with frames
idle, 5.25 s with TSO beside a busy core: a 64 kB GSO packet is 52 ms of a 10 Mbit/s link, so
flows take turns in coarse bursts. `PSNET_TSO=1` puts every run on TSO, `0` none.
A daemon started without the setting runs without it whatever PSNET_TSO says: scripts/setup.sh
sets it and restarts ovs-vswitchd when no emulation runs. Runs over several servers
(emulation.cluster_net) keep it off: a server's daemon is its own.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import networkx as nx

from emulation.shaping import ETH_HEADER, TCP_IP_HEADERS
from topologies.model import Network
from topologies.spec import CEILING_HOPS, DEFAULT_MTU, InputError, datapath_ceiling, measured_ceiling

OVS_LOG = Path("/var/log/openvswitch/ovs-vswitchd.log")
#: the line ovs-vswitchd logs once at start, first thing (vlog's sequence number 1)
STARTED = b"|00001|vlog|INFO|opened log file"
#: the line it logs shortly after when it read userspace-tso-enable=true
TSO_ON = b"userspace_tso|INFO|Userspace TCP Segmentation Offloading support enabled"
#: bytes read from the log's end at a time, looking back for the daemon's start
CHUNK = 1 << 20
#: bytes of headers each frame of a TCP segment carries: Ethernet, IPv4 and TCP with timestamps
FRAME_HEADERS = ETH_HEADER + TCP_IP_HEADERS


def daemon_has_tso(log: Path = OVS_LOG) -> bool:
    """Whether the running ovs-vswitchd took userspace TSO at its start: its log since its last
    start says so. (OVS 3.1 offers no command that tells; the setting in its database counts only
    from the next start.) False when the log cannot be read."""
    try:
        with log.open("rb") as f:
            end = f.seek(0, os.SEEK_END)
            tail = b""
            pos = end
            while pos > 0:
                prev, pos = pos, max(0, pos - CHUNK)
                f.seek(pos)
                tail = f.read(prev - pos) + tail  # each byte once: the first chunk may be short
                start = tail.rfind(STARTED)
                if start >= 0:
                    return TSO_ON in tail[start:]
    except OSError:
        return False
    return False


#: PSNET_TSO's spellings, and what each means
MODES = {"auto": "auto", "1": "on", "on": "on", "0": "off", "off": "off"}


def mode() -> str:
    """PSNET_TSO as "auto" (the default: TSO for runs the datapath of frames cannot carry), "on"
    (every run) or "off" (none)."""
    raw = os.environ.get("PSNET_TSO", "auto").strip().lower() or "auto"
    if raw not in MODES:
        raise InputError(f"PSNET_TSO={raw}: not a datapath choice; use auto (the default), 1 (always TSO) or 0 (never)")
    return MODES[raw]


def available(log: Path = OVS_LOG) -> bool:
    """Whether runs here may use userspace TSO: PSNET_TSO is not 0 and the daemon took it."""
    return mode() != "off" and daemon_has_tso(log)


def demand_mbps(net: Network) -> float:
    """The most a network can offer the datapath, in the ceiling's terms (Mbit/s x switch hops /
    CEILING_HOPS): every host sending on all its NICs at once, over the longest switch path
    between two hosts. An upper bound that needs no job, so the testbed can choose its datapath at
    bring-up (workloads.budget.offered_load_mbps is the job-aware estimate, for refusals)."""
    hosts = [n.name for n in net.nodes.values() if n.is_host]
    injected = sum(ln.mbps for h in hosts for ln in net.links_of(h))
    g = nx.Graph(net.graph())
    longest = 0
    for h in hosts:
        dist = nx.single_source_shortest_path_length(g, h)
        longest = max([longest] + [dist[o] - 1 for o in hosts if o != h and o in dist])
    return injected * max(longest, 1) / CEILING_HOPS


def enabled(demand: float, mtu: int = DEFAULT_MTU, log: Path = OVS_LOG) -> bool:
    """Whether a run whose network offers `demand` Mbit/s (`demand_mbps`) uses userspace TSO:
    PSNET_TSO=1 and the daemon has it; or, under `auto`, the daemon has it and `demand` is more
    than this machine's datapath of frames carries faithfully."""
    m = mode()
    if m == "off" or not daemon_has_tso(log):
        return False
    return m == "on" or demand > datapath_ceiling(mtu)[0]


def ceiling(mtu: int = DEFAULT_MTU, log: Path = OVS_LOG) -> tuple[float, str]:
    """(Mbit/s, where it came from): the faithful aggregate runs get on this machine, the one the
    budget and a sweep's scale plan with. The datapath with TSO's figure when runs may use it and
    it was measured, else the frames' one (topologies.spec.datapath_ceiling)."""
    return datapath_ceiling(mtu, tso=available(log) and measured_ceiling(tso=True) is not None)


def wire_bytes(nbytes: int, packets: int, mtu: int) -> int:
    """The bytes `packets` counted packets of `nbytes` took on the wire as frames of at most
    `mtu`: a GSO packet is counted once with its headers, and is sent as frames that each carry
    them. The payload beyond one header per packet, in full segments of mtu - 52 bytes, gives the
    frames; frames beyond the packets add their headers. Exact for frames the size of the MTU or
    less (nothing is added), and within a fraction of one header per GSO packet otherwise."""
    payload = nbytes - packets * FRAME_HEADERS
    frames = payload / (mtu - TCP_IP_HEADERS)  # full segments (emulation.measure.mss_bytes)
    return nbytes + int(max(0.0, frames - packets) * FRAME_HEADERS)


def main(argv: list[str] | None = None) -> int:
    """`python -m emulation.tso check`: exit 0 when the running daemon has userspace TSO (set-up)."""
    p = argparse.ArgumentParser(prog="python -m emulation.tso", description=main.__doc__)
    p.add_argument("action", choices=["check"])
    p.parse_args(argv)
    on = daemon_has_tso()
    print(f"ovs-vswitchd {'has' if on else 'does not have'} userspace TSO")
    return 0 if on else 1


if __name__ == "__main__":
    sys.exit(main())
