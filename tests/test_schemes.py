"""Synchronisation schedules: exact sums, the bytes and chain lengths the papers state, region traffic."""

from __future__ import annotations

import math

import numpy as np
import pytest

from schemes import compile_scheme
from schemes.schedule import (
    Op,
    Schedule,
    ScheduleError,
    Step,
    chain_length,
    cross_region_bytes,
    execute,
    host_bytes,
)

N_ELEMS = 1003  # not a multiple of any W used here: chunks of unequal length


def workers(n: int) -> list[str]:
    return [f"w{i}" for i in range(n)]


def racks(ws: list[str], per_rack: int) -> dict[str, tuple[str]]:
    return {w: (f"r{i // per_rack}",) for i, w in enumerate(ws)}


def grads(ws: list[str], seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {w: rng.standard_normal(N_ELEMS).astype(np.float32) for w in ws}


def schedule(name: str, n: int) -> Schedule:
    ws = workers(n)
    return compile_scheme(name, ws, N_ELEMS, servers=["ps0", "ps1"], regions=racks(ws, 4 if n >= 8 else 2))


@pytest.mark.parametrize("name", ["ps", "mesh", "ring", "halving-doubling", "rat"])
@pytest.mark.parametrize("n", [2, 3, 4, 5, 6, 7, 8, 12])
def test_every_worker_ends_with_the_exact_sum(name: str, n: int):
    sched = schedule(name, n)
    g = grads(sched.workers)
    want = np.sum(np.stack(list(g.values())).astype(np.float64), axis=0)
    out = execute(sched, g)
    for w in sched.workers:
        err = np.max(np.abs(out[w] - want)) / np.max(np.abs(want))
        assert err <= 1e-5, (name, n, w, err)


def test_ps_servers_hold_s_over_p_and_chain_is_two():
    sched = schedule("ps", 6)
    sizes = [c.nbytes for c in sched.chunks]
    assert max(sizes) - min(sizes) <= 4  # one float32 at most
    assert sum(sizes) == N_ELEMS * 4
    sent, recv = host_bytes(sched)["ps0"]
    assert recv == 6 * sizes[0] and sent == 6 * sizes[0]
    assert chain_length(sched) == 2


@pytest.mark.parametrize("n", [4, 5, 8])
def test_ring_sends_two_w_minus_one_over_w_and_chain_is_2_w_minus_1(n: int):
    sched = schedule("ring", n)
    for w in sched.workers:
        sent, recv = host_bytes(sched)[w]
        assert sent == pytest.approx(2 * (n - 1) / n * N_ELEMS * 4, abs=2 * n * 4)
        assert recv == sent or abs(recv - sent) <= 2 * n * 4
    assert chain_length(sched) == 2 * (n - 1)


@pytest.mark.parametrize(("n", "steps"), [(2, 2), (4, 4), (8, 6), (16, 8), (5, 6), (6, 6), (12, 8)])
def test_halving_doubling_takes_2_log2_steps_plus_two_for_non_powers(n: int, steps: int):
    sched = schedule("halving-doubling", n)
    assert chain_length(sched) == steps
    if n & (n - 1) == 0:
        assert steps == 2 * int(math.log2(n))
        for w in sched.workers:  # the same bytes as ring on a power of two
            assert host_bytes(sched)[w][0] == pytest.approx(2 * (n - 1) / n * N_ELEMS * 4, abs=2 * n * 4)


def test_rat_chain_is_2_l_plus_1_and_its_cross_rack_traffic_is_minimal():
    ws = workers(8)
    one_level = racks(ws, 4)
    two_levels = {w: (f"r{i // 2}", f"p{i // 4}") for i, w in enumerate(ws)}
    assert chain_length(compile_scheme("rat", ws, N_ELEMS, regions=one_level)) == 4
    assert chain_length(compile_scheme("rat", ws, N_ELEMS, regions=two_levels)) == 6
    assert chain_length(compile_scheme("rat", ws, N_ELEMS)) == 2  # no oversubscribed level: depth-one trees
    cross = {
        name: cross_region_bytes(compile_scheme(name, ws, N_ELEMS, regions=one_level), one_level)[0]
        for name in ("mesh", "ring", "rat", "halving-doubling")
    }
    # RAT: each 1/8 chunk crosses the rack boundary once up and once down, per rack pair: 2 x S
    assert cross["rat"] == pytest.approx(2 * N_ELEMS * 4, abs=64)
    # the colocated PS sends each worker's 4 remote shards (S/8 each) across, each way: 8 x S
    assert cross["mesh"] == pytest.approx(8 * N_ELEMS * 4, abs=64)
    assert cross["rat"] <= cross["ring"] < cross["mesh"]
    # halving-doubling in Rabenseifner's order (distance doubling as the vector halves): only the
    # last step's S/8 blocks cross the racks, once each way per worker: 2 x S, as RAT (the old
    # order, halving at the largest distance first, crossed with S/2 blocks: 8 x S)
    assert cross["halving-doubling"] == pytest.approx(2 * N_ELEMS * 4, abs=64)


def test_halving_doubling_exchanges_its_largest_blocks_with_rank_neighbours():
    """Step 1 of the reduce-scatter sends half the gradient to rank r ^ 1; each later step halves
    the block and doubles the distance, and the all-gather mirrors it."""
    ws = workers(8)
    sched = compile_scheme("halving-doubling", ws, N_ELEMS)
    for r, w in enumerate(ws):
        sends = [(s.peer, sched.chunks[s.chunk].nbytes) for s in sched.steps[w] if s.op == Op.SEND]
        by_peer: dict[str, int] = {}
        for peer, nbytes in sends:
            by_peer[peer] = by_peer.get(peer, 0) + nbytes
        # each way (reduce-scatter and all-gather) the peer at distance d gets S / (2 d)
        for d in (1, 2, 4):
            assert by_peer[ws[r ^ d]] == pytest.approx(2 * N_ELEMS * 4 / (2 * d), abs=64)
        assert sends[0][0] == ws[r ^ 1] and sends[-1][0] == ws[r ^ 1]


def test_rat_spreads_aggregation_over_every_worker():
    ws = workers(8)
    sched = compile_scheme("rat", ws, 8 * 100, regions=racks(ws, 4))
    sent = [host_bytes(sched)[w][0] for w in ws]
    assert max(sent) == min(sent)


def test_a_receive_nobody_sends_is_a_deadlock():
    sched = compile_scheme("ring", workers(3), N_ELEMS)
    sched.steps["w0"].insert(0, Step(Op.REDUCE, 0, "w2"))
    with pytest.raises(ScheduleError, match="deadlock"):
        execute(sched, grads(sched.workers))


def test_unknown_scheme_lists_the_known_ones():
    with pytest.raises(ScheduleError, match="schemes: tf-ps, ps, mesh, ring"):
        compile_scheme("butterfly", workers(4), 100)


def test_counted_cable_bytes_follow_the_controllers_routes():
    """On the FatTree prototype: a PS's cable carries W shards in, a ring host's cable 2(W-1)/W of S."""
    from schemes.count import expected_sync_s, link_loads
    from topologies.build import load_network

    net = load_network("topologies/fattree-testbed.yaml")
    ws = [w.name for w in net.workers()]
    pss = [p.name for p in net.pss()]
    sched = compile_scheme("ps", ws, N_ELEMS, servers=pss)
    loads = link_loads(net, sched)
    shard = sched.chunks[0].nbytes
    into_ps = [ld for ld in loads if ld.link.other(ld.src) == pss[0]]
    assert sum(ld.nbytes for ld in into_ps) == pytest.approx(len(ws) * shard, abs=4 * len(ws))
    ring_sched = compile_scheme("ring", ws, N_ELEMS)
    per_host = 2 * (len(ws) - 1) / len(ws) * N_ELEMS * 4
    first_hop = [ld for ld in link_loads(net, ring_sched) if ld.src in ws]
    assert {ld.src for ld in first_hop} == set(ws)
    assert all(ld.nbytes == pytest.approx(per_host, abs=8 * len(ws)) for ld in first_hop)
    assert expected_sync_s(net, ring_sched) >= per_host * 8 / (first_hop[0].link.mbps * 1e6) - 1e-9
