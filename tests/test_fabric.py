"""The controller's shared state (controller.fabric.Fabric) without a switch: circuit map, failed
cables, the TC's repair, desired flows, status and the event log."""

from __future__ import annotations

import json

import pytest

from controller.fabric import Fabric
from topologies.build import load_network

PSNET = "topologies/psnet-testbed.yaml"


@pytest.fixture
def fab(tmp_path):
    return Fabric(load_network(PSNET), event_log=str(tmp_path / "events.jsonl"))


def test_initial_state_spreads_workers_over_the_tors(fab):
    st = fab.state()
    assert st["deployment"] == {"1": [2, 2, 2]}
    assert st["circuits"]["w1_1_1"] == "t1_1" and st["circuits"]["w1_3_2"] == "t1_3"
    assert st["down"] == []
    assert set(fab.desired) == {n.name for n in fab.net.switches()}  # every switch gets rules
    assert all(fab.desired[s] for s in fab.desired)


def test_failed_ps_cable_recircuits_the_tors_workers_and_repair_brings_them_home(fab):
    before = fab.state()["circuits"]
    keys = fab.set_link("t1_1", "ps1_1", up=False)
    assert len(keys) == 1 and fab.state()["down"] == [list(keys[0])]
    assert fab.repair() == ["ecs1"]  # the ECS whose circuits changed
    after = fab.state()
    assert after["deployment"]["1"][0] == 0 and sorted(after["deployment"]["1"]) == [0, 3, 3]
    assert {after["circuits"]["w1_1_1"], after["circuits"]["w1_1_2"]} <= {"t1_2", "t1_3"}
    fab.set_link("ps1_1", "t1_1", up=True)  # either order of the ends
    assert fab.repair() == ["ecs1"]
    assert fab.state()["circuits"] == before and fab.state()["down"] == []


def test_failed_cable_leaves_the_desired_rules(fab):
    """Once recomputed, no rule sends traffic out of a failed cable's port."""
    ln = fab.net.links_between("t1_1", "ps1_1")[0]
    port = ln.port_of("t1_1")
    assert any(f.out_port == port for f in fab.desired["t1_1"])
    fab.set_link("t1_1", "ps1_1", up=False)
    fab.repair()
    fab.recompute()
    assert not any(f.out_port == port for f in fab.desired["t1_1"])


def test_reconfigure_moves_the_worker_and_its_home(fab):
    circuits = fab.reconfigure("w1_1_1", "t1_3")
    assert circuits["w1_1_1"].b == "t1_3"
    assert fab.state()["deployment"] == {"1": [1, 2, 3]}
    assert fab.repair() == []  # chosen on purpose: the TC does not move it back


def test_whole_node_failure_and_unknown_elements(fab):
    keys = fab.set_node("t1_2", up=False)
    assert len(keys) == len(fab.net.links_of("t1_2"))
    assert fab.repair() == ["ecs1"]
    assert fab.state()["deployment"]["1"][1] == 0
    with pytest.raises(ValueError, match="no link between t1_1 and t1_2"):
        fab.set_link("t1_1", "t1_2", up=False)
    with pytest.raises(ValueError, match="no node nosuch"):
        fab.set_node("nosuch", up=False)


def test_status_without_switches_is_not_ready(fab):
    st = fab.status()
    names = sorted(n.name for n in fab.net.switches())
    assert st == {"ready": False, "switches": len(names), "connected": 0, "synced": 0, "missing": names}
    fab.synced.update(names)
    assert fab.status()["ready"]


def test_log_keeps_the_event_and_appends_it_to_the_file(fab, tmp_path):
    rec = fab.log("tc", worker="w1_1_1", tor="t1_3")
    assert rec["event"] == "tc" and rec["worker"] == "w1_1_1" and rec["t"] > 0
    assert fab.events == [rec]
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert [json.loads(x) for x in lines] == [rec]
