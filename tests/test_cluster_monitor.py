"""The cluster monitor's arithmetic (emulation/cluster_monitor.py, emulation/remote_sampler.py),
on counters as the servers' agents print them: two servers' windows merge into one (the least idle
server, the busiest ovs-vswitchd, every server's interfaces), and their datapath losses add up.
The agents, the SSH sessions and the verdict over two real servers are tests/test_cluster.py's."""

from __future__ import annotations

import json
from dataclasses import asdict

import pytest

from emulation.cluster_monitor import _drops, merge_drops
from emulation.datapath import Drops, PortLoss
from emulation.fidelity import tcp_counts, tcp_text
from emulation.remote_sampler import RemoteSampler


def _line(t: float, busy: int, idle: int, ovs: int, tx: int) -> dict:
    """An agent line: /proc/stat's first 8 fields (user nice system idle iowait irq softirq steal)."""
    return {"t": t, "cpu": [busy, 0, 0, idle, 0, 0, 0, 0], "ovs": ovs, "tick": 100, "dev": {}, "_tx": tx}


def _sampler(lines: dict[str, list[dict]]) -> RemoteSampler:
    s = RemoteSampler(config=None, intfs={k: [] for k in lines})  # type: ignore[arg-type]
    for server, rows in lines.items():
        for r in rows:
            r["dev"] = {f"{server}-eth1": [0, r.pop("_tx")]}
        s.lines[server] = rows
    return s


def test_two_servers_windows_merge_into_the_clusters():
    """Server 1 is 50% idle, its ovs-vswitchd at 0.2 of a core; server 2 25% idle at 0.6: the
    cluster's window is 25% idle, ovs-vswitchd at 0.6, and both servers' interfaces' bytes."""
    lines = {
        "s1": [_line(0.0, 0, 0, 0, 0), _line(1.0, 100, 100, 20, 125_000)],
        "s2": [_line(0.01, 0, 0, 0, 0), _line(1.01, 150, 50, 60, 250_000)],
    }
    (w,) = _sampler(lines).samples(every=1)
    assert w.idle == pytest.approx(0.25) and w.ovs_cpu == pytest.approx(0.6)
    assert w.tx_bytes == {"s1-eth1": 125_000, "s2-eth1": 250_000} and w.t == pytest.approx(1.01)
    assert w.rate_mbps("s2-eth1") == pytest.approx(2.0, rel=0.02)


def test_windows_stop_where_the_shortest_agent_stops():
    """A server whose agent printed fewer lines bounds the merged rounds (no window is half a cluster)."""
    lines = {
        "s1": [_line(float(t), 10 * t, 10 * t, t, 1000 * t) for t in range(4)],
        "s2": [_line(float(t), 10 * t, 10 * t, t, 1000 * t) for t in range(2)],
    }
    assert len(_sampler(lines).samples(every=1)) == 1


def test_transfer_windows_grow_as_the_agents_print_and_each_round_is_merged_once():
    """The stall watch reads the windows every tick of a run: the rounds merged on an earlier
    read are kept (the same objects), only the new ones are added, as far as every server has
    printed; each window's bytes are its own round's."""
    lines = {s: [_line(float(t), 10 * t, 10 * t, t, 1000 * t) for t in range(3)] for s in ("s1", "s2")}
    sampler = _sampler(lines)
    rate = {"s1-eth1": 1.0, "s2-eth1": 1.0}
    first = sampler.windows(rate)
    assert len(first) == 2
    for t in (3, 4):
        sampler.lines["s1"].append(_line(float(t), 10 * t, 10 * t, t, 0) | {"dev": {"s1-eth1": [0, 1000 * t]}})
    sampler.lines["s2"].append(_line(3.0, 30, 30, 3, 0) | {"dev": {"s2-eth1": [0, 5000]}})
    later = sampler.windows(rate)
    assert len(later) == 3 and all(a is b for a, b in zip(first, later, strict=False))
    # round 3: s1 sent 1,000 B, s2 3,000 B in 1 s, on 1 Mbit/s cables
    assert later[2].t == pytest.approx(3.0) and later[2].link == "s2-eth1" and later[2].util == pytest.approx(0.024)


def test_the_servers_losses_add_up():
    """Every server's ports, received drops and logged send errors, from their JSON form."""
    a = Drops([PortLoss("s1-eth1", 100, 90, 0, 4, True)], {"s1-eth1": 2}, {"Resource temporarily unavailable": 3})
    b = Drops([PortLoss("s2-eth1", 50, 50, 0, 0, True)], {}, {"Resource temporarily unavailable": 1})
    back = [_drops(json.loads(json.dumps(asdict(d)))) for d in (a, b)]
    m = merge_drops(back)
    assert m.silent == 6 and m.tc_dropped == 4 and m.received_dropped == 2
    assert m.send_errors == {"Resource temporarily unavailable": 4} and [p.intf for p in m.ports] == [
        "s1-eth1",
        "s2-eth1",
    ]


def test_tcp_counters_from_a_hosts_snmp_and_netstat():
    snmp = "Tcp: RtoAlgorithm RetransSegs OutSegs\nTcp: 1 7 1000\n"
    netstat = "TcpExt: SyncookiesSent TCPTimeouts TCPDSACKRecv\nTcpExt: 0 5 3\nIpExt: InNoRoutes\nIpExt: 9\n"
    assert tcp_counts(snmp + netstat) == (7, 1000, 5, 3)
    assert tcp_counts(snmp) == (7, 1000, 0, 0) and tcp_counts("") == (0, 0, 0, 0)
    # the verdict's clause: summed over hosts, the timers' share and the duplicates named
    text = tcp_text([(7, 1000, 5, 3), (1, 1000, 0, 0)])
    assert text == "TCP retransmitted 8 of 2000 segments (0.40%; 5 timeouts, 3 duplicates received)"
    assert tcp_text([]) == ""
