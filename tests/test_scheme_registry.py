"""The scheme registry: its facts agree with the schedules, the files and the CLI take their
choices from it, the engine hosts run compiled steps, and the flow model compiles a scheme from
the network's inputs (`testbed simulate --scheme hips` gets every server's address digits)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from schemes import compile_scheme, gst, registry
from schemes.schedule import Op, from_host_part, host_part
from topologies.build import load_network

REPO = Path(__file__).resolve().parent.parent
TOPOLOGIES = REPO / "topologies"


@pytest.mark.parametrize("name", [n for n, s in registry.SCHEMES.items() if s.messages is not None])
@pytest.mark.parametrize("w", [2, 3, 5, 8, 13])
def test_message_count_is_the_compiled_schedules(name: str, w: int):
    ws = [f"w{i}" for i in range(w)]
    regions = {x: (f"r{i // 3}",) for i, x in enumerate(ws)}
    sched = compile_scheme(name, ws, 4099, servers=["p0", "p1", "p2"], regions=regions)
    sends = sum(1 for steps in sched.steps.values() for s in steps if s.op == Op.SEND)
    assert sends == registry.get(name).messages(w, 3)  # type: ignore[misc]


def test_facts_of_the_shipped_schemes():
    tf = registry.get(registry.DEFAULT)
    assert not tf.engine and tf.flow is registry.FlowTraffic.PS_PHASES and registry.Need.PS_HOSTS in tf.needs
    engine = [s for s in registry.SCHEMES.values() if s.engine]
    assert all(s.flow is registry.FlowTraffic.SCHEDULE for s in engine)
    grid = [s.name for s in registry.SCHEMES.values() if s.workers is registry.Workers.ADDRESS_GRID]
    assert grid and all(registry.Need.DIGITS in registry.get(n).needs for n in grid)


def test_why_not_on_the_shipped_topologies():
    files = ("leafspine-2rack.yaml", "bcube-4-1.yaml", "torus-3x3.yaml")
    ls, bcube, torus = (load_network(TOPOLOGIES / f) for f in files)
    assert registry.get("tf-ps").why_not(ls) == "tf-ps needs PS hosts; this leafspine has none"
    assert "address digit" in registry.get("hips").why_not(ls)  # type: ignore[operator]
    assert "no oversubscribed region" in registry.get("rat").why_not(bcube)  # type: ignore[operator]
    assert registry.get("hrs").why_not(torus) is None and registry.get("ring").why_not(ls) is None
    limits = registry.Limits(max_tf_processes=8)
    assert "16 > max_tf_processes 8" in registry.get("tf-ps").why_not(bcube, limits)  # type: ignore[operator]
    assert registry.get("tf-ps").why_not(bcube) is None  # no limit given


def test_gather_takes_every_grid_server_for_hips_and_the_pss_for_ps():
    net = load_network(TOPOLOGIES / "bcube-4-1.yaml")  # s0_0 is the PS, 15 workers
    hips = registry.gather(net, "hips", 4096)
    assert len(hips.workers) == 16 and hips.servers == () and set(hips.digits) == set(hips.workers)
    ps = registry.gather(net, "ps", 4096)
    assert ps.servers == ("s0_0",) and len(ps.workers) == 15 and ps.digits.keys() == set(ps.workers)
    assert registry.gather(net, "ring", 4096).servers == ()


def test_table3_through_the_registry_is_gsts():
    net = load_network(TOPOLOGIES / "torus-3x3.yaml")
    for name in ("hips", "hrs", "hips-ms", "mesh", "ring", "rat"):
        inputs = registry.gather(net, name, 9000, workers=[h.name for h in net.hosts()])
        got = registry.get(name).formula_s(inputs, 36e3, 10.0)
        row = registry.get(name).table3_row
        row = row(inputs, 2) if row else None
        want = None if row is None else gst.table3(row, 3, 2, net.family.rings_both_ways).seconds(36e3, 10.0)
        assert got == want
        assert (want is None) == (name in ("rat", "hips-ms"))  # Torus HiPS is RS per stage


def test_an_engine_host_gets_its_own_compiled_steps():
    net = load_network(TOPOLOGIES / "bcube-4-1.yaml")
    sched = registry.get("hips").compile(registry.gather(net, "hips", 10_007))
    for h in sched.hosts:
        back = from_host_part(host_part(sched, h))
        assert back.steps == {h: sched.steps[h]} and back.chunks == sched.chunks
        assert back.workers == sched.workers and back.servers == sched.servers


def test_choices_come_from_the_registry():
    from pydantic import ValidationError

    from replays.matrix import MatrixSpec
    from testbed.cli import build_parser
    from workloads.experiment import JobSpec

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    (scheme,) = [a for a in sub.choices["simulate"]._actions if a.dest == "scheme"]
    assert list(scheme.choices) == registry.names() and scheme.default is None  # None: the job's own scheme
    assert JobSpec(model="tiny").scheme == registry.DEFAULT
    with pytest.raises(ValidationError, match="unknown scheme 'butterfly'; use one of " + ", ".join(registry.names())):
        JobSpec(model="tiny", scheme="butterfly")
    assert "schemes" in MatrixSpec.model_fields
    with pytest.raises(ValidationError, match="unknown scheme 'butterfly'"):
        MatrixSpec.model_validate(
            {"matrix": "m", "title": "t", "emulated_mbps": 10, "job": {"model": "tiny"}, "topologies": [],
             "schemes": ["ring", "butterfly"]}
        )  # fmt: skip


@pytest.fixture
def bcube_experiment(tmp_path: Path) -> Path:
    exp = tmp_path / "bcube-tiny.yaml"
    exp.write_text(yaml.safe_dump({"topology": str(TOPOLOGIES / "bcube-4-1.yaml"), "job": {"model": "tiny"}}))
    return exp


def test_simulate_hips_on_bcube(bcube_experiment: Path, capsys, monkeypatch):
    """`testbed simulate --scheme hips`: every one of the 16 servers synchronises (the PS s0_0
    too) over its two NICs, as the emulator's HiPS jobs do; the messages are the schedule's."""
    pytest.importorskip("simgrid", reason="python3-simgrid (scripts/setup.sh links it into the venv)")
    from runs.simulate import plan, run
    from testbed.cli import main

    monkeypatch.setenv("PSNET_FLOWMODEL_FACTORS", "none")
    p = plan(bcube_experiment, scheme="hips")
    assert len(p.workers) == 16
    out = run(p, calibrated=False)
    inputs = registry.gather(p.net, "hips", round(p.model_bytes / 4))
    sched = registry.get("hips").compile(inputs)
    assert out.result.messages == sum(1 for st in sched.steps.values() for s in st if s.op == Op.SEND)
    assert out.result.iteration_s >= out.bound_s * (1 - 1e-6) > 0
    assert main(["simulate", str(bcube_experiment), "--scheme", "hips", "--exact"]) == 0
    assert "traffic hips" in capsys.readouterr().out
