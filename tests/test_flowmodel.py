"""The SimGrid flow model: analytic cases it must reproduce exactly, the controller's paths, the
prototypes against the paper's model, a 1k-host FatTree, and the scale benchmark's quick path.
Unit level: SimGrid runs in a subprocess per simulation, nothing is emulated."""

from __future__ import annotations

import glob
import json
import math
from pathlib import Path

import pytest

pytest.importorskip("simgrid", reason="python3-simgrid (scripts/setup.sh links it into the venv)")

from controller.routing import compute_paths
from controller.tc import initial_circuits
from models.flow import simgrid
from models.flow.demands import Traffic, from_schedule
from models.flow.routes import IndexedNetwork, fast_paths
from models.flow.simgrid import Platform, sim_config, simulate
from runs.simulate import format_outcome, plan, run
from schemes import compile_scheme
from topologies.build import build_network, load_network
from topologies.schema import TopologyError

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = REPO / "workloads" / "experiments"
TOPOLOGIES = REPO / "topologies"
MBIT = 1e6 / 8


@pytest.fixture(autouse=True)
def exact_max_min(monkeypatch):
    """The analytic cases here are exact max-min's, whatever calibration the repository stores."""
    monkeypatch.setenv("PSNET_FLOWMODEL_FACTORS", "none")


def star(rates_mbps: dict[str, float], latency_s: float = 0.0) -> tuple[Platform, dict]:
    """Every host on its own split-duplex cable to one switch; a route is up one, down the other."""
    names = list(rates_mbps)
    links = [(f"l-{h}", rates_mbps[h] * MBIT, latency_s) for h in names]
    idx = {h: i for i, h in enumerate(names)}
    routes = {(a, b): [(idx[a], True), (idx[b], False)] for a in names for b in names if a != b}
    return Platform(links, routes), idx


def test_lazy_bug_case_every_flow_takes_08s():
    """The probe's case that SimGrid's default Lazy optimisation gets wrong (10 of 12 flows at
    0.4 s): 2 PSs on 1 Gbit/s each send 5 MB to 6 workers on 100 Mbit/s, latency > 0. A worker's
    cable carries two 5 MB flows at 50 Mbit/s each: 0.8 s (+ the two cables' latency)."""
    lat = 1e-4
    rates = {"ps0": 1000.0, "ps1": 1000.0, **{f"w{i}": 100.0 for i in range(6)}}
    plat, _ = star(rates, lat)
    t = Traffic("bug", phases=["pull"])
    for p in ("ps0", "ps1"):
        for i in range(6):
            t.add(p, f"w{i}", 5e6)
    res = simulate(plat, t)
    assert res.config["network/optim"] == "Full"
    assert len(res.finish_s) == 12
    for f in res.finish_s:
        assert f == pytest.approx(0.8 + 2 * lat, rel=1e-4), res.finish_s


@pytest.mark.parametrize("w", [4, 6])
def test_ring_on_a_star_takes_2_w_minus_1_over_w_s_over_b(w):
    """Chunked ring allreduce, each host on a B cable to one switch: 2(W-1)/W x S/B."""
    ws = [f"h{i}" for i in range(w)]
    plat, _ = star(dict.fromkeys(ws, 100.0))
    n_elems = 1_200_000  # S = 4.8 MB
    traffic = from_schedule(compile_scheme("ring", ws, n_elems))
    assert len(traffic) == 2 * w * (w - 1)
    res = simulate(plat, traffic)
    s_bytes = n_elems * 4
    assert res.iteration_s == pytest.approx(2 * (w - 1) / w * s_bytes / (100 * MBIT), rel=1e-6)


def test_ps_push_then_pull_matches_eq5_terms():
    """6 workers push S/2 to each of 2 PSs, each PS behind one 100 Mbit/s cable shared by the six
    flows: push = pull = 6 x (S/2) / B = 2.4 s for S = 10 MB (Eq. 5's (S/P) / (B_s / W))."""
    rates = {"ps0": 100.0, "ps1": 100.0, **{f"w{i}": 1000.0 for i in range(6)}}
    plat, _ = star(rates)
    from models.flow.demands import tf_ps

    res = simulate(plat, tf_ps([f"w{i}" for i in range(6)], ["ps0", "ps1"], 10e6))
    assert res.phase_s == pytest.approx([2.4, 2.4], rel=1e-6)


@pytest.mark.parametrize("path", sorted(glob.glob(str(REPO / "topologies" / "*.yaml"))))
@pytest.mark.parametrize("strategy", ["hashed", "balanced"])
def test_fast_paths_are_the_controllers(path, strategy):
    """The flow model's per-destination routing returns compute_paths' result, pair for pair."""
    net = build_network(load_network(path).spec.model_copy(update={"routing": strategy}))
    circuits = initial_circuits(net)
    ref = compute_paths(net, circuits)
    assert fast_paths(IndexedNetwork.of(net), circuits, list(ref)) == ref


@pytest.mark.parametrize("path", ["fattree-testbed.yaml", "fattree-k4.yaml", "psnet-testbed.yaml", "bcube-4-1.yaml"])
def test_least_loaded_is_the_first_of_the_least_loaded_candidates(path):
    """`balanced`'s choice without listing candidates equals min((max load, summed load)) over every
    candidate in the controller's order, under seeded random loads full of ties (few values)."""
    import random
    from collections import Counter

    from controller.routing import _edges, routing_graph
    from models.flow.routes import _Router
    from topologies.model import Role

    net = IndexedNetwork.of(build_network(load_network(REPO / "topologies" / path).spec))
    g = routing_graph(net, initial_circuits(net))
    router = _Router(g, {n.name for n in net.nodes.values() if (not n.is_host or n.relay) and n.role != Role.ECS})
    rng = random.Random(7)
    load = Counter({(u, attrs["ports"][u]): rng.randint(0, 3) for u, v, attrs in g.edges(data=True)})
    load.update({(v, attrs["ports"][v]): rng.randint(0, 3) for u, v, attrs in g.edges(data=True)})
    hosts = [h.name for h in net.hosts()]
    checked = 0
    for src in hosts:
        for dst in hosts:
            if src != dst and router.count(src, dst) > 1:
                best = min(
                    router.all(src, dst),
                    key=lambda p: (max(load[e] for e in _edges(p)), sum(load[e] for e in _edges(p))),
                )
                assert router.least_loaded(src, dst, load) == best, (src, dst)
                checked += 1
    assert checked >= 2  # PSNet: only pairs whose circuits give a choice


def test_simulate_predicts_a_job_that_names_its_ps_hosts_on_those_hosts():
    """psnet-4modules-resnet50 names two of the H = 4 PSNet's four PSs: `testbed simulate` prints
    Eq. 6 for the job on its own hosts (as `testbed run` records it), not a refusal."""
    out = run(plan(EXPERIMENTS / "psnet-4modules-resnet50.yaml"))
    assert out.prediction["equation"] == "Eq. 6" and out.plan.pss == ["ps1_1", "ps2_1"]
    assert out.prediction["t_push_s"] > 0 and out.result.phase_s[0] >= out.prediction["t_push_s"] * 0.99


@pytest.mark.parametrize("name", ["psnet-vgg16.yaml", "fattree-vgg16.yaml"])
def test_prototypes_agree_with_the_paper_model(name):
    """One bottleneck with equal flows (the PS NIC): the model is exact there, so within 1%."""
    out = run(plan(EXPERIMENTS / name))
    pred = out.prediction
    assert pred["equation"].startswith("Eq. 5" if "psnet" in name else "Eq. 7")
    assert out.result.phase_s[0] == pytest.approx(pred["t_push_s"], rel=0.01)
    assert out.result.phase_s[1] == pytest.approx(pred["t_pull_s"], rel=0.01)
    assert out.routes.exact


def test_simulate_command_prints_simulated_and_model(capsys):
    from testbed.cli import main

    assert main(["simulate", str(EXPERIMENTS / "fattree-vgg16.yaml"), "--set", "oversubscription=2"]) == 0
    text = capsys.readouterr().out
    assert "iteration simulated" in text and "BCT model (network)" in text and "Eq. 7" in text


def test_exact_ignores_a_stored_calibration_the_default_applies(capsys, monkeypatch, tmp_path):
    from testbed.cli import main

    factors = tmp_path / "factors.json"
    factors.write_text(json.dumps({"network/model": "LV08", "network/bandwidth-factor": "0.5"}))
    monkeypatch.setenv("PSNET_FLOWMODEL_FACTORS", str(factors))
    exp = str(EXPERIMENTS / "fattree-vgg16.yaml")
    assert main(["simulate", exp, "--exact"]) == 0
    exact = capsys.readouterr().out
    assert "simulated / model 1.000" in exact and "CM02, exact max-min" in exact
    assert main(["simulate", exp]) == 0
    assert "simulated / model 2.000" in capsys.readouterr().out  # every rate halved by the stored factor


def test_set_overrides_and_their_errors():
    p = plan(EXPERIMENTS / "psnet-vgg16.yaml", ["worker_mbps=500", "batch_size=2", "compress=2"])
    assert p.net.spec.worker_mbps == 500 and p.job.batch_size == 2 and p.compress == 2
    with pytest.raises(TopologyError, match="no topology, job or experiment field 'bogus'"):
        plan(EXPERIMENTS / "psnet-vgg16.yaml", ["bogus=1"])
    with pytest.raises(TopologyError, match="unknown field; did you mean worker_mbps"):
        plan(EXPERIMENTS / "psnet-vgg16.yaml", ["topology.worker_mbsp=1"])
    with pytest.raises(TopologyError, match="--scheme nope"):
        plan(EXPERIMENTS / "psnet-vgg16.yaml", scheme="nope")


def test_scheme_on_the_fattree_prototype_is_its_busiest_cable():
    """A ring on the FatTree prototype: each step's flows share nothing but their own cables,
    so the iteration is the busiest cable's bytes over its rate."""
    out = run(plan(EXPERIMENTS / "fattree-vgg16.yaml", scheme="ring"))
    assert out.result.iteration_s == pytest.approx(out.bound_s, rel=1e-3)
    assert "traffic ring" in format_outcome(out)


@pytest.mark.parametrize("path", sorted(EXPERIMENTS.glob("*.yaml")), ids=lambda p: p.stem)
def test_simulate_means_the_job_run_runs(path):
    """`testbed simulate EXP` takes every shipped experiment file and simulates the job `testbed
    run` runs: its scheme, on the hosts the run takes (a scheme job's own or its scheme's
    defaults, TF's PS job's roles), with the scheme's messages (a schedule's, or TF's 2 x W x P)."""
    from runs.engine_job import job_hosts
    from schemes.registry import FlowTraffic
    from schemes.registry import get as get_scheme
    from workloads.experiment import load_experiment

    exp, _, _ = load_experiment(path)
    job = exp.all_jobs[0]
    out = run(plan(path))
    p = out.plan
    assert p.scheme == job.scheme and f"traffic {job.scheme}" in format_outcome(out)
    if get_scheme(job.scheme).flow is FlowTraffic.PS_PHASES:
        assert out.result.messages == 2 * len(p.workers) * len(p.pss)
    else:  # the schedule `testbed run` compiles for this job: its sends are the simulated messages
        from runs.engine_job import prepare
        from schemes.schedule import Op

        assert (p.workers, p.pss) == tuple(job_hosts(job, p.net, str(path)))
        ran = prepare(job.model_copy(update={"compute_s": 0.0}), p.net, p.net.spec.scale * exp.compress, str(path))
        sends = [ran.sched.chunks[s.chunk].nbytes for st in ran.sched.steps.values() for s in st if s.op == Op.SEND]
        assert out.result.messages == len(sends) == len(out.traffic)
        assert sum(out.traffic.nbytes) == pytest.approx(sum(sends), rel=1e-3)
    assert out.result.iteration_s >= out.bound_s * (1 - 1e-6)  # nothing beats the busiest cable


def test_fattree_1k_hosts_iteration():
    """k = 16 (1024 hosts), 4 PSs: only the used pairs are routed; the PS cables are the
    bottleneck with equal flows, so push and pull are each the busiest cable's time."""
    k, half = 16, 8
    workers = [half] * (k * half - 1) + [half - 4]
    sets = [f"k={k}", "pods=null", f"workers={workers}", "ps=4", "routing=hashed"]
    out = run(plan(EXPERIMENTS / "fattree-vgg16.yaml", sets))
    assert len(out.plan.net.hosts()) == 1024 and not out.routes.exact
    assert out.result.messages == 2 * 1020 * 4
    assert out.result.iteration_s == pytest.approx(out.bound_s, rel=1e-3)
    assert out.prediction["note"].startswith("skipped")


def test_factors_file_is_the_calibration_hook(tmp_path, monkeypatch):
    f = tmp_path / "factors.json"
    f.write_text(json.dumps({"network/model": "LV08", "network/bandwidth-factor": 0.97, "network/optim": "Lazy"}))
    monkeypatch.setenv("PSNET_FLOWMODEL_FACTORS", str(f))
    cfg, note = sim_config()
    assert cfg["network/model"] == "LV08" and cfg["network/bandwidth-factor"] == "0.97"
    assert cfg["network/optim"] == "Full" and str(f) in note
    f.write_text("[1")
    with pytest.raises(ValueError, match="not a JSON object"):
        sim_config()
    monkeypatch.setenv("PSNET_FLOWMODEL_FACTORS", str(tmp_path / "absent.json"))
    assert sim_config() == (simgrid.BASE_CONFIG, "CM02, uncalibrated")
    monkeypatch.setenv("PSNET_FLOWMODEL_FACTORS", "none")
    assert sim_config() == (simgrid.BASE_CONFIG, "CM02, uncalibrated")


def test_scale_benchmark_quick_path(tmp_path):
    """The quick path on BCube (both schemes) and PSNet's TF PS job at 100 hosts. PSNet's 100-host
    ring (160,740 messages) is left to the benchmark: it alone took 117 s of the test's 190 s."""
    from benchmarks import scale

    assert scale.main(["--quick", "--kinds", "bcube", "--out", str(tmp_path / "bcube")]) == 0
    assert scale.main(["--quick", "--kinds", "psnet", "--schemes", "tf-ps", "--out", str(tmp_path)]) == 0
    points = {}
    for out in (tmp_path / "bcube", tmp_path):
        points |= {(p["kind"], p["scheme"]): p for p in json.loads((out / "scale.json").read_text())["points"]}
    assert set(points) == {("bcube", "tf-ps"), ("bcube", "ring"), ("psnet", "tf-ps")}
    for p in points.values():
        assert p["hosts"] == 100 and p["sim_rss_mb"] > 0
        assert p["iteration_s"] == pytest.approx(p["bound_s"], rel=1e-3) or p["iteration_s"] > p["bound_s"]
        assert not math.isnan(p["iteration_s"])
    assert "| psnet | 100 | tf-ps |" in (tmp_path / "scale.md").read_text()


@pytest.mark.parametrize(
    ("topology", "scheme"),
    [("leafspine-2rack.yaml", "ring"), ("fattree-testbed.yaml", "mesh"), ("bcube-4-1.yaml", "rat"),
     ("psnet-testbed.yaml", "mesh")],
)  # fmt: skip
def test_a_runs_cable_load_is_the_flow_models(topology, scheme):
    """The cable load a scheme run reports (schemes.count, from the controller's routes on the
    topology) is the one the flow model's load term multiplies (models.flow.simgrid, from its
    platform): the same bytes on the same veth cables, whichever side computes it. On PSNet the
    ECS-ToR cables are patch ports, which cost the datapath no pass: they are not in it."""
    from models.flow.links import platform
    from models.flow.routes import flow_routes
    from schemes.count import cable_load_gbps, link_loads

    net = load_network(TOPOLOGIES / topology)
    hosts = [h.name for h in net.hosts()][:8]
    sched = compile_scheme(scheme, hosts, 250_000, regions=net.family.regions(net))
    traffic = from_schedule(sched)
    plat = platform(net, flow_routes(net, traffic.pairs()), False)
    loads = link_loads(net, sched)
    ours = cable_load_gbps(net, loads)
    assert ours > 0 and ours == pytest.approx(simgrid.cable_load_gbps(plat, traffic), rel=1e-9)
    patch = [ld for ld in loads if net.is_patch(ld.link)]
    assert bool(patch) == bool(plat.patch) == topology.startswith("psnet")
    every = sum(ld.nbytes for ld in loads) * 8 / loads[0].seconds() / 1e9
    assert ours == pytest.approx(every - sum(ld.nbytes for ld in patch) * 8 / loads[0].seconds() / 1e9)
