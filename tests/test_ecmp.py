"""ECMP as a switch does it (`routing: ecmp`, FatTree's default): per-pair next-hop sets and
ECMP groups as data (pure), their OpenFlow form (a per-switch `multipath` hash and one bucket
rule per port), and on a real FatTree k=4 several TCP connections of one host pair spread over
more than one core path (root)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from controller.routing import Flow, Group, compute_paths, group_id, next_hops, switch_flows
from controller.tc import initial_circuits
from emulation.sampler import tx_bytes
from topologies.build import build_network, load_network

TOPOLOGIES = Path(__file__).resolve().parents[1] / "topologies"


@pytest.fixture
def k4():
    net = load_network(TOPOLOGIES / "fattree-k4.yaml")
    assert net.spec.routing == "ecmp"  # FatTree's default
    return net


def test_next_hops_fan_out_up_and_converge_down(k4):
    hops = next_hops(k4, initial_circuits(k4), pairs=[("h0_0_2", "h1_0_2"), ("h0_0_2", "h0_1_2"), ("h0_0_2", "h0_0_3")])
    inter = hops[("h0_0_2", "h1_0_2")]
    assert len(inter["e0_0"]) == 2 and len(inter["a0_2"]) == 2 and len(inter["a0_3"]) == 2  # up: a choice
    assert {n for n in inter if n.startswith("c")} == {"c1_1", "c1_2", "c2_1", "c2_2"}  # all 4 core paths
    assert all(len(inter[n]) == 1 for n in inter if n[0] in "c" or n in ("a1_2", "a1_3", "e1_0"))  # down: one
    intra_pod = hops[("h0_0_2", "h0_1_2")]
    assert len(intra_pod["e0_0"]) == 2 and not any(n.startswith("c") for n in intra_pod)
    assert hops[("h0_0_2", "h0_0_3")] == {"h0_0_2": (1,), "e0_0": (2,)}  # same ToR: no choice


def test_ecmp_rules_send_to_select_groups_where_there_is_a_choice(k4):
    circuits = initial_circuits(k4)
    flows = switch_flows(k4, circuits, compute_paths(k4, circuits))
    groups = {sw: {g.group_id: g for g in rules if isinstance(g, Group)} for sw, rules in flows.items()}
    assert all(len(g) == 1 for sw, g in groups.items() if sw.startswith(("e", "a")))  # the 2 uplinks
    assert all(not g for sw, g in groups.items() if sw.startswith("c"))  # a core has one way down
    (up,) = groups["e0_0"].values()
    assert up.ports == (3, 4) and up.group_id == group_id((3, 4))  # ports 1-2 hosts, 3-4 aggs
    to_group = [f for f in flows["e0_0"] if isinstance(f, Flow) and f.group is not None]
    assert len(to_group) == 2 * 14  # both hosts of e0_0 to the 14 hosts of other ToRs
    assert all(f.out_port is None and f.group == up.group_id for f in to_group)


def test_hashed_and_balanced_install_no_group(k4):
    for routing in ("hashed", "balanced"):
        net = build_network(k4.spec.model_copy(update={"routing": routing}))
        circuits = initial_circuits(net)
        flows = switch_flows(net, circuits, compute_paths(net, circuits))
        assert not any(isinstance(r, Group) or r.group is not None for rules in flows.values() for r in rules)


@pytest.mark.root
def test_connections_of_one_pair_spread_over_core_paths():
    """8 TCP connections h0_0_2 -> h1_0_2 (other pod): bytes on at least two agg->core links;
    the chance that a per-connection hash sends all 8 one way is 4 x (1/4)^8 = 6e-5."""
    from emulation.net import Testbed

    with Testbed(TOPOLOGIES / "fattree-k4.yaml") as tb:
        desc = subprocess.run(
            ["ovs-ofctl", "-O", "OpenFlow13", "dump-flows", "e0_0"], capture_output=True, text=True, check=True
        ).stdout
        # the ECMP group of e0_0's two uplinks: a hash over 2 buckets, bucket 0 -> port 3, 1 -> port 4
        assert re.search(r"multipath\(symmetric_l4,\d+,hrw,2,0,NXM_NX_REG0\[0\.\.15\]\),resubmit\(,1\)", desc), desc
        assert re.search(r"table=1,.*reg0=0,reg1=\S+ actions=output:3", desc), desc
        assert re.search(r"table=1,.*reg0=0x1,reg1=\S+ actions=output:4", desc), desc
        cores = [ln for ln in tb.model.links if ln.kind == "agg-core"]
        up = {ln.intf(ln.a): ln for ln in cores if ln.a.startswith("a0_")}  # pod 0's aggs toward the cores
        assert len(up) == 4
        before = {i: tx_bytes(i) for i in up}
        ip = tb.model.nodes["h1_0_2"].ip
        tb.host("h1_0_2").cmd("iperf3 -s -D -1 -p 5201")
        time.sleep(0.5)
        out = tb.host("h0_0_2").cmd(f"iperf3 -c {ip} -p 5201 -P 8 -t 3")
        assert "iperf Done" in out, out[-500:]
        grew = {i: tx_bytes(i) - before[i] for i in up}
        busy = [i for i, b in grew.items() if b > 500_000]
        assert len(busy) >= 2, grew
        assert sum(grew.values()) > 4_000_000, grew  # 3 s at the 25 Mbit/s of one host link


def test_group_buckets_count_as_rules_of_their_port():
    from emulation.datapath import group_buckets

    desc = (
        "OFPST_GROUP_DESC reply (OF1.3) (xid=0x2):\n"
        " group_id=47350710,type=select,bucket=weight:1,actions=output:3,bucket=weight:1,actions=output:4\n"
    )
    stats = (
        "OFPST_GROUP reply (OF1.3) (xid=0x6):\n"
        " group_id=47350710,duration=5.388s,ref_count=28,packet_count=7973,byte_count=12023870,"
        "bucket0:packet_count=2051,byte_count=3096616,bucket1:packet_count=5922,byte_count=8927254\n"
    )
    got = [(r.key, r.out_port, r.packets, r.age_s) for r in group_buckets("e0_0", desc, stats)]
    assert got == [("group=47350710,bucket=0", 3, 2051, 5.388), ("group=47350710,bucket=1", 4, 5922, 5.388)]


class _Datapath:
    """What ofctl needs of an os-ken Datapath; every message is serialised as it would be sent."""

    def __init__(self, dpid: int) -> None:
        from os_ken.ofproto import ofproto_v1_3, ofproto_v1_3_parser

        self.ofproto, self.ofproto_parser, self.id = ofproto_v1_3, ofproto_v1_3_parser, dpid
        self.sent: list = []

    def send_msg(self, msg) -> None:
        msg.serialize()
        self.sent.append(msg)

    def set_xid(self, msg) -> None:
        msg.set_xid(len(self.sent) + 1)


def test_ecmp_group_becomes_a_per_switch_hash_and_bucket_rules(k4):
    from controller import ofctl
    from controller.routing import ECMP_TABLE, bucket_flows, ecmp_basis

    circuits = initial_circuits(k4)
    rules = switch_flows(k4, circuits, compute_paths(k4, circuits))["e0_0"]
    (up,) = [g for g in rules if isinstance(g, Group)]
    dp = _Datapath(k4.nodes["e0_0"].dpid)
    ofctl.program(dp, set(), rules)
    mods = [m for m in dp.sent if type(m).__name__ == "OFPFlowMod"]
    buckets = [m for m in mods if m.table_id == ECMP_TABLE]
    assert mods[: len(buckets)] == buckets  # buckets first: routes resubmit to them
    assert [(dict(m.match.items()), m.instructions[0].actions[0].port) for m in buckets] == [
        ({"reg0": 0, "reg1": up.group_id}, 3),
        ({"reg0": 1, "reg1": up.group_id}, 4),
    ]
    to_group = [m for m in mods if m.table_id == 0 and len(m.instructions[0].actions) == 3]
    assert len(to_group) == 2 * 14
    load, hash_, resubmit = to_group[0].instructions[0].actions
    assert load.key == "reg1" and load.value == up.group_id
    assert (hash_.max_link, hash_.dst, hash_.basis) == (1, "reg0", ecmp_basis(dp.id))
    assert resubmit.table_id == ECMP_TABLE
    bases = {ecmp_basis(k4.nodes[n].dpid) for n in ("e0_0", "e0_1", "a0_2", "a0_3", "a1_2", "e1_0")}
    assert len(bases) == 6  # each switch hashes with its own seed: choices do not repeat hop to hop
    # removing the group removes its bucket rules (after the routes that used them)
    dp2 = _Datapath(dp.id)
    ofctl.program(dp2, rules, {r for r in rules if not isinstance(r, Group) and r.group is None})
    deleted = [m for m in dp2.sent if type(m).__name__ == "OFPFlowMod"]
    assert [m.table_id for m in deleted][-2:] == [ECMP_TABLE, ECMP_TABLE]
    assert {dict(m.match.items())["reg0"] for m in deleted[-2:]} == {f.match[0][1] for f in bucket_flows(up)}
