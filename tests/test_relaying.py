"""Relaying servers' ceiling (emulation/relaying.py): the rate per cable up to which this machine
carried an all-to-all over relaying servers within 10% of its lowest rate's time, kept per machine,
and the verdict of a run whose traffic servers relay above it. The figures fed in are the ones
`scripts/bench_alltoall.sh` measured (results/bench/alltoall.md, 2026-11-29); the routes are the
kinds' own (no emulation needed: which servers a pair crosses is the topology model's answer)."""

from __future__ import annotations

import json

import pytest

from emulation.fidelity import FidelityInputs, judge
from emulation.relaying import ceiling_of, measured, record, relay_load
from replays.provenance import REPO
from schemes import compile_scheme
from schemes.schedule import pair_bytes
from topologies.build import build_network
from topologies.schema import load_spec
from topologies.spec import machine_key

TORUS = {3.125: 1.02, 6.25: 1.16, 12.5: 1.71, 25.0: 2.67}
BCUBE = {3.125: 1.27, 6.25: 1.27, 12.5: 1.58, 25.0: 2.85}
LEAFSPINE = {3.125: 1.07, 6.25: 1.08, 12.5: 1.08, 25.0: 1.08}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "psnet-testbed" / "relay-ceiling.json"


def test_the_ceiling_is_the_last_rate_within_ten_percent_of_the_lowest():
    """BCube's 1.27x at the two lowest rates is the network's (it does not grow with the load);
    12.5 Mbit/s took 1.24x that. Leaf-spine never grew: no rate is judged."""
    t, b, ls = ceiling_of("torus", TORUS), ceiling_of("bcube", BCUBE), ceiling_of("leafspine", LEAFSPINE)
    assert (t.mbps, t.failed_mbps) == (3.125, 6.25) and t.failed_ratio == pytest.approx(1.16 / 1.02)
    assert (b.mbps, b.failed_mbps) == (6.25, 12.5) and b.failed_ratio == pytest.approx(1.58 / 1.27)
    assert (ls.mbps, ls.failed_mbps) == (25.0, None)
    assert t.over(4.0) and not t.over(3.125) and not ls.over(1000.0)


def test_recorded_per_machine_and_merged_by_rate(cache):
    assert measured("torus") is None
    record("torus", "torus-3x3.yaml", {3.125: 1.02, 12.5: 1.71}, "first")
    c = record("torus", "torus-3x3.yaml", {6.25: 1.16, 12.5: 1.60}, "second")  # 12.5 measured again
    assert (c.mbps, c.failed_mbps, c.measured) == (3.125, 6.25, "second")
    data = json.loads(cache.read_text())
    assert data[machine_key()]["torus"]["ratios"] == {"3.125": 1.02, "6.25": 1.16, "12.5": 1.6}
    assert measured("torus") == c
    # another topology of the kind starts the kind's figures afresh
    assert record("torus", "torus-4x4.yaml", {3.125: 1.0}, "third").failed_mbps is None


@pytest.mark.parametrize("damage", ['{"ratios": {}}', '{"ratios": {"fast": 1.0}}', '"torus"', "not json"])
def test_a_damaged_cache_means_not_measured_here(cache, damage):
    """A hand-edited entry (no ratios, a rate that is no number) or a broken file is "not
    measured on this machine", as if the benchmark never ran, never an error in a run's verdict."""
    cache.parent.mkdir(parents=True)
    text = f'{{"{machine_key()}": {{"torus": {damage}}}}}' if damage != "not json" else damage
    cache.write_text(text)
    assert measured("torus") is None


def _net(name: str, scale: float):
    spec = load_spec(REPO / "topologies" / name)
    return build_network(spec.model_copy(update={"scale": scale}))


def test_which_jobs_relay_follows_the_kinds_routes(cache):
    """A mesh on Torus-3x3 or BCube(4,1) crosses servers; HiPS's stages pair neighbours only on
    Torus-3x3 (a ring of 3: every digit difference is one hop) and cross none; a switched network
    has no relaying server at all."""
    record("torus", "torus-3x3.yaml", TORUS, "2026-11-29")
    torus = _net("torus-3x3.yaml", 40)  # 1000 / 40 = 25 Mbit/s per cable
    hosts = [h.name for h in torus.hosts()]
    mesh = relay_load(torus, pair_bytes(compile_scheme("mesh", hosts, 9000)))
    assert mesh is not None and (mesh.kind, mesh.cable_mbps) == ("torus", 25.0) and mesh.over
    neighbours = [(a, b) for a in hosts for b in hosts if a < b and torus.family.relay_hosts(torus, a, b) == (a, b)]
    assert len(neighbours) == 9 * 4 // 2 and relay_load(torus, neighbours) is None
    assert not relay_load(_net("torus-3x3.yaml", 320), pair_bytes(compile_scheme("mesh", hosts, 9000))).over
    bcube = _net("bcube-4-1.yaml", 40)
    b = relay_load(bcube, pair_bytes(compile_scheme("ring", [h.name for h in bcube.hosts()], 16000)))
    assert b is not None and b.ceiling is None and not b.over and "not judged" in b.text  # bcube not measured
    ls = _net("leafspine-rat.yaml", 40)
    assert relay_load(ls, pair_bytes(compile_scheme("mesh", [h.name for h in ls.hosts()], 8000))) is None


def test_a_run_relayed_above_the_ceiling_is_not_faithful_though_nothing_else_shows_it(cache):
    record("torus", "torus-3x3.yaml", TORUS, "2026-11-29")
    torus = _net("torus-3x3.yaml", 40)
    hosts = [h.name for h in torus.hosts()]
    load = relay_load(torus, pair_bytes(compile_scheme("mesh", hosts, 9000)))
    calm = {"ovs_cpu": [0.5] * 10, "idle": [0.6] * 10, "peak_mbps": {"x": 25.0}, "rate_mbps": {"x": 25.0}}
    v = judge(FidelityInputs(**calm, relay=load))
    assert not v.faithful
    assert v.reason.startswith("servers relay its traffic at 25 Mbit/s per cable, above the 3.125")
    assert "at 6.25 Mbit/s: 1.14x" in v.reason and v.relay == v.reason
    ok = judge(FidelityInputs(**calm, relay=relay_load(_net("torus-3x3.yaml", 320), [(hosts[0], hosts[4])])))
    assert ok.faithful and "within the torus's measured ceiling" in ok.relay
    assert judge(FidelityInputs(**calm)).relay == ""


@pytest.mark.root
def test_a_scheme_run_relayed_above_the_ceiling_says_so_in_its_summary(tmp_path, cache, no_leftovers):
    """A real mesh on Torus-3x3 at the file's 25 Mbit/s per cable, with this machine's ceiling as
    bench_alltoall keeps it: the run's own verdict names the relaying and is not faithful."""
    import yaml

    from runs.runner import run_experiment

    record("torus", "torus-3x3.yaml", TORUS, "2026-11-29")
    job = {"model": "tiny", "width": 4.0, "scheme": "mesh", "compute": "calibrated", "compute_s": 0.01}
    exp = tmp_path / "relay-mesh.yaml"
    topology = str(REPO / "topologies" / "torus-3x3.yaml")
    exp.write_text(yaml.safe_dump({"name": "relay-mesh", "topology": topology, "job": job | {"iterations": 2}}))
    s = run_experiment(exp, results=tmp_path / "results", progress=False).summary
    assert s["complete"] and s["gst_s"]["n"] == 2
    f = s["fidelity"]
    assert f["faithful"] is False and f["relay"] and f["relay"] in f["reason"]
    assert f["relay"].startswith("servers relay its traffic at 25 Mbit/s per cable, above the 3.125")
