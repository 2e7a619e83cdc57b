"""Parameter Flow's update-centric synchronisation (UCC-BSP) with TSB's broadcast tree, as a schedule.

Workers push their update's shard p to server p (as the PS scheme does); server p sums the W
shards and, instead of every worker pulling it, broadcasts the sum down an overlay tree of workers
(TSB): the server sends to the root's children, and every worker that receives the sum passes it
on to its own children. All P servers use the same tree (the paper's representative root). With
the engine's segments a relay forwards a segment while the next arrives: the paper's streaming
broadcast. A server then sends T (its children) copies of its shard instead of W, and the workers
carry the rest. `pf_tree: flat` is the same push and broadcast without the tree: every server
sends to every worker (the bytes of `ps`, under PF's name).

TSB's tree is the paper's integer program P3 (Eqs. 12-21): each worker gets one parent (another
worker, or the servers' representative root), a node has at most T children, no worker is more
than H hops from the root, and the cost is the sum of the tree's edge costs (the root's edges
cost what they cost from every server, as all p servers share its children) plus alpha per leaf
(the paper's term that balances the tree). The paper's path-inheritance depth constraints (Eqs.
16, 17: O(n^3) binaries) are replaced by depth layers (a worker's parent edge carries its depth,
1..H, and a worker parents at depth d only from depth d - 1), which admits exactly the trees of
depth <= H and solves far faster than an integer depth per node with big-M constraints (`_solve`).
Solved exactly by scipy's `milp` (HiGHS) rather than CPLEX. Edge costs follow the paper's tier
tree (after Barroso et al.): 0.1 within one edge switch, 0.5 within one aggregation block, 1.0
across (`tier_cost`, from the switches on the topology's own shortest path: `tier_costs`).

DVF's filtered, variable-size updates are not in the schedule (its messages' sizes are known only
at run time): the engine's codec (engine/dvf.py) filters, encodes and forwards them on these steps.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from schemes.flat import _check
from schemes.schedule import Op, Schedule, ScheduleError, split

if TYPE_CHECKING:
    from topologies.model import Network

#: the tree's root: the servers
ROOT = "<servers>"
#: the paper's TSB setting: at most T children per node, at most H hops from the root
MAX_DEGREE, MAX_DEPTH = 5, 3
#: the tier tree's edge costs: one edge switch, one aggregation block, across blocks
TIER_COSTS = (0.1, 0.5, 1.0)
#: the broadcast's shapes: P3's tree, or every server to every worker
TREES = ("tsb", "flat")


def push_broadcast(workers: Sequence[str], n_elems: int, servers: Sequence[str], parent: Mapping[str, str]) -> Schedule:
    """UCC-BSP over `parent` (worker -> its parent worker, or ROOT for the servers' children)."""
    ws = _check(workers, least=1)
    ss = tuple(servers)
    if not ss or set(ss) & set(ws) or len(set(ss)) != len(ss):
        raise ScheduleError(f"pf: servers {list(ss)} must be distinct hosts that are not workers")
    if set(parent) != set(ws) or any(p != ROOT and p not in ws for p in parent.values()):
        raise ScheduleError("pf: the tree must give every worker one parent: a worker or the servers' root")
    children: dict[str, list[str]] = {}
    for w in ws:
        children.setdefault(parent[w], []).append(w)
    order = _top_down(children)
    if len(order) != len(ws):
        raise ScheduleError("pf: the tree has a cycle: some worker never hangs from the servers' root")
    sched = Schedule("pf", ws, split(n_elems, len(ss)), servers=ss)
    for p, srv in enumerate(ss):
        for w in ws:
            sched.transfer(w, srv, p, Op.REDUCE)
    for p, srv in enumerate(ss):
        for child in children.get(ROOT, []):
            sched.transfer(srv, child, p, Op.COPY)
        for node in order:
            for child in children.get(node, []):
                sched.transfer(node, child, p, Op.COPY)
    return sched


def pf(
    workers: Sequence[str],
    n_elems: int,
    servers: Sequence[str],
    tree: str = "tsb",
    costs: Mapping[tuple[str, str], float] | None = None,
    max_degree: int = MAX_DEGREE,
    max_depth: int = MAX_DEPTH,
) -> Schedule:
    """PF's push and broadcast: down P3's tree (`tsb`, on the tier `costs` between the hosts;
    uniform costs where none are given) or from every server to every worker (`flat`)."""
    if tree not in TREES:
        raise ScheduleError(f"pf: pf_tree {tree!r}; use one of {', '.join(TREES)}")
    if tree == "flat":
        parent = dict.fromkeys(workers, ROOT)
    else:
        try:
            parent = tsb_tree(workers, costs or {}, servers, max_degree, max_depth).parent
        except ValueError as err:
            raise ScheduleError(f"pf: {err}") from None
    return push_broadcast(workers, n_elems, servers, parent)


def _top_down(children: Mapping[str, Sequence[str]]) -> list[str]:
    """The workers from the root's children down, parents before their children."""
    out: list[str] = []
    level = list(children.get(ROOT, []))
    while level:
        out += level
        level = [c for n in level for c in children.get(n, [])]
    return out


@dataclass(frozen=True)
class Tree:
    """A broadcast tree: each worker's parent (ROOT: the servers), and the objective's parts."""

    parent: dict[str, str]
    cost: float  # the edges' cost, root edges counted once per server
    leaves: int

    def children(self, node: str) -> list[str]:
        return sorted(w for w, p in self.parent.items() if p == node)

    def depth(self, worker: str) -> int:
        d, node = 0, worker
        while node != ROOT:
            node, d = self.parent[node], d + 1
        return d


def fits(workers: int, max_degree: int = MAX_DEGREE, max_depth: int = MAX_DEPTH) -> bool:
    """Whether a tree of this degree and depth holds this many workers below the root."""
    return max_degree * sum(max_degree**d for d in range(max_depth)) >= workers


def tsb_tree(
    workers: Sequence[str],
    cost: Mapping[tuple[str, str], float],
    servers: Sequence[str],
    max_degree: int = MAX_DEGREE,
    max_depth: int = MAX_DEPTH,
    alpha: float = 0.1,
) -> Tree:
    """P3's optimal tree (see the module docstring). `cost[(a, b)]`: the edge cost between any two
    of the workers and servers (either order; a pair it lacks costs 1.0, the paper's most). A tree
    that T and H cannot hold is an error naming both. Solved once per distinct input (cached): a
    job compiles its schedule several times (the run, the counters, the flow model, the matrix)."""
    ws, ss = tuple(workers), tuple(servers)
    pairs = itertools.combinations((*ws, *ss), 2)
    key = tuple((a, b, float(cost[(a, b)] if (a, b) in cost else cost.get((b, a), 1.0))) for a, b in pairs)
    return _solve(ws, ss, key, max_degree, max_depth, alpha)


@functools.lru_cache(maxsize=64)
def _solve(
    ws: tuple[str, ...],
    servers: tuple[str, ...],
    costs: tuple[tuple[str, str, float], ...],
    max_degree: int,
    max_depth: int,
    alpha: float,
) -> Tree:
    """P3 in layered form: x[i, j, d] = 1 where node i is worker j's parent and j sits at depth d
    (the root's children at 1). A worker parents at depth d only if it sits at depth d - 1, so
    depth grows down every edge (no cycle) and stops at H. The same trees as the paper's
    constraints, with an LP relaxation tight enough for HiGHS: 13 workers of equal costs take 1.8 s
    where the integer-depth form (big-M) took 79 s to prove the same optimum, 20 workers 4 s
    where it took 272 s at a 5% gap; equal optima on seeded cost tables of 5-10 workers."""
    # imported here: scipy.optimize takes ~0.66 s to import, and every engine process imports the
    # scheme registry (this module) at its start, while only TSB's tree solve needs it
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_array

    n = len(ws)
    nodes = [*ws, ROOT]  # parents: the workers, then the root (index n)
    if max_degree < 1 or max_depth < 1 or not fits(n, max_degree, max_depth):
        raise ValueError(f"{n} workers do not fit a tree of degree {max_degree} and depth {max_depth}")
    table = {(a, b): c for a, b, c in costs} | {(b, a): c for a, b, c in costs}

    def c(a: str, b: str) -> float:
        if a == ROOT:
            return sum(c(s, b) for s in servers)
        return table[(a, b)]

    var: dict[tuple[int, int, int], int] = {}  # (parent, child, depth) -> column; then t[i] per node
    for j in range(n):
        var[(n, j, 1)] = len(var)
        for i in range(n):
            for d in range(2, max_depth + 1) if i != j else ():
                var[(i, j, d)] = len(var)
    ti = len(var)
    nv = ti + n + 1
    obj = np.zeros(nv)
    for (i, j, _), k in var.items():
        obj[k] = c(nodes[i], ws[j])
    obj[ti:] = alpha
    by_child: dict[int, list[int]] = {j: [] for j in range(n)}
    by_parent: dict[int, list[int]] = {i: [] for i in range(n + 1)}
    at_depth: dict[tuple[int, int], list[int]] = {(j, d): [] for j in range(n) for d in range(1, max_depth + 1)}
    for (i, j, d), k in var.items():
        by_child[j].append(k)
        by_parent[i].append(k)
        at_depth[(j, d)].append(k)
    rows: list[list[tuple[int, float]]] = []
    lbs: list[float] = []
    ubs: list[float] = []

    def row(coefs: list[tuple[int, float]], lb: float, ub: float) -> None:
        rows.append(coefs)
        lbs.append(lb)
        ubs.append(ub)

    for j in range(n):  # one parent each (13), at one depth
        row([(k, 1) for k in by_child[j]], 1, 1)
    for i in range(n + 1):  # degree (14) and leaf indicator (15)
        row([(k, 1) for k in by_parent[i]], 0, max_degree)
        row([*((k, 1) for k in by_parent[i]), (ti + i, 1)], 1, np.inf)
    for (i, _, d), k in var.items():  # i parents at depth d only from depth d - 1 (16, 17)
        if i < n:
            row([(k, 1), *((q, -1) for q in at_depth[(i, d - 1)])], -np.inf, 0)
    r = [at for at, coefs in enumerate(rows) for _ in coefs]
    cols = [k for coefs in rows for k, _ in coefs]
    vals = [v for coefs in rows for _, v in coefs]
    a = coo_array((vals, (r, cols)), shape=(len(rows), nv)).tocsr()
    res = milp(obj, constraints=LinearConstraint(a, lbs, ubs), integrality=np.ones(nv), bounds=Bounds(0, 1))
    if res.x is None:
        raise ValueError(f"no broadcast tree of degree {max_degree} and depth {max_depth}: {res.message}")
    x = np.round(res.x).astype(int)
    parent = {ws[j]: nodes[i] for (i, j, _), k in var.items() if x[k]}
    edge_cost = sum(c(p, w) for w, p in parent.items())
    leaves = sum(1 for node in nodes if node not in parent.values())
    return Tree(parent, float(edge_cost), leaves)


def tier_cost(switches_between: int) -> float:
    """The tier tree's cost of an edge whose shortest path crosses this many switches: one (the
    same edge switch) 0.1, up to three (the same aggregation block) 0.5, more 1.0."""
    if switches_between <= 1:
        return TIER_COSTS[0]
    return TIER_COSTS[1] if switches_between <= 3 else TIER_COSTS[2]


def tier_costs(net: Network, hosts: Sequence[str]) -> dict[tuple[str, str], float]:
    """The tier cost of every pair of `hosts`, from the switches on the topology's own shortest
    path between them (networkx on the model's graph)."""
    import networkx as nx

    g = nx.Graph(net.graph())
    out = {}
    for a, b in itertools.combinations(hosts, 2):
        path = nx.shortest_path(g, a, b)
        out[(a, b)] = tier_cost(sum(1 for x in path if not net.nodes[x].is_host))
    return out
