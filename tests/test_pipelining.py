"""Pipelining (JobSpec.segment_kb, streams): a schedule cut into segments moves the same bytes over
the same pairs and regions with the same dependency chain, sums exactly in memory and over real TCP
with several connections per peer, and a job's segment reaches the schedule its engine runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.host import verify_sums
from engine.processes import local_starter, run_scheme
from schemes import registry
from schemes.schedule import ELEM_BYTES, chain_length, cross_region_bytes, execute, pair_bytes, segmented
from tests.test_scheme_engine import N_ELEMS, config

WORKERS = tuple(f"w{i}" for i in range(6))
REGIONS = {h: (f"r{i // 3}",) for i, h in enumerate((*WORKERS, "s0", "s1"))}
ENGINE_SCHEMES = [s.name for s in registry.SCHEMES.values() if s.engine and registry.Need.DIGITS not in s.needs]


def _compile(scheme: str, n_elems: int, segment_bytes: int | None = None):
    servers = ("s0", "s1") if registry.Need.PS_HOSTS in registry.get(scheme).needs else ()
    regions = {w: REGIONS[w] for w in WORKERS}
    inputs = registry.SchemeInputs(WORKERS, n_elems, servers, regions=regions, segment_bytes=segment_bytes)
    return registry.get(scheme).compile(inputs)


@pytest.mark.parametrize("scheme", ENGINE_SCHEMES)
def test_segments_keep_bytes_regions_and_chain_and_sum_exactly(scheme: str):
    whole = _compile(scheme, 100_003)
    cut = _compile(scheme, 100_003, segment_bytes=4096)
    assert len(cut.chunks) > len(whole.chunks)  # it did cut
    assert max(c.nbytes for c in cut.chunks) <= 4096
    assert sum(c.length for c in cut.chunks) == whole.n_elems
    assert pair_bytes(cut) == pair_bytes(whole)  # every pair carries the same bytes
    assert cross_region_bytes(cut, REGIONS) == cross_region_bytes(whole, REGIONS)
    assert chain_length(cut) == chain_length(whole)  # a segment's hops are its chunk's
    grads = {
        w: np.random.default_rng(i).standard_normal(whole.n_elems).astype(np.float32) for i, w in enumerate(WORKERS)
    }
    want = sum(g.astype(np.float64) for g in grads.values())
    got = execute(cut, grads)
    for w in WORKERS:
        np.testing.assert_allclose(got[w], want, rtol=0, atol=1e-4)


def test_no_segment_or_a_larger_one_leaves_the_schedule_whole():
    whole = _compile("ring", 10_000)
    assert segmented(whole, None) is whole
    assert segmented(whole, 0) is whole
    assert segmented(whole, 10_000 * ELEM_BYTES) is whole


def test_a_jobs_segment_reaches_the_engines_schedule():
    """The job field is in emulated KB; the engine's config carries it, and compiling from that
    config (what every host process receives) gives the segmented schedule."""
    from runs.engine_job import scheme_options
    from workloads.experiment import JobSpec

    job = JobSpec(model="tiny", scheme="ring", compute="calibrated", compute_s=0.0, segment_kb=8)
    assert scheme_options(job)["segment_bytes"] == 8192
    cfg = {"scheme": "ring", "workers": list(WORKERS), "n_elems": 100_000, **scheme_options(job)}
    sched = registry.compile_from_config(cfg)
    assert max(c.nbytes for c in sched.chunks) <= 8192
    tf = JobSpec(model="tiny", segment_kb=8)  # TF's PS job moves its own tensors: nothing to cut
    assert scheme_options(tf)["segment_bytes"] is None


@pytest.mark.parametrize("scheme", ["ring", "rat"])
def test_segments_over_several_streams_sum_exactly_over_tcp(tmp_path: Path, scheme: str):
    """Real processes on loopback, 3 connections per peer and 8 KB segments: every worker holds
    the exact sum, and each moved the bytes the (unsegmented) schedule counts."""
    workers = list(WORKERS[:5])
    regions = {w: REGIONS[w] for w in workers}
    cfg = config(scheme, workers, regions=regions, segment_bytes=8192, streams=3)
    run = run_scheme(cfg, workers, dict.fromkeys(workers, "127.0.0.1"), tmp_path, local_starter(tmp_path), 120)
    assert verify_sums(tmp_path, workers) == []
    whole = registry.get(scheme).compile(registry.SchemeInputs(tuple(workers), N_ELEMS, regions=regions))
    counted = sum(pair_bytes(whole).values())
    assert [i["sent_bytes"] for i in run.iterations()] == [counted, counted]


def test_a_barrier_starts_every_synchronisation_together(tmp_path: Path):
    """With `barrier`, the hosts of a ring begin each synchronisation within a few milliseconds
    of one another (the coordinator's release), though worker w0 computes 0.3 s longer, and the
    wait is in the row (barrier_s), not in the GST; the sums stay exact."""
    workers = list(WORKERS[:4])
    cfg = config("ring", workers, barrier=True, segment_bytes=16384)
    slow = {"w0": {"compute_s": 0.3}}
    run = run_scheme(cfg, workers, dict.fromkeys(workers, "127.0.0.1"), tmp_path, local_starter(tmp_path), 120, slow)
    assert verify_sums(tmp_path, workers) == []
    for it in run.iterations():
        assert it["start_skew_s"] < 0.05, it
        assert it["sync_s"] < 0.3, it  # the slow worker's 0.3 s is waited out before, not inside
    waits = [r["barrier_s"] for r in run.rows if r["host"] != "w0"]
    assert min(waits) > 0.25, waits


def test_a_stalled_peer_does_not_hold_a_sends_other_peers():
    """A chunk sent to two peers reaches the second though the first never reads: sends never
    block (the schedule's semantics), so one slow connection of a PS, a mesh owner or a RAT relay
    does not pace its other peers. Real TCP on loopback; the chunk (16 MB) is larger than what the
    stalled socket and its buffers absorb, so waiting on its drain first would never reach b."""
    import asyncio
    import socket

    from engine.executor import HostEngine
    from schemes.schedule import Chunk, Op, Schedule

    n = 4 << 20  # float32 elements: 16 MB
    sched = Schedule("fan-out", ("s", "a", "b"), (Chunk(0, 0, n),))
    sched.transfer("s", "a", 0, Op.COPY)
    sched.transfer("s", "b", 0, Op.COPY)

    def free_port() -> int:
        with socket.socket() as so:
            so.bind(("127.0.0.1", 0))
            return so.getsockname()[1]

    addresses = {h: ("127.0.0.1", free_port()) for h in ("s", "a", "b")}

    async def scenario() -> np.ndarray:
        stalled: list[asyncio.StreamWriter] = []

        async def never_read(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            stalled.append(w)  # accepted, then never read: its window closes, s's buffers fill

        a = await asyncio.start_server(never_read, *addresses["a"])
        s, b = HostEngine("s", sched, addresses), HostEngine("b", sched, addresses)
        await b.listen()
        await s.listen()
        await s.connect()
        await b.connect()
        sent = np.arange(n, dtype=np.float32)
        sender = asyncio.create_task(s.synchronise(sent, 0))
        got = np.zeros(n, dtype=np.float32)
        await asyncio.wait_for(b.synchronise(got, 0), 30)
        assert not sender.done()  # still waiting on a, as it should
        sender.cancel()
        for w in [*stalled, *(w for ws in s.writers.values() for w in ws)]:
            w.transport.abort()
        await b.close()
        await s.close()
        a.close()
        return got

    assert np.array_equal(asyncio.run(scenario()), np.arange(n, dtype=np.float32))


def test_the_chain_still_ahead_of_each_hosts_first_step():
    """remaining_chain: a ring's first send of a host's own chunk starts the whole 2(W-1) chain; a
    PS worker's push is 2 messages from the end (push, then the PS's answer); the PS's own first
    step on a shard is a receive with 1 message (its answer) ahead."""
    from schemes.schedule import remaining_chain

    w = len(WORKERS)
    ring = _compile("ring", 60_000)
    assert max(remaining_chain(ring)[(h, c.index)] for h in WORKERS for c in ring.chunks) == 2 * (w - 1)
    ps = _compile("ps", 60_000)
    ahead = remaining_chain(ps)
    assert {ahead[(h, c.index)] for h in WORKERS for c in ps.chunks if (h, c.index) in ahead} == {2}
    assert {ahead[(s, c.index)] for s in ("s0", "s1") for c in ps.chunks if (s, c.index) in ahead} == {1}


@pytest.mark.parametrize("scheme", ["rat", "halving-doubling", "ring"])
def test_segments_go_round_by_round_and_longest_chain_first(scheme: str):
    """Each host lists every chunk's first segment before any chunk's second (so one connection
    carries all the trees it serves at once, not one tree after another), and, within a round,
    a chunk with a longer chain ahead before a shorter one; a segment's own steps keep their
    chunk's order."""
    from schemes.schedule import remaining_chain

    whole = _compile(scheme, 100_003)
    cut = _compile(scheme, 100_003, segment_bytes=4096)
    ahead = remaining_chain(whole)
    old = {}  # new chunk -> (old chunk, round)
    for c in whole.chunks:
        inside = [k for k in cut.chunks if c.offset <= k.offset < c.offset + c.length]
        old.update({k.index: (c.index, j) for j, k in enumerate(inside)})
    for h, steps in cut.steps.items():
        keys = [(old[s.chunk][1], -ahead[(h, old[s.chunk][0])]) for s in steps]
        assert keys == sorted(keys), h
        for k in {s.chunk for s in steps}:
            mine = [(s.op, s.peer) for s in steps if s.chunk == k]
            assert mine == [(s.op, s.peer) for s in whole.steps[h] if s.chunk == old[k][0]]


def test_on_the_oversubscribed_leaf_spine_rat_and_halving_doubling_come_near_the_busiest_cable():
    """The flow model (SimGrid, a pair's messages one at a time in the schedule's order) on RAT's
    2:1 leaf-spine with 64 KB segments: RAT and halving-doubling within 1.10x of the busiest
    cable's bytes over its rate (chunk by chunk, they took 1.26x and 1.16x)."""
    pytest.importorskip("simgrid", reason="python3-simgrid (scripts/setup.sh links it into the venv)")
    from models.flow.schedule_time import schedule_time_s
    from runs.engine_job import prepare
    from schemes.count import expected_sync_s
    from topologies.build import build_network
    from topologies.schema import load_spec
    from workloads.experiment import JobSpec

    spec = load_spec(Path(__file__).resolve().parents[1] / "topologies" / "leafspine-rat.yaml")
    net = build_network(spec)
    for scheme in ("rat", "halving-doubling"):
        job = JobSpec(model="resnet50", scheme=scheme, compute="calibrated", compute_s=0.0, segment_kb=64)
        prep = prepare(job, net, spec.scale * 2, "test")
        assert schedule_time_s(net, prep.sched) <= 1.10 * expected_sync_s(net, prep.sched), scheme
