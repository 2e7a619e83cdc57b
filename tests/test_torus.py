"""The Torus kind: its shape, ports and addresses, HiPS's digits, dimension-order relay routes;
and (root) the shipped 3 x 3 built, routed, reached and shaped like the other kinds."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from controller.routing import compute_paths, host_routes, taken_path
from controller.tc import initial_circuits
from models.flow.routes import fast_paths
from topologies.build import build_network, load_network
from topologies.kinds.torus import TorusId, digits, dimension_order
from topologies.model import LinkKind, Network, Role
from topologies.schema import parse_spec

TOPOLOGIES = Path(__file__).resolve().parents[1] / "topologies"


def torus(n: int, h: int, **kw) -> Network:
    return build_network(parse_spec({"kind": "torus", "n": n, "h": h, "worker_mbps": 1000, "scale": 40, **kw}))


def ring_distance(a: tuple[int, ...], b: tuple[int, ...], n: int) -> int:
    return sum(min((x - y) % n, (y - x) % n) for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(("n", "h"), [(3, 1), (3, 2), (4, 2), (5, 2), (3, 3)])
def test_counts_ports_and_rings(n, h):
    net = torus(n, h)
    servers, wires = net.hosts(), net.by_role(Role.WIRE)
    assert len(servers) == n**h and len(wires) == h * n**h and len(net.switches()) == len(wires)
    assert len(net.links) == 2 * h * n**h and {ln.kind for ln in net.links} == {LinkKind.SERVER_WIRE}
    assert all(len(net.links_of(s.name)) == 2 * h and s.relay for s in servers)
    assert all(len(net.links_of(w.name)) == 2 for w in wires)
    assert [w.name for w in servers] == [s.name for s in net.workers()]  # no PS by default
    for s in servers:
        me = TorusId.from_name(s.name, net.spec)
        for dim in range(h):
            for port, delta in ((2 * dim + 1, 1), (2 * dim + 2, -1)):
                ln = net.link_at(s.name, port)
                wire = ln.other(s.name)
                (peer,) = [x.other(wire) for x in net.links_of(wire) if x.other(wire) != s.name]
                want = list(me.digits)
                want[h - 1 - dim] = (want[h - 1 - dim] + delta) % n
                assert TorusId.from_name(peer, net.spec).digits == tuple(want), (s.name, port, peer)
                assert net.mac(s.name, port) == me.mac(port)
                assert wire.startswith(f"w{dim}_")


def test_names_addresses_and_identity_of_the_3x3():
    net = load_network(TOPOLOGIES / "torus-3x3.yaml")
    assert net.node_id("s1_2") == TorusId(True, 5, 0, 3, 2)
    assert net.nodes["s1_2"].ip == "10.1.0.6"
    assert net.node_id("w1_2_0") == TorusId(False, 6, 1, 3, 2)
    assert net.nodes["w1_2_0"].ip == "10.3.0.6"
    assert TorusId.from_mac("02:04:0a:01:00:06", net.spec).name == "s1_2"  # port 4: dim 1, toward a_1 - 1
    assert TorusId.from_dpid(net.nodes["w0_1_1"].dpid, net.spec).name == "w0_1_1"
    for bad in ("s3_0", "s1", "w2_0_0", "x0_0"):
        with pytest.raises(ValueError):
            TorusId.from_name(bad, net.spec)
    with pytest.raises(ValueError):
        TorusId.from_mac("02:05:0a:01:00:01", net.spec)  # 2h = 4 NICs


def test_address_digits_are_the_names_for_torus_and_bcube():
    t = load_network(TOPOLOGIES / "torus-4x4.yaml")
    assert t.family.address_digits(t)["s2_3"] == (2, 3)
    b = load_network(TOPOLOGIES / "bcube-4-1.yaml")
    got = b.family.address_digits(b)
    assert got["s3_1"] == (3, 1) and len(got) == 16
    psnet = load_network(TOPOLOGIES / "psnet-testbed.yaml")
    assert psnet.family.address_digits(psnet) == {}


def test_dimension_order_corrects_a0_first_the_short_way():
    # 4 x 4: from (0,0) to (2,3): a_0 0 -> 3 goes -1 (one hop), then a_1 0 -> 2 ties, goes +
    path = [digits(i, 4, 2) for i in dimension_order(0, 11, 4, 2)]
    assert path == [(0, 0), (0, 3), (1, 3), (2, 3)]


@pytest.mark.parametrize(("n", "h"), [(3, 2), (4, 2), (3, 3)])
def test_routes_are_dimension_order_and_relays_agree(n, h):
    net = torus(n, h)
    paths = compute_paths(net, initial_circuits(net))
    assert len(paths) == n**h * (n**h - 1)
    hops = Counter()
    for (src, dst), p in paths.items():
        servers = tuple(x.node for x in p if net.nodes[x.node].is_host)
        assert servers == net.family.relay_hosts(net, src, dst)
        a, b = (TorusId.from_name(x, net.spec).digits for x in (src, dst))
        assert len(servers) - 1 == ring_distance(a, b, n)  # shortest
        assert [net.nodes[x.node].is_host for x in p] == [i % 2 == 0 for i in range(len(p))]
        assert taken_path(net, paths, src, dst) == p  # every relay's own route continues it
        hops[len(servers) - 1] += 1
    assert max(hops) == h * (n // 2)
    routes = host_routes(net, paths)
    assert sum(map(len, routes.values())) == len(paths)


def test_flow_model_routes_equal_the_controllers():
    net = load_network(TOPOLOGIES / "torus-4x4.yaml")
    pairs = net.intended_pairs()
    assert fast_paths(net, initial_circuits(net), pairs) == compute_paths(net, initial_circuits(net), pairs=pairs)


def test_a_cut_ring_cable_reroutes_around_it():
    net = load_network(TOPOLOGIES / "torus-3x3.yaml")
    cut = net.link_at("s0_0", 1)  # s0_0 -> s0_1 in dimension 0
    paths = compute_paths(net, initial_circuits(net), down=[cut.key])
    servers = [x.node for x in paths[("s0_0", "s0_1")] if net.nodes[x.node].is_host]
    assert servers[0] == "s0_0" and servers[-1] == "s0_1" and len(servers) == 3  # the other way round


# --- emulated (root) ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tb():
    from emulation.net import Testbed

    with Testbed("topologies/torus-3x3.yaml") as t:
        yield t


@pytest.mark.root
def test_topo_check_passes(tb):
    from testbed.check import run_checks

    rows = run_checks(tb, iperf_s=3)
    verdicts = [r for r in rows if r.ok is not None]
    assert any(r.check == "reachability" and r.subject == "72 intended pairs" for r in verdicts), verdicts
    assert [r for r in verdicts if not r.ok] == []


@pytest.mark.root
def test_every_pair_reaches_and_packets_take_the_models_wires(tb):
    from emulation import measure

    pairs = tb.model.intended_pairs()
    res = measure.reachable(tb, pairs)
    assert [p for p, ok in res.items() if not ok] == [] and len(res) == len(pairs)
    for src, dst in [("s0_0", "s2_2"), ("s2_1", "s0_0")]:  # two relays, both dimensions
        want = measure.model_switches(tb, src, dst)
        assert len(want) == 2
        assert measure.measured_switches(tb, src, dst) == set(want)


@pytest.mark.root
def test_a_two_hop_flow_is_shaped(tb):
    from emulation import measure

    samples = measure.rates_measured_twice_if_slow(tb, [("s0_0", "s1_1")], 3, 0.90 * 25.0)
    (r,), _ = samples[-1]
    assert r.configured_mbps == pytest.approx(25.0)
    assert 0.90 <= r.ratio <= 1.0, measure.describe_samples(samples)
