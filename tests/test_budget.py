"""The resource budget (workloads/budget.py), the per-kind address limits and this machine's
measured datapath ceiling (topologies/spec.py): refusals before anything is built."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from replays import figure, matrix, sweep
from testbed import cli
from topologies.build import build_network
from topologies.schema import TopologyError, load_spec, parse_spec
from topologies.spec import (
    FIDELITY_BUDGETS_MBPS,
    ceiling_cache_file,
    datapath_ceiling,
    fidelity_budget_mbps,
    record_ceiling,
)
from workloads import budget
from workloads.experiment import load_experiment

ROOT = Path(__file__).resolve().parent.parent
#: the cache this machine's `testbed doctor` wrote to, before the fixture below hides it
REAL_CACHE = os.environ.get("XDG_CACHE_HOME")
#: a machine like this one, fixed so that the unit tests do not depend on the one they run on
MACHINE = budget.Machine(memory_mb=24 * 1024, cores=2, ceiling_mbps=600.0, ceiling_source="test")


@pytest.fixture(autouse=True)
def no_cached_ceiling(tmp_path, monkeypatch):
    """Each test sees an empty cache unless it records a ceiling itself."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


def write(folder: Path, workers: object, extra: str = "") -> Path:
    (folder / "my.yaml").write_text(f"kind: psnet\ntors: 3\nps: 2\nworkers: {workers}\nworker_mbps: 1000\nscale: 10\n")
    exp = folder / "exp.yaml"
    exp.write_text(f"topology: my.yaml\njob: {{model: tiny, iterations: 2, warmup: 1}}\n{extra}")
    return exp


def bridges() -> set[str] | None:
    if not shutil.which("ovs-vsctl"):
        return None
    r = subprocess.run(["ovs-vsctl", "--timeout=5", "list-br"], capture_output=True, text=True, check=False)
    return set(r.stdout.split()) if r.returncode == 0 else None


# ---------------------------------------------------------------- refusals before bring-up


def test_600_workers_are_refused_in_one_line_before_any_bridge_exists(tmp_path, monkeypatch, capsys):
    exp = write(tmp_path, 600)
    net_names = {n.name for n in build_network(load_spec(tmp_path / "my.yaml")).switches()}
    before = bridges()

    def never(*_a, **_k):
        raise AssertionError("the emulation was started")

    monkeypatch.setattr("emulation.net.Testbed.start", never)
    t0 = time.monotonic()
    rc = cli.main(["run", str(exp)])
    took = time.monotonic() - t0
    err = capsys.readouterr().err.strip()
    assert rc == cli.EXIT_USAGE, err
    assert len(err.splitlines()) == 1
    assert f"{tmp_path / 'my.yaml'}: workers: 602 TF processes need ~" in err
    assert "GB" in err and "--no-budget or budget: off to override" in err
    assert took < 20, took
    after = bridges()
    if before is not None and after is not None:  # no bridge of this network appeared
        assert not (after - before) & net_names


def test_topo_commands_refuse_a_network_too_large_for_memory(tmp_path, monkeypatch, capsys):
    small = budget.Machine(memory_mb=1024, cores=2, ceiling_mbps=600.0, ceiling_source="test")
    monkeypatch.setattr(budget.Machine, "here", classmethod(lambda cls, mtu=1500: small))
    monkeypatch.setattr("emulation.net.Testbed.start", lambda *_a: pytest.fail("the emulation was started"))
    f = tmp_path / "big.yaml"
    f.write_text(f"kind: fattree\nk: 8\nworkers: {[1] * 32}\nworker_mbps: 100\n")
    for cmd in ("check", "up"):
        assert cli.main(["topo", cmd, str(f)]) == cli.EXIT_USAGE
        err = capsys.readouterr().err
        assert f"{f}: k, pods: 128 hosts and 80 switches need ~" in err and "--no-budget to override" in err


def test_the_cores_and_the_rate_are_budgeted_too():
    d = budget.Demand(hosts=40, switches=5, tf_processes=33)
    assert any("33 TF processes on 2 cores" in why for _, why in budget.problems(d, MACHINE))
    fast = budget.Demand(hosts=8, switches=5, offered_mbps=950.0)
    ((what, why),) = budget.problems(fast, MACHINE)
    assert what == "rate" and "needs 2 servers at 950 Mbit/s aggregate (--cluster" in why, why
    faster = budget.Demand(hosts=8, switches=5, offered_mbps=1500.0)
    why = budget.problems(faster, MACHINE)[0][1]
    assert "needs 2 servers (3 to keep each within its faithful ceiling) at 1,500 Mbit/s aggregate" in why, why
    assert "--servers 3)" in why
    assert budget.problems(budget.Demand(hosts=8, switches=5, offered_mbps=850.0), MACHINE) == []  # within the slack


def test_a_scheme_job_needs_far_less_than_a_tf_job(tmp_path):
    spec = parse_spec({"kind": "psnet", "tors": 3, "ps": 2, "workers": 36, "worker_mbps": 1000, "scale": 100})
    net = build_network(spec)
    from workloads.experiment import JobSpec

    tf = budget.job_demand(net, spec, [JobSpec(model="tiny")])
    ring = budget.job_demand(net, spec, [JobSpec(model="resnet50", scheme="ring", compute="calibrated")])
    assert tf.tf_processes == 38 and ring.tf_processes == 0 and ring.engine_processes == 36
    assert ring.memory_mb < tf.memory_mb / 5
    assert budget.problems(tf, MACHINE) and not budget.problems(ring, MACHINE)


def test_the_offered_load_of_a_large_network_is_taken_over_a_spread_of_its_pairs(monkeypatch):
    """64 hosts (4,032 pairs): the mean hop count over 1,000 evenly spread pairs gives the offered
    load of every pair's within 0.5%, and the sample holds every source host."""
    spec = parse_spec(
        {"kind": "leafspine", "spines": 2, "leaves": 4, "hosts_per_leaf": 16, "worker_mbps": 1000, "scale": 250}
    )
    net = build_network(spec)
    pairs = [(a.name, b.name) for a in net.workers() for b in net.workers() if a.name != b.name]
    sample = budget.hop_sample(pairs)
    assert len(sample) == budget.HOP_PAIRS == 1000 and {a for a, _ in sample} == {w.name for w in net.workers()}
    sampled = budget.offered_load_mbps(spec, "ring", net)
    monkeypatch.setattr(budget, "HOP_PAIRS", len(pairs))
    every = budget.offered_load_mbps(spec, "ring", net)
    assert every > 0 and abs(sampled / every - 1) < 0.005, (sampled, every)


# ---------------------------------------------------------------- the override


def test_the_override_lets_a_modestly_over_budget_file_through(tmp_path, monkeypatch):
    exp = write(tmp_path, 30)  # 32 TF processes: ~21 GB, over 80% of 24 GB
    monkeypatch.setattr(budget.Machine, "here", classmethod(lambda cls, mtu=1500: MACHINE))
    e, topo, tp = load_experiment(exp)
    with pytest.raises(budget.BudgetError, match=r"my.yaml: workers: 32 TF processes need ~21 GB"):
        budget.check_experiment(e, topo, exp, tp)
    off = write(tmp_path, 30, "budget: off\n")
    e, topo, tp = load_experiment(off)
    assert e.budget is False
    budget.check_experiment(e, topo, off, tp)  # let through
    args = cli.build_parser().parse_args(["run", str(exp), "--no-budget"])
    assert args.no_budget
    for argv in (["topo", "check", "f"], ["topo", "up", "f"], ["replay", "fig13"], ["matrix"]):
        assert cli.build_parser().parse_args([*argv, "--no-budget"]).no_budget


def test_a_job_naming_its_hosts_is_refused_in_the_experiment_file(tmp_path):
    spec = parse_spec({"kind": "psnet", "tors": 3, "ps": 2, "workers": 60, "worker_mbps": 1000, "scale": 10})
    from workloads.experiment import JobSpec

    net = build_network(spec)
    job = JobSpec(model="tiny", workers=[w.name for w in net.workers()], ps=[p.name for p in net.pss()])
    with pytest.raises(budget.BudgetError, match=r"^exp.yaml: job.workers: 62 TF processes"):
        budget.check_job(spec, "my.yaml", [job], exp_source="exp.yaml", machine=MACHINE)


# ---------------------------------------------------------------- address limits at load time


@pytest.mark.parametrize("emulated", [True, False])
def test_fattree_k_512_is_refused_at_load_time_naming_k(emulated):
    with pytest.raises(TopologyError, match=r"^my.yaml: k: FatTree\(k=512\) overflows its addresses.*k <= 254"):
        parse_spec({"kind": "fattree", "k": 512, "workers": [1], "worker_mbps": 100}, "my.yaml", emulated=emulated)


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"modules": 256, "tors": 2, "ps": 1, "workers": 2}, "modules"),
        ({"tors": 255, "ps": 1, "workers": 255}, "tors"),
        ({"tors": 2, "ps": 250, "standby_ps": 10, "workers": 2}, "standby_ps"),
        ({"tors": 2, "ps": 300, "workers": 2}, "ps"),
        ({"tors": 2, "ps": 1, "workers": 600}, "workers"),
        ({"tors": 2, "ps": 1, "workers": [300, 1]}, "workers"),
    ],
)
def test_psnet_numbers_past_one_octet_are_refused_naming_the_field(fields, field):
    data = {"kind": "psnet", "worker_mbps": 100, **fields}
    with pytest.raises(TopologyError, match=rf"^my.yaml: {field}: .*overflow"):
        parse_spec(data, "my.yaml", emulated=False)


def test_bcube_past_its_addresses_is_refused_even_for_the_flow_model():
    with pytest.raises(TopologyError, match=r"^my.yaml: n, k: BCube\(300,1\) has 90000 servers, past its addresses"):
        parse_spec({"kind": "bcube", "n": 300, "k": 1, "worker_mbps": 100}, "my.yaml", emulated=False)
    parse_spec({"kind": "bcube", "n": 16, "k": 2, "worker_mbps": 100}, "my.yaml", emulated=False)  # 4096: fine


# ---------------------------------------------------------------- the measured ceiling


def test_the_fixed_ceiling_is_the_fallback_and_says_so():
    mbps, source = datapath_ceiling(1500)
    assert mbps == FIDELITY_BUDGETS_MBPS[1500] == fidelity_budget_mbps()
    assert "fixed figure" in source and "testbed doctor" in source


def test_a_measured_ceiling_is_used_over_the_fixed_one():
    record_ceiling(600.0, {"measured": "2026-11-26"})
    assert fidelity_budget_mbps(1500) == 600.0
    _, source = datapath_ceiling(1500)
    assert "measured on this machine 2026-11-26" in source
    jumbo, how = datapath_ceiling(9000)  # scaled by the fixed figures' ratio
    assert jumbo == pytest.approx(600.0 * FIDELITY_BUDGETS_MBPS[9000] / FIDELITY_BUDGETS_MBPS[1500])
    assert "scaled to MTU 9000" in how
    m = budget.Machine.here()
    assert m.ceiling_mbps == 600.0 and "measured" in m.ceiling_source
    refused = budget.problems(budget.Demand(hosts=8, switches=5, offered_mbps=950.0), m)
    assert refused and "600 Mbit/s (measured on this machine 2026-11-26)" in refused[0][1]


def test_the_datapaths_with_and_without_tso_keep_their_own_ceilings(tmp_path, monkeypatch):
    from emulation import tso

    with_tso, without = tmp_path / "with.log", tmp_path / "without.log"
    started = tso.STARTED + b"\n"
    with_tso.write_bytes(b"old run\n" + started + b"x|" + tso.TSO_ON + b"\n")
    without.write_bytes(started + b"x|" + tso.TSO_ON + b"\n" + started)  # restarted since, without it
    record_ceiling(1000.0, {"measured": "2026-11-30", "tso": False})
    mbps, source = datapath_ceiling(1500, tso=True)  # not measured with TSO: the frames' figure, said so
    assert mbps == 1000.0 and "TSO's not measured" in source
    record_ceiling(1800.0, {"measured": "2026-11-30", "tso": True})
    assert datapath_ceiling(1500)[0] == 1000.0 and datapath_ceiling(1500, tso=True)[0] == 1800.0
    assert "userspace TSO" in datapath_ceiling(1500, tso=True)[1]
    monkeypatch.delenv("PSNET_TSO", raising=False)  # on, where the daemon has it
    assert tso.ceiling(1500, with_tso)[0] == 1800.0 and tso.ceiling(1500, without)[0] == 1000.0
    monkeypatch.setenv("PSNET_TSO", "0")
    assert tso.ceiling(1500, with_tso)[0] == 1000.0


def test_a_ceiling_cached_by_an_older_testbed_on_the_tso_datapath_is_not_the_frames_one():
    record_ceiling(1800.0, {"measured": "2026-11-29", "tso": True})
    f = ceiling_cache_file()
    data = json.loads(f.read_text())
    data = {k.removesuffix("|tso"): v for k, v in data.items()}  # the one entry an older testbed kept
    f.write_text(json.dumps(data))
    assert datapath_ceiling(1500)[0] == FIDELITY_BUDGETS_MBPS[1500]


def test_an_unreadable_cache_falls_back_to_the_fixed_ceiling(tmp_path):
    f = tmp_path / "cache" / "psnet-testbed" / "datapath-ceiling.json"
    f.parent.mkdir(parents=True)
    f.write_text("{not json")
    assert datapath_ceiling(1500)[0] == FIDELITY_BUDGETS_MBPS[1500]


# ---------------------------------------------------------------- every shipped file fits here


def test_every_shipped_file_passes_the_budget_on_this_machine(monkeypatch):
    """On this machine's memory and cores, and on its measured ceiling when one is cached (the
    real cache: this test runs on what `testbed doctor` found)."""
    if REAL_CACHE is None:
        monkeypatch.delenv("XDG_CACHE_HOME")
    else:
        monkeypatch.setenv("XDG_CACHE_HOME", REAL_CACHE)
    for f in sorted((ROOT / "topologies").glob("*.yaml")):
        budget.check_topology(load_spec(f), str(f))
    for f in sorted((ROOT / "workloads" / "experiments").glob("*.yaml")):
        exp, topo, tp = load_experiment(f)
        assert exp.budget, f  # none of them needs the override
        budget.check_experiment(exp, topo, f, tp)
    for name in figure.figure_names("emulated"):
        fig = figure.load_figure(name)
        for quick in [False, True] if fig.quick else [False]:
            sweep.check_budget(fig, quick)
    m = matrix.load_matrix(matrix.DEFAULT_FILE)
    for quick in (False, True):
        fig, cells = matrix.plan(m, matrix.DEFAULT_FILE, quick)
        matrix.check_budget(fig, cells, matrix.DEFAULT_FILE)


class FakeTestbed:
    """Stands in for emulation.net.Testbed: the probe's logic without an emulator."""

    timings = {"bring_up_s": 1.0, "lock_wait_s": 0.0}
    tso = False  # the datapath of frames: the probe's own steps

    def __init__(self, _net: object, tso: bool | None = None) -> None:
        pass

    def __enter__(self) -> FakeTestbed:
        return self

    def __exit__(self, *_exc: object) -> None:
        pass

    def set_rate(self, *_a: object) -> float:
        return 0.0


def probe(monkeypatch, wires: list[float]) -> dict:
    """Run the ceiling probe on a fake emulator whose samples hold `wires` in turn."""
    from emulation import ceiling

    samples = iter(wires)
    monkeypatch.setenv("PSNET_TSO", "0")  # the datapath of frames only: one probe
    monkeypatch.setattr(ceiling, "Testbed", FakeTestbed)
    monkeypatch.setattr(ceiling.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    monkeypatch.setattr(
        ceiling,
        "_sample",
        lambda _tb, agg, _pf, _s: {"aggregate_mbps": agg, "wire_mean": (w := next(samples)), "wire_min": w},
    )
    return ceiling.measure_ceiling(queue=False)


def test_the_probe_caches_the_last_step_that_held_and_retries_a_low_sample_once(monkeypatch):
    got = probe(monkeypatch, [0.99, 0.90, 0.98, 0.97, 0.80, 0.70])  # 300, 450 (again), 600, then 750 fails twice
    assert got["mbps"] == 600.0 and not got["at_least"]
    assert datapath_ceiling(1500) == (600.0, "measured on this machine " + got["measured"])


def test_a_probe_that_holds_nothing_caches_nothing(monkeypatch):
    from emulation.ceiling import NotMeasured

    with pytest.raises(NotMeasured, match="nothing cached"):
        probe(monkeypatch, [0.7, 0.6])
    assert datapath_ceiling(1500)[0] == FIDELITY_BUDGETS_MBPS[1500]


def test_a_busy_machine_is_not_measured(monkeypatch):
    from emulation import ceiling

    monkeypatch.setattr(ceiling, "Testbed", FakeTestbed)
    monkeypatch.setattr(ceiling.os, "getloadavg", lambda: (12.0, 8.0, 4.0))
    with pytest.raises(ceiling.NotMeasured, match="busy"):
        ceiling.measure_ceiling(queue=False)
    assert "fixed figure" in datapath_ceiling(1500)[1]
