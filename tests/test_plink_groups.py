"""PLink's ProbeEmbed on distances from a real topology model (workloads/plink.py): the probe
rounds cover every pair once without a host twice in a round, embedding plus balanced k-means
finds the racks of a leaf-spine network from noisy probes, PAIA and AMI score as the paper
defines them, and the balance elasticity bounds the group sizes."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest

from topologies.build import build_network
from topologies.schema import parse_spec
from workloads import plink


def _leafspine(leaves: int, hosts_per_leaf: int):
    spec = parse_spec(
        {"kind": "leafspine", "spines": 2, "leaves": leaves, "hosts_per_leaf": hosts_per_leaf,
         "oversubscription": 4, "worker_mbps": 1000, "scale": 20},
        "plink test",
    )  # fmt: skip
    return build_network(spec)


def _hops(net, hosts: list[str]) -> np.ndarray:
    """Switch hops between every two hosts on the topology's own graph (the probes' truth)."""
    g = nx.Graph(net.graph())
    return np.array([[nx.shortest_path_length(g, a, b) if a != b else 0 for b in hosts] for a in hosts], float)


def _places(net, hosts: list[str]) -> list[tuple[str, str]]:
    return [(f"rack{net.nodes[h].index}", h) for h in hosts]


@pytest.mark.parametrize("n", [8, 7, 16])
def test_probe_rounds_cover_every_pair_once_with_no_host_twice_in_a_round(n: int):
    hosts = [f"h{i}" for i in range(n)]
    rounds = plink.probe_rounds(hosts)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    for r in rounds:
        used = [h for pair in r for h in pair]
        assert len(used) == len(set(used))
    pairs = [frozenset(p) for r in rounds for p in r]
    assert sorted(map(sorted, pairs)) == sorted(map(sorted, map(frozenset, itertools.combinations(hosts, 2))))


def test_embedding_and_balanced_kmeans_find_the_racks_from_noisy_probes():
    """16 hosts in 4 racks; probes are switch hops (2 in a rack, 4 across) times seeded log-normal
    noise (sigma 0.25): k = 4 groups of 4 that are the racks (AMI >= 0.9), and the embedding's
    distances order triplets no worse than the raw probes (PAIA)."""
    net = _leafspine(4, 4)
    hosts = [h.name for h in net.hosts()]
    truth = [net.nodes[h].index for h in hosts]
    hops = _hops(net, hosts)
    assert plink.paia(hops, _places(net, hosts)) == 1.0  # exact distances order every triplet right
    noise = np.exp(np.random.default_rng(7).normal(0.0, 0.25, hops.shape))
    probes = np.triu(hops * noise, 1)
    probes = probes + probes.T
    coords, offsets = plink.embed(probes, alpha=2.0, seed=1)
    labels = plink.groups(coords, seed=1)
    assert sorted(np.bincount(labels)) == [4, 4, 4, 4]
    assert plink.ami(truth, labels) >= 0.9
    raw, embedded = (
        plink.paia(probes, _places(net, hosts)),
        plink.paia(plink.embedded_distances(coords, offsets), _places(net, hosts)),
    )
    assert raw < 1.0 and embedded >= raw, (raw, embedded)
    random = plink.balanced_random(len(hosts), seed=1)
    assert sorted(np.bincount(random)) == [4, 4, 4, 4] and plink.ami(truth, random) < plink.ami(truth, labels)


def test_offsets_absorb_a_per_host_stack_latency():
    """Vivaldi's height: two hosts with a fixed extra latency on every probe get it as their
    offset (h >= 0), and the grouping still finds the racks."""
    net = _leafspine(3, 3)
    hosts = [h.name for h in net.hosts()]
    probes = _hops(net, hosts)
    extra = np.zeros(len(hosts))
    extra[[0, 4]] = 1.5
    probes = probes + extra[:, None] + extra[None, :]
    np.fill_diagonal(probes, 0.0)
    coords, offsets = plink.embed(probes, alpha=1.0, offsets=True, seed=0)
    assert offsets.min() >= 0.0 and offsets[[0, 4]].min() > 2 * np.delete(offsets, [0, 4]).max()
    assert plink.ami([net.nodes[h].index for h in hosts], plink.groups(coords, seed=0)) >= 0.9


def test_elasticity_bounds_the_smallest_group():
    """Racks of 6, 6, 2 and 2 hosts: with elasticity 1 every group is held to 4 hosts; with 2 a
    group may shrink to 2, and the grouping follows the racks."""
    sizes = [6, 6, 2, 2]
    centers = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0], [10.0, 10.0]])
    rng = np.random.default_rng(3)
    points = np.concatenate([c + rng.normal(0, 0.3, (s, 2)) for c, s in zip(centers, sizes, strict=True)])
    truth = [r for r, s in enumerate(sizes) for _ in range(s)]
    assert plink.min_group_size(16, 4, 1.0) == 4 and plink.min_group_size(16, 4, 2.0) == 2
    tight = plink.groups(points, k=4, elasticity=1.0)
    assert sorted(np.bincount(tight)) == [4, 4, 4, 4]
    loose = plink.groups(points, k=4, elasticity=2.0)
    assert min(np.bincount(loose)) >= 2 and plink.ami(truth, loose) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="elasticity must be within"):
        plink.groups(points, elasticity=3.0)


def test_a_pair_never_probed_is_named():
    with pytest.raises(ValueError, match="no probe between b and c"):
        plink.probe_matrix(["a", "b", "c"], {("a", "b"): 1.0, ("c", "a"): 2.0})
    m = plink.probe_matrix(["a", "b"], {("a", "b"): 1.0, ("b", "a"): 3.0})
    assert m[0, 1] == m[1, 0] == 2.0


@pytest.mark.parametrize("unit", [1.0, 1e-5])
def test_balanced_kmeans_finds_uneven_racks_whatever_the_embeddings_unit(unit):
    """Four racks of 12, 24, 20 and 8 hosts as tight clusters: balanced k-means with k = 4 and
    the paper's elasticity finds them at any scale of the coordinates. At 10 Gbit/s probes
    (distances in 1 / Mbit/s) the embedding's squared distances are ~1e-8: rounded to integers
    as they were, every assignment cost the same and the groups were noise (AMI 0.14 at 64 hosts)."""
    rng = np.random.default_rng(3)
    sizes = [12, 24, 20, 8]
    centers = np.array([[0, 0], [10, 0], [0, 10], [10, 10]], dtype=float)
    coords = np.concatenate([c + rng.normal(scale=0.5, size=(n, 2)) for c, n in zip(centers, sizes, strict=True)])
    truth = [r for r, n in enumerate(sizes) for _ in range(n)]
    labels = plink.groups(coords * unit, k=4, elasticity=2.0)
    assert plink.ami(truth, labels) == pytest.approx(1.0)
