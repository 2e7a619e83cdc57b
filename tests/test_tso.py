"""Userspace TSO (emulation.tso), opt-in with PSNET_TSO=1: GSO packets cross the datapath whole.

Real emulation (root) of the smallest PSNet (`psnet-1tor`), its own testbed with PSNET_TSO=1:
a worker's TCP segments of many frames cross ECS and ToR as one packet each, the ToR's shaped
queue to the PS still holds the cable's rate, nothing is lost, and the bytes the fidelity monitor
reads (the interface's count, headers put back per frame) are the frames' bytes HTB shaped.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from emulation import measure, sampler, tso
from emulation.net import Testbed
from emulation.tso import wire_bytes

pytestmark = pytest.mark.root
TOPO = "topologies/psnet-1tor.yaml"


def _port_counts(intf: str) -> tuple[int, int, int]:
    """(bytes its qdisc sent, as HTB counts frames; bytes and packets its interface counted)."""
    text = subprocess.run(["tc", "-s", "qdisc", "show", "dev", intf, "root"], capture_output=True, text=True).stdout
    sent = int(re.search(r"Sent (\d+) bytes", text).group(1))
    return (sent, *sampler.tx_counters(intf))


def test_with_userspace_tso_gso_packets_cross_the_datapath_and_count_as_their_frames(monkeypatch):
    """The module doc, measured: packets of several frames on the ToR's port, wire bytes within
    0.5% of HTB's, the rate held, no drop, and the verdict says tso."""
    assert tso.daemon_has_tso(), (
        "ovs-vswitchd has no userspace TSO: run scripts/setup.sh (it restarts it with the setting)"
    )
    monkeypatch.setenv("PSNET_TSO", "1")
    with Testbed(TOPO) as tb:
        assert tb.tso
        ps, worker = tb.model.pss()[0].name, tb.model.workers()[0].name
        intf = tb.model.links_between(ps, "t1_1")[0].intf("t1_1")
        before = _port_counts(intf)
        monitor = tb.monitor().start()
        (rate,) = measure.iperf(tb, [(worker, ps)], seconds=4)
        verdict = monitor.stop()
        shaped, counted, packets = (b - a for a, b in zip(before, _port_counts(intf), strict=True))
        assert counted / packets > 4 * 1514, (counted, packets)  # packets of several frames on average
        assert wire_bytes(counted, packets, tb.model.spec.mtu) == pytest.approx(shaped, rel=0.005)
        nic = tb.model.links_between(ps, "t1_1")[0].mbps
        assert 0.90 * nic <= rate.achieved_mbps <= nic, (rate.achieved_mbps, nic)
        assert verdict.datapath_drops == 0 and verdict.datapath_rx_drops == 0, verdict.reason
        assert verdict.tso and verdict.busiest_utilisation == pytest.approx(1.0, abs=0.06), verdict.as_dict()
