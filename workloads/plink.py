"""PLink's ProbeEmbed (MLSys 2020, §4.1): from pairwise probe distances to aggregation groups.

PLink probes every pair of the job's hosts (latency or inverse bandwidth), denoises the probes by
embedding the hosts in a few dimensions, and groups them with balanced k-means; the groups are
2LHA's (two-level hierarchical aggregation) local groups. This module is that pipeline on a
matrix of distances, whatever measured them, plus the paper's two scores:

- `probe_rounds`: the N-1 rounds of disjoint pairs the probes run in (no host in two probes of a
  round, so probes do not interfere): the circle method of a round-robin tournament. Hand-written
  (ten lines): networkx and scipy have no tournament schedule.
- `embed`: coordinates v_i (and, optionally, a per-host offset h_i >= 0, Vivaldi's "height")
  minimising the paper's Eq. (1), sum over pairs of (d_ij^alpha + h_i + h_j - p_ij)^2 with
  d_ij = |v_i - v_j|. alpha in [1, 2]; alpha = 2 compacts long distances more (the paper's Fig. 5:
  AMI 0.59 at alpha = 1, 0.76 at alpha = 2). The paper optimises with Adam; here scipy's L-BFGS-B
  with the analytic gradient (h's bound h >= 0 is L-BFGS-B's own), from several seeded starts, in
  k - 1 dimensions for k groups (`dims_for`; the paper gives no number).
- `groups`: k = round(sqrt(n)) groups (the GM's bytes, O(n/k + k), are least there: Eq. 2) by
  k-means with k-means++ starts (scikit-learn's `kmeans_plusplus`) whose assignment step keeps
  every group at least ceil((n/k) / elasticity) hosts (elasticity in [1, 2]: 1 perfectly
  balanced, 2 each group at least half its share), solved exactly as a min-cost flow (networkx).
  Of several seeded clusterings the one with the least diverse group sizes wins, then the
  tightest. Not the PyPI package k-means-constrained: it pulls in OR-Tools, whose protobuf pin
  (< 7) would move TensorFlow's protobuf in the same venv; its formulation (the same min-cost
  flow) is a dozen lines on networkx.
- `balanced_random`: the paper's baseline, sqrt(n) groups of sqrt(n) hosts drawn at random.
- `paia` (§3.4's physical-affinity inference accuracy) and `ami` (scikit-learn's adjusted mutual
  information) score a distance matrix and a grouping against the hosts' true places.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import networkx as nx
import numpy as np
from scipy.optimize import minimize

#: the fewest embedding dimensions: the paper says fewer dimensions denoise more but gives no
#: number; `dims_for` gives k - 1 for k groups (k clusters all equally far apart need k - 1
#: dimensions: 4 racks in 2 dimensions put two of them nearer, and balanced k-means then mixed
#: racks: AMI 0.50 for 16 hosts in racks of 4, 5, 4, 3 on flow-model probes, 1.00 in 3 dimensions)
DIMS = 2


def dims_for(n: int) -> int:
    """Embedding dimensions for n hosts: k - 1 for k = group_count(n) groups, at least DIMS."""
    return max(DIMS, group_count(n) - 1)


#: seeded starts of the embedding and of the clustering
STARTS = 8
#: min-cost flow needs integer costs: squared distances are scaled by this before rounding
COST_SCALE = 1e6


def probe_rounds(hosts: Sequence[str]) -> list[list[tuple[str, str]]]:
    """Every unordered pair once, in len(hosts) - 1 rounds (len(hosts) rounds when odd) in which no
    host is in two pairs: the circle method (one host fixed, the others rotate)."""
    ring = list(hosts) + ([None] if len(hosts) % 2 else [])
    n = len(ring)
    rounds = []
    for _ in range(n - 1):
        pairs = [(ring[i], ring[n - 1 - i]) for i in range(n // 2)]
        rounds.append([(a, b) for a, b in pairs if a is not None and b is not None])
        ring = [ring[0], ring[-1], *ring[1:-1]]
    return rounds


def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    i, j = np.triu_indices(n, k=1)
    return i, j


def embed(
    probes: np.ndarray, alpha: float = 2.0, offsets: bool = False, dims: int | None = None, seed: int = 0
) -> tuple[np.ndarray, np.ndarray]:
    """(coordinates n x dims, offsets n) minimising Eq. (1) over the upper triangle of the
    symmetric `probes` (distances; only i < j is read); `dims` defaults to `dims_for(n)`. Probes
    are normalised by their median first, so the optimiser sees values near 1 whatever the unit."""
    if not 1.0 <= alpha <= 2.0:
        raise ValueError(f"alpha must be within [1, 2] (the paper's range), got {alpha}")
    n = probes.shape[0]
    dims = dims or dims_for(n)
    i, j = _pairs(n)
    scale = float(np.median(probes[i, j])) or 1.0
    p = probes[i, j] / scale
    rng = np.random.default_rng(seed)

    def loss(x: np.ndarray) -> tuple[float, np.ndarray]:
        v = x[: n * dims].reshape(n, dims)
        h = x[n * dims :] if offsets else np.zeros(n)
        diff = v[i] - v[j]
        d = np.sqrt((diff**2).sum(axis=1)) + 1e-12
        r = d**alpha + h[i] + h[j] - p
        g_d = 2 * r * alpha * d ** (alpha - 1)  # d loss / d d_ij
        g_pair = (g_d / d)[:, None] * diff
        g_v = np.zeros_like(v)
        np.add.at(g_v, i, g_pair)
        np.add.at(g_v, j, -g_pair)
        grad = g_v.ravel()
        if offsets:
            g_h = np.zeros(n)
            np.add.at(g_h, i, 2 * r)
            np.add.at(g_h, j, 2 * r)
            grad = np.concatenate([grad, g_h])
        return float((r**2).sum()), grad

    best = None
    bounds = [(None, None)] * (n * dims) + ([(0.0, None)] * n if offsets else [])
    for _ in range(STARTS):
        x0 = rng.normal(scale=1.0, size=n * dims)
        if offsets:
            x0 = np.concatenate([x0, np.zeros(n)])
        res = minimize(loss, x0, jac=True, method="L-BFGS-B", bounds=bounds)
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None
    v = best.x[: n * dims].reshape(n, dims)
    h = best.x[n * dims :] if offsets else np.zeros(n)
    return v * scale ** (1 / alpha), h * scale


def embedded_distances(coords: np.ndarray, offsets: np.ndarray, alpha: float = 2.0) -> np.ndarray:
    """The embedding's distance matrix, in the probes' terms: d_ij^alpha + h_i + h_j (0 on the diagonal)."""
    d = np.sqrt(((coords[:, None, :] - coords[None, :, :]) ** 2).sum(axis=2)) ** alpha
    out = d + offsets[:, None] + offsets[None, :]
    np.fill_diagonal(out, 0.0)
    return out


def group_count(n: int) -> int:
    """k = sqrt(n), rounded, at least 1 (Eq. 2's minimum)."""
    return max(1, round(math.sqrt(n)))


def min_group_size(n: int, k: int, elasticity: float) -> int:
    """Each group's floor: its even share n/k over the elasticity, rounded up (at most n // k)."""
    if not 1.0 <= elasticity <= 2.0:
        raise ValueError(f"elasticity must be within [1, 2] (the paper's range), got {elasticity}")
    return min(n // k, math.ceil(n / k / elasticity - 1e-9))


def _assign(points: np.ndarray, centers: np.ndarray, size_min: int) -> np.ndarray:
    """Each point to a center at least cost (squared distance) with every center taking at least
    `size_min` points: min-cost flow, points -> centers (each center demands size_min) -> an
    overflow node that takes the rest."""
    n, k = len(points), len(centers)
    cost = ((points[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    # min-cost flow takes integer weights: relative to the largest, so COST_SCALE's resolution holds
    # whatever the embedding's unit (1 / Mbit/s at 10 Gbit/s puts squared distances near 1e-8)
    cost = cost / (cost.max() or 1.0)
    g = nx.DiGraph()
    for p in range(n):
        g.add_node(("p", p), demand=-1)
    for c in range(k):
        g.add_node(("c", c), demand=size_min)
    g.add_node("rest", demand=n - k * size_min)
    for p in range(n):
        for c in range(k):
            g.add_edge(("p", p), ("c", c), weight=int(np.rint(cost[p, c] * COST_SCALE)), capacity=1)
    for c in range(k):
        g.add_edge(("c", c), "rest", weight=0, capacity=n)
    flow = nx.min_cost_flow(g)
    labels = np.empty(n, dtype=int)
    for p in range(n):
        labels[p] = next(c for c in range(k) if flow[("p", p)][("c", c)])
    return labels


def _balanced_kmeans(points: np.ndarray, k: int, size_min: int, seed: int, iterations: int = 50) -> np.ndarray:
    from sklearn.cluster import kmeans_plusplus

    centers, _ = kmeans_plusplus(points, k, random_state=seed)
    labels = _assign(points, centers, size_min)
    for _ in range(iterations):
        centers = np.array([points[labels == c].mean(axis=0) for c in range(k)])
        new = _assign(points, centers, size_min)
        if np.array_equal(new, labels):
            break
        labels = new
    return labels


def groups(
    coords: np.ndarray, k: int | None = None, elasticity: float = 1.5, tries: int = STARTS, seed: int = 0
) -> np.ndarray:
    """A group label per host: balanced k-means on the embedding (see the module docstring); of
    `tries` seeded clusterings, the least diverse in group size, then the least inertia."""
    n = len(coords)
    k = k or group_count(n)
    if not 1 <= k <= n:
        raise ValueError(f"k must be within [1, {n}] for {n} hosts, got {k}")
    size_min = min_group_size(n, k, elasticity)
    best_key, best = None, None
    for t in range(tries):
        labels = _balanced_kmeans(coords, k, size_min, seed + t)
        sizes = np.bincount(labels, minlength=k)
        inertia = sum(((coords[labels == c] - coords[labels == c].mean(axis=0)) ** 2).sum() for c in range(k))
        key = (float(np.std(sizes)), round(float(inertia), 9))
        if best_key is None or key < best_key:
            best_key, best = key, labels
    assert best is not None
    return _canonical(best)


def _canonical(labels: np.ndarray) -> np.ndarray:
    """Labels renumbered in order of first appearance (equal groupings compare equal)."""
    order: dict[int, int] = {}
    return np.array([order.setdefault(int(x), len(order)) for x in labels])


def balanced_random(n: int, k: int | None = None, seed: int = 0) -> np.ndarray:
    """The paper's Balanced Random baseline: k = sqrt(n) groups of (as near as can be) equal size,
    hosts drawn uniformly at random."""
    k = k or group_count(n)
    labels = np.arange(n) % k
    np.random.default_rng(seed).shuffle(labels)
    return _canonical(labels)


def ami(truth: Sequence[object], labels: Sequence[int]) -> float:
    """Adjusted mutual information of a grouping with the hosts' true groups (1: the same)."""
    from sklearn.metrics import adjusted_mutual_info_score

    return float(adjusted_mutual_info_score(list(truth), list(labels)))


def _common_prefix(a: Sequence[str], b: Sequence[str]) -> int:
    return sum(1 for _ in itertools.takewhile(lambda xy: xy[0] == xy[1], zip(a, b, strict=False)))


def paia(distances: np.ndarray, places: Sequence[Sequence[str]]) -> float:
    """Physical-affinity inference accuracy (§3.4): over every triplet (a, b, observer c) where a and
    b share prefixes of different length with c in the place tuples (e.g. (pod, rack, host)), the
    share in which the measured order of d(a, c) and d(b, c) agrees with the places' (a longer
    common prefix is nearer). NaN where no triplet is comparable."""
    n = len(places)
    hits = total = 0
    for c in range(n):
        lcp = [_common_prefix(places[x], places[c]) for x in range(n)]
        for a, b in itertools.combinations([x for x in range(n) if x != c], 2):
            if lcp[a] == lcp[b]:
                continue
            total += 1
            nearer_true = a if lcp[a] > lcp[b] else b
            nearer_measured = a if distances[a, c] < distances[b, c] else b
            hits += nearer_true == nearer_measured
    return hits / total if total else float("nan")


def probe_matrix(hosts: Sequence[str], measured: Mapping[tuple[str, str], float]) -> np.ndarray:
    """A symmetric distance matrix in `hosts` order from probes keyed by pair (either order; both
    orders measured: their mean). A pair never probed is an error naming it."""
    idx = {h: i for i, h in enumerate(hosts)}
    out = np.zeros((len(hosts), len(hosts)))
    for a, b in itertools.combinations(hosts, 2):
        got = [measured[k] for k in ((a, b), (b, a)) if k in measured]
        if not got:
            raise ValueError(f"no probe between {a} and {b}: probe every pair (probe_rounds)")
        out[idx[a], idx[b]] = out[idx[b], idx[a]] = float(np.mean(got))
    return out
