"""Which server runs which node when one emulation spans several (`--cluster`): a partition of the
topology model that keeps the job's traffic inside servers and each server's datapath within its
ceiling.

A packet costs the server it crosses: every switch (one ovs-vswitchd per server, userspace
datapath) and every relaying server (BCube, Torus: their kernel) handles it once per hop. A cable
whose two ends sit on different servers (a *cut* cable) becomes a tunnel between them, which adds
encapsulation, the servers' own network and its latency to every packet on it. So a good
placement (1) balances the switch-hop traffic over the servers, (2) cuts cables that carry little
of the job's traffic, and (3) never cuts a patch cable (an OVS patch port joins two bridges of one
ovs-vswitchd).

The traffic per cable comes from the job: each (sender, receiver) pair's bytes (a scheme's
`schemes.schedule.pair_bytes`, or the PS job's worker <-> PS pairs) over the path the controller
programs for it (controller.routing), scaled so the busiest cable runs at its rate. The partition
itself is METIS's multilevel k-way partitioning (pymetis) with two balance constraints, switch-hop
traffic and hosts (each host's processes take memory and CPU where it runs), and the cable
traffic as edge weight: networkx's Kernighan-Lin only bisects with equal node counts, and does not
balance a vertex weight.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import networkx as nx
import pymetis

from controller.routing import compute_paths, path_links, path_nodes, taken_path
from controller.tc import initial_circuits
from topologies.model import Link, Network

#: METIS's allowed imbalance per constraint, in thousandths (ufactor 100: a part may carry 10% over the mean)
UFACTOR = 100
#: integer resolution of the weights METIS sees (it takes integers only)
RESOLUTION = 1000


def cable_traffic(net: Network, pair_weight: Mapping[tuple[str, str], float] | None = None) -> dict[Link, float]:
    """Mbit/s each cable carries (both directions together) when the job's pairs send at once, with
    the busiest cable at its rate: each pair's weight (its bytes) over every cable of the path the
    controller programs for it. None: the network's intended pairs, one unit each (an all-to-all of
    the job's hosts when the kind intends every pair)."""
    weights = dict(pair_weight) if pair_weight else {p: 1.0 for p in net.intended_pairs()}
    paths = compute_paths(net, initial_circuits(net), pairs=list(weights))
    units: Counter[Link] = Counter()
    for pair, w in weights.items():
        if pair in paths and w > 0:
            for ln in path_links(net, taken_path(net, paths, *pair)):
                units[ln] += w
    if not units:
        return {}
    # the busiest cable, relative to its rate, sets the pace: its units run at its Mbit/s
    per_unit = min(ln.mbps / u for ln, u in units.items())
    return {ln: u * per_unit for ln, u in units.items()}


def relayed_by(net: Network, pair_weight: Mapping[tuple[str, str], float] | None = None) -> Counter[str]:
    """Per relaying server (BCube, Torus), how many of the weighted pairs' paths it forwards."""
    weights = dict(pair_weight) if pair_weight else {p: 1.0 for p in net.intended_pairs()}
    paths = compute_paths(net, initial_circuits(net), pairs=list(weights))
    out: Counter[str] = Counter()
    for pair, w in weights.items():
        if pair in paths:
            for n in path_nodes(net, taken_path(net, paths, *pair))[1:-1]:
                if net.nodes[n].is_host:
                    out[n] += w
    return out


def hop_traffic(net: Network, traffic: Mapping[Link, float]) -> dict[str, float]:
    """Mbit/s of packets each node forwards: a switch, or a relaying server, handles every packet
    of its cables once as it enters (half of the sum of its cables' traffic, which counts entry and
    exit); an end host forwards nothing."""
    out: dict[str, float] = {}
    for name, node in net.nodes.items():
        forwards = not node.is_host or node.relay
        out[name] = sum(traffic.get(ln, 0.0) for ln in net.links_of(name)) / 2 if forwards else 0.0
    return out


@dataclass(frozen=True)
class Placement:
    """Each node's server, and what the placement costs."""

    servers: tuple[str, ...]
    server_of: dict[str, str]
    links: list[Link] = field(repr=False)
    traffic: dict[Link, float] = field(repr=False)
    hops: dict[str, float] = field(repr=False)

    @property
    def cut(self) -> list[Link]:
        """The cables whose ends sit on different servers (tunnelled), in the model's order."""
        return [ln for ln in self.links if self.server_of[ln.a] != self.server_of[ln.b]]

    def nodes_on(self, server: str) -> list[str]:
        return sorted(n for n, s in self.server_of.items() if s == server)

    def hop_mbps(self, server: str) -> float:
        """Switch-hop Mbit/s the server's datapath handles (compare with a ceiling times the hops
        it was measured over)."""
        return sum(v for n, v in self.hops.items() if self.server_of[n] == server)

    @property
    def cut_mbps(self) -> float:
        """Mbit/s the tunnels carry, both directions together."""
        return sum(self.traffic.get(ln, 0.0) for ln in self.cut)

    @property
    def cut_share(self) -> float:
        """Share of the job's cable traffic that crosses a tunnel."""
        total = sum(self.traffic.values())
        return self.cut_mbps / total if total else 0.0

    def text(self) -> str:
        per = ", ".join(
            f"{s}: {len(self.nodes_on(s))} nodes, {self.hop_mbps(s):.0f} Mbit/s of switch hops" for s in self.servers
        )
        return f"{per}; {len(self.cut)} cables tunnelled, carrying {self.cut_share:.0%} of the job's traffic"


def _groups(net: Network) -> list[list[str]]:
    """Nodes that must share a server: the two ends of a patch cable (one ovs-vswitchd's bridges),
    transitively; every other node alone."""
    g = nx.Graph()
    g.add_nodes_from(net.nodes)
    g.add_edges_from((ln.a, ln.b) for ln in net.links if net.is_patch(ln))
    return sorted((sorted(c) for c in nx.connected_components(g)), key=lambda c: c[0])


def place(
    net: Network,
    servers: Sequence[str],
    traffic: Mapping[Link, float] | None = None,
    pinned: Mapping[str, str] | None = None,
    seed: int = 0,
) -> Placement:
    """Partition the model over `servers` (module doc). `traffic`: Mbit/s per cable (default:
    `cable_traffic(net)`); `pinned`: nodes that must run on a given server. One server: all on it."""
    traffic = dict(cable_traffic(net) if traffic is None else traffic)
    hops = hop_traffic(net, traffic)
    names = list(servers)
    if not names:
        raise ValueError("no server to place the network on")
    if len(names) == 1:
        return Placement(tuple(names), {n: names[0] for n in net.nodes}, list(net.links), traffic, hops)
    groups = _groups(net)
    index = {n: i for i, grp in enumerate(groups) for n in grp}
    hop_total = sum(hops.values()) or 1.0
    vweights: list[int] = []
    for grp in groups:  # two constraints per vertex: switch-hop traffic, then hosts
        vweights.append(max(1, round(RESOLUTION * sum(hops[n] for n in grp) / hop_total)))
    for grp in groups:
        vweights.append(sum(1 for n in grp if net.nodes[n].is_host) or 0)
    if not any(vweights[len(groups) :]):
        vweights = vweights[: len(groups)]
    top = max(traffic.values(), default=1.0) or 1.0
    edges: Counter[tuple[int, int]] = Counter()
    for ln in net.links:
        a, b = index[ln.a], index[ln.b]
        if a != b:
            # every cable binds a little (1): an idle cable is cheaper to cut than none, not free
            edges[(min(a, b), max(a, b))] += 1 + round(RESOLUTION * traffic.get(ln, 0.0) / top)
    adj: list[list[tuple[int, int]]] = [[] for _ in groups]
    for (a, b), w in sorted(edges.items()):
        adj[a].append((b, w))
        adj[b].append((a, w))
    starts, adjacent, eweights = [0], [], []
    for row in adj:
        for b, w in row:
            adjacent.append(b)
            eweights.append(w)
        starts.append(len(adjacent))
    part = pymetis.part_graph(
        len(names),
        adjacency=pymetis.CSRAdjacency(starts, adjacent),
        vweights=vweights,
        eweights=eweights,
        options=pymetis.Options(seed=seed, ufactor=UFACTOR),
    ).vertex_part
    server_of = {n: names[part[index[n]]] for n in net.nodes}
    for node, server in (pinned or {}).items():
        for n in groups[index[node]]:
            server_of[n] = server
    return Placement(tuple(names), server_of, list(net.links), traffic, hops)


def servers_needed(hop_mbps: float, ceiling_mbps: float, hops_measured: float, most: int = 64) -> int:
    """How many servers carry `hop_mbps` of switch hops when one carries `ceiling_mbps` of flows
    crossing `hops_measured` switches each (the ceiling's measurement): a lower bound, before the
    partition's imbalance and tunnels."""
    per_server = ceiling_mbps * hops_measured
    return min(most, max(1, math.ceil(hop_mbps / per_server))) if per_server > 0 else most


__all__ = [
    "Placement",
    "cable_traffic",
    "hop_traffic",
    "place",
    "relayed_by",
    "servers_needed",
]
