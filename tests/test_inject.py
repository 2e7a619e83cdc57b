"""Timelines checked against a topology before anything is built (runs.inject): random
failure candidates, and one-line errors for events naming what the topology does not have."""

from __future__ import annotations

from pathlib import Path

import pytest

from runs.inject import candidates, plan_timeline
from topologies.build import load_network
from workloads.timeline import RandomFailures, TimelineError, TimelineEvent

TOPOLOGIES = Path(__file__).resolve().parents[1] / "topologies"


@pytest.fixture(scope="module")
def psnet():
    return load_network(TOPOLOGIES / "psnet-testbed.yaml")


@pytest.fixture(scope="module")
def fattree():
    return load_network(TOPOLOGIES / "fattree-testbed.yaml")


def ev(**kw) -> TimelineEvent:
    return TimelineEvent(at_s=1, **kw)


def test_default_candidates_never_cut_a_worker_off(psnet, fattree):
    for net in (psnet, fattree):
        c = candidates(net, RandomFailures(k=1, every_s=5))
        assert c["links"] and c["switches"]
        assert all(net.nodes[x].role.value not in ("worker", "idle") for pair in c["links"] for x in pair)
        assert all(not net.nodes[s].is_host for s in c["switches"])
    ft = candidates(fattree, RandomFailures(k=1, every_s=5))
    assert {fattree.nodes[s].role.value for s in ft["switches"]} == {"agg", "core"}  # ToRs hold hosts
    assert all({fattree.nodes[x].role.value for x in pair} <= {"tor", "agg", "core"} for pair in ft["links"])
    ps = candidates(psnet, RandomFailures(k=1, every_s=5))
    assert ("ps1_1", "t1_1") in ps["links"] and ("ecs1", "t1_1") in ps["links"]  # parallel cables once


def test_bcube_candidates_are_its_cables_and_switches():
    net = load_network(TOPOLOGIES / "bcube-4-1.yaml")
    c = candidates(net, RandomFailures(k=1, every_s=5))
    assert len(c["links"]) == len(net.links) and len(c["switches"]) == len(net.switches())


def test_kinds_narrow_the_draw(psnet):
    c = candidates(psnet, RandomFailures(k=1, every_s=5, kinds=("ps-tor",)))
    assert len(c["links"]) == 6 and all(a.startswith("ps") for a, _ in c["links"])


def test_plan_draws_random_rounds(psnet):
    rf = RandomFailures(k=2, every_s=5, count=2, seed=3, kinds=("ps-tor",))
    planned = plan_timeline(psnet, [], rf, "x.yaml")
    assert [e.action for e in planned] == ["link_down"] * 2 + ["link_up"] * 2 + ["link_down"] * 2 + ["link_up"] * 2
    assert planned == plan_timeline(psnet, [], rf, "x.yaml")


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (
            ev(action="link_down", link=("ps1_1", "t1_9")),
            r"x.yaml: timeline\[0\].link: no cable between ps1_1 and t1_9",
        ),
        (ev(action="fail_switch", node="ps1_1"), r"timeline\[0\].node: ps1_1 is a host; fail_switch takes a switch"),
        (ev(action="fail_ps", node="t1_1"), r"timeline\[0\].node: t1_1 is not a PS"),
        (ev(action="reconfigure", worker="ps1_1", tor="t1_1"), r"timeline\[0\].worker: ps1_1 is not a worker"),
        (ev(action="reconfigure", worker="w1_1_1", tor="sn1"), r"timeline\[0\].tor: sn1 is not a ToR"),
        (ev(action="repair_switch", node="nope"), r"timeline\[0\].node: no node nope"),
        (
            ev(action="set_rate", link=("ecs1", "t1_1"), mbps=500),
            r"timeline\[0\].link: ecs1-t1_1 is an OVS patch cable .*patch_cables: false",
        ),
    ],
)
def test_events_naming_what_the_topology_lacks_are_refused(psnet, event, message):
    with pytest.raises(TimelineError, match=message):
        plan_timeline(psnet, [event], None, "x.yaml")


def test_reconfigure_needs_an_ecs(fattree):
    with pytest.raises(TimelineError, match="only a PSNet topology has them"):
        plan_timeline(fattree, [ev(action="reconfigure", worker="h0_1_2", tor="e0_1")], None, "x.yaml")


def test_too_many_random_failures_are_refused_with_the_file(psnet):
    rf = RandomFailures(k=7, every_s=5, kinds=("ps-tor",))
    with pytest.raises(TimelineError, match=r"x.yaml: random_failures.k: k=7 but only 6 links"):
        plan_timeline(psnet, [], rf, "x.yaml")
