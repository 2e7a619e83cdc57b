"""PLink's 2LHA and Parameter Flow's push + tree broadcast as schedules (schemes/plink.py,
schemes/pf.py), run in memory on real gradients: every worker ends with the exact sum, 2LHA moves
2(C - 1)S across groups in a chain of 4 and spreads its masters by size and bandwidth, and the
broadcast tree takes the servers' egress from W copies to the root's children, also segmented
(the streaming broadcast)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from schemes import pf as pf_scheme
from schemes.plink import apportion, interleaved, masters, two_level
from schemes.schedule import (
    ELEM_BYTES,
    ScheduleError,
    chain_length,
    cross_region_bytes,
    execute,
    host_bytes,
    segmented,
)

ROOT = Path(__file__).resolve().parent.parent
N = 48_000


def _grads(hosts, seed=0):
    rng = np.random.default_rng(seed)
    return {h: rng.standard_normal(N).astype(np.float32) for h in hosts}


def _exact(sched, grads):
    want = np.sum([grads[w].astype(np.float64) for w in sched.workers], axis=0)
    out = execute(sched, grads)
    return all(np.allclose(out[w], want, rtol=0, atol=1e-4) for w in sched.workers)


def test_2lha_sums_exactly_and_crosses_each_group_boundary_once_per_chunk():
    workers = [f"w{i}" for i in range(16)]
    groups = {w: f"rack{i // 4}" for i, w in enumerate(workers)}
    sched = two_level(workers, N, groups)
    assert _exact(sched, _grads(workers))
    c = 4
    assert cross_region_bytes(sched, {w: (groups[w],) for w in workers}) == [2 * (c - 1) * N * ELEM_BYTES]
    assert chain_length(sched) == 4
    lms = [m for _, per in masters(workers, groups, 16) for m in per.values()]
    assert sorted(lms.count(w) for w in workers) == [4] * 16  # every host LM for 4 of the 16 chunks
    assert sorted(gm for gm, _ in masters(workers, groups, 16)) == sorted(workers)  # and GM for one each


def test_masters_follow_group_size_and_bandwidth():
    workers = [f"w{i}" for i in range(8)]
    groups = {w: ("big" if i < 6 else "small") for i, w in enumerate(workers)}
    gms = [gm for gm, _ in masters(workers, groups, 8)]
    assert sum(groups[g] == "big" for g in gms) == 6  # GM chunks in proportion to size: 6 and 2
    slow = {w: (0.4 if w == "w0" else 1.0) for w in workers}
    duties = [per["big"] for _, per in masters(workers, groups, 24, bandwidth=slow)]
    assert duties.count("w0") < duties.count("w1")  # the slow host masters less
    assert apportion(7, [1, 1, 1]) == [3, 2, 2] and sum(apportion(10, [0.4, 1, 1])) == 10
    assert interleaved(["a", "b"], [2, 2]) == ["a", "b", "a", "b"]
    with pytest.raises(ScheduleError, match="no group for"):
        two_level(workers, N, {w: "x" for w in workers[:-1]})


def test_push_and_tree_broadcast_sum_exactly_and_unload_the_servers():
    """FatTree(4)'s tier costs give P3's tree (T = 5, H = 3); two servers, 14 workers. Each server
    receives W shards but sends only as many copies as the root has children; segmented, the
    relays stream and the sums stay exact."""
    from tests.test_pf_algorithms import fattree_tier_costs

    hosts, cost = fattree_tier_costs()
    servers, workers = hosts[:2], hosts[2:]
    tree = pf_scheme.tsb_tree(workers, cost, servers)
    sched = pf_scheme.push_broadcast(workers, N, servers, tree.parent)
    grads = _grads(workers, seed=2)
    assert _exact(sched, grads)
    shard = N // 2 * ELEM_BYTES
    sent = host_bytes(sched)
    root_children = len(tree.children(pf_scheme.ROOT))
    assert root_children <= 5
    for s in servers:
        assert sent[s] == (root_children * shard, len(workers) * shard)
    assert _exact(segmented(sched, 4096), grads)  # the streaming broadcast
    with pytest.raises(ScheduleError, match="cycle"):
        pf_scheme.push_broadcast(["a", "b"], N, ["s"], {"a": "b", "b": "a"})


def test_finetune_moves_masters_off_a_throttled_host():
    """8 hosts in 2 groups, 16 chunks; host w0 sends at 40% of the others' rate (the paper's
    Fig. 10 throttles one node from 5 to 2 Gbit/s). Finetune, step by step, takes master duties off
    w0 and the slowest host's time falls; Quicktune (bandwidth-weighted masters) starts w0 lighter."""
    from schemes.plink import blame, finetune, host_seconds
    from schemes.schedule import pair_bytes

    workers = [f"w{i}" for i in range(8)]
    groups = {w: f"g{i // 4}" for i, w in enumerate(workers)}
    rate = {w: (40e6 if w == "w0" else 100e6) for w in workers}
    bw = {(a, b): rate[a] / 7 for a in workers for b in workers if a != b}
    rtt = {(a, b): 1e-4 for a in workers for b in workers if a != b}

    def duties(assign, host):
        return sum(gm == host for gm, _ in assign) + sum(lm == host for _, lms in assign for lm in lms.values())

    def slowest(assign):
        return max(host_seconds(pair_bytes(two_level(workers, N, groups, assignment=assign)), rtt, bw).values())

    start = masters(workers, groups, 16)
    assign = start
    for _ in range(12):
        scores = blame(pair_bytes(two_level(workers, N, groups, assignment=assign)), rtt, bw)
        assign = finetune(assign, groups, scores)
    assert duties(assign, "w0") < duties(start, "w0")
    assert slowest(assign) < 0.9 * slowest(start)
    sched = two_level(workers, N, groups, assignment=assign)
    assert _exact(sched, _grads(workers, seed=3))  # a tuned schedule still sums exactly
    quick = masters(workers, groups, 16, bandwidth=rate)
    assert duties(quick, "w0") < duties(start, "w0")
