"""Parameter Flow's DVF (engine/dvf.py) and TSB (schemes/pf.py): the filter loses nothing (sent + held back
equals computed, exactly, over many clocks of real gradients), its threshold falls as 1/sqrt(t)
and follows the links; the wire form is exact and smaller when sparse; P3's tree on a FatTree's
tier costs keeps every worker under one parent within T and H and costs less than every worker
pulling from the servers."""

from __future__ import annotations

import itertools
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from engine import dvf
from schemes import pf
from topologies.build import build_network
from topologies.schema import load_spec

ROOT = Path(__file__).resolve().parent.parent


def test_dvf_loses_nothing_and_its_threshold_falls_with_the_clock():
    """A worker's 20 clocks of gradients (seeded, 100k float32 each): every clock, sent plus held
    back equals the update plus what was held before, exactly; over the run the sum of everything
    sent plus the last held back is the sum of everything computed. A larger delta sends less;
    a later clock (smaller delta/sqrt(t)) sends more."""
    rng = np.random.default_rng(0)
    held = np.zeros(100_000, dtype=np.float32)
    computed = np.zeros(100_000, dtype=np.float64)
    applied = np.zeros(100_000, dtype=np.float64)
    for t in range(1, 21):
        u = (rng.standard_normal(100_000) * 1e-3).astype(np.float32)
        before = u + held
        sent, held = dvf.dvf_split(u, held, delta=2e-3, clock=t)
        assert np.array_equal(sent + held, before)  # exact, element for element
        assert np.all((sent == 0) | (np.abs(sent) > 2e-3 / np.sqrt(t)))
        computed += u
        applied += sent
    assert np.allclose(applied + held, computed, rtol=0, atol=1e-9)
    u = (rng.standard_normal(100_000) * 1e-3).astype(np.float32)
    zero = np.zeros_like(u)
    nnz = {d: np.count_nonzero(dvf.dvf_split(u, zero, d, 1)[0]) for d in (1e-3, 2e-3)}
    assert nnz[2e-3] < nnz[1e-3]
    assert np.count_nonzero(dvf.dvf_split(u, zero, 2e-3, 16)[0]) > nnz[2e-3]
    with pytest.raises(ValueError, match="clock counts from 1"):
        dvf.dvf_split(u, zero, 1e-3, 0)


def test_network_aware_threshold():
    assert dvf.dvf_delta(1e-4, 2e-4, [60.0, 55.0], sufficient_mbps=50) == 1e-4
    assert dvf.dvf_delta(1e-4, 2e-4, [60.0, 40.0], sufficient_mbps=50) == 2e-4
    with pytest.raises(ValueError, match="delta_low must be below delta_up"):
        dvf.dvf_delta(2e-4, 1e-4, [60.0], 50)


def test_the_wire_form_is_exact_and_smaller_when_sparse():
    rng = np.random.default_rng(1)
    v = rng.standard_normal(200_000).astype(np.float32)
    sparse = np.where(rng.random(200_000) < 0.9, 0, v).astype(np.float32)  # 90% zeros
    for x in (v, sparse):
        assert np.array_equal(dvf.decode(dvf.encode(x)), x)
    assert len(dvf.encode(sparse)) < sparse.nbytes / 3  # the paper: snappy 3.1x at 80% sparsity
    assert len(dvf.encode(v)) >= v.nbytes * 0.9  # random floats do not compress


def fattree_tier_costs() -> tuple[list[str], dict[tuple[str, str], float]]:
    """FatTree(4)'s hosts and the tier cost of every pair, from the switches on its own shortest path."""
    net = build_network(load_spec(ROOT / "topologies" / "fattree-k4.yaml"))
    hosts = [h.name for h in net.hosts()]
    g = nx.Graph(net.graph())
    cost = {
        (a, b): pf.tier_cost(sum(1 for x in nx.shortest_path(g, a, b) if not net.nodes[x].is_host))
        for a, b in itertools.combinations(hosts, 2)
    }
    return hosts, cost


def test_p3_tree_on_a_fattree_keeps_t_and_h_and_beats_pulling_from_the_server():
    """FatTree(4): a server on the first host, 15 workers; edge costs from the tier tree (one edge
    switch 0.1, one pod 0.5, across 1.0) on the topology's own shortest paths."""
    hosts, cost = fattree_tier_costs()
    server, workers = hosts[0], hosts[1:]
    assert sorted(set(cost.values())) == [0.1, 0.5, 1.0]
    tree = pf.tsb_tree(workers, cost, [server], max_degree=5, max_depth=3)
    assert sorted(tree.parent) == sorted(workers)
    for node in [pf.ROOT, *workers]:
        assert len(tree.children(node)) <= 5
    assert max(tree.depth(w) for w in workers) <= 3
    pulls = sum(cost[(server, w)] for w in workers)  # no tree: every worker from the server
    assert tree.cost < pulls / 2, (tree.cost, pulls)
    with pytest.raises(ValueError, match="do not fit a tree of degree 2 and depth 2"):
        pf.tsb_tree(workers, cost, [server], max_degree=2, max_depth=2)
