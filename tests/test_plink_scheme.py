"""PLink's 2LHA as the registered scheme `plink` (schemes/registry.py, schemes/plink.py): compiled
from a topology's racks it sums exactly and crosses each rack boundary once per chunk each way;
its job defaults (4 connections per peer) and own fields reach the job; the three groupings give
what they say; Quicktune's weights follow measured bandwidth; it sums exactly over real TCP with 4
streams; and the flow model probes, groups and simulates it. (Inside Mininet, with the probes
measured over the emulated network: tests/test_plink_runs.py.)"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.host import verify_sums
from engine.processes import local_starter, run_scheme
from schemes import plink as plink_scheme
from schemes import registry
from schemes.schedule import ELEM_BYTES, chain_length, cross_region_bytes, execute, host_bytes
from tests.test_scheme_engine import config
from topologies.build import load_network
from workloads.experiment import ExperimentError, JobSpec, load_experiment

REPO = Path(__file__).resolve().parent.parent
TOPOLOGY = REPO / "topologies" / "leafspine-plink.yaml"
EXPERIMENT = REPO / "workloads" / "experiments" / "leafspine-plink.yaml"
N = 40_003


def _exact(sched) -> bool:
    rng = np.random.default_rng(5)
    grads = {w: rng.standard_normal(sched.n_elems).astype(np.float32) for w in sched.workers}
    want = np.sum([g.astype(np.float64) for g in grads.values()], axis=0)
    out = execute(sched, grads)
    return all(np.allclose(out[w], want, rtol=0, atol=1e-4) for w in sched.workers)


def test_plink_on_the_uneven_leafspine_groups_by_rack_and_sums_exactly():
    """16 workers in racks of 3, 6, 5 and 2 (the shipped file's seeded draw): by default the groups
    are the racks; every chunk crosses each rack boundary once each way (2(C - 1)S with C = 4),
    in a chain of 4 messages, and every worker ends with the exact sum."""
    net = load_network(TOPOLOGY)
    inputs = registry.gather(net, "plink", N)
    sizes = sorted(list(inputs.clusters.values()).count(g) for g in set(inputs.clusters.values()))  # type: ignore[union-attr]
    assert sizes == [2, 3, 5, 6]
    assert inputs.clusters == plink_scheme.racks(net, inputs.workers)
    sched = registry.get("plink").compile(inputs)
    assert len(sched.chunks) == plink_scheme.CHUNKS_PER_HOST * 16
    assert _exact(sched)
    regions = {w: (inputs.clusters[w],) for w in inputs.workers}  # type: ignore[index]
    assert cross_region_bytes(sched, regions) == [2 * 3 * N * ELEM_BYTES]
    assert chain_length(sched) == 4
    assert registry.get("plink").why_not(net) is None
    sent = sum(s for s, _ in host_bytes(sched).values())
    assert sent == 2 * 15 * N * ELEM_BYTES  # 2(n - 1)S in all, as flat aggregation (Table 1)


def test_quicktune_gives_the_well_connected_more_duties():
    """Three groups of two: group c is reached at 2 Mbit/s, every other pair runs at 10, except
    that every pair of host a2 runs at a quarter of that (a throttled NIC). Quicktune's weights: c
    has the least bandwidth out of its group and a2 the least of its own, so c masters fewer
    chunks than b, and a2 fewer than a1."""
    groups = {"a1": "a", "a2": "a", "b1": "b", "b2": "b", "c1": "c", "c2": "c"}
    hosts = list(groups)

    def rate(x: str, y: str) -> float:
        r = 2.0 if "c" in (groups[x], groups[y]) and groups[x] != groups[y] else 10.0
        return r / 4 if "a2" in (x, y) else r

    bw = {(x, y): rate(x, y) for i, x in enumerate(hosts) for y in hosts[i + 1 :]}
    host_w, group_w = plink_scheme.quicktune(groups, bw)
    assert group_w == {"a": 30.0, "b": 33.0, "c": 13.0} and host_w["a2"] < host_w["a1"]
    plan = plink_scheme.masters(hosts, groups, 48, host_w, group_w)
    gm_groups = [groups[gm] for gm, _ in plan]
    assert gm_groups.count("c") < gm_groups.count("a") < gm_groups.count("b")
    lm_a = [lms["a"] for _, lms in plan]
    assert lm_a.count("a2") < lm_a.count("a1")
    sched = plink_scheme.two_level(hosts, N, groups, bandwidth=host_w, group_weight=group_w)
    assert _exact(sched)


def test_plink_job_defaults_and_its_own_fields(tmp_path: Path):
    """PLink's 4 connections per peer and 64 KB segments unless the file says otherwise; another
    scheme's job refuses plink's fields in one line naming the file and field."""
    job = JobSpec(model="tiny", scheme="plink")
    assert (job.streams, job.segment_kb, job.plink_groups, job.autotune) == (4, 64.0, "probe", False)
    assert JobSpec(model="tiny", scheme="plink", streams=2).streams == 2
    ring = JobSpec(model="tiny", scheme="ring")
    assert (ring.streams, ring.plink_groups) == (1, None)
    assert JobSpec.model_validate(ring.model_dump()).streams == 1  # a dump reads back as it was
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"topology: {TOPOLOGY}\njob: {{model: tiny, scheme: ring, plink_groups: racks}}\n")
    with pytest.raises(ExperimentError) as err:
        load_experiment(bad)
    assert str(err.value).count("\n") == 0 and "plink_groups: only plink takes it" in str(err.value)
    exp, _, _ = load_experiment(EXPERIMENT)
    assert exp.main.streams == 4 and exp.main.plink_groups == "probe"


def test_racks_and_balanced_random_groupings():
    from runs import plink_groups

    net = load_network(TOPOLOGY)
    workers = [h.name for h in net.workers()]
    racks = plink_groups.without_probes(JobSpec(model="tiny", scheme="plink", plink_groups="racks"), net, workers)
    assert racks.ami == pytest.approx(1.0) and racks.bandwidth_mbps is None
    job = JobSpec(model="tiny", scheme="plink", plink_groups="random", seed=4)
    rnd = plink_groups.without_probes(job, net, workers)
    assert sorted(len(m) for m in rnd.record()["groups"].values()) == [4, 4, 4, 4]
    assert rnd.clusters == plink_groups.without_probes(job, net, workers).clusters  # seeded
    assert rnd.ami < 0.5


def test_plink_sums_exactly_over_tcp_with_four_streams(tmp_path: Path):
    """Real processes on loopback: 6 workers in 2 groups, 4 connections per peer, 8 KB segments."""
    workers = [f"w{i}" for i in range(6)]
    clusters = {w: f"g{i // 3}" for i, w in enumerate(workers)}
    cfg = config("plink", workers, clusters=clusters, streams=4, segment_bytes=8192)
    run = run_scheme(cfg, workers, dict.fromkeys(workers, "127.0.0.1"), tmp_path, local_starter(tmp_path), 120)
    assert verify_sums(tmp_path, workers) == []
    sched = registry.compile_from_config(cfg)
    counted = sum(sent for sent, _ in host_bytes(sched).values())
    assert all(i["sent_bytes"] == counted for i in run.iterations())


def test_flow_model_probes_group_and_simulate_plink():
    """`testbed simulate` on the shipped experiment: bandwidth probes on the model (pairs in a rack
    at B_w, across racks at most an uplink's 0.4 B_w), ProbeEmbed's groups from them, and the
    2LHA schedule on those groups simulated."""
    from runs import simulate

    p = simulate.plan(EXPERIMENT, ["workers=[4,5,4,3]"])
    out = simulate.run(p)
    g = out.grouped
    assert g is not None and g.probes is not None and g.where == "flow model"
    rack = plink_scheme.racks(p.net, p.workers)
    inside = [v for (a, b), v in g.probes.values.items() if rack[a] == rack[b]]
    across = [v for (a, b), v in g.probes.values.items() if rack[a] != rack[b]]
    assert min(inside) > 2 * max(across)
    assert g.ami == pytest.approx(1.0) and g.paia_raw == pytest.approx(1.0)
    assert out.result.iteration_s > 0 and len(out.traffic) == registry.get("plink").messages(16, 0)  # type: ignore[misc]
