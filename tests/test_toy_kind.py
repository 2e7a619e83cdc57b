"""Adding a topology kind is one module and a registry line: a toy kind defined only here (a star
of hosts on one switch whose role, `hub`, and cable kind, `host-hub`, no other file knows),
registered, built as a Network, routed by the controller's code for every intended pair, drawn by
`testbed topo show`, read by the flow model, and (root) brought up in Mininet with the
controller importing it as a plugin: every pair pings, paths and shaping check out, and a
scheme's engine sums exactly across it."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Self

import pytest
import yaml
from pydantic import Field

from topologies import kinds
from topologies.model import Kind, LinkKind, Network, Node, NodeId, Role, dpid_for, dpid_parts, ip_octets, mac_for
from topologies.schema import load_spec
from topologies.spec import SpecBase

REPO = Path(__file__).resolve().parent.parent

#: the toy's own role and cable kind (defined on import: the controller process imports this
#: module by `kinds.plugin_ref` and must know them too)
HUB = Role.define("hub", color="gold", dpid_byte=0x42)
HOST_HUB = LinkKind.define("host-hub")


class StarSpec(SpecBase):
    """n hosts on one hub switch; the first P are PSs."""

    kind: Literal["star"]
    hosts: int = Field(ge=2, le=20, description="hosts on the hub")
    ps: int = Field(default=0, ge=0, description="P: the first P hosts are PSs")


@dataclass(frozen=True)
class StarId(NodeId):
    """The hub (index 0, 10.9.0.254) or host h<i> (10.9.0.i)."""

    index: int

    @property
    def name(self) -> str:
        return f"h{self.index}" if self.index else "hub"

    @property
    def ip(self) -> str:
        return f"10.9.0.{self.index or 254}"

    @property
    def is_host(self) -> bool:
        return self.index > 0

    @property
    def dpid(self) -> int | None:
        return None if self.index else dpid_for(HUB, 1)

    @classmethod
    def from_name(cls, name: str, spec: SpecBase) -> Self:
        return cls(0 if name == "hub" else int(name.removeprefix("h"))).checked(spec)

    @classmethod
    def from_ip(cls, ip: str, spec: SpecBase) -> Self:
        *_, last = ip_octets(ip)
        return cls(0 if last == 254 else last).checked(spec)

    @classmethod
    def from_dpid(cls, dpid: int, spec: SpecBase) -> Self:
        role, a, _, _ = dpid_parts(dpid)
        if role != HUB or a != 1:
            raise ValueError(f"DPID {dpid:#x} is no star switch")
        return cls(0)

    def checked(self, spec: SpecBase) -> Self:
        if not 0 <= self.index <= spec.hosts:  # type: ignore[attr-defined]
            raise ValueError(f"{self.name} is not a node of this star")
        return self


class StarKind(Kind):
    """Hosts on one switch; every host pair must reach each other."""

    name = "star"
    title = "star"
    spec_class = StarSpec
    node_id = StarId
    all_pairs_intended = True
    failure_links = (HOST_HUB,)
    layers = {HUB: 0, Role.WORKER: 2, Role.PS: 2}

    def build(self, spec: SpecBase) -> Network:
        s: StarSpec = spec  # type: ignore[assignment]
        net = Network(s, self)
        hub = StarId(0)
        net.add_node(Node(hub.name, HUB, hub.ip, hub.dpid))
        for i in range(1, s.hosts + 1):
            h = StarId(i)
            net.add_node(Node(h.name, Role.PS if i <= s.ps else Role.WORKER, h.ip, None, 0, i))
            ln = net.add_link(h.name, hub.name, s.worker_mbps, HOST_HUB)
            net.set_mac(h.name, ln.port_a, mac_for(h.ip))
        return net

    def intended_pairs(self, net: Network) -> list[tuple[str, str]]:
        names = [h.name for h in net.hosts()]
        return [(a, b) for a in names for b in names if a != b]


@pytest.fixture(scope="module", autouse=True)
def registered():
    kind = kinds.register(StarKind())
    yield kind
    kinds.unregister(kind.name)
    Role.undefine(HUB.value)
    LinkKind.undefine(HOST_HUB.value)


@pytest.fixture
def star_file(tmp_path: Path) -> Path:
    f = tmp_path / "star4.yaml"
    f.write_text(yaml.safe_dump({"kind": "star", "hosts": 4, "ps": 1, "worker_mbps": 100, "scale": 10}))
    return f


def test_built_and_routed_through_the_hub(star_file: Path):
    from controller.routing import compute_paths, path_nodes
    from controller.tc import initial_circuits
    from topologies.build import load_network

    net = load_network(star_file)
    assert net.family is kinds.get("star") and net.nodes["hub"].role is HUB and not HUB.is_host
    assert [n.name for n in net.workers()] == ["h2", "h3", "h4"] and [n.name for n in net.pss()] == ["h1"]
    assert {ln.kind for ln in net.links} == {HOST_HUB} and all(ln.mbps == 10 for ln in net.links)
    assert dpid_parts(net.nodes["hub"].dpid) == (HUB, 1, 0, 0)  # type: ignore[arg-type]
    for name in net.nodes:  # node identity both ways
        ident = net.node_id(name)
        assert ident.name == name and StarId.from_ip(ident.ip, net.spec).name == name
    pairs = net.intended_pairs()
    assert len(pairs) == 4 * 3
    paths = compute_paths(net, initial_circuits(net), pairs=pairs)
    assert set(paths) == set(pairs)
    assert all(path_nodes(net, paths[(a, b)]) == [a, "hub", b] for a, b in pairs)


def test_the_cnc_routes_its_role_and_topo_show_draws_it(star_file: Path, tmp_path: Path, capsys):
    from controller.cnc import CNCApp
    from testbed.cli import main

    assert HUB in CNCApp.roles() and Role.ECS not in CNCApp.roles()
    png = tmp_path / "star.png"
    assert main(["topo", "show", str(star_file), "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "hub        hub" in out and "host-hub" in out and png.stat().st_size > 1000


def test_another_process_imports_it_by_its_plugin_ref(star_file: Path, tmp_path: Path):
    """What the controller process does (controller.launch --kind-plugin): import, register, rebuild."""
    ref = kinds.plugin_ref(kinds.get("star"))
    assert ref == "tests.test_toy_kind:StarKind" and kinds.plugin_ref(kinds.get("psnet")) is None
    topo = tmp_path / "topology.yaml"
    topo.write_text(load_spec(star_file).model_dump_json())  # as emulation.net hands it over
    code = (
        "import sys; from topologies import kinds; from topologies.build import load_network; "
        f"kinds.load_plugin({ref!r}); net = load_network(sys.argv[1]); "
        "print(net.kind, len(net.hosts()), net.nodes['hub'].role.color)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(topo)], capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.split() == ["star", "4", "gold"]


def test_the_flow_model_reads_its_fields(star_file: Path, tmp_path: Path, monkeypatch):
    """`testbed simulate` on a star: `--set hosts=6` goes to the topology (the kind's own field),
    and a ring over its workers is its busiest cable, every cable its own host's."""
    pytest.importorskip("simgrid", reason="python3-simgrid (scripts/setup.sh links it into the venv)")
    from runs.simulate import plan, run

    monkeypatch.setenv("PSNET_FLOWMODEL_FACTORS", "none")
    exp = tmp_path / "star-tiny.yaml"
    exp.write_text(yaml.safe_dump({"topology": str(star_file), "job": {"model": "tiny"}}))
    p = plan(exp, ["hosts=6"], scheme="ring")
    assert len(p.net.hosts()) == 6 and len(p.workers) == 5
    out = run(p, calibrated=False)
    assert out.result.iteration_s == pytest.approx(out.bound_s, rel=1e-3)


@pytest.mark.root
def test_up_in_mininet_pings_iperfs_and_syncs(star_file: Path, tmp_path: Path, no_leftovers):
    """The real check: the controller process imports the kind, routes its hub, every pair pings,
    paths, MTU and shaping check as `testbed topo check` does, and a ring sums exactly over it."""
    from emulation.net import Testbed
    from engine.emulated import run_in_testbed
    from engine.host import verify_sums
    from testbed.check import format_rows, run_checks
    from topologies.build import load_network

    os.environ.setdefault("PSNET_LOCK_WAIT_S", "3600")
    net = load_network(star_file)
    hosts = [h.name for h in net.hosts()]
    cfg = {
        "scheme": "ring", "workers": hosts, "servers": [], "regions": None, "n_elems": 50_000,
        "mode": "calibrated", "compute_s": 0.0, "model": "tiny", "width": 1.0, "batch_size": 1, "lr": 0.01,
        "seed": 2, "warmup": 1, "iterations": 2, "check": True,
    }  # fmt: skip
    with Testbed(net) as tb:
        rows = run_checks(tb, iperf_s=3.0)
        run = run_in_testbed(tb, cfg, hosts, tmp_path / "ring", timeout_s=120)
    print(format_rows(rows))
    assert [r for r in rows if r.ok is False] == [], format_rows(rows)
    assert any(r.check == "reachability" and r.ok for r in rows) and any(r.check == "shaping" and r.ok for r in rows)
    assert verify_sums(tmp_path / "ring", hosts) == []
    assert len(run.iterations()) == 2
