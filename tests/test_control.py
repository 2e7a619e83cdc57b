"""Real emulations (root): the controller's reconfiguration and rerouting move real traffic, and
every exit path leaves nothing behind. (A separate module from test_emulation.py: two testbeds
with the same switch names cannot be up at once, and pytest keeps module fixtures until the
module ends.)"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from emulation import measure
from emulation.net import Testbed

pytestmark = pytest.mark.root
TOPO = "topologies/{}.yaml"


def verdicts(tb: Testbed, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], bool]:
    """measure.reachable, checked to hold a verdict for every pair: it returns {} when a shell
    prints nothing, and all({}.values()) would pass vacuously."""
    got = measure.reachable(tb, pairs)
    assert len(pairs) > 0 and sorted(got) == sorted(pairs), f"pairs asked {sorted(pairs)}, answered {sorted(got)}"
    return got


@pytest.fixture
def psnet(no_leftovers):
    with Testbed(TOPO.format("psnet-testbed")) as t:
        yield t


def test_ecs_reconfiguration_moves_traffic_to_new_tor(psnet):
    tb = psnet
    w, ps = "w1_1_1", "ps1_1"
    assert tb.circuits()[w] == "t1_1"
    reply = tb.reconfigure(w, "t1_3")
    assert reply["circuits"][w] == "t1_3"
    assert reply["deployment"] == {"1": [1, 2, 3]}
    slot = tb.state()["circuit_links"][w][3]  # the new ToR's port of the ECS-ToR cable
    before = measure.port_packets("t1_3")[slot][0]
    assert measure.measured_switches(tb, w, ps) == {"ecs1", "t1_3"}
    assert measure.port_packets("t1_3")[slot][0] - before >= 50  # ToR port counter saw it
    assert measure.measured_switches(tb, ps, w) == {"ecs1", "t1_3"}  # replies leave on ps1_1's t1_3 NIC
    assert all(verdicts(tb, [(w, p.name) for p in tb.model.pss()]).values())
    events = [e["event"] for e in tb.request("events")["events"]]
    seq = events[events.index("tc") :]
    assert seq[:5] == ["tc", "ccc", "ecs", "cnc", "hosts"]


def test_failed_tor_ps_link_recircuits_the_tors_workers(psnet):
    """Section 3.4: the TC moves the workers of a ToR that lost a PS cable to working ToRs (the
    least loaded first), the ECS re-circuits them; repaired, they go home."""
    tb = psnet
    before = tb.circuits()
    moved = sorted(w for w, t in before.items() if t == "t1_1")
    reply = tb.set_link("t1_1", "ps1_1", up=False)
    assert reply["recircuited"] == ["ecs1"]
    after = tb.circuits()
    assert all(after[w] in ("t1_2", "t1_3") for w in moved)
    assert sorted(reply["deployment"]["1"]) == [0, 3, 3]
    assert {w: t for w, t in after.items() if w not in moved} == {w: t for w, t in before.items() if w not in moved}
    pairs = [(w, p.name) for w in moved for p in tb.model.pss()]
    assert all(verdicts(tb, pairs + [(b, a) for a, b in pairs]).values())
    for w in moved:  # measured on the switches' counters: through the ECS and the new ToR only
        assert measure.measured_switches(tb, w, "ps1_1") == {"ecs1", after[w]}
    events = [e["event"] for e in tb.request("events")["events"] if e["event"] != "port"]  # OVS port status
    assert events[events.index("link") :][:6] == ["link", "tc", "ccc", "ecs", "cnc", "hosts"]
    tb.set_link("t1_1", "ps1_1", up=True)
    assert tb.circuits() == before
    assert measure.measured_switches(tb, moved[0], "ps1_1") == {"ecs1", "t1_1"}


def _port_config(bridge: str, port: int) -> str:
    """The OpenFlow port's config flags as ovs-ofctl prints them (e.g. "NO_RECV NO_FWD", or "0")."""
    out = subprocess.run(
        ["ovs-ofctl", "-O", "OpenFlow13", "dump-ports-desc", bridge], capture_output=True, text=True, check=True
    ).stdout
    block = out.split(f" {port}(")[1]
    return block.split("config:")[1].splitlines()[0].strip()


def test_ecs_tor_slots_are_patch_ports_and_a_failed_one_stops_until_repaired(psnet):
    """The ECS-ToR slots are OVS patch ports (patch_cables, the default): no kernel interface, one
    datapath pass for ECS and ToR. Failing t1_1's slots stops both ends of each patch cable (no
    receive, no forward: a patch port has no interface to take down) and the TC moves t1_1's
    workers to the other ToRs; repaired, the ports forward again and the workers come home."""
    tb = psnet
    slots = tb.model.links_between("ecs1", "t1_1")
    assert slots and all(tb.model.is_patch(ln) for ln in slots)
    for ln in slots:
        for end in (ln.a, ln.b):
            kind = subprocess.run(["ovs-vsctl", "get", "Interface", ln.intf(end), "type"],
                                  capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
            assert kind == "patch" and not Path(f"/sys/class/net/{ln.intf(end)}").exists()
    before = tb.circuits()
    moved = sorted(w for w, t in before.items() if t == "t1_1")
    assert moved and measure.measured_switches(tb, moved[0], "ps1_1") == {"ecs1", "t1_1"}
    reply = tb.set_link("ecs1", "t1_1", up=False)
    assert reply["recircuited"] == ["ecs1"]
    for ln in slots:
        for end in (ln.a, ln.b):
            assert _port_config(end, ln.port_of(end)) == "NO_RECV NO_FWD"
    after = tb.circuits()
    assert all(after[w] in ("t1_2", "t1_3") for w in moved)
    pairs = [(w, p.name) for w in moved for p in tb.model.pss()]
    assert all(verdicts(tb, pairs + [(b, a) for a, b in pairs]).values())
    tb.set_link("ecs1", "t1_1", up=True)
    assert all(_port_config(ln.a, ln.port_a) == "0" for ln in slots)
    assert tb.circuits() == before
    assert measure.measured_switches(tb, moved[0], "ps1_1") == {"ecs1", "t1_1"}


def test_failed_tor_switch_recircuits_and_repair_brings_workers_home(psnet):
    tb = psnet
    before = tb.circuits()
    on_tor = sorted(w for w, t in before.items() if t == "t1_2")
    reply = tb.set_node("t1_2", up=False)
    after = tb.circuits()
    assert on_tor and all(after[w] in ("t1_1", "t1_3") for w in on_tor)
    assert reply["deployment"]["1"][1] == 0 and sum(reply["deployment"]["1"]) == 6
    pairs = [(w, p.name) for w in on_tor for p in tb.model.pss()]
    assert all(verdicts(tb, pairs + [(b, a) for a, b in pairs]).values())
    tb.set_node("t1_2", up=True)
    assert tb.circuits() == before
    assert measure.measured_switches(tb, on_tor[0], "ps1_1") == {"ecs1", "t1_2"}


def test_rate_change_is_shaped_and_survives_a_cable_bounce(psnet):
    tb = psnet
    w, ps = "w1_1_1", "ps1_1"
    full = measure.rates_measured_twice_if_slow(tb, [(w, ps)], 3, 0.9 * 100)
    assert full[-1][0][0].achieved_mbps > 0.9 * 100, measure.describe_samples(full)  # 1000 Mbit/s paper, scale 10
    assert tb.set_rate(w, "ecs1", 400) == pytest.approx(40)
    slow = measure.rates_measured_twice_if_slow(tb, [(w, ps)], 3, 0.85 * 40)
    assert 0.85 * 40 < slow[-1][0][0].achieved_mbps < 1.05 * 40, measure.describe_samples(slow)
    tb.set_link(w, "ecs1", up=False)
    assert not any(verdicts(tb, [(w, ps)]).values())
    tb.set_link(w, "ecs1", up=True)
    again = measure.rates_measured_twice_if_slow(tb, [(w, ps)], 3, 0.85 * 40)
    # the qdisc outlived the link going down
    assert 0.85 * 40 < again[-1][0][0].achieved_mbps < 1.05 * 40, measure.describe_samples(again)


def test_fattree_failed_agg_link_is_routed_around(no_leftovers):
    with Testbed(TOPO.format("fattree-testbed")) as tb:
        w, ps = tb.model.workers()[-1].name, tb.model.pss()[0].name
        path = measure.model_switches(tb, w, ps)
        tor, agg = path[0], path[1]
        tb.set_link(tor, agg, up=False)
        assert all(verdicts(tb, [(w, ps), (ps, w)]).values())
        got = measure.measured_switches(tb, w, ps)
        assert agg not in got and len(got) == 5


def test_a_shell_interrupted_mid_command_does_not_stop_the_teardown(no_leftovers):
    """Ctrl-C/SIGTERM inside a host's cmd() leaves Mininet's shell marked busy; Mininet's own
    stop() then fails on its first command. The bridges must go anyway (seen in CI: a SIGTERM
    during `topo check` left all twelve FatTree bridges behind)."""
    with Testbed(TOPO.format("psnet-1tor")) as tb:
        tb.host(tb.model.workers()[0].name).waiting = True
    # no_leftovers: no bridge, no controller


def test_exception_inside_run_leaves_nothing_behind(no_leftovers):
    with pytest.raises(RuntimeError, match="boom"), Testbed(TOPO.format("psnet-testbed")):
        raise RuntimeError("boom")


def test_crashed_controller_is_reported_and_leaves_nothing_behind(no_leftovers):
    from controller.channel_client import ChannelError

    with pytest.raises(ChannelError, match="controller"), Testbed(TOPO.format("psnet-testbed")) as tb:
        tb.controller.kill()
        tb.controller.wait()
        tb.state()
