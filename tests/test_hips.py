"""HiPS schedules (HiPS paper §3.2-3.3): exact sums on BCube and Torus for every stage
method, each level's messages only on that level's cables, one hop, and the bytes Table 3 implies."""

from __future__ import annotations

import numpy as np
import pytest

from schemes import compile_scheme
from schemes.count import link_loads
from schemes.flat import ring
from schemes.hips import by_level, grid, stage_methods
from schemes.schedule import ScheduleError, chain_length, execute, pair_bytes
from topologies.build import build_network
from topologies.model import Network
from topologies.schema import parse_spec

N_ELEMS = 4099  # a prime: chunks of unequal length

NETS = {
    "bcube-3-1": {"kind": "bcube", "n": 3, "k": 1},
    "bcube-4-1": {"kind": "bcube", "n": 4, "k": 1},
    "torus-3x3": {"kind": "torus", "n": 3, "h": 2},
    "torus-4x4": {"kind": "torus", "n": 4, "h": 2},
}
#: (scheme, hips_stages): the named variants, each method in every stage, and mixes
VARIANTS = [
    ("hips", None),
    ("hrs", None),
    ("hips-ms", None),
    ("hips", "ps"),
    ("hips", ["ms", "rs"]),
    ("hips", ["ps", "rs"]),
    ("hips", ["rs", "ps"]),
]


def network(name: str) -> Network:
    return build_network(parse_spec({**NETS[name], "worker_mbps": 1000, "scale": 40}))


def compiled(net: Network, scheme: str, stages, parallel: bool, n_elems: int = N_ELEMS):
    servers = [h.name for h in net.hosts()]
    digits = net.family.address_digits(net)
    return compile_scheme(
        scheme, servers, n_elems, digits=digits, hips_stages=stages, hips_parallel=parallel,
        both_ways=net.family.rings_both_ways,
    )  # fmt: skip


@pytest.mark.parametrize("parallel", [True, False], ids=["parallel", "one-process"])
@pytest.mark.parametrize(("scheme", "stages"), VARIANTS, ids=[f"{s}-{st}" for s, st in VARIANTS])
@pytest.mark.parametrize("name", NETS)
def test_every_server_ends_with_the_exact_sum(name, scheme, stages, parallel):
    net = network(name)
    sched = compiled(net, scheme, stages, parallel)
    rng = np.random.default_rng(7)
    g = {w: rng.standard_normal(N_ELEMS).astype(np.float32) for w in sched.workers}
    want = np.sum(np.stack(list(g.values())).astype(np.float64), axis=0)
    out = execute(sched, g)
    assert set(out) == {h.name for h in net.hosts()}
    for w in sched.workers:
        err = np.max(np.abs(out[w] - want)) / np.max(np.abs(want))
        assert err <= 1e-5, (w, err)


def _switch_level(net: Network, load) -> int:
    """The level (BCube) or dimension (Torus) of the switch or wire a loaded cable plugs into."""
    (sw,) = [x for x in (load.link.a, load.link.b) if not net.nodes[x].is_host]
    return net.nodes[sw].module


@pytest.mark.parametrize(("scheme", "stages"), [("hrs", None), ("hips-ms", None), ("hips", ["ps", "rs"])])
@pytest.mark.parametrize("name", NETS)
def test_each_levels_stages_stay_one_hop_on_that_levels_cables(name, scheme, stages):
    net = network(name)
    sched = compiled(net, scheme, stages, parallel=True)
    digits = net.family.address_digits(net)
    levels = by_level(sched, digits)
    assert sum(sum(pair_bytes(s).values()) for s in levels.values()) == sum(pair_bytes(sched).values())
    for lvl, part in levels.items():
        loads = link_loads(net, part)
        assert loads, f"level {lvl} carries nothing"
        assert {_switch_level(net, x) for x in loads} == {lvl}
        # one hop: every byte leaves a server once (a relayed message leaves its relay too). On a
        # Torus ring of 4 only RS is: MS and PS also reach the server opposite, through a relay.
        from_servers = sum(x.nbytes for x in loads if net.nodes[x.src].is_host)
        method = stage_methods(stages, 2, scheme)[lvl]
        one_hop = not net.family.rings_both_ways or method == "rs" or NETS[name]["n"] == 3
        assert (from_servers == sum(pair_bytes(part).values())) == one_hop


@pytest.mark.parametrize("name", NETS)
def test_parallel_processes_load_every_nic_with_the_table3_bytes(name):
    """h processes rotated over the levels: every NIC sends, and the busiest cable carries exactly
    what Table 3's HiPS GST implies (BCube 2(N-1)/(hN) W, Torus half that: rings both ways)."""
    net = network(name)
    n, h = NETS[name]["n"], 2
    big = n**h
    n_elems = 2 * big * 4 * 3000  # whole chunks everywhere: the byte counts are exact
    w_bytes = n_elems * 4
    factor = 1 if net.family.rings_both_ways else 2
    for parallel in (True, False):
        loads = link_loads(net, compiled(net, "hrs", None, parallel, n_elems))
        nic_tx = {(x.src, x.link.port_of(x.src)) for x in loads if net.nodes[x.src].is_host and x.nbytes}
        assert len(nic_tx) == sum(len(net.links_of(s.name)) for s in net.hosts())  # every NIC sends
        if parallel:
            assert loads[0].nbytes == pytest.approx(factor * (big - 1) / big / h * w_bytes)
        else:  # one process: the first stage alone moves 2(n-1)/n W (Table 3's MS figure)
            assert loads[0].nbytes == pytest.approx(factor * (n - 1) / n * w_bytes)


def test_hrs_with_one_level_is_the_ring_allreduce():
    net = build_network(parse_spec({"kind": "bcube", "n": 5, "k": 0, "worker_mbps": 1000, "scale": 40}))
    hosts = [h.name for h in net.hosts()]
    hrs = compile_scheme("hrs", hosts, 5000, digits=net.family.address_digits(net))
    flat = ring(hosts, 5000)  # equal chunks: the two number their chunks differently
    assert pair_bytes(hrs) == pair_bytes(flat)
    assert chain_length(hrs) == chain_length(flat) == 2 * (5 - 1)


def test_chain_is_2_n_minus_1_per_rs_stage_and_2_per_ms_stage():
    net = network("bcube-4-1")
    assert chain_length(compiled(net, "hrs", None, True)) == 2 * 2 * 3
    assert chain_length(compiled(net, "hips-ms", None, True)) == 2 * 2
    assert chain_length(compiled(net, "hips", ["ms", "rs"], True)) == 2 + 2 * 3


def test_refusals_name_the_problem():
    net = network("bcube-3-1")
    hosts = [h.name for h in net.hosts()]
    digits = net.family.address_digits(net)
    with pytest.raises(ScheduleError, match="not a full address grid"):
        compile_scheme("hips", hosts[1:], N_ELEMS, digits=digits)
    with pytest.raises(ScheduleError, match="has no address digits"):
        compile_scheme("hips", hosts, N_ELEMS, digits={})
    with pytest.raises(ScheduleError, match="one of ms, rs, ps per level"):
        compile_scheme("hips", hosts, N_ELEMS, digits=digits, hips_stages=["rs"])
    with pytest.raises(ScheduleError, match="one of ms, rs, ps per level"):
        compile_scheme("hips", hosts, N_ELEMS, digits=digits, hips_stages="ring")


def test_grid_ranks_follow_the_digits():
    g = grid(["a", "b", "c", "d"], {"a": (0, 0), "b": (0, 1), "c": (1, 0), "d": (1, 1)})
    assert g.sizes == (2, 2)
    assert g.groups(0) == [["a", "b"], ["c", "d"]] and g.groups(1) == [["a", "c"], ["b", "d"]]
    assert g.level_of("a", "b") == 0 and g.level_of("a", "c") == 1 and g.level_of("a", "d") is None


@pytest.mark.parametrize("name", ["bcube-4-1", "torus-4x4"])
def test_pipelined_chunks_move_the_same_bytes_and_sum_exactly(name):
    """`pipeline` cuts every piece into finer chunks: same pairs, same bytes, exact sums, and every
    stage's parts still whole chunks."""
    net = network(name)
    servers = [h.name for h in net.hosts()]
    digits = net.family.address_digits(net)
    both = net.family.rings_both_ways
    n = 64 * 4 * 97  # whole chunks at both chunkings: the byte counts are equal exactly
    base = compile_scheme("hrs", servers, n, digits=digits, both_ways=both, hips_pipeline=1)
    fine = compile_scheme("hrs", servers, n, digits=digits, both_ways=both, hips_pipeline=4)
    default = compile_scheme("hrs", servers, n, digits=digits, both_ways=both)
    assert len(fine.chunks) == 4 * len(base.chunks) and len(default.chunks) == len(base.chunks)
    # each of the h processes cuts its share in 2N pieces with rings both ways (N without): the
    # fewest that keep every stage's parts whole (the sums below are exact at 4x finer too)
    h = len(next(iter(digits.values())))
    assert len(base.chunks) == h * len(servers) * (2 if both else 1)
    assert pair_bytes(fine) == pair_bytes(base)
    rng = np.random.default_rng(3)
    g = {w: rng.standard_normal(n).astype(np.float32) for w in servers}
    want = np.sum(np.stack(list(g.values())).astype(np.float64), axis=0)
    for w, got in execute(fine, g).items():
        err = np.max(np.abs(got - want)) / np.max(np.abs(want))
        assert err <= 1e-5, (w, err)
    with pytest.raises(ScheduleError, match="pipeline"):
        compile_scheme("hrs", servers, n, digits=digits, hips_pipeline=0)
