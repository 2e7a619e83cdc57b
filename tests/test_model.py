"""The shared model: node and link counts, addresses, identities and port numbers of every builder.

Every builder is built at two sizes or more. Port numbers are checked against the model's own
lookup (`link_at`) and against the Mininet Topo that transcribes it, the check ripl lacked.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

from topologies.bcube import digits
from topologies.build import build_network, load_network
from topologies.mininet_topo import ModelTopo
from topologies.model import Network, Node, Role
from topologies.psnet import home_tors, supernode_graph
from topologies.schema import parse_spec

TOPOLOGIES = Path(__file__).resolve().parents[1] / "topologies"


def build(**fields) -> Network:
    return build_network(parse_spec(fields, "test.yaml"), "test.yaml")


def psnet(**kw) -> Network:
    return build(**{"kind": "psnet", "worker_mbps": 1000, "scale": 40, **kw})


def fattree(**kw) -> Network:
    return build(**{"kind": "fattree", "worker_mbps": 1000, "scale": 40, **kw})


def bcube(**kw) -> Network:
    return build(**{"kind": "bcube", "worker_mbps": 1000, "scale": 40, **kw})


#: every builder at several sizes; used by the generic identity and port tests
NETWORKS = {
    "psnet-H1": lambda: psnet(tors=3, ps=2, workers=[2, 2, 2]),
    "psnet-H2": lambda: psnet(modules=2, tors=3, ps=1, workers=3),
    "psnet-H4": lambda: psnet(modules=4, tors=3, ps=2, workers=6, seed=7),
    "psnet-H2-uneven": lambda: psnet(modules=2, tors=2, ps=3, workers=[[1, 3], [0, 2]], ecs_ports=5),
    "fattree-k4": lambda: fattree(k=4, workers=[2] * 7 + [0], ps=2),
    "fattree-k4-pods2": lambda: fattree(k=4, pods=2, workers=[0, 2, 2, 2], ps=2),
    "fattree-k6": lambda: fattree(k=6, workers=[3] * 17 + [0], ps=3),
    "bcube-4-1": lambda: bcube(n=4, k=1),
    "bcube-3-2": lambda: bcube(n=3, k=2, ps=2, workers=20),
}


@pytest.fixture(params=NETWORKS.values(), ids=NETWORKS.keys())
def net(request) -> Network:
    return request.param()


def kinds(net: Network) -> Counter:
    return Counter(ln.kind for ln in net.links)


def roles(net: Network) -> Counter:
    return Counter(n.role for n in net.nodes.values())


# --- counts --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "w", "md", "inter"),
    [
        ({"tors": 3, "ps": 2, "workers": [2, 2, 2]}, 6, 6, 0),
        ({"tors": 3, "ps": 2, "workers": [1, 1, 4], "tor_downlinks": 4, "ecs_ports": 8}, 6, 4, 0),
        ({"modules": 2, "tors": 3, "ps": 1, "workers": 3}, 3, 3, 3),
        ({"modules": 4, "tors": 3, "ps": 2, "workers": 6, "seed": 7}, 6, 6, 6),
        ({"modules": 6, "tors": 3, "ps": 1, "workers": 4}, 4, 4, 9),
    ],
    ids=["H1", "H1-deployment", "H2", "H4", "H6"],
)
def test_psnet_counts(kw, w, md, inter):
    net = psnet(**kw)
    h, r, p = kw.get("modules", 1), kw["tors"], kw["ps"]
    assert roles(net) == {
        Role.ECS: h,
        Role.TOR: h * r,
        Role.SUPERNODE: h,
        Role.PS: h * p,
        Role.WORKER: h * w,
    }
    expected = {"worker-ecs": h * w, "ecs-tor": h * r * md, "tor-supernode": h * r, "ps-tor": h * p * r}
    if inter:
        expected["supernode"] = inter
    assert kinds(net) == expected
    for ps in net.pss():  # R NICs, one on every ToR of its own module
        tors = sorted(ln.other(ps.name) for ln in net.links_of(ps.name))
        assert tors == [f"t{ps.module}_{s}" for s in range(1, r + 1)]


@pytest.mark.parametrize("k", [4, 6, 8])
def test_fattree_full_counts(k):
    half = k // 2
    net = fattree(k=k, workers=[half] * (k * half - 1) + [0], ps=half)
    assert len(net.hosts()) == k**3 // 4
    assert len(net.switches()) == 5 * k**2 // 4
    assert roles(net) == {
        Role.WORKER: k**3 // 4 - half,
        Role.PS: half,
        Role.TOR: k * half,
        Role.AGG: k * half,
        Role.CORE: half * half,
    }
    assert kinds(net) == {"host-tor": k**3 // 4, "tor-agg": k**3 // 4, "agg-core": k**3 // 4}
    assert len(net.links) == 3 * k**3 // 4


def test_fattree_partial_build_is_the_four_tor_prototype():
    net = fattree(k=4, pods=2, workers=[0, 2, 2, 2], ps=2)
    assert roles(net) == {Role.WORKER: 6, Role.PS: 2, Role.TOR: 4, Role.AGG: 4, Role.CORE: 4}
    assert kinds(net) == {"host-tor": 8, "tor-agg": 8, "agg-core": 8}
    assert [h.name for h in net.pss()] == ["h0_0_2", "h0_0_3"]  # worker(0,2,2,2): ToR 1 holds the PSs
    for core in net.by_role(Role.CORE):  # a core reaches only the pods that are built
        assert len(net.links_of(core.name)) == 2


def test_fattree_roles_follow_worker_counts_then_ps_then_idle():
    net = fattree(k=4, workers=[1, 0, 2, 0, 0, 0, 0, 0], ps=2)
    by_tor = {}
    for h in net.hosts():
        by_tor.setdefault(h.index, []).append(h.role)
    assert by_tor[1] == [Role.WORKER, Role.PS]
    assert by_tor[2] == [Role.PS, Role.IDLE]
    assert by_tor[3] == [Role.WORKER, Role.WORKER]
    assert all(r == Role.IDLE for t in range(4, 9) for r in by_tor[t])


@pytest.mark.parametrize(("n", "k"), [(4, 1), (3, 2), (2, 3), (5, 0)])
def test_bcube_counts(n, k):
    net = bcube(n=n, k=k)
    servers = n ** (k + 1)
    assert len(net.hosts()) == servers
    assert len(net.switches()) == (k + 1) * n**k
    assert len(net.links) == (k + 1) * servers
    assert all(len(net.links_of(h.name)) == k + 1 for h in net.hosts())
    assert all(len(net.links_of(s.name)) == n for s in net.switches())
    assert all(h.relay for h in net.hosts())
    assert roles(net)[Role.PS] == 1 and roles(net)[Role.WORKER] == servers - 1


def test_bcube_roles_and_idle_servers():
    net = bcube(n=3, k=2, ps=2, workers=20)
    assert [h.role for h in net.hosts()] == [Role.PS] * 2 + [Role.WORKER] * 20 + [Role.IDLE] * 5


# --- PSNet addressing (Section 3.2) --------------------------------------------------------


def test_psnet_testbed_addresses():
    net = load_network(TOPOLOGIES / "psnet-testbed.yaml")
    ips = {n.name: n.ip for n in net.nodes.values()}
    assert {n.name: ips[n.name] for n in net.workers()} == {
        "w1_1_1": "10.1.1.1",
        "w1_1_2": "10.1.1.2",
        "w1_2_1": "10.1.2.1",
        "w1_2_2": "10.1.2.2",
        "w1_3_1": "10.1.3.1",
        "w1_3_2": "10.1.3.2",
    }
    assert {n.name: ips[n.name] for n in net.pss()} == {"ps1_1": "10.1.0.1", "ps1_2": "10.1.0.2"}
    assert {n.name: ips[n.name] for n in net.by_role(Role.TOR)} == {
        "t1_1": "10.1.1.0",
        "t1_2": "10.1.2.0",
        "t1_3": "10.1.3.0",
    }
    assert ips["sn1"] == "10.1.4.0"  # swid R + 1


@pytest.mark.parametrize(
    "kw",
    [
        {"modules": 4, "tors": 3, "ps": 2, "workers": 6, "seed": 7},
        {"modules": 2, "tors": 4, "ps": 3, "workers": 7},
        {"modules": 6, "tors": 3, "ps": 1, "workers": [1, 2, 0]},
    ],
    ids=["H4-R3", "H2-R4", "H6-R3-deployment"],
)
def test_psnet_addressing_per_role(kw):
    net = psnet(**kw)
    r = kw["tors"]
    for n in net.nodes.values():
        m = n.module
        if n.role == Role.WORKER:
            swid, wid = map(int, re.fullmatch(rf"w{m}_(\d+)_(\d+)", n.name).groups())
            assert n.ip == f"10.{m}.{swid}.{wid}"
            assert n.index == swid and 1 <= swid <= r
            assert 1 <= wid <= -(-net.spec.w_prime // r)  # wid in [1, W'/R]
        elif n.role == Role.PS:
            assert n.ip == f"10.{m}.0.{n.index}" and n.name == f"ps{m}_{n.index}"
            assert 1 <= n.index <= kw["ps"]
        elif n.role == Role.TOR:
            assert n.ip == f"10.{m}.{n.index}.0" and n.name == f"t{m}_{n.index}"
        elif n.role == Role.SUPERNODE:
            assert n.ip == f"10.{m}.{r + 1}.0" and n.name == f"sn{m}"
        else:
            assert n.role == Role.ECS and n.name == f"ecs{m}"
    assert sorted({n.module for n in net.nodes.values()}) == list(range(1, kw["modules"] + 1))


def test_home_tors_spread_workers_round_robin():
    assert home_tors(7, 3) == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2), (3, 1), (3, 2)]
    assert Counter(s for s, _ in home_tors(8, 4)) == {1: 2, 2: 2, 3: 2, 4: 2}


# --- FatTree and BCube addressing ----------------------------------------------------------


def test_fattree_addresses_follow_al_fares():
    net = fattree(k=4, workers=[2] * 7 + [0], ps=2)
    ips = {n.name: n.ip for n in net.nodes.values()}
    assert ips["h0_0_2"] == "10.0.0.2" and ips["h3_1_3"] == "10.3.1.3"
    assert ips["e2_1"] == "10.2.1.1" and ips["a2_3"] == "10.2.3.1"
    assert ips["c1_2"] == "10.4.1.2" and ips["c2_2"] == "10.4.2.2"


def test_bcube_addresses_and_names():
    net = bcube(n=3, k=2)
    servers = net.hosts()
    assert [s.name for s in servers[:4]] == ["s0_0_0", "s0_0_1", "s0_0_2", "s0_1_0"]
    assert servers[26].name == "s2_2_2" and servers[26].ip == "10.1.0.27"
    assert {s.role.value for s in net.switches()} == {"bcube-switch"}
    assert net.nodes["b1_2_0"].ip == "10.3.0.6"  # level 1, switch index 2*3 + 0


def test_digits_are_base_n_most_significant_first():
    assert digits(11, 3, 2) == (1, 0, 2)
    assert digits(0, 4, 1) == (0, 0)
    assert digits(15, 4, 1) == (3, 3)


# --- identities: unique names, addresses, MACs, DPIDs --------------------------------------


def test_names_are_unique_in_mininet_topo(net):
    topo = ModelTopo(net)
    assert sorted(topo.hosts()) == sorted(h.name for h in net.hosts())
    assert sorted(topo.switches()) == sorted(s.name for s in net.switches())
    assert len(topo.hosts()) + len(topo.switches()) == len(net.nodes)


def test_host_ips_are_unique_and_in_10_slash_8(net):
    ips = [h.ip for h in net.hosts()]
    assert len(set(ips)) == len(ips)
    assert all(ip.startswith("10.") for ip in ips)
    all_ips = [n.ip for n in net.nodes.values()]
    assert len(set(all_ips)) == len(all_ips)  # switch addresses do not collide with hosts either


def test_every_host_port_has_a_mac(net):
    host_ports = {(x, ln.port_of(x)) for ln in net.links for x in (ln.a, ln.b) if net.nodes[x].is_host}
    assert set(net.macs) == host_ports


def test_macs_unique_per_host_port_except_shared_psnet_ps_nics(net):
    per_host: dict[str, set[str]] = {}
    for (host, _port), mac in net.macs.items():
        assert re.fullmatch(r"02(:[0-9a-f]{2}){5}", mac), mac  # locally administered, unicast
        per_host.setdefault(host, set()).add(mac)
    for host, macs in per_host.items():
        ports = sum(1 for h, _ in net.macs if h == host)
        shared = net.kind == "psnet" and net.nodes[host].role == Role.PS
        assert len(macs) == (1 if shared else ports), host
    every = [m for macs in per_host.values() for m in macs]
    assert len(set(every)) == len(every)  # no MAC is used by two hosts


def test_psnet_ps_nics_share_one_mac():
    net = psnet(tors=3, ps=2, workers=[2, 2, 2])
    assert {net.mac("ps1_1", p) for p in (1, 2, 3)} == {"02:00:0a:01:00:01"}
    assert net.mac("w1_2_1") == "02:00:0a:01:02:01"


def test_bcube_nic_macs_carry_the_level():
    net = bcube(n=4, k=1)
    assert net.mac("s1_2", 1) == "02:01:0a:01:00:07"
    assert net.mac("s1_2", 2) == "02:02:0a:01:00:07"


def test_dpids_unique_and_only_on_switches(net):
    dpids = [s.dpid for s in net.switches()]
    assert all(isinstance(d, int) and 0 < d < 2**48 for d in dpids)
    assert len(set(dpids)) == len(dpids)
    assert all(h.dpid is None for h in net.hosts())


def test_mininet_topo_carries_the_model_dpids(net):
    topo = ModelTopo(net)
    for s in net.switches():
        assert topo.nodeInfo(s.name)["dpid"] == f"{s.dpid:016x}"
        assert int(topo.nodeInfo(s.name)["dpid"], 16) == s.dpid


def test_interface_names_fit_linux_limit(net):
    names = [ln.intf(x) for ln in net.links for x in (ln.a, ln.b)]
    assert max(len(i) for i in names) <= 15
    assert len(set(names)) == len(names)


def test_overlong_node_name_is_refused():
    net = bcube(n=2, k=0)
    with pytest.raises(ValueError, match="longer than 9 characters"):
        net.add_node(Node("w10_10_100", Role.WORKER, "10.10.10.100"))
    with pytest.raises(ValueError, match="duplicate node name"):
        net.add_node(Node("s0", Role.WORKER, "10.9.9.9"))


# --- ports: decided once, read back the same everywhere ------------------------------------


def test_link_ports_match_link_at(net):
    for ln in net.links:
        assert net.link_at(ln.a, ln.port_a) is ln
        assert net.link_at(ln.b, ln.port_b) is ln
        assert ln.intf(ln.a) == f"{ln.a}-eth{ln.port_a}"


def test_ports_are_unique_per_node(net):
    used = Counter((x, ln.port_of(x)) for ln in net.links for x in (ln.a, ln.b))
    assert max(used.values()) == 1
    assert min(p for _, p in used) == 1


def test_mininet_topo_carries_exactly_the_model_ports(net):
    topo = ModelTopo(net)
    wired = sorted(
        (info["node1"], info["port1"], info["node2"], info["port2"]) for _a, _b, info in topo.links(withInfo=True)
    )
    assert wired == sorted(ln.key for ln in net.links)
    for ln in net.links:
        assert topo.ports[ln.a][ln.port_a] == (ln.b, ln.port_b)
        assert topo.ports[ln.b][ln.port_b] == (ln.a, ln.port_a)


def test_psnet_port_layout():
    net = psnet(tors=3, ps=2, workers=[2, 2, 2], ecs_ports=8, tor_downlinks=4)
    w_prime, md = 8, 4
    for i, w in enumerate(net.workers(), start=1):  # ECS ports 1..W face workers, in order
        assert net.link_at("ecs1", i).other("ecs1") == w.name
    for s in range(1, 4):
        tor = f"t1_{s}"
        for j in range(1, md + 1):  # then M_d ports per ToR; a ToR's slots are its ports 1..M_d
            ln = net.link_at("ecs1", w_prime + (s - 1) * md + j)
            assert (ln.other("ecs1"), ln.port_of(tor)) == (tor, j)
        assert net.link_at(tor, md + 1).other(tor) == "sn1"
        assert net.link_at("sn1", s).other("sn1") == tor
        for p in (1, 2):  # PS p's NIC on ToR s is the PS's port s and the ToR's port M_d + 1 + p
            ln = net.link_at(f"ps1_{p}", s)
            assert (ln.other(f"ps1_{p}"), ln.port_of(tor)) == (tor, md + 1 + p)
    with pytest.raises(KeyError):  # unused ECS worker ports W+1..W' are left unwired
        net.link_at("ecs1", 7)


def test_fattree_port_layout():
    net = fattree(k=6, workers=[3] * 17 + [0], ps=3)
    half = 3
    for e in net.by_role(Role.TOR):
        down = [net.link_at(e.name, p).other(e.name) for p in range(1, half + 1)]
        up = [net.link_at(e.name, p).other(e.name) for p in range(half + 1, 7)]
        assert all(net.nodes[x].is_host for x in down)
        assert up == [f"a{e.module}_{s}" for s in range(half, 6)]
    for c in net.by_role(Role.CORE):  # core port p reaches pod p - 1
        assert [net.nodes[net.link_at(c.name, p).other(c.name)].module for p in range(1, 7)] == list(range(6))


def test_bcube_port_layout():
    n, k = 3, 2
    net = bcube(n=n, k=k)
    for idx, s in enumerate(net.hosts()):
        a = digits(idx, n, k)
        for level in range(k + 1):
            ln = net.link_at(s.name, level + 1)  # NIC of level l is port l + 1
            sw = net.nodes[ln.other(s.name)]
            assert sw.module == level
            assert ln.port_of(sw.name) == a[k - level] + 1  # switch port a_l + 1


# --- the SuperNode graph -------------------------------------------------------------------


def supernode_multigraph(net: Network) -> nx.MultiGraph:
    g = nx.MultiGraph()
    g.add_nodes_from(n.name for n in net.by_role(Role.SUPERNODE))
    g.add_edges_from((ln.a, ln.b) for ln in net.links if ln.kind == "supernode")
    return g


@pytest.mark.parametrize(("h", "r", "seed"), [(2, 3, 1), (4, 3, 7), (6, 3, 1), (8, 3, 5), (5, 4, 2)])
def test_supernode_graph_is_r_regular_and_connected(h, r, seed):
    net = psnet(modules=h, tors=r, ps=1, workers=r, seed=seed)
    g = supernode_multigraph(net)
    assert {d for _, d in g.degree()} == {r}
    assert nx.is_connected(g)
    if h > 2:
        assert nx.number_of_selfloops(g) == 0
        assert g.number_of_edges() == len(set(map(frozenset, g.edges())))  # simple graph


def test_two_modules_are_joined_by_r_parallel_links():
    assert supernode_graph(2, 3, seed=1) == [(1, 2)] * 3
    assert supernode_graph(1, 3, seed=1) == []


def test_supernode_graph_is_the_same_for_the_same_seed():
    first = supernode_graph(8, 3, seed=5)
    assert supernode_graph(8, 3, seed=5) == first
    assert any(supernode_graph(8, 3, seed=s) != first for s in range(6, 10))
    a = psnet(modules=6, tors=3, ps=1, workers=3, seed=3)
    b = psnet(modules=6, tors=3, ps=1, workers=3, seed=3)
    assert [ln.key for ln in a.links] == [ln.key for ln in b.links]


def test_supernode_graph_respects_the_shipped_seed():
    net = load_network(TOPOLOGIES / "psnet-4modules.yaml")
    pairs = sorted((int(ln.a[2:]), int(ln.b[2:])) for ln in net.links if ln.kind == "supernode")
    assert pairs == supernode_graph(4, 3, seed=7) == [(1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4)]


# --- rates ---------------------------------------------------------------------------------


@pytest.mark.parametrize("r", [1, 2, 4, 5])
def test_fattree_oversubscription_sets_uplinks_to_bw_over_r(r):
    net = fattree(k=4, pods=2, workers=[0, 2, 2, 2], ps=2, oversubscription=r, ps_mbps=800, scale=10)
    for ln in net.links:
        if ln.kind in ("tor-agg", "agg-core"):
            assert ln.paper_mbps == 1000 / r
        else:
            assert ln.paper_mbps == (800 if net.nodes[ln.a].role == Role.PS else 1000)


def test_psnet_rates():
    net = psnet(tors=3, ps=2, workers=[2, 2, 2], K=2, worker_mbps=200, scale=1)
    paper = {ln.kind: ln.paper_mbps for ln in net.links}
    assert paper == {"worker-ecs": 200, "ecs-tor": 200, "ps-tor": 400, "tor-supernode": 600}
    net = psnet(modules=2, tors=3, ps=1, workers=3, worker_mbps=200, uplink_mbps=500, inter_module_mbps=700)
    paper = {ln.kind: ln.paper_mbps for ln in net.links}
    assert paper["tor-supernode"] == 500 and paper["supernode"] == 700


@pytest.mark.parametrize("scale", [1, 4, 10, 40])
def test_scale_divides_every_rate(scale):
    net = psnet(modules=2, tors=3, ps=1, workers=3, worker_mbps=1000, scale=scale, uplink_mbps=1000, K=0.5)
    for ln in net.links:
        assert ln.mbps == pytest.approx(ln.paper_mbps / scale)
    assert {ln.kind: ln.mbps for ln in net.links}["ps-tor"] == pytest.approx(500 / scale)


def test_shipped_scales():
    emulated = {p.stem: {ln.kind: ln.mbps for ln in load_network(p).links} for p in sorted(TOPOLOGIES.glob("*.yaml"))}
    assert emulated["psnet-testbed"]["worker-ecs"] == 100
    assert emulated["psnet-testbed"]["tor-supernode"] == 300
    assert emulated["fattree-testbed"] == {"host-tor": 100, "tor-agg": 100, "agg-core": 100}
    assert emulated["bcube-4-1"] == {"server-switch": 25}
