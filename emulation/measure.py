"""Measurements on a running testbed, always from inside the emulated hosts.

Reachability by ping, the path a flow really takes from OpenFlow rule counters, bytes per NIC
from the hosts' own interface counters, and achieved rates with iperf3. Traffic to 10.x
addresses is only ever sent from a Mininet host (its namespace), never from the root namespace.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass

from controller.routing import path_links, path_nodes, taken_path
from emulation.fidelity import TCP_COUNTERS, tcp_counts
from emulation.hostcmd import run
from emulation.net import Testbed
from topologies.model import Network

_FLOW_RE = re.compile(r"n_packets=(\d+).*?priority=(\d+)(?:,(\S*))? actions=(\S+)")


def reachable(tb: Testbed, pairs: list[tuple[str, str]], wait_s: float = 1.0) -> dict[tuple[str, str], bool]:
    """Ping every (src, dst) once from inside src; all sources in parallel."""
    by_src: dict[str, list[str]] = {}
    for s, d in pairs:
        by_src.setdefault(s, []).append(d)
    procs = {}
    for src, dsts in by_src.items():
        ips = " ".join(tb.model.nodes[d].ip for d in dsts)
        script = (
            f"for d in {ips}; do if ping -c1 -W{wait_s:g} -q $d >/dev/null 2>&1; "
            "then echo ok $d; else echo fail $d; fi; done"
        )
        procs[src] = tb.host(src).popen(["bash", "-c", script], stdout=subprocess.PIPE, text=True)
    by_ip = {n.ip: n.name for n in tb.model.hosts()}
    out = {}
    for src, p in procs.items():
        text, _ = p.communicate(timeout=60 + 2 * len(by_src[src]))
        for line in text.split("\n"):
            if line.strip():
                verdict, ip = line.split()
                out[(src, by_ip[ip])] = verdict == "ok"
    return out


def flow_counters(tb: Testbed) -> Counter:
    """Packets per (switch, rule) from `ovs-ofctl dump-flows` of every bridge.

    The userspace datapath credits rules from its flow cache only when a revalidator runs, so
    this first waits for one round (`revalidator/wait`); otherwise counts lag by ~0.5 s.
    """
    subprocess.run(["ovs-appctl", "revalidator/wait"], capture_output=True, check=True)
    counts: Counter = Counter()
    for sw in tb.model.switches():
        text = subprocess.run(
            ["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", sw.name], capture_output=True, text=True, check=True
        ).stdout
        for line in text.splitlines():
            m = _FLOW_RE.search(line)
            if m:
                counts[(sw.name, m.group(2), m.group(3) or "", m.group(4))] += int(m.group(1))
    return counts


def udp_probe(tb: Testbed, src: str, dst: str, packets: int, gap_s: float = 0.0005) -> None:
    """Send `packets` one-way UDP datagrams (46-byte frames) from inside src to dst's port 9.

    Paced and preceded by one datagram: the userspace datapath drops part of an unpaced burst
    (its receive ring overflows, and packets arriving during the first upcall are lost).
    """
    ip = tb.model.nodes[dst].ip
    code = (
        "import socket,time\n"
        f"s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.sendto(b'x',('{ip}',9)); time.sleep(0.1)\n"
        f"for _ in range({packets}): s.sendto(b'x',('{ip}',9)); time.sleep({gap_s})\n"
    )
    run(tb.host(src), [sys.executable, "-c", code])


def port_packets(switch: str) -> dict[int, tuple[int, int]]:
    """(rx, tx) packets of every OpenFlow port of a bridge, from `ovs-ofctl dump-ports`."""
    subprocess.run(["ovs-appctl", "revalidator/wait"], capture_output=True, check=True)
    text = subprocess.run(
        ["ovs-ofctl", "-O", "OpenFlow13", "dump-ports", switch], capture_output=True, text=True, check=True
    ).stdout
    out = {}
    for port, rx, tx in re.findall(r"port\s+(\d+): rx pkts=(\d+).*?tx pkts=(\d+)", text, re.S):
        out[int(port)] = (int(rx), int(tx))
    return out


def measured_switches(tb: Testbed, src: str, dst: str, packets: int = 50) -> set[str]:
    """Switches that forwarded `packets` one-way UDP datagrams from src to dst (rule counters).

    UDP to a closed port is one-way (ICMP errors back are rate-limited to a few), so only the
    forward path's rules count many packets; half the probe is the bar, since a loaded
    userspace datapath may drop some.
    """
    before = flow_counters(tb)
    udp_probe(tb, src, dst, packets)
    after = flow_counters(tb)
    grew = Counter()
    for key, n in after.items():
        grew[key[0]] = max(grew[key[0]], n - before.get(key, 0))
    return {sw for sw, n in grew.items() if n >= packets // 2}


def model_switches(tb: Testbed, src: str, dst: str) -> list[str]:
    """Switches on the model's path for the current circuits (the ECS included: it is a bridge)."""
    nodes = path_nodes(tb.model, taken_path(tb.model, tb.current_paths(), src, dst))
    return [n for n in nodes if not tb.model.nodes[n].is_host]


def nic_bytes(tb: Testbed, host: str) -> dict[str, tuple[int, int]]:
    """(rx, tx) bytes of every interface of `host`, read inside its namespace."""
    data = json.loads(tb.host(host).cmd("ip -s -j link show"))
    return {
        d["ifname"]: (d["stats64"]["rx"]["bytes"], d["stats64"]["tx"]["bytes"]) for d in data if d["ifname"] != "lo"
    }


def tcp_totals(tb: Testbed, hosts: list[str]) -> tuple[int, ...]:
    """emulation.fidelity.tcp_counts summed over `hosts` so far (retransmitted, sent, timeouts,
    duplicates received), read through each host's shell."""
    rows = [tcp_counts(tb.host(h).cmd("cat /proc/net/snmp /proc/net/netstat")) for h in hosts]
    return tuple(sum(col) for col in zip(*rows, strict=True)) if rows else (0,) * len(TCP_COUNTERS)


def tcp_retrans(tb: Testbed, hosts: list[str]) -> int:
    """TCP segments retransmitted so far by `hosts` (RetransSegs of each namespace's
    /proc/net/snmp). Every segment lost in the network, dropped at a down link, a dark circuit or
    a full queue, is sent again, so the growth of this counter is the data the network dropped
    (and, with timeouts that were spurious, some it did not: tcp_totals tells them apart)."""
    return sum(tcp_counts(tb.host(h).cmd("cat /proc/net/snmp"))[0] for h in hosts)


@dataclass(frozen=True)
class Rate:
    src: str
    dst: str
    configured_mbps: float
    achieved_mbps: float

    @property
    def ratio(self) -> float:
        return self.achieved_mbps / self.configured_mbps


def bottleneck_mbps(tb: Testbed, src: str, dst: str) -> float:
    """Slowest cable on the taken path (a worker's ECS cable and circuit included)."""
    return path_bottleneck_mbps(tb.model, tb.current_paths(), src, dst)


def path_bottleneck_mbps(net: Network, paths: dict, src: str, dst: str) -> float:
    """Slowest cable on the path `paths` give src -> dst (controller.routing.compute_paths)."""
    return min(ln.mbps for ln in path_links(net, taken_path(net, paths, src, dst)))


def iperf(tb: Testbed, pairs: list[tuple[str, str]], seconds: float = 3.0, base_port: int = 5201) -> list[Rate]:
    """Concurrent TCP flows, one per (src, dst); achieved goodput at the receiver."""
    servers, clients = [], []
    for i, (_, dst) in enumerate(pairs):
        servers.append(
            tb.host(dst).popen(
                ["iperf3", "-s", "-1", "-p", str(base_port + i)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        )
    time.sleep(0.3)
    for i, (src, dst) in enumerate(pairs):
        ip = tb.model.nodes[dst].ip
        clients.append(
            tb.host(src).popen(
                ["iperf3", "-c", ip, "-p", str(base_port + i), "-t", f"{seconds:g}", "-J", "-O", "1"],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    out = []
    for (src, dst), c in zip(pairs, clients, strict=True):
        text, _ = c.communicate(timeout=seconds + 30)
        try:
            bps = json.loads(text)["end"]["sum_received"]["bits_per_second"]
        except (ValueError, KeyError):
            bps = 0.0
        out.append(Rate(src, dst, bottleneck_mbps(tb, src, dst), bps / 1e6))
    for s in servers:
        s.kill()
        s.wait()
    return out


def rates_measured_twice_if_slow(
    tb: Testbed, pairs: list[tuple[str, str]], seconds: float, floor_mbps: float
) -> list[tuple[list[Rate], int]]:
    """Concurrent TCP flows (iperf) and the TCP segments their sources retransmitted
    meanwhile; measured once more when their total fell below `floor_mbps`.

    Why once more, and only from below: a shaper lets no more than its rate through, so a sample
    above the range is a fault at the first try, while a low one may be the host rather than the
    shaper (the other core busy, a retransmission timeout early in a 3-s sample). The suite saw
    81% and 62.6% samples on 2026-11-23 where 16 back-to-back samples of the same paths, on the
    same machine, gave 93.8-95.7%. Callers judge the last sample and show every one."""
    sources = sorted({s for s, _ in pairs})
    samples: list[tuple[list[Rate], int]] = []
    for _attempt in range(2):
        before = tcp_retrans(tb, sources)
        rates = iperf(tb, pairs, seconds)
        samples.append((rates, tcp_retrans(tb, sources) - before))
        if sum(r.achieved_mbps for r in rates) >= floor_mbps:
            break
    return samples


def describe_samples(samples: list[tuple[list[Rate], int]]) -> str:
    """'95.6 Mbit/s (95.6%)', or every sample when there were two: '81.1 Mbit/s (81.1%, 14 segments
    retransmitted); again: 95.2 Mbit/s (95.2%)'."""
    out = []
    for rates, retrans in samples:
        total = sum(r.achieved_mbps for r in rates)
        share = f"{total / rates[0].configured_mbps:.1%}" if len(rates) == 1 else f"{len(rates)} flows"
        extra = f", {retrans} segments retransmitted" if len(samples) > 1 else ""
        out.append(f"{total:.1f} Mbit/s ({share}{extra})")
    return "; again: ".join(out)
