"""Adding a scheme is one registry line: a toy scheme defined only here, registered, runs through
the in-memory executor (exact sums), the byte counter on a built network through the controller's
routes, the real TCP engine on loopback, a scheme job's preparation, the matrix's applicability
check and the flow model, without any other file knowing it.

The toy is a star: every worker sends its shard of each chunk to worker 0, which reduces it and
sends the sum back (a PS colocated on one worker, with nothing sharded)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.host import verify_sums
from engine.processes import local_starter, run_scheme
from schemes import registry
from schemes.count import link_loads
from schemes.schedule import (
    ELEM_BYTES,
    Op,
    Schedule,
    ScheduleError,
    chain_length,
    execute,
    host_bytes,
    split,
)
from topologies.build import load_network
from topologies.model import LinkKind

REPO = Path(__file__).resolve().parent.parent
TOPOLOGY = REPO / "topologies" / "leafspine-2rack.yaml"  # 2 leaves x 4 hosts, one spine, 50 Mbit/s
N_ELEMS = 40_001
CHUNKS = 2


def star(inputs: registry.SchemeInputs) -> Schedule:
    """Every worker reduces into worker 0, chunk by chunk; worker 0 copies the sum back."""
    ws = inputs.workers
    if len(ws) < 2:
        raise ScheduleError(f"star: needs at least 2 workers, got {list(ws)}")
    sched = Schedule("star", ws, split(inputs.n_elems, CHUNKS))
    root = ws[0]
    for c in range(CHUNKS):
        for w in ws[1:]:
            sched.transfer(w, root, c, Op.REDUCE)
        for w in ws[1:]:
            sched.transfer(root, w, c, Op.COPY)
    return sched


STAR = registry.SchemeSpec(
    "star", "star", "none (a test's toy)", "every worker reduces into worker 0, which sends the sum back", star,
    messages=lambda w, p: 2 * CHUNKS * (w - 1),
)  # fmt: skip


@pytest.fixture(autouse=True)
def registered():
    registry.register(STAR)
    yield
    registry.unregister(STAR.name)


def test_star_sums_exactly_in_memory():
    ws = [f"w{i}" for i in range(5)]
    sched = registry.get("star").compile(registry.SchemeInputs(tuple(ws), 1003))
    rng = np.random.default_rng(1)
    grads = {w: rng.standard_normal(1003).astype(np.float32) for w in ws}
    want = np.sum(np.stack(list(grads.values())).astype(np.float64), axis=0)
    out = execute(sched, grads)
    for w in ws:
        assert np.max(np.abs(out[w] - want)) / np.max(np.abs(want)) <= 1e-5
    assert chain_length(sched) == 2  # up to the root and back
    sends = sum(1 for steps in sched.steps.values() for s in steps if s.op == Op.SEND)
    assert sends == STAR.messages(5, 0)  # type: ignore[misc]


def test_star_bytes_per_host_and_per_cable_through_the_controllers_routes():
    """On two racks: worker 0 takes (W-1)·S in and sends (W-1)·S out on its own cable, every
    other worker S each way; the four other-rack workers' S cross the leaf-spine cables, each
    message two of them (leaf -> spine -> leaf)."""
    net = load_network(TOPOLOGY)
    spec = registry.get("star")
    inputs = registry.gather(net, spec, N_ELEMS)
    sched = spec.compile(inputs)
    ws = list(inputs.workers)
    assert ws == [n.name for n in net.workers()] and len(ws) == 8
    s = N_ELEMS * ELEM_BYTES
    root = ws[0]
    assert host_bytes(sched) == {w: ((7 * s, 7 * s) if w == root else (s, s)) for w in ws}
    loads = link_loads(net, sched)
    per = {(ld.link.a, ld.link.b, ld.src): ld.nbytes for ld in loads}
    for w in ws:
        (ln,) = net.links_of(w)
        up, down = per[(ln.a, ln.b, w)], per[(ln.a, ln.b, ln.other(w))]
        assert (up, down) == ((7 * s, 7 * s) if w == root else (s, s)), w
    other_rack = [w for w in ws if net.nodes[w].index != net.nodes[root].index]
    spine_bytes = sum(ld.nbytes for ld in loads if ld.link.kind is LinkKind.LEAF_SPINE)
    assert spine_bytes == 2 * 2 * len(other_rack) * s  # push and pull, two cables each
    root_cable = net.links_of(root)[0]
    assert loads[0].link == root_cable  # the busiest cable is worker 0's
    assert spec.expected_sync_s(net, inputs) == pytest.approx(7 * s * 8 / (root_cable.mbps * 1e6))


def test_star_over_real_tcp_on_loopback(tmp_path: Path):
    """The engine's processes get their compiled steps in their configs: none of them knows 'star'."""
    ws = [f"w{i}" for i in range(4)]
    cfg = {
        "scheme": "star", "workers": ws, "servers": [], "regions": None, "n_elems": N_ELEMS, "mode": "calibrated",
        "compute_s": 0.0, "model": "tiny", "width": 1.0, "batch_size": 1, "lr": 0.01, "seed": 5, "warmup": 1,
        "iterations": 2, "check": True,
    }  # fmt: skip
    run = run_scheme(cfg, ws, dict.fromkeys(ws, "127.0.0.1"), tmp_path, local_starter(tmp_path), timeout_s=120)
    assert verify_sums(tmp_path, ws) == []
    counted = sum(sent for sent, _ in host_bytes(registry.compile_from_config(cfg)).values())
    its = run.iterations()
    assert [i["iteration"] for i in its] == [1, 2]
    assert all(i["sent_bytes"] == counted == 2 * 3 * N_ELEMS * ELEM_BYTES for i in its)


def test_star_is_a_job_a_matrix_cell_and_flow_model_traffic(tmp_path: Path):
    """The experiment schema accepts it while registered; a scheme job prepares it on a network,
    the matrix finds it applicable, and the flow model simulates its schedule."""
    pytest.importorskip("simgrid", reason="python3-simgrid (scripts/setup.sh links it into the venv)")
    from controller.tc import initial_circuits
    from models.flow.demands import scheme_traffic
    from models.flow.links import busiest_cable, platform
    from models.flow.routes import flow_routes
    from models.flow.simgrid import sim_config, simulate
    from replays.matrix import why_not
    from runs.engine_job import prepare
    from workloads.experiment import JobSpec

    net = load_network(TOPOLOGY)
    job = JobSpec(model="tiny", scheme="star", compute="calibrated", compute_s=0.0, model_bytes=2e6)
    prep = prepare(job, net, net.spec.scale, "toy")
    assert prep.sched.scheme == "star" and prep.cfg["scheme"] == "star" and len(prep.workers) == 8
    assert why_not(net, job, "star", net.spec.scale, 8) == ""

    ws = [n.name for n in net.workers()]
    traffic = scheme_traffic(net, initial_circuits(net), "star", ws, [], 2e6 / net.spec.scale)
    assert len(traffic) == STAR.messages(8, 0)  # type: ignore[misc]
    routes = flow_routes(net, traffic.pairs())
    cfg, _ = sim_config(calibrated=False)
    result = simulate(platform(net, routes, False), traffic, cfg)
    bound, cable = busiest_cable(traffic, routes, False)
    assert cable.startswith(ws[0]) or cable.endswith(ws[0])
    assert result.iteration_s >= bound * (1 - 1e-6)


def test_unregistered_the_name_is_refused_in_one_line():
    from pydantic import ValidationError

    from workloads.experiment import JobSpec

    registry.unregister("star")
    with pytest.raises(ValidationError, match="unknown scheme 'star'; use one of tf-ps, ps, mesh"):
        JobSpec(model="tiny", scheme="star")
    with pytest.raises(ScheduleError, match="unknown scheme 'star'"):
        registry.get("star")
