"""Paths between PSNet modules: the R edge-disjoint paths of the SuperNode graph (Section 3.1).

Section 3.1 spreads the traffic from module A to module B "evenly on the R parallel paths that
have no shared links", and Section 3.3's CNC uses "all the R disjoint paths ... at the same time".
Shortest paths alone do not: with H >= 4 two adjacent modules have one shortest SuperNode link,
so every flow between them would share it. Here a pair of hosts in two different modules gets
one of the edge-disjoint SuperNode paths (a maximum set, shortest first), round robin over the
module pair's host pairs, and as candidates the shortest host paths through it; `controller.routing`
then chooses among those like among any candidates (which ToR and PS NIC at either end). With
H = 2 the R parallel links are the R paths; after a cable or SuperNode failure the disjoint
paths of what remains are used.

Pure functions of the routing graph (networkx), so the CNC, the BCT model and the flow model
(models.flow.routes) share them.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

import networkx as nx

from topologies.model import Network, Role

#: one SuperNode path: the SuperNodes in order and the key of the cable taken between each two
SnPath = tuple[tuple[str, ...], tuple[object, ...]]


def supernodes(net: Network) -> dict[int, str]:
    """Module id -> its SuperNode switch (empty for kinds without SuperNodes)."""
    return {n.module: n.name for n in net.nodes.values() if n.role == Role.SUPERNODE}


def disjoint_supernode_paths(g: nx.MultiGraph, sns: set[str], sn_a: str, sn_b: str) -> list[SnPath]:
    """A maximum set of edge-disjoint SuperNode paths from sn_a to sn_b, shortest first.

    Each parallel cable becomes its own edge (through a node standing for the cable), so R
    parallel links between two modules count as R disjoint paths; networkx's max-flow finds the
    set (`edge_disjoint_paths`). Only SuperNode-SuperNode cables that are up (in `g`) are used.
    """
    h = nx.Graph()
    h.add_nodes_from(sorted(n for n in sns if n in g))
    for u, v, key in sorted(
        ((u, v, k) for u, v, k in g.edges(keys=True) if u in sns and v in sns), key=lambda e: str(e)
    ):
        cable = ("cable", key)
        h.add_edge(u, cable)
        h.add_edge(cable, v)
    if sn_a == sn_b or sn_a not in h or sn_b not in h or not nx.has_path(h, sn_a, sn_b):
        return []
    out = []
    for path in nx.edge_disjoint_paths(h, sn_a, sn_b):
        nodes = tuple(n for n in path if isinstance(n, str))
        keys = tuple(n[1] for n in path if not isinstance(n, str))
        out.append((nodes, keys))
    return sorted(out, key=lambda p: (len(p[0]), [str(x) for x in p[0]], [str(k) for k in p[1]]))


@dataclass
class ModuleRouter:
    """Inter-module candidates for one routing graph, SuperNode paths cached per module pair."""

    net: Network
    g: nx.MultiGraph
    transit: set[str]
    _sn: dict[int, str] = field(default_factory=dict)
    _paths: dict[tuple[int, int], list[SnPath]] = field(default_factory=dict)
    _rank: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._sn = supernodes(self.net)

    def applies(self, src: str, dst: str) -> bool:
        """True for two hosts in different modules of a network with SuperNodes."""
        a, b = self.net.nodes[src].module, self.net.nodes[dst].module
        return bool(self._sn) and a != b and a in self._sn and b in self._sn

    def sn_paths(self, src: str, dst: str) -> list[SnPath]:
        """The disjoint SuperNode paths between the two hosts' modules: one set per module pair,
        computed from the lower-numbered module and reversed for the other direction, so a
        pull can take the very path of its push."""
        a, b = self.net.nodes[src].module, self.net.nodes[dst].module
        key = (min(a, b), max(a, b))
        if key not in self._paths:
            self._paths[key] = disjoint_supernode_paths(self.g, set(self._sn.values()), *map(self._sn.get, key))
        if a < b:
            return self._paths[key]
        return [(nodes[::-1], keys[::-1]) for nodes, keys in self._paths[key]]

    def rank(self, host: str) -> int:
        """A host's position among its module's hosts (the model's host order)."""
        if not self._rank:
            seen: dict[int, int] = {}
            for h in self.net.hosts():
                self._rank[h.name] = seen.get(h.module, 0)
                seen[h.module] = self._rank[h.name] + 1
        return self._rank[host]

    def candidates(self, src: str, dst: str, shortest: Callable[[nx.MultiGraph, str, str], list[list]]) -> list[list]:
        """Host paths src -> dst through the pair's SuperNode path, the shortest ones.

        The pair's SuperNode path is number (rank(src) + rank(dst)) mod (number of paths): round
        robin, so the W1 x P2 worker-PS flows of a module pair spread evenly over the R paths (each
        PS's workers take the paths in turn), the same in both directions and whatever order the
        pairs are routed in (the flow model routes them per destination). `shortest(view, src,
        dst)` lists the shortest candidates (as Hops) inside a graph view: `controller.routing`'s
        own expansion, so ports and parallel cables are chosen alike. The view keeps the two
        modules' switches, the path's SuperNodes and only the path's cables between SuperNodes,
        so its shortest paths are exactly the ones through that path; the strategy then chooses
        among them (which ToR and PS NIC at each end).
        """
        paths = self.sn_paths(src, dst)
        if not paths:
            return []
        nodes, keys = paths[(self.rank(src) + self.rank(dst)) % len(paths)]
        ma, mb = self.net.nodes[src].module, self.net.nodes[dst].module
        sn_names = set(self._sn.values())
        local = {n for n in self.transit if self.net.nodes[n].module in (ma, mb) and n not in sn_names}
        keep = local | set(nodes) | {src, dst}
        allowed, on_path = set(keys), set(nodes)

        def edge_ok(u: str, v: str, k: object) -> bool:
            return not (u in on_path and v in on_path) or k in allowed

        view = nx.subgraph_view(self.g, filter_node=keep.__contains__, filter_edge=edge_ok)
        return shortest(view, src, dst)


def sn_cables(path: list, net: Network) -> list[tuple[str, str]]:
    """The SuperNode-to-SuperNode hops of a host path (as (from, to) names): for tests and logs."""
    names = [h.node for h in path]
    return [(u, v) for u, v in itertools.pairwise(names) if net.nodes[u].role == net.nodes[v].role == Role.SUPERNODE]
