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

- A GSO packet leaves its sender as one burst: 64 kB is 52 ms of a 10 Mbit/s link, so flows
  into one receiver took turns in coarse bursts. Each host interface's GSO size is therefore
  capped at `GSO_BURST_MS` of the network's slowest link (`gso_cap`, `gso_cmd`: Linux's
  gso_max_size and gso_max_segs; at least 2 frames, at most 64 kB). Measured with
  bench_schemes' expected figure on leafspine-2rack (8 hosts, 5 iterations, GST over the busiest
  cable's bound; 2026-11-30): at 50 / 25 / 10 Mbit/s host links, mesh 1.41 / 1.27 / 1.32 with
  frames, 1.19 / 1.40 / 1.57 with uncapped TSO, 1.17 / 1.12 / 1.11 capped at 2 ms; RAT 1.51 /
  1.27 / 1.40, 1.19 / 1.45 / 1.44, 1.17 / 1.16 / 1.11; ring 1.10 / 1.08 / 1.07, 1.06 / 1.06 /
  1.03, 1.07 / 1.09 / 1.09. (1 and 5 ms gave the same within their spread.)

Every run uses it where the daemon has it (`PSNET_TSO=0` turns it off, for a comparison); the
first clean-clone CI with uncapped TSO for every run failed two emulation tests at 10-20 Mbit/s
links that pass with the cap (HRS on BCube(3,1): GST with both NICs 0.59 of one NIC's, the test
asks < 0.85, uncapped 0.85; PLink's probed groups AMI 1.00, uncapped 0.71).
A daemon started without the setting runs without it whatever PSNET_TSO says: scripts/setup.sh
sets it and restarts ovs-vswitchd when no emulation runs. Runs over several servers
(emulation.cluster_net) keep it off: a server's daemon is its own.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from emulation.wire import ETH_HEADER, TCP_IP_HEADERS, mss_bytes
from topologies.model import Network
from topologies.spec import DEFAULT_MTU, InputError, datapath_ceiling, measured_ceiling

OVS_LOG = Path("/var/log/openvswitch/ovs-vswitchd.log")
#: the line ovs-vswitchd logs once at start, first thing (vlog's sequence number 1)
STARTED = b"|00001|vlog|INFO|opened log file"
#: the line it logs shortly after when it read userspace-tso-enable=true
TSO_ON = b"userspace_tso|INFO|Userspace TCP Segmentation Offloading support enabled"
#: bytes read from the log's end at a time, looking back for the daemon's start
CHUNK = 1 << 20
#: bytes of headers each frame of a TCP segment carries: Ethernet, IPv4 and TCP with timestamps
FRAME_HEADERS = ETH_HEADER + TCP_IP_HEADERS


#: where ovs-ctl writes the daemon's PID (Debian: /var/run is a link to /run); a new start
#: rewrites it. emulation.sampler finds the daemon's process by the same files.
OVS_PID_FILES = (Path("/run/openvswitch/ovs-vswitchd.pid"), Path("/var/run/openvswitch/ovs-vswitchd.pid"))
#: (log, the PID file's text and mtime) of a daemon seen with TSO: a yes holds until it restarts
_SEEN_TSO: set[tuple[Path, str, int]] = set()


def _daemon_key(log: Path) -> tuple[Path, str, int] | None:
    for f in OVS_PID_FILES:
        try:
            return log, f.read_text().strip(), f.stat().st_mtime_ns
        except OSError:
            continue
    return None


def daemon_has_tso(log: Path = OVS_LOG) -> bool:
    """Whether the running ovs-vswitchd took userspace TSO at its start: its log since its last
    start says so. (OVS 3.1 offers no command that tells; the setting in its database counts only
    from the next start.) False when the log cannot be read. A yes is kept for the daemon that
    said it (its PID file unchanged): every bring-up asks, and the log may be long. A no is read
    again each time, as the line comes shortly after the daemon's start."""
    key = _daemon_key(log)
    if key is not None and key in _SEEN_TSO:
        return True
    if _log_has_tso(log):
        if key is not None:
            _SEEN_TSO.add(key)
        return True
    return False


def _log_has_tso(log: Path) -> bool:
    """The log since the daemon's last start has TSO_ON (read back from its end in CHUNKs)."""
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
MODES = {"1": "on", "on": "on", "0": "off", "off": "off"}
#: a GSO packet is at most this long on the network's slowest link (`gso_cap`)
GSO_BURST_MS = 2.0
#: the largest GSO packet Linux makes (gso_max_size's default)
GSO_MAX_BYTES = 65536


def mode() -> str:
    """PSNET_TSO as "on" (the default: every run, where the daemon has it) or "off"."""
    raw = os.environ.get("PSNET_TSO", "1").strip().lower() or "1"
    if raw not in MODES:
        raise InputError(f"PSNET_TSO={raw}: not a datapath choice; use 1 (userspace TSO, the default) or 0 (frames)")
    return MODES[raw]


def enabled(log: Path = OVS_LOG) -> bool:
    """Whether runs here use userspace TSO: PSNET_TSO is not 0 and the daemon took it."""
    return mode() == "on" and daemon_has_tso(log)


def gso_cap(net: Network) -> int:
    """Bytes of the largest GSO packet a host of `net` may send: `GSO_BURST_MS` of its slowest
    link, at least two frames' payload and at most 64 kB."""
    slowest = min((ln.mbps for ln in net.links), default=0.0)
    mss = mss_bytes(net.spec.mtu)
    return int(max(2 * mss + FRAME_HEADERS, min(GSO_MAX_BYTES, slowest * 1e6 / 8 * GSO_BURST_MS / 1e3)))


def gso_cmd(intf: str, cap: int, mtu: int) -> list[str]:
    """The command, run where `intf` lives, that caps its GSO packets at `cap` bytes: the size a
    local TCP sender builds (gso_max_size) and the segments a forwarded GRO packet may keep
    (gso_max_segs; a relaying host's larger ones are cut in software)."""
    segs = max(2, cap // mss_bytes(mtu))
    return ["ip", "link", "set", "dev", intf, "gso_max_size", str(cap), "gso_max_segs", str(segs)]


def ceiling(mtu: int = DEFAULT_MTU, log: Path = OVS_LOG) -> tuple[float, str]:
    """(Mbit/s, where it came from): the faithful aggregate runs get on this machine, the one the
    budget and a sweep's scale plan with. The datapath with TSO's figure when runs may use it and
    it was measured, else the frames' one (topologies.spec.datapath_ceiling)."""
    return datapath_ceiling(mtu, tso=enabled(log) and measured_ceiling(tso=True) is not None)


def wire_bytes(nbytes: int, packets: int, mtu: int) -> int:
    """The bytes `packets` counted packets of `nbytes` took on the wire as frames of at most
    `mtu`: a GSO packet is counted once with its headers, and is sent as frames that each carry
    them. The payload beyond one header per packet, in full segments of mtu - 52 bytes, gives the
    frames; frames beyond the packets add their headers. Exact for frames the size of the MTU or
    less (nothing is added), and within a fraction of one header per GSO packet otherwise."""
    payload = nbytes - packets * FRAME_HEADERS
    frames = payload / mss_bytes(mtu)  # full segments
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
