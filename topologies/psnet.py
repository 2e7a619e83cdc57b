"""PSNet builder (Section 3.1, addressing 3.2): modules of ECS + R ToRs + SuperNode + multi-NIC PSs.

Names: worker `w{mid}_{swid}_{wid}` (10.mid.swid.wid, swid = its home ToR), PS `ps{mid}_{psid}`
(10.mid.0.psid), ToR `t{mid}_{swid}` (10.mid.swid.0), SuperNode `sn{mid}` (10.mid.R+1.0), ECS
`ecs{mid}`. Workers get home ToRs round-robin, so the addresses spread equally under the ToRs as
the paper's default; the circuits (which ToR a worker is wired to now) are the TC's business.

Every PS NIC carries the same MAC and address: a PS is one server with R ports, and the ToRs route
by IP, so a worker on any ToR reaches the PS through that ToR's NIC without ARP ever asking which.
"""

from __future__ import annotations

import random

import networkx as nx

from topologies.model import Network, Node, Role, dpid_for, mac_for
from topologies.schema import PSNetSpec


def home_tors(workers: int, tors: int) -> list[tuple[int, int]]:
    """(swid, wid) of each worker, 1-based: round-robin over ToRs, as equal as W allows."""
    return sorted(((i % tors) + 1, (i // tors) + 1) for i in range(workers))


def supernode_graph(modules: int, degree: int, seed: int) -> list[tuple[int, int]]:
    """Edges (1-based module ids) of the R-regular inter-module graph; connected, seeded.

    Two modules are joined by R parallel links (the R disjoint paths); more modules form a random
    R-regular graph, redrawn with the next seed until it is connected.
    """
    if modules == 1:
        return []
    if modules == 2:
        return [(1, 2)] * degree
    for attempt in range(100):
        g = nx.random_regular_graph(degree, modules, seed=random.Random(seed + attempt).randrange(2**31))
        if nx.is_connected(g):
            return sorted((a + 1, b + 1) for a, b in g.edges())
    raise ValueError(f"no connected {degree}-regular graph on {modules} modules after 100 seeds")


def build_psnet(spec: PSNetSpec) -> Network:
    """Nodes and links of a PSNet; ports are numbered in the order links are added here."""
    net = Network(spec)
    r = spec.tors
    bw = spec.worker_mbps
    uplink = spec.uplink_paper_mbps
    inter = spec.inter_module_paper_mbps
    for m in range(1, spec.modules + 1):
        ecs = net.add_node(Node(f"ecs{m}", Role.ECS, f"10.{m}.0.0", dpid_for(Role.ECS, m), m))
        tors = [
            net.add_node(Node(f"t{m}_{s}", Role.TOR, f"10.{m}.{s}.0", dpid_for(Role.TOR, m, s), m, s))
            for s in range(1, r + 1)
        ]
        sn = net.add_node(Node(f"sn{m}", Role.SUPERNODE, f"10.{m}.{r + 1}.0", dpid_for(Role.SUPERNODE, m), m, r + 1))
        # ECS ports 1..W' face workers; then M_d ports per ToR face the ToRs (ToR ports 1..M_d).
        workers = []
        for swid, wid in home_tors(spec.worker_count(m), r):
            w = net.add_node(Node(f"w{m}_{swid}_{wid}", Role.WORKER, f"10.{m}.{swid}.{wid}", None, m, swid))
            ln = net.add_link(w.name, ecs.name, bw, "worker-ecs")
            net.set_mac(w.name, ln.port_a, mac_for(w.ip))
            workers.append(w)
        for _ in range(spec.w_prime - len(workers)):  # unused ECS worker ports keep numbering fixed
            net._next_port[ecs.name] += 1
        for t in tors:
            for _ in range(spec.m_d):
                net.add_link(ecs.name, t.name, bw, "ecs-tor")
        for t in tors:
            net.add_link(t.name, sn.name, uplink, "tor-supernode")
        for p in range(1, spec.ps + spec.standby_ps + 1):
            role = Role.PS if p <= spec.ps else Role.STANDBY
            ps = net.add_node(Node(f"ps{m}_{p}", role, f"10.{m}.0.{p}", None, m, p))
            for t in tors:
                ln = net.add_link(ps.name, t.name, spec.K * bw, "ps-tor")
                net.set_mac(ps.name, ln.port_a, mac_for(ps.ip))
    for a, b in supernode_graph(spec.modules, r, spec.seed):
        net.add_link(f"sn{a}", f"sn{b}", inter, "supernode")
    return net
