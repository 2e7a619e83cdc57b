"""Parameter Flow's two algorithms (issue 31): DVF, the dynamic value-bounded filter, and TSB's
broadcast tree, the paper's integer program P3.

DVF (the paper's Eqs. 6, 10, 11): before a push (worker) or a broadcast (server), the update plus
what was held back last time is split into what is sent and what is kept: an entry is dropped iff
|U_i| <= delta / sqrt(t) (t: the sender's clock). Nothing is lost: what is dropped is added to the
next update, so sent + kept always equals computed + kept before, exactly (`dvf_split`). Network
awareness picks delta_low where every link the sender uses is "sufficient" (at least a rate; the
paper's 50 Mbit/s at 1 Gbit/s links), delta_up otherwise (`dvf_delta`). The wire form (`encode`)
is the nonzeros and their indices above 80% sparsity, else the dense vector, then compressed with
snappy, as PF does (cramjam's binding: the maintained one; python-snappy now wraps it).

TSB (Eqs. 12-21): the overlay tree a server's broadcast streams down. Each worker gets one parent
(another worker, or the servers' representative root), a node has at most T children, no worker is
more than H hops from the root, and the cost is the sum of the tree's edge costs (the root's edges
cost what they cost from every server, as all p servers share its children) plus alpha per leaf
(the paper's term that balances the tree). The paper's path-inheritance depth constraints (Eqs. 16,
17: O(n^3) binaries) are replaced by the equivalent integer depth per node (depth(child) >=
depth(parent) + 1 on a chosen edge, depth <= H), which admits exactly the trees of depth <= H. Solved
exactly by scipy's `milp` (HiGHS) rather than CPLEX. Edge costs follow the paper's tier tree (after
Barroso et al.): 0.1 within one edge switch, 0.5 within one aggregation block, 1.0 across
(`tier_cost`, from the switches on the topology's own shortest path).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

#: above this share of zeros the wire form is sparse (nonzeros and their indices)
SPARSE_ABOVE = 0.8
#: the paper's TSB setting: at most T children per node, at most H hops from the root
MAX_DEGREE, MAX_DEPTH = 5, 3
#: the tier tree's edge costs: one edge switch, one aggregation block, across blocks
TIER_COSTS = (0.1, 0.5, 1.0)

_DENSE, _SPARSE = b"D", b"S"


def dvf_split(update: np.ndarray, held: np.ndarray, delta: float, clock: int) -> tuple[np.ndarray, np.ndarray]:
    """(sent, held back) of `update` plus what `held` back before: entries with |value| <= delta /
    sqrt(clock) are held back (clock >= 1). sent + held back == update + held, element for element."""
    if clock < 1:
        raise ValueError(f"clock counts from 1, got {clock}")
    total = update + held
    keep = np.abs(total) > delta / math.sqrt(clock)
    sent = np.where(keep, total, 0.0).astype(total.dtype)
    return sent, (total - sent).astype(total.dtype)


def dvf_delta(delta_low: float, delta_up: float, link_mbps: Sequence[float], sufficient_mbps: float) -> float:
    """The sender's threshold: delta_low when every link it sends on has at least `sufficient_mbps`
    available, delta_up otherwise (the paper's network-aware DVF)."""
    if not delta_low < delta_up:
        raise ValueError(f"delta_low must be below delta_up, got {delta_low} and {delta_up}")
    return delta_low if all(r >= sufficient_mbps for r in link_mbps) else delta_up


def encode(vec: np.ndarray) -> bytes:
    """The wire form of a float32 vector: sparse above SPARSE_ABOVE zeros, else dense; snappy-compressed."""
    import cramjam

    v = np.ascontiguousarray(vec, dtype=np.float32)
    nz = np.flatnonzero(v)
    if 1 - len(nz) / max(1, len(v)) > SPARSE_ABOVE:
        body = _SPARSE + np.uint64(len(v)).tobytes() + nz.astype(np.uint32).tobytes() + v[nz].tobytes()
    else:
        body = _DENSE + v.tobytes()
    return bytes(cramjam.snappy.compress_raw(body))


def decode(wire: bytes) -> np.ndarray:
    """The float32 vector `encode` sent."""
    import cramjam

    body = bytes(cramjam.snappy.decompress_raw(wire))
    if body[:1] == _DENSE:
        return np.frombuffer(body[1:], dtype=np.float32).copy()
    n = int(np.frombuffer(body[1:9], dtype=np.uint64)[0])
    k = (len(body) - 9) // 8
    idx = np.frombuffer(body[9 : 9 + 4 * k], dtype=np.uint32)
    out = np.zeros(n, dtype=np.float32)
    out[idx] = np.frombuffer(body[9 + 4 * k :], dtype=np.float32)
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


ROOT = "<servers>"


def tsb_tree(
    workers: Sequence[str],
    cost: dict[tuple[str, str], float],
    servers: Sequence[str],
    max_degree: int = MAX_DEGREE,
    max_depth: int = MAX_DEPTH,
    alpha: float = 0.1,
) -> Tree:
    """P3's optimal tree (see the module docstring). `cost[(a, b)]`: the edge cost between any two
    of the workers and servers (either order). A tree that T and H cannot hold is an error naming
    both."""
    ws = list(workers)
    n = len(ws)
    nodes = [*ws, ROOT]  # parents: the workers, then the root (index n)
    if max_degree * sum(max_degree**d for d in range(max_depth)) < n:
        raise ValueError(f"{n} workers do not fit a tree of degree {max_degree} and depth {max_depth}")

    def c(a: str, b: str) -> float:
        if a == ROOT:
            return sum(c(s, b) for s in servers)
        return cost[(a, b)] if (a, b) in cost else cost[(b, a)]

    # variables: l[i, j] (i in nodes, j in workers), t[i] (i in nodes), depth[j] (j in workers)
    nl = (n + 1) * n

    def li(i: int, j: int) -> int:
        return i * n + j

    ti = nl
    di = nl + n + 1
    nv = di + n
    obj = np.zeros(nv)
    for i, a in enumerate(nodes):
        for j, b in enumerate(ws):
            obj[li(i, j)] = c(a, b) if a != b else 0.0
    obj[ti : ti + n + 1] = alpha
    lo, hi = np.zeros(nv), np.ones(nv)
    lo[di:], hi[di:] = 1, max_depth
    for j in range(n):
        hi[li(j, j)] = 0  # l_ii = 0
    rows, lbs, ubs = [], [], []

    def row(coefs: dict[int, float], lb: float, ub: float) -> None:
        r = np.zeros(nv)
        for k, v in coefs.items():
            r[k] = v
        rows.append(r)
        lbs.append(lb)
        ubs.append(ub)

    for j in range(n):  # one parent each (13)
        row({li(i, j): 1 for i in range(n + 1)}, 1, 1)
    for i in range(n + 1):  # degree (14) and leaf indicator (15)
        row({li(i, j): 1 for j in range(n)}, 0, max_degree)
        row({**{li(i, j): 1 for j in range(n)}, ti + i: 1}, 1, np.inf)
    big = max_depth + 1
    for i in range(n):  # depth(j) >= depth(i) + 1 - big (1 - l_ij): no cycles, depth <= H
        for j in range(n):
            if i != j:
                row({di + j: 1, di + i: -1, li(i, j): -big}, 1 - big, np.inf)
    res = milp(
        obj,
        constraints=LinearConstraint(np.array(rows), lbs, ubs),
        integrality=np.ones(nv),
        bounds=Bounds(lo, hi),
    )
    if res.x is None:
        raise ValueError(f"no broadcast tree of degree {max_degree} and depth {max_depth}: {res.message}")
    x = np.round(res.x).astype(int)
    parent = {b: nodes[next(i for i in range(n + 1) if x[li(i, j)])] for j, b in enumerate(ws)}
    edge_cost = sum(c(p, w) for w, p in parent.items())
    leaves = sum(1 for node in nodes if node not in parent.values())
    return Tree(parent, float(edge_cost), leaves)


def tier_cost(switches_between: int) -> float:
    """The tier tree's cost of an edge whose shortest path crosses this many switches: one (the
    same edge switch) 0.1, up to three (the same aggregation block) 0.5, more 1.0."""
    if switches_between <= 1:
        return TIER_COSTS[0]
    return TIER_COSTS[1] if switches_between <= 3 else TIER_COSTS[2]
