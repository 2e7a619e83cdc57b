"""ovs-vswitchd must not lose packets silently (issue 11), and its losses must be counted exactly.

Real emulation (root) of the smallest PSNet (`psnet-1tor`): a worker's packets cross two
switch-side HTB queues (ECS -> ToR, ToR -> PS). Two workers pushing into the one PS NIC fill the
ToR's queue to the PS, which is what overflowed ovs-vswitchd's 208 KB send socket: measured here
with that buffer, 45-172 packets lost silently and 0.04-0.4% of segments retransmitted in 10 s;
with the 32 MiB buffer scripts/setup.sh gives it, none and none.
"""

from __future__ import annotations

import sys
import time

import pytest

from emulation import datapath, doctor, measure
from emulation.fidelity import Monitor
from emulation.hostcmd import run
from emulation.net import Testbed
from emulation.shaping import leaf_qdisc, queue_pkts_for
from emulation.wire import mss_bytes

pytestmark = pytest.mark.root
TOPO = "topologies/psnet-1tor.yaml"
#: retransmitted / sent segments allowed beyond the losses tc counted: with bbr in the hosts 0 were
#: measured with the large buffer, 0.04-0.4% with the small one. Hosts pin cubic (topology `tcp`),
#: which fills the shaped queue until it drops (counted by tc: 39 of 28,395 segments, 0.14%, on
#: 2026-11-26), so only the retransmissions tc's drops do not explain point at silent ones
RETRANS_MAX = 0.0002
#: the most a GSO packet carries (the kernel's GSO_MAX_SIZE for TCP)
GSO_MAX_BYTES = 65536


@pytest.fixture(scope="module")
def tb():
    with Testbed(TOPO) as t:
        yield t


def _rx_tx_packets(tb: Testbed, host: str) -> tuple[int, int]:
    """(rx, tx) packets of the host's one NIC, read in its namespace."""
    (intf,) = [ln.intf(host) for ln in tb.model.links_of(host)]
    text = run(tb.host(host), ["cat", f"/sys/class/net/{intf}/statistics/rx_packets"])
    text += run(tb.host(host), ["cat", f"/sys/class/net/{intf}/statistics/tx_packets"])
    rx, tx = (int(x) for x in text.split())
    return rx, tx


def test_two_shaped_flows_into_one_nic_lose_nothing_in_the_datapath(tb):
    """The regression: incast through two switch-side queues, no silent drop, ~no retransmission."""
    ps = tb.model.pss()[0].name
    workers = [w.name for w in tb.model.workers()][:2]
    monitor = Monitor(tb.model).start()
    rates = measure.iperf(tb, [(w, ps) for w in workers], seconds=8)
    verdict = monitor.stop()
    buf = doctor.send_buffer_check()
    assert verdict.datapath_drops == 0, f"{verdict.reason} ({buf.name}: {buf.detail})"
    assert verdict.datapath_rx_drops == 0, verdict.reason
    nic = tb.model.links_between(ps, "t1_1")[0].mbps
    # each flow ran: TCP segments out of its host, counted, and at least a fifth of its fair
    # share (cubic shares unevenly: one flow took 43% of its share on a CI run, 2026-11-27)
    fair_segments = nic * 1e6 / 8 * 8 / 1448 / len(workers)
    for w in workers:
        assert verdict.retrans[w][1] > fair_segments / 5, (w, verdict.retrans[w], round(fair_segments))
    retrans = sum(verdict.retrans[w][0] for w in workers)
    sent = sum(verdict.retrans[w][1] for w in workers)
    counted = verdict.datapath.get("tc_dropped", 0)  # tail drops at the shaped queues, seen by tc
    # with userspace TSO a tail drop is one GSO packet: up to 64 kB of full segments lost at once
    per_drop = GSO_MAX_BYTES // mss_bytes(tb.model.spec.mtu) if tb.tso else 1
    assert retrans <= counted * per_drop + RETRANS_MAX * sent, (retrans, counted, per_drop, sent, buf.detail)
    total = sum(r.achieved_mbps for r in rates)
    assert 0.90 * nic <= total <= nic, (total, nic)  # the shared NIC is still shaped
    assert verdict.faithful or "dropped" not in verdict.reason


def test_every_packet_lost_at_an_egress_is_counted(tb):
    """Exactness of the conservation count, on a port made to lose: the ToR's queue to the PS is
    cut to 10 Mbit/s and 2 packets, a worker sends a 50 Mbit/s UDP burst; packets the worker's
    NIC sent minus packets the PS's NIC received equal the losses the datapath module counts
    (tc tail drops plus what ovs-vswitchd dropped with them)."""
    ps = tb.model.pss()[0].name
    worker = tb.model.workers()[0].name
    intf = tb.model.links_between(ps, "t1_1")[0].intf("t1_1")
    root = tb.mn.switches[0]
    tc = ["tc", "class", "replace", "dev", intf, "parent", "5:", "classid", "5:1", "htb", "rate", "10mbit"]
    run(root, [*tc, "ceil", "10mbit", "burst", "15000b", "cburst", "15000b", "quantum", "1514"])
    leaf = ["tc", "qdisc", "replace", "dev", intf, "parent", "5:1", "handle", "10:"]
    mtu = tb.model.spec.mtu
    run(root, [*leaf, *leaf_qdisc(2, mtu, tb.tso)])  # the testbed's kind of FIFO, two frames long
    bridges = [s.name for s in tb.model.switches()]
    code = (
        "import socket,time\n"
        "s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n"
        "for i in range(3000):\n"
        "    try:\n"
        f"        s.sendto(b'x'*1400,('{tb.model.nodes[ps].ip}',9))\n"
        "    except OSError:\n"
        "        time.sleep(0.001)\n"
        "    time.sleep(0.0001)\n"
    )
    try:
        before = datapath.Snapshot.take(bridges)
        rx0, _ = _rx_tx_packets(tb, ps)
        _, tx0 = _rx_tx_packets(tb, worker)
        run(tb.host(worker), [sys.executable, "-c", code])
        time.sleep(2)  # the 10 Mbit/s queue drains
        rx1, _ = _rx_tx_packets(tb, ps)
        _, tx1 = _rx_tx_packets(tb, worker)
        drops = datapath.compare(before, datapath.Snapshot.take(bridges))
    finally:
        mbps = tb.model.links_between(ps, "t1_1")[0].mbps
        run(root, [*tc[:-2], "rate", f"{mbps:g}mbit", "ceil", f"{mbps:g}mbit", "burst", "15000b", "cburst", "15000b"])
        run(root, [*leaf, *leaf_qdisc(queue_pkts_for(mtu), mtu, tb.tso)])
    port = next(p for p in drops.ports if p.intf == intf)
    network_lost = (tx1 - tx0) - (rx1 - rx0)
    counted = sum(p.lost for p in drops.ports) + drops.received_dropped
    assert port.exact and port.tc_dropped > 0, port
    assert network_lost > 100, (tx1 - tx0, rx1 - rx0)
    assert counted == network_lost, (port, drops.rx_dropped, network_lost)


def test_the_send_socket_has_room_for_every_switch_queue_full(tb):
    """Bring-up gives ovs-vswitchd's send socket room for all of this network's switch-side
    queues full at once (32 MiB, the set-up's default, holds ~14 at MTU 1500)."""
    from emulation.shaping import queue_pkts_for

    ports = sum(not tb.model.nodes[e].is_host for ln in tb.model.links for e in (ln.a, ln.b))
    sock = datapath.send_socket()
    assert sock is not None and sock.sndbuf >= datapath.sndbuf_for(ports, queue_pkts_for(1500)), sock


def test_the_buffer_counts_every_queued_frame_at_its_mtu():
    assert datapath.frame_charge_bytes(1500) == 2304  # the ~2.3 kB per 1514-byte frame measured
    assert datapath.frame_charge_bytes(9000) == 16640  # a 16 KiB allocation per jumbo frame
    assert datapath.sndbuf_for(2, 1000) == datapath.WANT_SNDBUF  # small networks keep the floor
    assert datapath.sndbuf_for(54, 1000) == 54 * 1000 * 2304  # psnet-testbed: 119 MiB
    assert datapath.sndbuf_for(10_000, 1000) == datapath.MAX_SNDBUF
