"""Multi-module PSNet on real Mininet/OVS (root): flows between two modules spread over the R
disjoint SuperNode paths (port counters of the SuperNode switch while iperf3 runs), and an
inter-module cable or a transit SuperNode failing under traffic moves the flows to the paths
that remain (the flows keep going)."""

from __future__ import annotations

import threading
import time

import pytest

from emulation import measure
from emulation.net import Testbed
from topologies.model import LinkKind

pytestmark = pytest.mark.root
TOPO = "topologies/{}.yaml"


def sn_ports(tb: Testbed, sn: str) -> dict[int, str]:
    """OpenFlow port of `sn` -> the SuperNode at the cable's other end (one entry per cable)."""
    return {ln.port_of(sn): ln.other(sn) for ln in tb.model.links_of(sn) if ln.kind is LinkKind.SUPERNODE}


def tx_packets(sn: str, ports: dict[int, str]) -> dict[int, int]:
    """Packets each inter-module port of `sn` has sent (datapath counters)."""
    counts = measure.port_packets(sn)
    return {p: counts[p][1] for p in ports}


def grew(before: dict[int, int], after: dict[int, int], at_least: int = 200) -> set[int]:
    """Ports that sent at least `at_least` packets in between (a 2 s iperf flow sends thousands)."""
    return {p for p in before if after[p] - before[p] >= at_least}


def module_flows(tb: Testbed) -> list[tuple[str, str]]:
    """Module 1's workers -> the first PS of module 2: the push direction across modules."""
    ps2 = next(p.name for p in tb.model.pss() if p.module == 2)
    return [(w.name, ps2) for w in tb.model.workers() if w.module == 1]


@pytest.mark.parametrize("topo", ["psnet-2modules", "psnet-4modules-pair"])
def test_flows_between_two_modules_use_every_disjoint_path(topo):
    with Testbed(TOPO.format(topo)) as tb:
        ports = sn_ports(tb, "sn1")
        assert len(ports) == 3  # H = 2: 3 parallel links to sn2; H = 4: one link to each other module
        before = tx_packets("sn1", ports)
        rates = measure.iperf(tb, module_flows(tb), seconds=2)
        after = tx_packets("sn1", ports)
        assert len(rates) == 3 and all(r.achieved_mbps > 0 for r in rates), rates  # rates: a loaded box varies
        assert grew(before, after) == set(ports)  # all 3 inter-module links carried traffic


def _iperf_in_background(tb: Testbed, seconds: float) -> tuple[threading.Thread, list]:
    out: list = []
    t = threading.Thread(target=lambda: out.extend(measure.iperf(tb, module_flows(tb), seconds=seconds)))
    t.start()
    return t, out


def test_cable_and_supernode_failures_under_traffic_move_flows_to_the_remaining_paths():
    with Testbed(TOPO.format("psnet-4modules-pair")) as tb:
        ports = sn_ports(tb, "sn1")
        by_peer = {peer: p for p, peer in ports.items()}
        # 1. the direct cable sn1-sn2 fails while module 1 pushes to module 2
        thread, rates = _iperf_in_background(tb, seconds=7)
        time.sleep(2.5)
        tb.set_link("sn1", "sn2", up=False)
        time.sleep(0.5)
        t0 = tx_packets("sn1", ports)
        thread.join()
        t1 = tx_packets("sn1", ports)
        assert grew(t0, t1) == {by_peer["sn3"], by_peer["sn4"]}  # the survivors carry it all
        assert t1[by_peer["sn2"]] - t0[by_peer["sn2"]] < 10  # nothing leaves by the dead cable
        assert len(rates) == 3 and all(r.achieved_mbps > 0 for r in rates), rates
        for src, dst in module_flows(tb):  # the controller's paths agree: through sn3 or sn4
            assert {"sn3", "sn4"} & set(measure.model_switches(tb, src, dst))
        tb.set_link("sn1", "sn2", up=True)
        # 2. the transit SuperNode sn3 fails under traffic: the direct link and sn4 remain
        thread, rates = _iperf_in_background(tb, seconds=7)
        time.sleep(2.5)
        tb.set_node("sn3", up=False)
        time.sleep(0.5)
        t0 = tx_packets("sn1", ports)
        thread.join()
        t1 = tx_packets("sn1", ports)
        assert grew(t0, t1) == {by_peer["sn2"], by_peer["sn4"]}
        assert t1[by_peer["sn3"]] - t0[by_peer["sn3"]] < 10
        assert len(rates) == 3 and all(r.achieved_mbps > 0 for r in rates), rates
