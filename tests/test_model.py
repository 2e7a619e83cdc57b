"""The shared model: node and link counts, addresses, identities and port numbers of every builder.

Every builder is built at two sizes or more. Port numbers are checked against the model's own
lookup (`link_at`) and against the Mininet Topo that transcribes it, the check ripl lacked. Each
kind's node identity is checked both ways (name -> numbers -> address/MAC/DPID and back), and
every shipped file must build exactly as recorded in tests/fixtures/shipped_topologies.json.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

from topologies import kinds as topo_kinds
from topologies.build import build_network, load_network
from topologies.kinds.bcube import BCubeId, digits, undigits
from topologies.kinds.fattree import FatTreeId
from topologies.kinds.fattree import Tier as FatTier
from topologies.kinds.psnet import PSNetId, home_tors, supernode_graph
from topologies.kinds.psnet import Tier as PSNetTier
from topologies.mininet_topo import ModelTopo
from topologies.model import LinkKind, Network, Node, Role, dpid_for, dpid_parts, mac_parts
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


def leafspine(**kw) -> Network:
    return build(**{"kind": "leafspine", "worker_mbps": 1000, "scale": 40, **kw})


def torus(**kw) -> Network:
    return build(**{"kind": "torus", "worker_mbps": 1000, "scale": 40, **kw})


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
    "leafspine-2x4": lambda: leafspine(spines=2, leaves=4, hosts_per_leaf=3, oversubscription=4),
    "leafspine-4x16-ps": lambda: leafspine(spines=4, leaves=16, hosts_per_leaf=4, workers=[3] * 16, ps=2),
    "torus-4x4": lambda: torus(n=4, h=2),
    "torus-3x3x3-ps": lambda: torus(n=3, h=3, ps=2, workers=20),
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


# --- shipped files build exactly as recorded -------------------------------------------------
SHIPPED = sorted(TOPOLOGIES.glob("*.yaml"))
GOLDEN = Path(__file__).resolve().parent / "fixtures" / "shipped_topologies.json"


def fingerprint(net: Network) -> dict:
    """Every node's name/role/address/DPID, every cable's ends/ports/rates/kind, every MAC and the
    intended pairs: what the builder decides, as plain JSON values."""
    return {
        "kind": net.kind,
        "nodes": [[n.name, str(n.role), n.ip, n.dpid, n.module, n.index, n.relay] for n in net.nodes.values()],
        "links": [[ln.a, ln.port_a, ln.b, ln.port_b, ln.paper_mbps, ln.mbps, str(ln.kind)] for ln in net.links],
        "macs": sorted([h, p, m] for (h, p), m in net.macs.items()),
        "pairs": [list(p) for p in net.intended_pairs()],
    }


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_topology_builds_as_recorded(path):
    net = load_network(path)
    want = json.loads(GOLDEN.read_text())[path.name]
    digest = hashlib.sha256(json.dumps(fingerprint(net), sort_keys=True).encode()).hexdigest()
    assert (len(net.nodes), len(net.links)) == (want["nodes"], want["links"])
    assert digest == want["sha256"], (
        f"{path.name} no longer builds as recorded; if the change is intended, set its sha256 in {GOLDEN} to {digest}"
    )


def test_every_shipped_file_is_recorded():
    assert sorted(json.loads(GOLDEN.read_text())) == [p.name for p in SHIPPED]


# --- node identity: name <-> numbers <-> address <-> MAC <-> DPID, both ways, per kind ------
#: the builders' networks above, every shipped file, and the smallest shapes (R = 1, BCube k = 0)
IDENTITY_NETWORKS = {
    **NETWORKS,
    **{p.stem: (lambda p=p: load_network(p)) for p in SHIPPED},
    "bcube-2-0": lambda: bcube(n=2, k=0),
    "psnet-R1-H2": lambda: psnet(modules=2, tors=1, ps=1, workers=2, standby_ps=1),
}


@pytest.fixture(params=IDENTITY_NETWORKS.values(), ids=IDENTITY_NETWORKS.keys())
def any_net(request) -> Network:
    return request.param()


def test_identity_from_the_name_gives_what_the_builder_made(any_net):
    """name -> numbers -> name, address, DPID and the MAC of every NIC, for every node."""
    for n in any_net.nodes.values():
        i = any_net.node_id(n.name)
        assert (i.name, i.ip, i.dpid, i.is_host) == (n.name, n.ip, n.dpid, n.is_host)
        for ln in any_net.links_of(n.name):
            port = ln.port_of(n.name)
            assert i.mac(port) == (any_net.mac(n.name, port) if n.is_host else None)


def test_identity_parses_back_from_address_mac_and_dpid(any_net):
    """address / MAC / DPID -> numbers: the same identity as the name gives."""
    cls, spec = any_net.family.node_id, any_net.spec
    for n in any_net.nodes.values():
        i = cls.from_name(n.name, spec)
        assert cls.from_ip(n.ip, spec) == i
        if n.dpid is not None:
            assert cls.from_dpid(n.dpid, spec) == i
        for (host, _port), mac in any_net.macs.items():
            if host == n.name:
                assert cls.from_mac(mac, spec) == i


def test_identity_numbers_per_kind():
    """The numbers each kind's identity carries, as its README table names them."""
    pn = load_network(TOPOLOGIES / "psnet-standby.yaml")
    assert pn.node_id("w1_3_2") == PSNetId(PSNetTier.WORKER, 1, 3, 2)
    assert pn.node_id("ps1_3") == PSNetId(PSNetTier.PS, 1, 0, 3)  # the standby is a PS by position
    assert pn.node_id("sn1") == PSNetId(PSNetTier.SUPERNODE, 1, 4)  # swid R + 1 in its address
    assert PSNetId.from_ip("10.1.4.0", pn.spec).name == "sn1" and PSNetId.from_ip("10.1.3.0", pn.spec).name == "t1_3"
    ft = load_network(TOPOLOGIES / "fattree-k4.yaml")
    assert ft.node_id("c2_1") == FatTreeId(FatTier.CORE, 4, 2, 1)  # ripl: core (k, j, i)
    assert (
        FatTreeId.from_ip("10.3.2.1", ft.spec).name == "a3_2" and FatTreeId.from_ip("10.3.1.1", ft.spec).name == "e3_1"
    )
    assert FatTreeId.from_dpid(dpid_for(Role.TOR, 3, 1), ft.spec) == ft.node_id("e3_1")
    bc = bcube(n=3, k=2)
    assert bc.node_id("s2_0_1").index == undigits((2, 0, 1), 3) == 19
    assert bc.node_id("b1_2_0") == BCubeId(False, 6, 1, 3, 2)
    assert BCubeId.from_mac("02:03:0a:01:00:14", bc.spec).name == "s2_0_1"  # NIC of level 2


@pytest.mark.parametrize(
    ("file", "method", "value"),
    [
        ("psnet-testbed", "from_name", "t1_4"),  # R = 3
        ("psnet-testbed", "from_name", "w2_1_1"),  # one module
        ("psnet-testbed", "from_name", "w1_1_3"),  # two workers per home ToR
        ("psnet-testbed", "from_name", "ps1_3"),  # no standby here
        ("psnet-testbed", "from_name", "x1"),
        ("psnet-testbed", "from_name", "t1"),
        ("psnet-testbed", "from_ip", "10.1.5.0"),  # above the SuperNode
        ("psnet-testbed", "from_ip", "192.168.1.1"),
        ("psnet-testbed", "from_dpid", dpid_for(Role.AGG, 0, 0)),
        ("psnet-testbed", "from_mac", "02:01:0a:01:00:01"),  # a PS's NICs share NIC byte 0
        ("psnet-testbed", "from_mac", "02:00:0a:01:01:00"),  # a ToR has no MAC
        ("psnet-testbed", "from_mac", "aa:00:0a:01:01:01"),
        ("fattree-testbed", "from_name", "h2_0_2"),  # 2 pods built
        ("fattree-testbed", "from_name", "c3_1"),  # k/2 = 2
        ("fattree-testbed", "from_name", "a0_1"),  # aggregation switches are k/2..k-1
        ("fattree-testbed", "from_ip", "10.0.0.4"),  # hosts 2..k/2+1
        ("fattree-testbed", "from_dpid", dpid_for(Role.ECS, 1)),
        ("fattree-testbed", "from_dpid", 7 << 32),
        ("bcube-4-1", "from_name", "s4_0"),  # digit >= n
        ("bcube-4-1", "from_name", "s1"),  # k + 1 digits
        ("bcube-4-1", "from_name", "b2_0"),  # levels 0..k
        ("bcube-4-1", "from_ip", "10.1.0.17"),  # 16 servers
        ("bcube-4-1", "from_mac", "02:03:0a:01:00:01"),  # NICs 1..k+1
    ],
)
def test_identity_refuses_what_the_topology_lacks(file, method, value):
    net = load_network(TOPOLOGIES / f"{file}.yaml")
    with pytest.raises(ValueError):
        getattr(net.family.node_id, method)(value, net.spec)


def test_address_packing_inverts():
    assert dpid_parts(dpid_for(Role.BSWITCH, 1, 2, 3)) == (Role.BSWITCH, 1, 2, 3)
    assert mac_parts("02:02:0a:01:00:05") == ("10.1.0.5", 2)


# --- kinds: the registry and what each kind states about itself -------------------------------


def test_registry_knows_every_kind_and_refuses_others():
    assert topo_kinds.names() == ["bcube", "fattree", "leafspine", "psnet", "torus"]
    for name in topo_kinds.names():
        kind = topo_kinds.get(name)
        assert kind.name == name and kind.spec_class.model_fields["kind"].annotation.__args__ == (name,)
    with pytest.raises(ValueError, match="unknown kind 'ring'; use one of bcube, fattree, leafspine, psnet, torus"):
        topo_kinds.get("ring")


def test_a_network_carries_the_kind_that_built_it(any_net):
    assert any_net.family is topo_kinds.get(any_net.spec.kind)
    assert any_net.kind == any_net.family.name


def test_kind_capabilities_match_what_its_builder_makes(any_net):
    kind = any_net.family
    assert kind.has_ecs == bool(any_net.by_role(Role.ECS))
    assert kind.l2_by_next_server == any(h.relay for h in any_net.hosts())
    assert set(roles(any_net)) <= set(kind.layers)  # every node gets a drawing layer
    assert {str(r) for r in kind.failure_switches} <= {str(r) for r in roles(any_net)}
    # a worker's own cable is never a default failure candidate, except a BCube server's (it has k+1)
    assert all(ln.kind not in kind.failure_links for w in any_net.workers() for ln in any_net.links_of(w.name)) or (
        kind.l2_by_next_server
    )
    if kind.bct is not None:  # the cables the BCT model reads B_w and B_s from exist
        assert all(ln.kind is kind.bct.worker_link for w in any_net.workers() for ln in any_net.links_of(w.name))
        assert all(ln.kind is kind.bct.ps_link for p in any_net.pss() for ln in any_net.links_of(p.name))
        assert kind.bct.shared_links <= set(kinds(any_net))


def test_link_kinds_are_an_enum_that_prints_as_before(any_net):
    assert all(isinstance(ln.kind, LinkKind) for ln in any_net.links)
    assert {f"{ln.kind}" for ln in any_net.links} <= {k.value for k in LinkKind}
    assert json.dumps(LinkKind.PS_TOR) == '"ps-tor"'


# --- leaf-spine -----------------------------------------------------------------------------
def test_leafspine_uplinks_are_sized_for_the_oversubscription():
    """n·B_w / (o·S) per uplink: a leaf's S uplinks carry 1/o of what its n hosts can send."""
    for o in (1, 2, 8, 32):
        net = leafspine(spines=2, leaves=4, hosts_per_leaf=4, oversubscription=o)
        ups = [ln for ln in net.links if ln.kind == LinkKind.LEAF_SPINE]
        assert len(ups) == 2 * 4
        for leaf in (f"l{i}" for i in range(4)):
            hosts = sum(ln.paper_mbps for ln in net.links_of(leaf) if ln.kind == LinkKind.HOST_TOR)
            uplinks = sum(ln.paper_mbps for ln in net.links_of(leaf) if ln.kind == LinkKind.LEAF_SPINE)
            assert uplinks == pytest.approx(hosts / o)


def test_leafspine_roles_and_regions():
    net = leafspine(spines=2, leaves=3, hosts_per_leaf=3, workers=[2, 2, 1], ps=2, oversubscription=2)
    assert [h.name for h in net.workers()] == ["h0_2", "h0_3", "h1_2", "h1_3", "h2_2"]
    assert [h.name for h in net.pss()] == ["h0_4", "h1_4"]
    regions = net.family.regions(net)
    assert regions["h1_3"] == ("l1",) and regions["h2_2"] == ("l2",)
    flat = leafspine(spines=1, leaves=2, hosts_per_leaf=2)
    assert set(flat.family.regions(flat).values()) == {()}  # non-blocking: no aggregation level


def test_fattree_regions_are_rack_and_pod_when_oversubscribed():
    net = fattree(k=4, workers=[2] * 7 + [0], ps=2, oversubscription=4)
    assert net.family.regions(net)["h1_0_3"] == ("e1_0", "pod1")
    one = fattree(k=4, workers=[2] * 7 + [0], ps=2)
    assert set(one.family.regions(one).values()) == {()}
