"""Multi-module PSNet routing (Section 3.1): a module pair's flows spread over the R edge-disjoint
SuperNode paths, for H = 2 (R parallel links) and H = 4 (a 3-regular graph), also after failures.
Pure routing: no switch."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

from controller.modules import disjoint_supernode_paths, sn_cables, supernodes
from controller.routing import compute_paths, path_links, routing_graph, switch_flows
from controller.tc import initial_circuits
from topologies.build import build_network, load_network
from topologies.model import LinkKind, Network

TOPOLOGIES = Path(__file__).resolve().parents[1] / "topologies"


def cross_pairs(net: Network, ma: int, mb: int) -> list[tuple[str, str]]:
    """Worker -> PS pairs from module ma to module mb."""
    return [(w.name, p.name) for w in net.workers() for p in net.pss() if w.module == ma and p.module == mb]


def sn_link_loads(net: Network, paths, pairs) -> Counter:
    """Flows per directed SuperNode cable (by its link key and direction) over the pairs."""
    loads: Counter = Counter()
    for pair in pairs:
        node = pair[0]
        for ln in path_links(net, paths[pair]):
            if ln.kind is LinkKind.SUPERNODE:
                loads[(ln.key, node)] += 1
            node = ln.other(node)
    return loads


@pytest.fixture(scope="module")
def four() -> Network:
    return load_network(TOPOLOGIES / "psnet-4modules.yaml")


def test_the_4_module_graph_has_3_disjoint_paths_between_every_two_modules(four):
    g = routing_graph(four, initial_circuits(four))
    sns = set(supernodes(four).values())
    for a, b in [("sn1", "sn2"), ("sn1", "sn3"), ("sn2", "sn4"), ("sn3", "sn1")]:
        paths = disjoint_supernode_paths(g, sns, a, b)
        assert len(paths) == 3
        used = [frozenset((u, v)) for nodes, _ in paths for u, v in itertools.pairwise(nodes)]
        assert len(used) == len(set(used))  # no SuperNode cable shared
        assert [len(nodes) for nodes, _ in paths] == [2, 3, 3]  # the direct link first (K4: adjacent)


@pytest.mark.parametrize("routing", ["balanced", "hashed"])
def test_h4_module_pair_flows_use_all_3_disjoint_paths_evenly(tmp_path, routing):
    text = (TOPOLOGIES / "psnet-4modules.yaml").read_text() + f"routing: {routing}\n"
    (tmp_path / "four.yaml").write_text(text)
    net = load_network(tmp_path / "four.yaml")
    paths = compute_paths(net, initial_circuits(net))
    for ma, mb in [(1, 2), (2, 1), (3, 4), (1, 4)]:
        pairs = cross_pairs(net, ma, mb)
        assert len(pairs) == 12  # 6 workers x 2 PSs
        by_path = Counter(tuple(sn_cables(paths[p], net)) for p in pairs)
        assert len(by_path) == 3 and set(by_path.values()) == {4}, by_path
        # the pull direction follows the same SuperNode path back
        for w, p in pairs:
            back = [(v, u) for u, v in reversed(sn_cables(paths[(p, w)], net))]
            assert back == sn_cables(paths[(w, p)], net)


def test_h2_module_pair_flows_use_the_3_parallel_links_one_each():
    net = load_network(TOPOLOGIES / "psnet-2modules.yaml")
    paths = compute_paths(net, initial_circuits(net))
    for ma, mb in [(1, 2), (2, 1)]:
        loads = sn_link_loads(net, paths, cross_pairs(net, ma, mb))
        assert len(loads) == 3 and set(loads.values()) == {1}


def test_h4_rules_follow_the_spread_paths(four):
    circuits = initial_circuits(four)
    paths = compute_paths(four, circuits)
    flows = switch_flows(four, circuits, paths)
    # sn3 carries module 1 -> 2 transit flows: it holds a rule for each of them
    transit = [p for p in cross_pairs(four, 1, 2) if ("sn1", "sn3") in sn_cables(paths[p], four)]
    assert len(transit) == 4
    for w, p in transit:
        match = (("eth_type", 0x0800), ("ipv4_src", four.nodes[w].ip), ("ipv4_dst", four.nodes[p].ip))
        (rule,) = [f for f in flows["sn3"] if f.match == match]
        assert four.link_at("sn3", rule.out_port).other("sn3") == "sn2"


@pytest.mark.parametrize("split", [[[2, 1, 1], [1, 1, 0]], [[2, 2, 1], [1, 0, 0]], [[2, 2, 2], [0, 0, 0]]])
def test_an_uneven_split_keeps_every_ps_nic_at_its_share(split):
    """W = 6 workers split W1 : W - W1 between two modules (psnet-modules' points), one PS in each:
    each PS's 6 flows a direction spread 2 per NIC (R = 3), as Eq. 6's terms assume. Routing the
    crossing pairs before the local ones (one candidate each) put 3 on one NIC at W1 = 4 and 5,
    1.5x Eq. 6's BCT. The flow model's routes (models.flow.routes) are the controller's."""
    from models.flow.routes import flow_routes

    spec = load_network(TOPOLOGIES / "psnet-2modules.yaml").spec.model_copy(update={"workers": split})
    net = build_network(spec)
    paths = compute_paths(net, initial_circuits(net))
    pairs = [pair for ps in net.pss() for w in net.workers() for pair in ((w.name, ps.name), (ps.name, w.name))]
    flow = flow_routes(net, pairs).cables  # what testbed simulate routes
    for ps in net.pss():
        for direction in (0, 1):
            nics: Counter = Counter()
            for w in net.workers():
                pair = (w.name, ps.name) if direction == 0 else (ps.name, w.name)
                nics[next(ln.key for ln in path_links(net, paths[pair]) if ps.name in (ln.a, ln.b))] += 1
                assert [ln.key for ln, _ in flow[pair]] == [ln.key for ln in path_links(net, paths[pair])]
            assert sorted(nics.values()) == [2, 2, 2], (ps.name, direction, nics)


def test_h2_cable_down_reroutes_over_the_remaining_two_links():
    net = load_network(TOPOLOGIES / "psnet-2modules.yaml")
    circuits = initial_circuits(net)
    inter = [ln for ln in net.links if ln.kind is LinkKind.SUPERNODE]
    assert len(inter) == 3
    paths = compute_paths(net, circuits, down=[inter[0].key])
    pairs = cross_pairs(net, 1, 2) + cross_pairs(net, 2, 1)
    assert all(p in paths for p in pairs)
    assert all(inter[0] not in path_links(net, paths[p]) for p in pairs)
    loads = sn_link_loads(net, paths, cross_pairs(net, 1, 2))
    assert {k[0] for k in loads} == {inter[1].key, inter[2].key}  # both survivors carry flows
    assert sorted(loads.values()) == [1, 2]


def test_h4_supernode_down_reroutes_to_the_two_remaining_disjoint_paths(four):
    circuits = initial_circuits(four)
    down = [ln.key for ln in four.links_of("sn3")]
    paths = compute_paths(four, circuits, down)
    pairs = cross_pairs(four, 1, 2)
    by_path = Counter(tuple(sn_cables(paths[p], four)) for p in pairs)
    assert set(by_path) == {(("sn1", "sn2"),), (("sn1", "sn4"), ("sn4", "sn2"))}
    assert set(by_path.values()) == {6}
    assert all("sn3" not in [h.node for h in paths[p]] for p in pairs)


def test_two_modules_cut_apart_have_no_route():
    net = load_network(TOPOLOGIES / "psnet-2modules.yaml")
    down = [ln.key for ln in net.links if ln.kind is LinkKind.SUPERNODE]
    paths = compute_paths(net, initial_circuits(net), down)
    assert not any(p in paths for p in cross_pairs(net, 1, 2))
    assert all(p in paths for p in [(w.name, p.name) for w in net.workers() for p in net.pss() if w.module == p.module])


def test_disjoint_paths_are_a_maximum_set():
    """On any connected 3-regular graph the set has 3 paths (Menger: edge connectivity 3)."""
    net = load_network(TOPOLOGIES / "psnet-4modules.yaml")
    g = routing_graph(net, initial_circuits(net))
    sns = set(supernodes(net).values())
    h = nx.Graph(g.subgraph(sns))
    assert nx.edge_connectivity(h) == 3


def test_bench_bct_takes_the_two_module_gap_apart():
    """bench_bct's section 3: Eq. 6's binding term read from the topology at the point's scale,
    the byte-split and one-module parts of the gap from the rows' own numbers."""
    from benchmarks.bct import format_two_modules

    def row(topology: str, mean: float, bct_max: float, placed: float) -> dict:
        return {
            "topology": topology,
            "rate_mbps": 50.0,
            "scale": 20.0,
            "predicted": {"bct_max_s": bct_max},
            "bct_s": {"mean": mean},
            "ratio_max": mean / bct_max,
            "bct_max_placed_s": placed,
            "ratio_max_placed": mean / placed,
        }

    text = format_two_modules([row("psnet-testbed", 2.0, 1.5, 1.6), row("psnet-2modules", 2.3, 1.5, 1.7)])
    assert "PS NICs R B_s / W = worker link B_w / P = 25.0 Mbit/s" in text  # 50 Mbit/s emulated: 150/6 = 50/2
    assert "measured 2.30 s = Eq. 6 BCT_max 1.50 s + 0.20 s for the PSs' real byte split + 0.60 s more" in text
    assert "one module at this rate has 0.40 s beyond its own bound, so the second module adds +0.30 s" in text
    assert "inter-module terms do not bind at any rate here" in text  # 50 Mbit/s per SuperNode flow > 25
    assert format_two_modules([row("psnet-testbed", 2.0, 1.5, 1.6)]) == ""
