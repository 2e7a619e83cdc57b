"""Real emulations (root): each shipped prototype is built, routed and measured from inside its
hosts, and the controller's reconfiguration and rerouting move real traffic."""

from __future__ import annotations

import pytest

from emulation import measure
from emulation.net import Testbed
from testbed.check import check_mtu, check_ps_nics, check_shaping

pytestmark = pytest.mark.root
TOPO = "topologies/{}.yaml"


@pytest.fixture(scope="module", params=["psnet-testbed", "fattree-testbed", "bcube-4-1", "psnet-2modules"])
def tb(request):
    with Testbed(TOPO.format(request.param)) as t:
        yield t


def test_intended_pairs_reachable(tb):
    pairs = tb.model.intended_pairs()
    res = measure.reachable(tb, pairs)
    assert len(res) == len(pairs)
    assert [p for p, ok in res.items() if not ok] == []


def test_paths_taken_match_model(tb):
    """Rule counters of the switches that forwarded a one-way probe equal the model's path."""
    w = tb.model.workers()[-1].name
    ps = tb.model.pss()[0].name
    for src, dst in [(w, ps), (ps, w)]:
        want = measure.model_switches(tb, src, dst)
        assert measure.measured_switches(tb, src, dst) == set(want)
        if tb.model.kind == "psnet" and tb.model.nodes[src].module == tb.model.nodes[dst].module:
            assert len(want) == 2  # the paper's worker->PS path: the ECS and one ToR
        if tb.model.kind == "fattree":
            assert len(want) in (3, 5)  # same pod via one agg, other pod via a core
        if tb.model.kind == "bcube":
            assert len(want) <= tb.model.spec.k + 1


def test_ps_served_on_the_workers_tor_nic(tb):
    if tb.model.kind != "psnet":
        pytest.skip("multi-NIC PSs exist only in PSNet")
    rows = check_ps_nics(tb)
    assert rows and all(r.ok for r in rows), [r for r in rows if not r.ok]
    # every NIC of the PS carries someone's traffic in the balanced prototype
    nics = {r.expected.split()[0] for r in rows if r.subject.endswith(tb.model.pss()[0].name)}
    assert len(nics) == tb.model.spec.tors


def test_shaping_within_90_to_100_percent(tb):
    (row,) = check_shaping(tb, seconds=3)
    assert row.ok, row


def test_full_mtu_packets_cross_unfragmented(tb):
    row = check_mtu(tb)
    assert row.ok and row.expected == "2/2 1500-byte packets, unfragmented", row


def test_switch_egress_is_shaped_when_flows_share_a_cable(tb):
    """Two workers pushing into one PS NIC get its rate together, not each: the switch side of
    every cable is shaped too (OVS resets a port's qdisc when it adds it, so order matters)."""
    w = [n.name for n in tb.model.workers() if tb.circuits().get(n.name) == "t1_1"][:2]
    if len(w) < 2:
        pytest.skip("needs two workers circuited to one PSNet ToR")
    ps = tb.model.pss()[0].name
    nic = next(ln for ln in tb.model.links_between(ps, "t1_1")).mbps
    samples = measure.rates_measured_twice_if_slow(tb, [(w[0], ps), (w[1], ps)], 3, 0.90 * nic)
    total = sum(r.achieved_mbps for r in samples[-1][0])
    assert 0.90 * nic <= total <= 1.0 * nic, (measure.describe_samples(samples), nic)


def test_hosts_receive_in_napi_threads_of_their_own(tb):
    """Every host interface has GRO on and a threaded NAPI (a napi/<intf> kernel thread), so the
    receiving hosts' TCP does not run in ovs-vswitchd's thread (emulation.shaping.rx_napi_cmds);
    switch-side ends keep GRO off."""
    import subprocess

    from emulation.hostcmd import run

    threads = subprocess.run(["ps", "-eo", "comm"], capture_output=True, text=True, check=True).stdout
    for h in tb.model.hosts()[:3]:
        for ln in tb.model.links_of(h.name):
            x = ln.intf(h.name)
            node = tb.host(h.name)
            assert "generic-receive-offload: on" in run(node, ["ethtool", "-k", x])
            flag = ["unshare", "-m", "sh", "-c", f"mount -t sysfs sysfs /mnt && cat /mnt/class/net/{x}/threaded"]
            assert run(node, flag).strip() == "1", x
            assert f"napi/{x}"[:15] in threads, x  # a kernel thread's name is cut to 15 characters
            sw = ln.intf(ln.other(h.name))
            out = subprocess.run(["ethtool", "-k", sw], capture_output=True, text=True, check=True).stdout
            assert "generic-receive-offload: off" in out
