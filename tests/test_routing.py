"""TC circuits and CNC routing: pure functions of (model, circuit map, failed links), no switch."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import pytest

from controller.routing import (
    COOKIE_CIRCUIT,
    COOKIE_L2,
    COOKIE_ROUTE,
    PRIO_CIRCUIT,
    Flow,
    Group,
    compute_paths,
    host_routes,
    link_loads,
    path_links,
    path_nodes,
    switch_flows,
    taken_path,
)
from controller.tc import CircuitError, deployment, initial_circuits, recircuit, repair, slots, tor_works, worker_link
from topologies.build import build_network, load_network
from topologies.model import Network, Role
from topologies.schema import parse_spec

TOPOLOGIES = Path(__file__).resolve().parents[1] / "topologies"
SHIPPED = sorted(TOPOLOGIES.glob("*.yaml"))


def psnet(**kw) -> Network:
    data = {"kind": "psnet", "tors": 3, "ps": 2, "workers": [2, 2, 2], "worker_mbps": 1000, "scale": 10, **kw}
    return build_network(parse_spec(data, "test.yaml"))


def routed(net: Network, circuits=None, down=()):
    circuits = initial_circuits(net) if circuits is None else circuits
    return circuits, compute_paths(net, circuits, down)


def circuit_tor(circuits, worker: str) -> str:
    return circuits[worker].b


def route_of(net: Network, paths, src: str, dst: str):
    (route,) = [r for r in host_routes(net, paths)[src] if r.dst_ip == net.nodes[dst].ip]
    return route


def switches_on(net: Network, path) -> list[str]:
    return [h.node for h in path if not net.nodes[h.node].is_host]


@pytest.fixture
def testbed() -> Network:
    return load_network(TOPOLOGIES / "psnet-testbed.yaml")


# --- TC: circuits --------------------------------------------------------------------------


def test_initial_circuits_follow_the_file_deployment(testbed):
    circuits = initial_circuits(testbed)
    assert deployment(testbed, circuits) == {1: [2, 2, 2]}
    # balanced from the file: every worker stays on its home ToR (the one its address names)
    assert {w: circuit_tor(circuits, w) for w in circuits} == {w.name: f"t1_{w.index}" for w in testbed.workers()}


@pytest.mark.parametrize(
    ("workers", "tors", "expected"),
    [(6, 3, [2, 2, 2]), (7, 3, [3, 2, 2]), (5, 4, [2, 1, 1, 1]), (2, 3, [1, 1, 0])],
)
def test_initial_circuits_balance_a_count(workers, tors, expected):
    net = psnet(workers=workers, tors=tors)
    assert deployment(net, initial_circuits(net)) == {1: expected}


def test_initial_circuits_follow_a_deployment_list():
    net = psnet(workers=[1, 1, 4])
    circuits = initial_circuits(net)
    assert deployment(net, circuits) == {1: [1, 1, 4]}
    # the fewest workers leave their home ToR: one from each of ToR 1 and ToR 2
    moved = sorted(w.name for w in net.workers() if circuit_tor(circuits, w.name) != f"t1_{w.index}")
    assert moved == ["w1_1_2", "w1_2_2"]


def test_initial_circuits_per_module():
    net = psnet(modules=2, workers=[[1, 1, 1], [3, 0, 0]], ps=1)
    assert deployment(net, initial_circuits(net)) == {1: [1, 1, 1], 2: [3, 0, 0]}


def test_circuits_use_distinct_slots_of_the_right_tor():
    net = psnet(workers=[1, 1, 4])
    circuits = initial_circuits(net)
    keys = [ln.key for ln in circuits.values()]
    assert len(set(keys)) == len(keys)
    for ln in circuits.values():
        assert ln.kind == "ecs-tor" and ln.a == "ecs1"
    assert [ln.port_b for w, ln in circuits.items() if ln.b == "t1_3"] == [1, 2, 3, 4]


def test_no_circuits_outside_psnet():
    net = load_network(TOPOLOGIES / "fattree-testbed.yaml")
    assert initial_circuits(net) == {}
    assert deployment(net, {}) == {}


def test_recircuit_moves_one_worker(testbed):
    circuits = initial_circuits(testbed)
    moved = recircuit(testbed, circuits, "w1_1_1", "t1_3")
    assert deployment(testbed, moved) == {1: [1, 2, 3]}
    assert circuit_tor(moved, "w1_1_1") == "t1_3"
    assert moved["w1_1_1"] == slots(testbed, "t1_3")[2]  # first free slot: ports 1, 2 are taken
    assert {w: ln for w, ln in moved.items() if w != "w1_1_1"} == {w: ln for w, ln in circuits.items() if w != "w1_1_1"}
    assert deployment(testbed, circuits) == {1: [2, 2, 2]}  # the old map is left untouched


def cables(net: Network, a: str, b: str) -> frozenset:
    return frozenset(ln.key for ln in net.links_between(a, b))


def test_repair_moves_the_workers_of_a_tor_that_lost_a_ps_cable(testbed):
    home = initial_circuits(testbed)
    down = cables(testbed, "ps1_1", "t1_1")
    assert not tor_works(testbed, "t1_1", down) and tor_works(testbed, "t1_2", down)
    moved = repair(testbed, home, down, home)
    assert deployment(testbed, moved) == {1: [0, 3, 3]}  # least loaded first: one to each other ToR
    assert len({ln.key for ln in moved.values()}) == 6  # distinct slots
    assert repair(testbed, moved, frozenset(), home) == home  # repaired: everyone goes home


def test_repair_moves_the_workers_of_a_failed_tor_or_ecs_cable(testbed):
    home = initial_circuits(testbed)
    tor_down = frozenset(ln.key for ln in testbed.links_of("t1_2"))
    assert deployment(testbed, repair(testbed, home, tor_down, home)) == {1: [3, 0, 3]}
    ecs_cables = cables(testbed, "ecs1", "t1_3")
    assert deployment(testbed, repair(testbed, home, ecs_cables, home)) == {1: [3, 3, 0]}


def test_repair_ignores_a_failed_ps_and_a_worker_cut_off_at_its_own_cable(testbed):
    home = initial_circuits(testbed)
    dead_ps = frozenset(ln.key for ln in testbed.links_of("ps1_2"))
    assert repair(testbed, home, dead_ps, home) == home  # a dead PS is no ToR's fault
    own = frozenset({worker_link(testbed, "w1_1_1").key})
    assert repair(testbed, home, own, home) == home


def test_repair_keeps_circuits_when_no_tor_works(testbed):
    home = initial_circuits(testbed)
    down = cables(testbed, "ps1_1", "t1_1") | cables(testbed, "ps1_1", "t1_2") | cables(testbed, "ps1_2", "t1_3")
    assert not any(tor_works(testbed, t, down) for t in ("t1_1", "t1_2", "t1_3"))
    assert repair(testbed, home, down, home) == home  # nowhere better to go: the CNC routes what it can


def test_recircuit_skips_a_failed_slot(testbed):
    circuits = initial_circuits(testbed)
    free = slots(testbed, "t1_3")[2:]
    moved = recircuit(testbed, circuits, "w1_1_1", "t1_3", down=frozenset({free[0].key}))
    assert moved["w1_1_1"] == free[1]


def test_recircuit_refuses_a_full_tor():
    net = psnet(workers=[2, 2, 2], tor_downlinks=2)
    with pytest.raises(CircuitError, match="t1_2 has no free working ECS-facing port for w1_1_1"):
        recircuit(net, initial_circuits(net), "w1_1_1", "t1_2")


def test_recircuit_refuses_other_module():
    net = load_network(TOPOLOGIES / "psnet-2modules.yaml")
    with pytest.raises(CircuitError, match="not in w1_1_1's module"):
        recircuit(net, initial_circuits(net), "w1_1_1", "t2_1")


@pytest.mark.parametrize(("worker", "tor"), [("w1_1_1", "t9_9"), ("w1_1_1", "sn1"), ("w1_1_1", "ps1_1")])
def test_recircuit_refuses_an_unknown_tor(testbed, worker, tor):
    with pytest.raises(CircuitError, match=f"{tor} is not a ToR"):
        recircuit(testbed, initial_circuits(testbed), worker, tor)


@pytest.mark.parametrize("worker", ["w9_9_9", "ps1_1"])
def test_recircuit_refuses_an_unknown_worker(testbed, worker):
    with pytest.raises(CircuitError, match=f"{worker} is not a worker on an ECS"):
        recircuit(testbed, initial_circuits(testbed), worker, "t1_2")


# --- CNC: paths ----------------------------------------------------------------------------


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_every_intended_pair_has_a_loop_free_path(path):
    net = load_network(path)
    _, paths = routed(net)
    intended = net.intended_pairs()
    assert intended and all(pair in paths for pair in intended)
    for (src, dst), p in paths.items():
        assert (p[0].node, p[-1].node) == (src, dst)
        assert p[0].in_port is None and p[-1].out_port is None
        assert len({h.node for h in p}) == len(p)
        assert all(h.in_port != h.out_port for h in p[1:-1])
        assert all(not net.nodes[h.node].is_host or net.nodes[h.node].relay for h in p[1:-1])


def test_psnet_worker_ps_path_crosses_only_the_circuit_tor(testbed):
    circuits, paths = routed(testbed)
    for w in testbed.workers():
        tor = circuit_tor(circuits, w.name)
        for ps in testbed.pss():
            for src, dst in ((w.name, ps.name), (ps.name, w.name)):
                assert switches_on(testbed, paths[(src, dst)]) == [tor]
            nodes = path_nodes(testbed, paths[(w.name, ps.name)])
            assert nodes == [w.name, "ecs1", tor, ps.name]  # the ECS is crossed but transparent
            last = path_links(testbed, paths[(w.name, ps.name)])[-1]
            assert last.kind == "ps-tor" and last.other(tor) == ps.name
            nic = int(tor.rsplit("_", 1)[1])  # the PS's NIC s (port s) is the one on ToR t1_s
            assert last.port_of(ps.name) == paths[(w.name, ps.name)][-1].in_port == nic


def test_psnet_path_links_expand_the_circuit(testbed):
    circuits, paths = routed(testbed)
    links = path_links(testbed, paths[("w1_2_1", "ps1_2")])
    assert [ln.kind for ln in links] == ["worker-ecs", "ecs-tor", "ps-tor"]
    assert links[1] == circuits["w1_2_1"]
    back = path_links(testbed, paths[("ps1_2", "w1_2_1")])
    assert [ln.kind for ln in back] == ["ps-tor", "ecs-tor", "worker-ecs"]


def test_ps_route_leaves_through_the_nic_on_the_worker_tor(testbed):
    circuits, paths = routed(testbed)
    for w in testbed.workers():
        tor = circuit_tor(circuits, w.name)
        (nic,) = testbed.links_between("ps1_1", tor)
        route = route_of(testbed, paths, "ps1_1", w.name)
        assert route.intf == nic.intf("ps1_1")
        assert route.mac == testbed.mac(w.name)
    assert route_of(testbed, paths, "w1_3_2", "ps1_2").intf == "w1_3_2-eth1"
    assert route_of(testbed, paths, "w1_3_2", "ps1_2").mac == testbed.mac("ps1_2", 3)


def test_recircuit_moves_the_ps_route_to_the_new_tor(testbed):
    circuits, paths = routed(testbed)
    assert route_of(testbed, paths, "ps1_2", "w1_1_1").intf == "ps1_2-eth1"
    moved = recircuit(testbed, circuits, "w1_1_1", "t1_3")
    _, paths = routed(testbed, moved)
    assert route_of(testbed, paths, "ps1_2", "w1_1_1").intf == "ps1_2-eth3"
    assert path_nodes(testbed, paths[("w1_1_1", "ps1_2")]) == ["w1_1_1", "ecs1", "t1_3", "ps1_2"]
    assert path_nodes(testbed, paths[("ps1_2", "w1_1_1")]) == ["ps1_2", "t1_3", "ecs1", "w1_1_1"]


def test_failed_tor_ps_link_is_routed_around_via_the_supernode(testbed):
    circuits = initial_circuits(testbed)
    (dead,) = testbed.links_between("ps1_1", "t1_1")
    _, paths = routed(testbed, circuits, down=[dead.key])
    up = path_nodes(testbed, paths[("w1_1_1", "ps1_1")])
    assert up[:4] == ["w1_1_1", "ecs1", "t1_1", "sn1"] and up[-1] == "ps1_1"
    assert up[4] in ("t1_2", "t1_3")
    down = paths[("ps1_1", "w1_1_1")]
    assert switches_on(testbed, down)[1:] == ["sn1", "t1_1"]
    assert route_of(testbed, paths, "ps1_1", "w1_1_1").intf != dead.intf("ps1_1")
    assert all(dead not in path_links(testbed, p) for p in paths.values())
    # pairs that did not use the dead link keep their two-hop path
    assert switches_on(testbed, paths[("w1_1_1", "ps1_2")]) == ["t1_1"]


def test_psnet_cross_module_paths_spread_over_the_parallel_supernode_links():
    net = load_network(TOPOLOGIES / "psnet-2modules.yaml")
    _, paths = routed(net)
    cross = [(w.name, p.name) for w in net.workers() for p in net.pss() if w.module != p.module]
    for pair in cross:
        assert [net.nodes[s].role for s in switches_on(net, paths[pair])] == [
            Role.TOR,
            Role.SUPERNODE,
            Role.SUPERNODE,
            Role.TOR,
        ]
    loads = link_loads(net, paths, cross)
    sn_links = {k: v for k, v in loads.items() if k[0] in ("sn1", "sn2") and k[1] > 3}
    assert len(sn_links) == 6 and set(sn_links.values()) == {1}  # 3 parallel links x 2 directions


def test_fattree_path_lengths():
    net = load_network(TOPOLOGIES / "fattree-k4.yaml")
    _, paths = routed(net)
    seen = Counter()
    for (src, dst), p in paths.items():
        a, b = net.nodes[src], net.nodes[dst]
        expected = 1 if a.index == b.index else 3 if a.module == b.module else 5
        assert len(switches_on(net, p)) == expected, (src, dst)
        seen[expected] += 1
    assert seen == {1: 16, 3: 32, 5: 192}


def test_fattree_prototype_balanced_has_c_6_per_uplink(tmp_path):
    text = (TOPOLOGIES / "fattree-testbed.yaml").read_text() + "routing: balanced\n"
    (tmp_path / "ft.yaml").write_text(text)
    net = load_network(tmp_path / "ft.yaml")
    assert net.spec.routing == "balanced"
    _, paths = routed(net)
    pairs = [(w.name, p.name) for w in net.workers() for p in net.pss()]
    assert len(pairs) == 12
    loads = link_loads(net, paths, pairs)
    into_tor1 = {a: loads[(a, net.links_between(a, "e0_0")[0].port_of(a))] for a in ("a0_2", "a0_3")}
    assert into_tor1 == {"a0_2": 6, "a0_3": 6}  # 12 flows over ToR 1's 2 uplinks
    fabric = [ln for ln in net.links if ln.kind in ("tor-agg", "agg-core")]
    c = max(loads[(x, ln.port_of(x))] for ln in fabric for x in (ln.a, ln.b))
    assert c == 6
    assert loads[("e0_0", 1)] == loads[("e0_0", 2)] == 6  # each PS's own link carries its 6 workers


def hashed_paths(tmp_path: Path, text: str, seed: int):
    """Paths of a file's text with hashed routing and the given seed."""
    text = "\n".join(line for line in text.splitlines() if not line.startswith(("seed:", "routing:")))
    (tmp_path / f"seed{seed}.yaml").write_text(f"{text}\nrouting: hashed\nseed: {seed}\n")
    return routed(load_network(tmp_path / f"seed{seed}.yaml"))[1]


@pytest.mark.parametrize("path", ["fattree-k4.yaml", "psnet-4modules.yaml"])  # BCube's routing is its own
def test_hashed_routing_is_deterministic_for_a_seed(tmp_path, path):
    text = (TOPOLOGIES / path).read_text()
    nets = {}
    for seed in (1, 1, 4):
        nets.setdefault(seed, []).append(hashed_paths(tmp_path, text, seed))
    assert nets[1][0] == nets[1][1]
    assert nets[1][0] != nets[4][0]  # the seed is really used
    assert set(nets[1][0]) == set(nets[4][0])


def test_hashed_routing_differs_between_seeds(tmp_path):
    text = (TOPOLOGIES / "fattree-k4.yaml").read_text()
    routings = [hashed_paths(tmp_path, text, seed) for seed in (1, 3, 8)]
    assert routings[0] != routings[1] and routings[0] != routings[2] and routings[1] != routings[2]


@pytest.mark.parametrize(("n", "k"), [(4, 1), (3, 2), (2, 3)])
def test_bcube_paths_cross_at_most_k_plus_1_switches_and_relay_on_servers(n, k):
    net = build_network(parse_spec({"kind": "bcube", "n": n, "k": k, "worker_mbps": 1000, "scale": 40}))
    _, paths = routed(net)
    assert len(paths) == len(net.intended_pairs()) == n ** (k + 1) * (n ** (k + 1) - 1)
    hops = Counter()
    for (src, dst), p in paths.items():
        sw = switches_on(net, p)
        assert 1 <= len(sw) <= k + 1
        differing = sum(x != y for x, y in zip(src[1:].split("_"), dst[1:].split("_"), strict=True))
        assert len(sw) == differing  # one switch per digit to correct
        relays = [h.node for h in p[1:-1] if net.nodes[h.node].is_host]
        assert all(net.nodes[r].role in (Role.PS, Role.WORKER, Role.IDLE) and net.nodes[r].relay for r in relays)
        assert len(relays) == len(sw) - 1
        # BCubeRouting: each hop corrects the highest-level digit (leftmost in the name) still
        # differing from dst's, so relays forward in the order their own traffic leaves by
        want = dst[1:].split("_")
        for u, v in itertools.pairwise([src, *relays, dst]):
            cur = u[1:].split("_")
            first = next(j for j in range(k + 1) if cur[j] != want[j])
            assert v[1:].split("_") == cur[:first] + [want[first]] + cur[first + 1 :], (src, dst, relays)
        # nodes alternate server, switch, server, ...
        assert [net.nodes[h.node].is_host for h in p] == [i % 2 == 0 for i in range(len(p))]
        taken = taken_path(net, paths, src, dst)
        assert len(taken) == len(p) and taken[-1].node == dst
        hops[len(sw)] += 1
    assert max(hops) == k + 1


# --- CNC: flow rules -----------------------------------------------------------------------


def test_ecs_rules_are_in_port_output_pairs_one_pair_per_circuit():
    net = psnet(workers=[1, 1, 4])
    circuits, paths = routed(net)
    rules = switch_flows(net, circuits, paths)["ecs1"]
    assert len(rules) == 2 * len(circuits)
    assert all(
        (r.priority, r.cookie, len(r.match), r.match[0][0]) == (PRIO_CIRCUIT, COOKIE_CIRCUIT, 1, "in_port")
        for r in rules
    )
    forward = {r.match[0][1]: r.out_port for r in rules}
    assert len(forward) == len(rules)  # one rule per in_port
    for w, slot in circuits.items():
        wp, tp = worker_link(net, w).port_b, slot.port_a
        assert forward[wp] == tp and forward[tp] == wp
    assert all(inp != out for inp, out in forward.items())


def test_ecs_rules_follow_a_recircuit(testbed):
    circuits, paths = routed(testbed)
    moved = recircuit(testbed, circuits, "w1_1_1", "t1_3")
    before = switch_flows(testbed, circuits, paths)["ecs1"]
    after = switch_flows(testbed, moved, compute_paths(testbed, moved))["ecs1"]
    old, new = circuits["w1_1_1"].port_a, moved["w1_1_1"].port_a
    assert {(r.match[0][1], r.out_port) for r in before - after} == {(1, old), (old, 1)}
    assert {(r.match[0][1], r.out_port) for r in after - before} == {(1, new), (new, 1)}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_route_rules_match_the_paths(path):
    net = load_network(path)
    circuits, paths = routed(net)
    flows = switch_flows(net, circuits, paths)
    assert set(flows) == {s.name for s in net.switches()}
    for sw, rules in flows.items():
        by_match: dict = {}
        groups = {g.group_id: g for g in rules if isinstance(g, Group)}
        for r in rules:
            if isinstance(r, Group):  # ECMP: a choice between several wired ports
                assert len(r.ports) > 1 and all(net.link_at(sw, port) for port in r.ports), (sw, r)
                continue
            action = r.out_port if r.group is None else groups[r.group].ports
            assert by_match.setdefault(r.match, action) == action, (sw, r)  # no conflicting rules
            for port in action if r.group is not None else (action,):
                assert net.link_at(sw, port)  # outputs to a wired port
                assert dict(r.match).get("in_port") != port  # never back out of its in_port
    if net.family.l2_by_next_server:  # BCube, Torus
        assert all(r.cookie == COOKIE_L2 for rules in flows.values() for r in rules)
        assert sum(map(len, flows.values())) == len(net.links)  # one eth_dst rule per server NIC
        return
    for (src, dst), p in paths.items():
        match = (("eth_type", 0x0800), ("ipv4_src", net.nodes[src].ip), ("ipv4_dst", net.nodes[dst].ip))
        for hop in p[1:-1]:
            rules = [r for r in flows[hop.node] if isinstance(r, Flow) and r.match == match]
            if rules and rules[0].group is not None:  # ECMP: the pair's hashed path is one of the buckets
                (group,) = [g for g in flows[hop.node] if isinstance(g, Group) and g.group_id == rules[0].group]
                assert rules[0].cookie == COOKIE_ROUTE and hop.out_port in group.ports
                continue
            assert [(r.cookie, r.out_port) for r in rules] == [(COOKIE_ROUTE, hop.out_port)]


def test_same_inputs_give_identical_flows_and_routes():
    for name in ("psnet-4modules.yaml", "fattree-k4.yaml", "bcube-4-1.yaml"):
        results = []
        for _ in range(2):
            net = load_network(TOPOLOGIES / name)
            circuits, paths = routed(net)
            results.append((paths, switch_flows(net, circuits, paths), host_routes(net, paths)))
        assert results[0] == results[1], name


def test_host_routes_cover_every_path_through_a_real_interface():
    net = load_network(TOPOLOGIES / "bcube-4-1.yaml")
    _, paths = routed(net)
    routes = host_routes(net, paths)
    assert sum(map(len, routes.values())) == len(paths)
    for (src, dst), p in paths.items():
        (route,) = [r for r in routes[src] if r.dst_ip == net.nodes[dst].ip]
        assert route.intf == f"{src}-eth{p[0].out_port}"
        nxt = next(h for h in p[1:] if net.nodes[h.node].is_host)  # the next relay (or dst)
        assert route.mac == net.mac(nxt.node, nxt.in_port)
