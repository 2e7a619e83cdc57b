"""Paths for the flow model: the controller's own routes, for the host pairs the traffic uses.

Small networks (<= EXACT_HOSTS) route every pair in `controller.routing.compute_paths`' order,
so they get exactly the emulator's paths whatever the strategy; larger ones only the pairs the
traffic uses (identical for `hashed` and `ecmp`, which the model treats as `hashed`: one draw of
the switches' per-connection hash per pair, as a TF job keeps one connection per worker-PS pair;
for `balanced` the least-loaded choice then sees only the
traffic's own pairs). `compute_paths` itself is the bottleneck at scale (a subgraph view and
`nx.all_shortest_paths` per pair: ~87 ms a pair on FatTree k=34, an hour for one PS job), so
`fast_paths` computes the same thing per destination: one BFS, then the pair's candidates in the
controller's order (sorted node paths, parallel cables expanded in key order) and the same
choice (seeded hash, or least-loaded in pair order); PSNet pairs across modules take the
controller's own candidates (one disjoint SuperNode path each, controller.modules).
tests/test_flowmodel.py checks it against `compute_paths` pair for pair. Both helpers here belong
in controller.routing / topologies.model (see the report); they live in this package while those
files are being refactored.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter, OrderedDict, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, fields

import networkx as nx

from controller.modules import ModuleRouter
from controller.routing import (
    PAIR_HASHED,
    Hop,
    _edges,
    _hash,
    kind_fixed,
    pair_candidates,
    path_links,
    routing_graph,
    taken_path,
)
from controller.tc import initial_circuits
from topologies.model import Link, Network, Role

LOG = logging.getLogger(__name__)

#: up to this many hosts every pair is routed, as the emulator does (identical paths whatever
#: the strategy); above it only the traffic's pairs, in the emulator's order
EXACT_HOSTS = 200

#: BFS results kept (per switch next to a destination; each a dict over all nodes: ~1 MB at 10k)
CACHED_DESTINATIONS = 256

INF = float("inf")

Pair = tuple[str, str]


@dataclass
class IndexedNetwork(Network):
    """A `Network` whose `links_of` is a dict lookup: the TC and the routing graph call it per
    worker, which is O(links) each and O(hosts x links) at 10k hosts (minutes)."""

    def __post_init__(self) -> None:
        self._links_by_node: dict[str, list[Link]] = {}
        for ln in self.links:
            self._links_by_node.setdefault(ln.a, []).append(ln)
            self._links_by_node.setdefault(ln.b, []).append(ln)

    @classmethod
    def of(cls, net: Network) -> IndexedNetwork:
        """The same network (its objects shared, not copied), with the index."""
        return cls(**{f.name: getattr(net, f.name) for f in fields(Network)})

    def links_of(self, node: str) -> list[Link]:
        return list(self._links_by_node.get(node, ()))


class _Router:
    """Shortest paths toward one destination at a time, as `controller.routing._candidates`."""

    def __init__(self, g: nx.MultiGraph, transit: set[str]) -> None:
        self.transit = transit
        # plain dicts, neighbours in name order and parallel cables in key order, built once:
        # networkx's views and the per-pair sorting were most of the time at 10k hosts
        self.cables = {
            u: {v: sorted(es.items(), key=lambda kv: str(kv[0])) for v, es in nbrs.items()} for u, nbrs in g.adj.items()
        }
        self.nbrs = {u: sorted(c) for u, c in self.cables.items()}
        # directed edge (node, out port) of every parallel cable, as `controller.routing._edges` keys them
        self.edge_keys = {
            u: {v: [(u, attrs["ports"][u]) for _, attrs in cs] for v, cs in nbrs.items()}
            for u, nbrs in self.cables.items()
        }
        self._dst: str | None = None
        self._dists: list[dict[str, int]] = []
        self._count: dict[str, int] = {}
        self._nexts: dict[str, list[str]] = {}
        self._cache: OrderedDict[frozenset, tuple] = OrderedDict()
        self._bfs_cache: OrderedDict[str, dict[str, int]] = OrderedDict()

    def _bfs(self, root: str) -> dict[str, int]:
        """Hop counts from one node through transit nodes (cached: hosts share their switches)."""
        dist = self._bfs_cache.get(root)
        if dist is not None:
            self._bfs_cache.move_to_end(root)
            return dist
        dist = {root: 0}
        todo = deque([root] if root in self.transit else [])
        while todo:
            x = todo.popleft()
            for y in self.cables[x]:
                if y not in dist:
                    dist[y] = dist[x] + 1
                    if y in self.transit:  # hosts end paths, they do not carry them
                        todo.append(y)
        self._bfs_cache[root] = dist
        if len(self._bfs_cache) > CACHED_DESTINATIONS:
            self._bfs_cache.popitem(last=False)
        return dist

    def _to(self, dst: str) -> None:
        """Distances to `dst`: 1 + the least over its neighbours, whose BFS hosts under one switch
        share; path counts and next hops depend on `dst` only through its cables (shared too)."""
        if dst == self._dst:
            return
        key = frozenset((n, len(c)) for n, c in self.cables[dst].items())
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = ([self._bfs(n) for n, _ in sorted(key)], {}, {})
            if len(self._cache) > CACHED_DESTINATIONS:
                self._cache.popitem(last=False)
        else:
            self._cache.move_to_end(key)
        self._dst, (self._dists, self._count, self._nexts) = dst, cached

    def _d(self, v: str) -> int | None:
        if v == self._dst:
            return 0
        ds = [d[v] for d in self._dists if v in d]
        return 1 + min(ds) if ds else None

    def _next(self, u: str) -> list[str]:
        if self._dst in self.cables[u]:  # a neighbour of dst is 1 hop from it: dst is its only next hop
            return [self._dst]
        nxt = self._nexts.get(u)
        if nxt is None:
            d = self._d(u) - 1
            nxt = self._nexts[u] = [v for v in self.nbrs[u] if v in self.transit and self._d(v) == d]
        return nxt

    def _n(self, u: str) -> int:
        """Expanded candidates (node paths x parallel cables) from u to the destination."""
        if u == self._dst:
            return 1
        if u not in self._count:
            self._count[u] = sum(len(self.cables[u][v]) * self._n(v) for v in self._next(u))
        return self._count[u]

    def _hops(self, nodes: list[str], choice: Iterable[int]) -> list[Hop]:
        edges = [self._parallel(u, v)[c][1] for (u, v), c in zip(itertools.pairwise(nodes), choice, strict=True)]
        return [
            Hop(n, edges[i - 1]["ports"][n] if i > 0 else None, edges[i]["ports"][n] if i < len(edges) else None)
            for i, n in enumerate(nodes)
        ]

    def _parallel(self, u: str, v: str) -> list[tuple[object, dict]]:
        return self.cables[u][v]

    def count(self, src: str, dst: str) -> int:
        self._to(dst)
        return self._n(src) if self._d(src) is not None else 0

    def nth(self, src: str, dst: str, index: int) -> list[Hop]:
        """The index-th candidate in the controller's order, without listing the others."""
        self._to(dst)
        nodes, mults, u, scale = [src], [], src, 1
        while u != dst:
            for v in self._next(u):
                block = scale * len(self.cables[u][v]) * self._n(v)
                if index < block:
                    break
                index -= block
            m = len(self.cables[u][v])
            nodes.append(v)
            mults.append(m)
            scale *= m
            u = v
        choice = []
        for m in reversed(mults):  # itertools.product: the last cable varies fastest
            choice.append(index % m)
            index //= m
        return self._hops(nodes, reversed(choice))

    def least_loaded(self, src: str, dst: str, load: Counter) -> list[Hop]:
        """The candidate `min(self.all(src, dst), key=(max load, summed load) over its edges)` picks
        (the first of equals, in the controller's order), without listing the candidates.

        The least max load M over the paths to dst is a bottleneck-path recursion; among the paths
        whose every edge carries at most M, the least summed load is a shortest-path recursion;
        then the first path in `all`'s order that reaches both: at each node the first next hop
        (parallel cables: the first least-loaded one) whose remainder still does. Both recursions
        visit each node of the shortest-path graph to dst once per pair. At FatTree k = 40 a pair
        has ~400 candidates and one PS job (Fig. 7 at W = 720) ~46k pairs: listing every
        candidate's hops was minutes; networkx has no lexicographic (bottleneck, sum) path."""
        self._to(dst)
        keys, nxt = self.edge_keys, self._next

        def least(u: str, v: str, cap: float) -> tuple[int, int] | None:
            """(load, cable index) of u-v's first least-loaded cable within `cap`, or None."""
            ks = keys[u][v]
            if len(ks) == 1:  # one cable: most are
                low = load[ks[0]]
                return (low, 0) if low <= cap else None
            loads = [load[e] for e in ks]
            low = min(loads)
            return (low, loads.index(low)) if low <= cap else None

        worst: dict[str, float] = {dst: 0}

        def bottleneck(u: str) -> float:
            if u not in worst:
                worst[u] = min((max(least(u, v, INF)[0], bottleneck(v)) for v in nxt(u)), default=INF)  # type: ignore[index]
            return worst[u]

        cap = bottleneck(src)
        total: dict[str, float] = {dst: 0}

        def summed(u: str) -> float:
            if u not in total:
                best = INF
                for v in nxt(u):
                    edge = least(u, v, cap)
                    if edge is not None:
                        best = min(best, edge[0] + summed(v))
                total[u] = best
            return total[u]

        need = summed(src)
        nodes, choice, u = [src], [], src
        while u != dst:
            for v in nxt(u):
                edge = least(u, v, cap)
                if edge is not None and edge[0] + summed(v) == need:
                    break
            else:  # pragma: no cover - count() > 0 was checked by the caller
                raise AssertionError(f"{src}>{dst}: no path at ({cap}, {need})")
            need -= edge[0]
            nodes.append(v)
            choice.append(edge[1])
            u = v
        return self._hops(nodes, choice)

    def all(self, src: str, dst: str) -> Iterator[list[Hop]]:
        """Every candidate, in the controller's order."""
        self._to(dst)

        def walk(path: list[str]) -> Iterator[list[str]]:
            if path[-1] == dst:
                yield path
                return
            for v in self._next(path[-1]):
                yield from walk([*path, v])

        for nodes in walk([src]):
            ranges = [range(len(self.cables[u][v])) for u, v in itertools.pairwise(nodes)]
            for choice in itertools.product(*ranges):
                yield self._hops(nodes, choice)


def fast_paths(net: Network, circuits: dict, pairs: Iterable[Pair]) -> dict[Pair, list[Hop]]:
    """What `compute_paths(net, circuits, pairs=pairs)` returns, computed per destination.

    Pairs are processed in the given order (that order matters for `balanced`); consecutive
    pairs with the same destination share one BFS, so callers group them where order allows."""
    g = routing_graph(net, circuits)
    transit = {n.name for n in net.nodes.values() if (not n.is_host or n.relay) and n.role != Role.ECS}
    router = _Router(g, transit)
    modules = ModuleRouter(net, g, transit)  # PSNet: pairs across modules take a disjoint SuperNode path
    load: Counter = Counter()
    chosen: dict[Pair, list[Hop]] = {}
    listed: dict[Pair, list[list[Hop]] | None] = {}  # the candidates where the controller's are needed

    def candidates(src: str, dst: str) -> list[list[Hop]] | None:
        if (src, dst) not in listed:
            cands = None
            if modules.applies(src, dst):  # few pairs: the controller's own candidates
                cands = pair_candidates(net, g, transit, src, dst, modules)
            elif net.family.relay_hosts(net, src, dst) is not None:  # e.g. a Torus's dimension order
                cands = kind_fixed(net, list(router.all(src, dst)), src, dst)
            listed[(src, dst)] = cands
        return listed[(src, dst)]

    if net.spec.routing in PAIR_HASHED:  # each choice is independent of the others: group by dst
        pairs = sorted(pairs, key=lambda p: p[1])
    else:  # compute_paths' order: intended pairs first, the fewest candidates first
        first = set(net.intended_pairs())
        pairs = sorted(pairs, key=lambda p: (p not in first, _count(router, candidates, *p)))
    for src, dst in pairs:
        n = router.count(src, dst)
        if not n:
            continue
        cands = candidates(src, dst)
        if modules.applies(src, dst) and not cands:
            continue
        if net.spec.routing in PAIR_HASHED:
            h = _hash(f"{src}>{dst}>{net.spec.seed}")
            pick = cands[h % len(cands)] if cands else router.nth(src, dst, h % n)
        elif cands:
            pick = min(cands, key=lambda p: (max(load[e] for e in _edges(p)), sum(load[e] for e in _edges(p))))
        else:
            pick = router.least_loaded(src, dst, load)
        load.update(_edges(pick))
        chosen[(src, dst)] = pick
    return chosen


def _count(router: _Router, candidates: Callable[[str, str], list | None], src: str, dst: str) -> int:
    """How many candidates compute_paths has for the pair (controller.routing.pair_candidates)."""
    cands = candidates(src, dst)
    return len(cands) if cands is not None else router.count(src, dst)


def emulator_order(net: Network, pairs: Iterable[Pair]) -> list[Pair]:
    """The pairs in the order `compute_paths` is handed them: worker-PS pairs first (per worker,
    per PS, there and back), then the other pairs by host order. That is the order before its own
    sort (intended pairs first, the fewest candidates first; `fast_paths` sorts the same way, and
    Python's sort is stable, so ties keep this order). For `balanced` routing the sorted order
    decides the loads each choice sees."""
    hosts = {h.name: i for i, h in enumerate(net.hosts())}
    ps_index = {p.name: i for i, p in enumerate(net.pss())}
    workers = {w.name: i for i, w in enumerate(net.workers())}

    def key(pair: Pair) -> tuple:
        a, b = pair
        if not net.family.all_pairs_intended:
            if a in workers and b in ps_index:
                return (0, workers[a], ps_index[b], 0)
            if a in ps_index and b in workers:
                return (0, workers[b], ps_index[a], 1)
        return (1, hosts[a], hosts[b], 0)

    return sorted(set(pairs), key=key)


def _relay_pairs(net: Network, paths: dict[Pair, list[Hop]]) -> set[Pair]:
    """(relay, dst) pairs that `taken_path` will look up and that are not routed yet."""
    return {
        (h.node, dst)
        for (_, dst), p in paths.items()
        for h in p[1:-1]
        if net.nodes[h.node].is_host and (h.node, dst) not in paths
    }


@dataclass(frozen=True)
class Routes:
    """Per used pair: the physical cables crossed, each with the end the bytes leave from."""

    cables: dict[Pair, list[tuple[Link, str]]]
    exact: bool  # every pair routed, as the emulator does
    seconds: float


def flow_routes(net: Network, pairs: Iterable[Pair]) -> Routes:
    """The cables each used pair crosses, through the controller's circuits and routes."""
    import time

    t0 = time.perf_counter()
    used = emulator_order(net, pairs)
    exact = len(net.hosts()) <= EXACT_HOSTS
    inet = IndexedNetwork.of(net)
    circuits = initial_circuits(inet)
    if exact:  # every pair in compute_paths' order: its result, pair for pair
        intended = net.intended_pairs()
        seen = set(intended)
        hosts = [h.name for h in net.hosts()]
        every = intended + [(a, b) for a in hosts for b in hosts if a != b and (a, b) not in seen]
        paths = fast_paths(inet, circuits, every)
    else:
        want = list(used)
        paths = fast_paths(inet, circuits, want)
        while relays := _relay_pairs(net, paths):  # BCube: a relay forwards by its own path to dst
            want = emulator_order(net, [*want, *relays])
            if net.spec.routing in PAIR_HASHED:  # choices are independent: route only the new pairs
                paths.update(fast_paths(inet, circuits, sorted(relays)))
            else:  # the least-loaded choice depends on every earlier pair: all again, in order
                paths = fast_paths(inet, circuits, want)
    missing = [p for p in used if p not in paths]
    if missing:
        raise ValueError(f"{net.name}: no route for {len(missing)} pairs the traffic uses, e.g. {missing[0]}")
    cables: dict[Pair, list[tuple[Link, str]]] = {}
    for src, dst in used:
        node, out = src, []
        for ln in path_links(inet, taken_path(inet, paths, src, dst)):
            out.append((ln, node))
            node = ln.other(node)
        cables[(src, dst)] = out
    seconds = time.perf_counter() - t0
    LOG.debug(
        "%s: %d pairs routed in %.2f s (%s)", net.name, len(used), seconds, "all pairs" if exact else "used pairs"
    )
    return Routes(cables, exact, seconds)
