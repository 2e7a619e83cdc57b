"""Parameter Flow as a registered scheme (`pf`, schemes/pf.py) and DVF on the engine's wire
(engine/dvf.py), without emulation: the broadcast tree compiled for a job keeps T and H, `flat`
moves the bytes of `ps`, the schedule sums exactly in memory and over loopback TCP, and with DVF
the messages' sizes are known only at run time while, over the run, what the workers applied plus
every host's residual is what they computed."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from engine.dvf import Codec, DvfSettings, decode, verify_dvf
from engine.host import verify_sums
from engine.processes import local_starter, run_scheme
from schemes import pf as pf_scheme
from schemes import registry
from schemes.schedule import ELEM_BYTES, Op, execute, host_bytes
from topologies.build import load_network
from workloads.experiment import JobSpec

REPO = Path(__file__).resolve().parent.parent
FATTREE = REPO / "topologies" / "fattree-k4.yaml"  # 14 workers, 2 PSs over 4 pods


def tree_of(sched) -> dict[str, str]:
    """Each worker's parent in the broadcast of chunk 0 (the servers' sends: the root)."""
    parent = {}
    for host, steps in sched.steps.items():
        for s in steps:
            if s.op == Op.SEND and s.chunk == 0 and s.peer in sched.workers:
                parent[s.peer] = pf_scheme.ROOT if host in sched.servers else host
    return parent


def depth(parent: dict[str, str], w: str) -> int:
    d = 0
    while w != pf_scheme.ROOT:
        w, d = parent[w], d + 1
    return d


@pytest.mark.parametrize(("t", "h"), [(5, 3), (4, 2), (2, 3)])
def test_the_compiled_tree_keeps_t_and_h(t, h):
    """FatTree(4), 14 workers: the schedule the job runs (gather: the topology's tier costs) has
    every worker under one parent, at most T children per node and at most H hops; a T and H
    that cannot hold 14 workers are refused in one line."""
    net = load_network(FATTREE)
    spec = registry.get("pf")
    inputs = registry.gather(net, spec, 14_000, pf_degree=t, pf_depth=h)
    assert len(inputs.workers) == 14 and len(inputs.servers) == 2
    assert set(inputs.costs.values()) <= set(pf_scheme.TIER_COSTS)
    sched = spec.compile(inputs)
    parent = tree_of(sched)
    assert sorted(parent) == sorted(inputs.workers)
    children = defaultdict(int)
    for p in parent.values():
        children[p] += 1
    assert max(children.values()) <= t
    assert max(depth(parent, w) for w in parent) <= h
    with pytest.raises(Exception, match="14 workers do not fit a tree of degree 2 and depth 2"):
        spec.compile(registry.gather(net, spec, 14_000, pf_degree=2, pf_depth=2))


def test_tsb_unloads_the_servers_and_flat_moves_the_bytes_of_ps():
    net = load_network(FATTREE)
    n = 14_000
    tsb = registry.get("pf").compile(registry.gather(net, "pf", n))
    flat = registry.get("pf").compile(registry.gather(net, "pf", n, pf_tree="flat"))
    ps = registry.get("ps").compile(registry.gather(net, "ps", n))
    assert host_bytes(flat) == host_bytes(ps)
    shard = n // 2 * ELEM_BYTES
    root_children = sum(p == pf_scheme.ROOT for p in tree_of(tsb).values())
    assert root_children <= pf_scheme.MAX_DEGREE
    for s in tsb.servers:  # each server takes 14 shards in and sends T copies out, not 14
        assert host_bytes(tsb)[s] == (root_children * shard, 14 * shard)
    rng = np.random.default_rng(3)
    grads = {w: rng.standard_normal(n).astype(np.float32) for w in tsb.workers}
    want = np.sum([g.astype(np.float64) for g in grads.values()], axis=0)
    for w, got in execute(tsb, grads).items():
        if w in tsb.workers:
            assert np.allclose(got, want, atol=1e-4)
    assert registry.get("pf").messages(14, 2) == sum(1 for ss in tsb.steps.values() for s in ss if s.op == Op.SEND)


def test_the_codec_holds_back_what_it_does_not_send_and_forwards_nothing_new():
    """One chunk through a worker's codec over 5 clocks: each message decodes to what was sent, the
    view holds it, and sent + held equals the update + what was held before, element for element."""
    codec = Codec(DvfSettings("up", 0.5, 1.0), [10_000])
    rng = np.random.default_rng(0)
    computed = np.zeros(10_000)
    sent_total = np.zeros(10_000)
    for it in range(5):
        codec.begin(it)
        g = rng.standard_normal(10_000).astype(np.float32)
        before = g + codec.held[0]
        view = g.copy()
        wire = codec.originate(0, view, it)
        assert np.array_equal(decode(wire), view)
        assert np.array_equal(view + codec.held[0], before)
        assert np.all(np.abs(view[view != 0]) > 1.0 / np.sqrt(it + 1))
        computed += g
        sent_total += view
    assert np.allclose(sent_total + codec.residual(), computed, atol=1e-5)
    done = codec.done(4)
    assert 0 < done["sent_entries"] < done["originated"] == 10_000 and done["threshold"] == 1.0 / np.sqrt(5)


def test_dynamic_dvf_follows_the_measured_links():
    codec = Codec(DvfSettings("dynamic", 1e-3, 2e-3, sufficient_mbps=5.0), [8])
    codec.begin(0, {})  # nothing measured yet: the links are taken as sufficient
    assert codec.delta == 1e-3
    codec.begin(1, {"s1": 9.0, "s2": 4.0})  # one link below 5 Mbit/s: insufficient
    assert codec.delta == 2e-3
    codec.begin(2, {"s1": None, "s2": None})  # nothing said this time: the last verdict holds
    assert codec.delta == 2e-3
    codec.begin(3, {"s1": 9.0, "s2": 6.0})
    assert codec.delta == 1e-3


def _cfg(workers, servers, n, **more):
    return {
        "scheme": "pf", "workers": workers, "servers": servers, "regions": None, "n_elems": n,
        "mode": "calibrated", "compute_s": 0.0, "model": "tiny", "width": 1.0, "batch_size": 1, "lr": 0.01,
        "seed": 5, "warmup": 1, "iterations": 3, "check": True, "segment_bytes": 16384, **more,
    }  # fmt: skip


def test_pf_over_loopback_sums_exactly_and_dvf_loses_nothing(tmp_path: Path):
    """5 workers, 2 servers on loopback, segmented (the relays stream). Without DVF every worker
    holds the exact sum every iteration. With DVF (delta_up = 2 on standard-normal gradients: 95% of
    a push held back at clock 1, less as the threshold falls and the residual grows) the messages
    are shorter than the chunks, the engine sends fewer bytes than raw float32, and over the 4
    iterations applied + residual = computed; `encode` alone (nothing held back) sums exactly."""
    ws, ss = [f"w{i}" for i in range(5)], ["s0", "s1"]
    hosts = ws + ss
    n = 40_000
    addresses = dict.fromkeys(hosts, "127.0.0.1")
    plain = run_scheme(_cfg(ws, ss, n), hosts, addresses, tmp_path / "plain", local_starter(tmp_path), 120)
    assert verify_sums(tmp_path / "plain", ws) == []
    raw = plain.iterations()[0]["sent_bytes"]
    assert raw == 2 * len(ws) * n * ELEM_BYTES  # every worker pushes S and receives S

    dvf = {"mode": "up", "delta_low": 1.0, "delta_up": 2.0}
    (tmp_path / "dvf").mkdir()
    run = run_scheme(_cfg(ws, ss, n, dvf=dvf), hosts, addresses, tmp_path / "dvf", local_starter(tmp_path), 120)
    assert verify_dvf(tmp_path / "dvf", ws, hosts) == []
    its = run.iterations()
    assert all(it["raw_sent_bytes"] == raw and it["sent_bytes"] < raw for it in its), its
    assert sum(it["sent_bytes"] for it in its) < 0.8 * len(its) * raw
    assert verify_sums(tmp_path / "dvf", ws) != []  # held back: no single iteration is the exact sum

    (tmp_path / "enc").mkdir()
    enc = {"mode": "encode"}
    run_scheme(_cfg(ws, ss, n, dvf=enc), hosts, addresses, tmp_path / "enc", local_starter(tmp_path), 120)
    assert verify_sums(tmp_path / "enc", ws) == []


def test_job_fields_are_checked_in_one_line():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="dvf: ring sends raw gradients; DVF is for pf"):
        JobSpec(model="tiny", scheme="ring", dvf="up", dvf_delta_low=1, dvf_delta_up=2)
    with pytest.raises(ValidationError, match="dvf: up needs dvf_delta_low and dvf_delta_up"):
        JobSpec(model="tiny", scheme="pf", dvf="up")
    with pytest.raises(ValidationError, match="dvf_delta_low: must be below dvf_delta_up"):
        JobSpec(model="tiny", scheme="pf", dvf="low", dvf_delta_low=2, dvf_delta_up=1)
    with pytest.raises(ValidationError, match="pf_tree"):
        JobSpec(model="tiny", scheme="pf", pf_tree="star")


def test_ssp_lets_a_worker_run_at_most_s_clocks_ahead(tmp_path: Path):
    """UCC-SSP with s = 2 on loopback, 4 workers and 2 servers, w0 computing 15x slower than the
    others: the fast workers run ahead of w0 (they start clocks before it does), but none starts
    clock t before it applied the broadcast of t - s - 1, nor before every worker pushed t - s - 1;
    and each clock's broadcast is still the exact sum of that clock's updates (verify_sums)."""
    ws, ss = [f"w{i}" for i in range(4)], ["s0", "s1"]
    hosts = ws + ss
    s = 2
    cfg = {**_cfg(ws, ss, 20_000, staleness=s, barrier=False), "warmup": 0, "iterations": 8, "compute_s": 0.01}
    per_host = {"w0": {"compute_s": 0.15}}
    run = run_scheme(cfg, hosts, dict.fromkeys(hosts, "127.0.0.1"), tmp_path, local_starter(tmp_path), 120, per_host)
    assert verify_sums(tmp_path, ws) == []
    rows = {(r["host"], r["iteration"]): r for r in run.rows if r["role"] == "worker"}
    assert len(rows) == 4 * 8
    for (w, t), r in rows.items():
        if t > s:
            assert r["started"] >= rows[(w, t - s - 1)]["sync_done"], (w, t)  # applied its own t - s - 1
            for v in ws:  # every worker had pushed clock t - s - 1
                assert r["started"] >= rows[(v, t - s - 1)]["sync_started"], (w, t, v)
    ahead = [t for t in range(8) if rows[("w1", t)]["started"] < rows[("w0", t)]["started"] - 0.1]
    assert ahead, "the fast workers never ran ahead: that is BSP"
    assert all(rows[("w1", t)]["barrier_s"] > 0.05 for t in range(s + 2, 8))  # and then waited for w0


def test_ssp_needs_a_scheme_that_takes_it_and_no_barrier():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="staleness: ring runs BSP only; SSP is for ps, pf"):
        JobSpec(model="tiny", scheme="ring", staleness=2, barrier=False)
    with pytest.raises(ValidationError, match="barrier: SSP lets workers run up to staleness clocks apart"):
        JobSpec(model="tiny", scheme="pf", staleness=2)
    assert JobSpec(model="tiny", scheme="pf", staleness=4, barrier=False).staleness == 4


def test_a_diverged_model_fails_the_checks_and_updates_decay_as_the_papers_step(tmp_path: Path):
    """NaN or inf anywhere is a problem for both checks (a NaN compares false with any tolerance),
    and with step_decay a worker hands out its gradient at the paper's step eta / sqrt(t)."""
    from engine.host import Compute, calibrated_gradient

    check = tmp_path / "check"
    check.mkdir()
    for w in ("w0", "w1"):
        np.save(check / f"0-{w}-in.npy", np.array([1.0, np.nan], dtype=np.float32))
        np.save(check / f"0-{w}-out.npy", np.array([2.0, np.nan], dtype=np.float32))
        np.save(check / f"residual-{w}.npy", np.zeros(2, dtype=np.float32))
    assert verify_sums(tmp_path, ["w0", "w1"])
    assert any("not all finite" in p for p in verify_dvf(tmp_path, ["w0", "w1"], ["w0", "w1"]))
    cfg = {"mode": "calibrated", "compute_s": 0.0, "seed": 3, "step_decay": True}
    g = Compute(cfg, 1000, 1).gradient(3)  # clock 4: half the gradient
    assert np.allclose(g, calibrated_gradient(3, 3, 1, 1000) / 2)
