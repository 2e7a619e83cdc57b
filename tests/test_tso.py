"""Userspace TSO (emulation.tso): GSO packets cross the datapath whole, for the runs that need it.

Which runs use it (PSNET_TSO: auto, 1, 0) is decided from the daemon's log, the network's demand
and the cached ceiling of frames; those decisions are checked on files. Real emulation (root) of
the smallest PSNet (`psnet-1tor`): under auto it gets TSO only when its demand is over the
ceiling of frames (a cache written for the test says where that is), and the interfaces'
segmentation offloads follow; with TSO a worker's TCP segments of many frames cross ECS and ToR as
one packet each, the ToR's shaped queue to the PS still holds the cable's rate, nothing is lost,
and the bytes the fidelity monitor reads (the interface's count, headers put back per frame) are
the frames' bytes HTB shaped.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from emulation import measure, sampler, tso
from emulation.net import Testbed
from emulation.tso import wire_bytes
from topologies.build import build_network
from topologies.schema import InputError, load_spec
from topologies.spec import record_ceiling

TOPO = "topologies/psnet-1tor.yaml"


def _port_counts(intf: str) -> tuple[int, int, int]:
    """(bytes its qdisc sent, as HTB counts frames; bytes and packets its interface counted)."""
    text = subprocess.run(["tc", "-s", "qdisc", "show", "dev", intf, "root"], capture_output=True, text=True).stdout
    sent = int(re.search(r"Sent (\d+) bytes", text).group(1))
    return (sent, *sampler.tx_counters(intf))


@pytest.fixture
def logs(tmp_path):
    """ovs-vswitchd logs: one whose daemon took TSO at its last start, one restarted without it."""
    started = tso.STARTED + b"\n"
    with_tso, without = tmp_path / "with.log", tmp_path / "without.log"
    with_tso.write_bytes(b"an older start\n" + started + b"2026|00007|" + tso.TSO_ON + b"\n")
    without.write_bytes(started + b"2026|00007|" + tso.TSO_ON + b"\n" + started + b"more\n")
    return with_tso, without


@pytest.fixture
def frames_ceiling(tmp_path, monkeypatch):
    """A cache of this machine's ceilings written for the test: frames 1,000 Mbit/s."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    record_ceiling(1000.0, {"measured": "2026-11-30", "tso": False})
    return 1000.0


def test_psnet_tso_reads_auto_on_and_off_and_names_a_wrong_value(monkeypatch):
    monkeypatch.delenv("PSNET_TSO", raising=False)
    assert tso.mode() == "auto"
    for raw, want in (("1", "on"), ("ON", "on"), ("0", "off"), ("off", "off"), ("auto", "auto"), ("", "auto")):
        monkeypatch.setenv("PSNET_TSO", raw)
        assert tso.mode() == want, raw
    monkeypatch.setenv("PSNET_TSO", "yes")
    with pytest.raises(InputError, match=r"^PSNET_TSO=yes: .*use auto \(the default\), 1 .* or 0"):
        tso.mode()


def test_auto_gives_tso_to_a_demand_over_the_frames_ceiling_only(logs, frames_ceiling, monkeypatch):
    with_tso, without = logs
    monkeypatch.setenv("PSNET_TSO", "auto")
    assert not tso.enabled(frames_ceiling * 0.9, 1500, with_tso)
    assert tso.enabled(frames_ceiling * 1.1, 1500, with_tso)
    assert not tso.enabled(frames_ceiling * 10, 1500, without)  # a daemon without it: never
    monkeypatch.setenv("PSNET_TSO", "1")
    assert tso.enabled(1.0, 1500, with_tso) and not tso.enabled(1.0, 1500, without)
    monkeypatch.setenv("PSNET_TSO", "0")
    assert not tso.enabled(frames_ceiling * 10, 1500, with_tso)


def test_a_networks_demand_is_its_hosts_nics_over_its_longest_switch_path():
    for path, hops in (("topologies/leafspine-rat.yaml", 3), ("topologies/fattree-k4.yaml", 5)):
        net = build_network(load_spec(path), path)
        nics = sum(ln.mbps for h in net.hosts() for ln in net.links_of(h.name))
        assert tso.demand_mbps(net) == pytest.approx(nics * hops / 3), path


@pytest.mark.root
def test_auto_chooses_the_datapath_at_bring_up_and_the_offloads_follow(frames_ceiling, monkeypatch):
    assert tso.daemon_has_tso(), "ovs-vswitchd has no userspace TSO: run scripts/setup.sh"
    monkeypatch.setenv("PSNET_TSO", "auto")
    net = build_network(load_spec(TOPO), TOPO)
    demand = tso.demand_mbps(net)
    for ceiling_mbps, want in ((demand * 1.5, False), (demand / 1.5, True)):
        record_ceiling(ceiling_mbps, {"measured": "2026-11-30", "tso": False})
        with Testbed(TOPO) as tb:
            worker = tb.model.workers()[0].name
            intf = tb.model.links_of(worker)[0].intf(worker)
            features = tb.mn.get(worker).cmd(f"ethtool -k {intf}")
            assert tb.tso is want, (ceiling_mbps, demand)
            on = re.search(r"tcp-segmentation-offload: (on|off)", features).group(1)
            assert on == ("on" if want else "off"), features


@pytest.mark.root
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
