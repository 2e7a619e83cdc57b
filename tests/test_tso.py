"""Userspace TSO (emulation.tso): GSO packets cross the datapath whole, capped at a few ms of link.

Whether runs use it (PSNET_TSO: 1, the default, or 0) is decided from the daemon's log; that is
checked on log files. Real emulation (root) of the smallest PSNet (`psnet-1tor`): every host
interface's GSO size is capped at GSO_BURST_MS of the slowest link; a worker's TCP segments of
several frames cross ECS and ToR as one packet each, the ToR's shaped queue to the PS still holds
the cable's rate, nothing is lost, and the bytes the fidelity monitor reads (the interface's
count, headers put back per frame) are the frames' bytes HTB shaped.
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


def test_psnet_tso_reads_on_and_off_and_names_a_wrong_value(monkeypatch):
    monkeypatch.delenv("PSNET_TSO", raising=False)
    assert tso.mode() == "on"
    for raw, want in (("1", "on"), ("ON", "on"), ("0", "off"), ("off", "off"), ("", "on")):
        monkeypatch.setenv("PSNET_TSO", raw)
        assert tso.mode() == want, raw
    monkeypatch.setenv("PSNET_TSO", "auto")
    with pytest.raises(InputError, match=r"^PSNET_TSO=auto: .*use 1 \(userspace TSO, the default\) or 0"):
        tso.mode()


def test_runs_use_tso_where_the_daemon_took_it_unless_turned_off(logs, monkeypatch):
    with_tso, without = logs
    monkeypatch.delenv("PSNET_TSO", raising=False)
    assert tso.enabled(with_tso) and not tso.enabled(without)  # restarted without it: never
    monkeypatch.setenv("PSNET_TSO", "0")
    assert not tso.enabled(with_tso)


def test_a_daemons_yes_is_kept_until_it_restarts(tmp_path, monkeypatch):
    """Every bring-up asks; the log is read once per daemon that has TSO (its PID file unchanged),
    and again after a restart rewrites the PID file. A no is never kept."""
    pid, log = tmp_path / "ovs-vswitchd.pid", tmp_path / "ovs.log"
    monkeypatch.setattr(tso, "OVS_PID_FILES", (pid,))
    pid.write_text("100\n")
    log.write_bytes(tso.STARTED + b"\n")
    assert not tso.daemon_has_tso(log)
    log.write_bytes(tso.STARTED + b"\n2026|00007|" + tso.TSO_ON + b"\n")
    assert tso.daemon_has_tso(log)
    log.write_bytes(tso.STARTED + b"\nrestarted by hand, the PID file not rewritten\n")
    assert tso.daemon_has_tso(log)  # kept: the log is not read again
    pid.write_text("200\n")  # a new start
    assert not tso.daemon_has_tso(log)


def test_the_gso_cap_is_a_few_ms_of_the_slowest_link_within_two_frames_and_64_kb():
    for path, want in (("topologies/leafspine-plink.yaml", 2_962), ("topologies/psnet-testbed.yaml", 25_000)):
        net = build_network(load_spec(path), path)
        slowest = min(ln.mbps for ln in net.links)
        assert tso.gso_cap(net) == max(2 * 1448 + 66, int(slowest * 1e6 / 8 * tso.GSO_BURST_MS / 1e3)), path
        assert tso.gso_cap(net) == want, (path, slowest)
    fast = build_network(load_spec("topologies/psnet-testbed.yaml").model_copy(update={"scale": 1}))
    assert tso.gso_cap(fast) == tso.GSO_MAX_BYTES
    assert tso.gso_cmd("h1-eth0", 25_000, 1500)[-4:] == ["gso_max_size", "25000", "gso_max_segs", "17"]


@pytest.mark.root
def test_with_userspace_tso_gso_packets_cross_the_datapath_and_count_as_their_frames(monkeypatch):
    """The module doc, measured: packets of several frames on the ToR's port, wire bytes within
    0.5% of HTB's, the rate held, no drop, and the verdict says tso."""
    assert tso.daemon_has_tso(), (
        "ovs-vswitchd has no userspace TSO: run scripts/setup.sh (it restarts it with the setting)"
    )
    monkeypatch.delenv("PSNET_TSO", raising=False)  # the default
    with Testbed(TOPO) as tb:
        assert tb.tso
        ps, worker = tb.model.pss()[0].name, tb.model.workers()[0].name
        intf = tb.model.links_between(ps, "t1_1")[0].intf("t1_1")
        shown = tb.mn.get(worker).cmd(f"ip -d link show {tb.model.links_of(worker)[0].intf(worker)}")
        assert f"gso_max_size {tso.gso_cap(tb.model)} " in shown, shown
        before = _port_counts(intf)
        monitor = tb.monitor().start()
        (rate,) = measure.iperf(tb, [(worker, ps)], seconds=4)
        verdict = monitor.stop()
        shaped, counted, packets = (b - a for a, b in zip(before, _port_counts(intf), strict=True))
        assert counted / packets > 4 * 1514, (counted, packets)  # packets of several frames on average
        # within 1%: 0.1% with 64 kB packets, 0.55% with GSO packets capped at ~8 frames (2026-11-30)
        assert wire_bytes(counted, packets, tb.model.spec.mtu) == pytest.approx(shaped, rel=0.01)
        nic = tb.model.links_between(ps, "t1_1")[0].mbps
        assert 0.90 * nic <= rate.achieved_mbps <= nic, (rate.achieved_mbps, nic)
        assert verdict.datapath_drops == 0 and verdict.datapath_rx_drops == 0, verdict.reason
        assert verdict.tso and verdict.busiest_utilisation == pytest.approx(1.0, abs=0.06), verdict.as_dict()
