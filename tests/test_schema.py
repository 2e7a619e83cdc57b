"""Topology YAML files: the shipped files parse, and every bad file fails in one line.

Each refusal must be one `TopologyError` line `FILE: FIELD: problem; fix`, so the tests check the
file path and the field at the start of the message, not just that something was raised.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from topologies import kinds
from topologies.build import build_network
from topologies.kinds.leafspine import LeafSpineSpec
from topologies.kinds.torus import TorusSpec
from topologies.schema import (
    EMULATOR_CEILING_MBPS,
    FIDELITY_BUDGETS_MBPS,
    BCubeSpec,
    FatTreeSpec,
    PSNetSpec,
    TopologyError,
    fidelity_budget_mbps,
    load_spec,
    parse_spec,
)

TOPOLOGIES = Path(__file__).resolve().parents[1] / "topologies"
SHIPPED = sorted(TOPOLOGIES.glob("*.yaml"))

PSNET = {"kind": "psnet", "tors": 3, "ps": 2, "workers": [2, 2, 2], "worker_mbps": 1000, "scale": 10}
FATTREE = {"kind": "fattree", "k": 4, "pods": 2, "workers": [0, 2, 2, 2], "ps": 2, "worker_mbps": 1000, "scale": 10}
BCUBE = {"kind": "bcube", "n": 4, "k": 1, "worker_mbps": 1000, "scale": 40}
TORUS = {"kind": "torus", "n": 4, "h": 2, "worker_mbps": 1000, "scale": 40}


def write(tmp_path: Path, data: dict | str, name: str = "topo.yaml") -> Path:
    """A topology file in tmp_path from a mapping (dumped as YAML) or from raw text."""
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


def refusal(path: Path) -> str:
    """The message of the TopologyError that loading `path` raises; it must be one line."""
    with pytest.raises(TopologyError) as info:
        load_spec(path)
    msg = str(info.value)
    assert "\n" not in msg, msg
    return msg


def without(data: dict, key: str) -> dict:
    return {k: v for k, v in data.items() if k != key}


# --- the shipped files ---------------------------------------------------------------------


def test_shipped_files_are_the_documented_fifteen():
    assert [p.name for p in SHIPPED] == [
        "bcube-4-1.yaml",
        "fattree-k4.yaml",
        "fattree-standby.yaml",
        "fattree-testbed.yaml",
        "leafspine-2rack.yaml",
        "leafspine-plink.yaml",
        "leafspine-rat.yaml",
        "psnet-1tor.yaml",
        "psnet-2modules.yaml",
        "psnet-4modules-pair.yaml",
        "psnet-4modules.yaml",
        "psnet-standby.yaml",
        "psnet-testbed.yaml",
        "torus-3x3.yaml",
        "torus-4x4.yaml",
    ]


def test_standby_ps_hosts_are_cabled_as_pss_and_not_in_the_job():
    from topologies.build import load_network

    psnet = load_network(TOPOLOGIES / "psnet-standby.yaml")
    assert [n.name for n in psnet.pss()] == ["ps1_1", "ps1_2"]
    assert [n.name for n in psnet.standbys()] == ["ps1_3"]
    assert sorted(ln.kind for ln in psnet.links_of("ps1_3")) == ["ps-tor"] * 3  # a NIC on every ToR
    assert all("ps1_3" not in pair for pair in psnet.intended_pairs())
    fattree = load_network(TOPOLOGIES / "fattree-standby.yaml")
    assert [n.name for n in fattree.standbys()] == ["h2_0_2"]
    assert len(fattree.workers()) == 6 and [n.name for n in fattree.pss()] == ["h0_0_2", "h0_0_3"]


def test_standby_ps_needs_a_free_fattree_host():
    data = {"kind": "fattree", "k": 4, "pods": 2, "workers": [0, 2, 2, 2], "ps": 2, "standby_ps": 1}
    with pytest.raises(TopologyError, match="standby_ps: 1 standby PSs but only 0 hosts"):
        parse_spec({**data, "worker_mbps": 1000}, "x.yaml")


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_file_parses_and_is_named_after_its_file(path):
    spec = load_spec(path)
    assert spec.name == path.stem
    assert spec.kind == path.stem.split("-")[0]


def test_psnet_testbed_file_values():
    spec = load_spec(TOPOLOGIES / "psnet-testbed.yaml")
    assert isinstance(spec, PSNetSpec)
    assert (spec.modules, spec.tors, spec.ps, spec.K) == (1, 3, 2, 1.0)
    assert spec.deployments() == [[2, 2, 2]]
    assert spec.worker_count(1) == 6
    assert spec.w_prime == 6  # default W' = the largest module's worker count
    assert spec.m_d == 6  # default M_d = W'
    assert spec.routing == "balanced"  # PSNet default
    assert spec.emulated(spec.worker_mbps) == 100.0


def test_psnet_count_file_is_balanced_per_module():
    spec = load_spec(TOPOLOGIES / "psnet-2modules.yaml")
    assert spec.deployments() == [None, None]
    assert [spec.worker_count(m) for m in (1, 2)] == [3, 3]
    assert spec.emulated(spec.worker_mbps) == 50.0


def test_fattree_testbed_file_values():
    spec = load_spec(TOPOLOGIES / "fattree-testbed.yaml")
    assert isinstance(spec, FatTreeSpec)
    assert (spec.k, spec.n_pods, spec.ps, spec.oversubscription) == (4, 2, 2, 1.0)
    assert spec.workers == [0, 2, 2, 2]
    assert spec.routing == "balanced"  # the prototype spreads flows as the paper's Eq. 7 analysis (C = 6)


def test_fattree_full_build_has_k_pods_by_default():
    spec = load_spec(TOPOLOGIES / "fattree-k4.yaml")
    assert spec.pods is None
    assert spec.n_pods == 4


def test_bcube_file_values():
    spec = load_spec(TOPOLOGIES / "bcube-4-1.yaml")
    assert isinstance(spec, BCubeSpec)
    assert (spec.n, spec.k, spec.ps, spec.workers) == (4, 1, 1, None)


def test_per_module_deployments_are_kept_per_module():
    spec = parse_spec({**PSNET, "modules": 2, "workers": [[1, 1, 1], [3, 0, 0]]})
    assert spec.deployments() == [[1, 1, 1], [3, 0, 0]]
    assert spec.w_prime == 3


def test_parse_spec_names_a_spec_after_its_source():
    assert parse_spec(dict(PSNET), "dir/my-net.yaml").name == "my-net"
    assert parse_spec({**PSNET, "name": "given"}, "dir/my-net.yaml").name == "given"


# --- one-line refusals ---------------------------------------------------------------------

BAD = {
    "unknown kind": ({**PSNET, "kind": "dragonfly"}, "kind"),
    "misspelled key": ({**PSNET, "worker_mbsp": 100}, "worker_mbsp"),
    "unknown key": ({**FATTREE, "colour": "red"}, "colour"),
    "missing tors": (without(PSNET, "tors"), "tors"),
    "missing worker_mbps": (without(BCUBE, "worker_mbps"), "worker_mbps"),
    "missing k": (without(FATTREE, "k"), "k"),
    "R=0": ({**PSNET, "tors": 0}, "tors"),
    "scale 0": ({**PSNET, "scale": 0}, "scale"),
    "negative delay": ({**PSNET, "delay_ms": -1}, "delay_ms"),
    "unknown routing": ({**PSNET, "routing": "balance"}, "routing"),
    "MTU below IPv6's minimum": ({**PSNET, "mtu": 576}, "mtu"),
    "MTU above jumbo": ({**FATTREE, "mtu": 9216}, "mtu"),
    "odd k": ({**FATTREE, "k": 5}, "k"),
    "more pods than k": ({**FATTREE, "pods": 5}, "pods"),
    "more workers than ECS ports": ({**PSNET, "ecs_ports": 4}, "workers"),
    "deployment shorter than tors": ({**PSNET, "workers": [3, 3]}, "workers"),
    "deployment longer than tors": ({**PSNET, "workers": [2, 2, 1, 1]}, "workers"),
    "per-module lists != modules": ({**PSNET, "modules": 2, "workers": [[2, 2, 2]] * 3}, "workers"),
    "negative count in deployment": ({**PSNET, "workers": [3, -1, 2]}, "workers"),
    "deployment above tor_downlinks": ({**PSNET, "workers": [3, 2, 1], "tor_downlinks": 2}, "workers"),
    "fattree ToR count list too short": ({**FATTREE, "workers": [0, 2, 2]}, "workers"),
    "fattree count above k/2": ({**FATTREE, "workers": [0, 3, 2, 2]}, "workers"),
    "fattree negative count": ({**FATTREE, "workers": [0, -1, 2, 2]}, "workers"),
    "too few hosts left for PSs": ({**FATTREE, "workers": [1, 2, 2, 2]}, "ps"),
    "modules 3 with tors 3": ({**PSNET, "modules": 3}, "modules"),
    "H x R odd": ({**PSNET, "modules": 5}, "modules"),
    "bcube above 256 servers": ({**BCUBE, "n": 8, "k": 2}, "n, k"),
    "bcube PSs + workers above servers": ({**BCUBE, "ps": 2, "workers": 15}, "workers"),
    "torus above 256 servers": ({**TORUS, "n": 7, "h": 3}, "n, h"),
    "torus ring of 2": ({**TORUS, "n": 2}, "n"),
    "torus of 4 dimensions": ({**TORUS, "n": 3, "h": 4}, "h"),
    "torus PSs + workers above servers": ({**TORUS, "ps": 2, "workers": 15}, "workers"),
    "workers of wrong type": ({**PSNET, "workers": "six"}, "workers"),
}


@pytest.mark.parametrize(("data", "field"), BAD.values(), ids=BAD.keys())
def test_bad_file_is_one_line_naming_file_and_field(tmp_path, data, field):
    path = write(tmp_path, data)
    msg = refusal(path)
    assert re.match(rf"{re.escape(str(path))}: {re.escape(field)}[.:]", msg), msg


def test_missing_field_message_says_so(tmp_path):
    path = write(tmp_path, without(PSNET, "ps"))
    assert refusal(path) == f"{path}: ps: required field is missing; add it (see topologies/README.md)"


def test_misspelled_key_is_reported_before_the_missing_one(tmp_path):
    path = write(tmp_path, {**without(PSNET, "worker_mbps"), "worker_mbsp": 100})
    assert refusal(path) == f"{path}: worker_mbsp: unknown field; did you mean worker_mbps?"


def test_unknown_field_without_a_close_name_points_to_the_readme(tmp_path):
    path = write(tmp_path, {**FATTREE, "colour": "red"})
    assert refusal(path) == f"{path}: colour: unknown field; see topologies/README.md for the fields"


def test_unknown_kind_lists_the_valid_kinds(tmp_path):
    msg = refusal(write(tmp_path, {**PSNET, "kind": "dragonfly"}))
    assert msg.endswith("unknown kind 'dragonfly'; use one of bcube, fattree, leafspine, psnet, torus")


def test_odd_k_suggests_the_next_even_k(tmp_path):
    assert refusal(write(tmp_path, {**FATTREE, "k": 5})).endswith("got 5; use 6")


def test_ecs_port_refusal_names_ecs_ports(tmp_path):
    msg = refusal(write(tmp_path, {**PSNET, "ecs_ports": 4}))
    assert "6 workers" in msg and "4 ports (ecs_ports)" in msg


def test_tor_downlinks_refusal_names_tor_downlinks(tmp_path):
    msg = refusal(write(tmp_path, {**PSNET, "workers": [3, 2, 1], "tor_downlinks": 2}))
    assert "puts 3 workers on one ToR" in msg and "2 ECS-facing ports (tor_downlinks)" in msg


def test_modules_refusal_suggests_valid_counts(tmp_path):
    msg = refusal(write(tmp_path, {**PSNET, "modules": 3}))
    assert "H > R=3" in msg and msg.endswith("use modules 1, 2 or >= 4")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("kind: psnet\n\ttors: 3\n", "line 2"),
        ("kind: psnet\ntors: [1, 2\n", "line 3"),
        ("kind: psnet: x\n", "line 1"),
        ("kind: psnet\n---\nkind: bcube\n", "line 2"),
        ("kind: !!python/object:os.system x\n", "line 1"),
    ],
    ids=["tab", "unclosed list", "colon in value", "two documents", "python tag"],
)
def test_malformed_yaml_is_one_line_with_its_line(tmp_path, text, where):
    path = write(tmp_path, text)
    msg = refusal(path)
    assert msg.startswith(f"{path}: {where}: not valid YAML ("), msg


@pytest.mark.parametrize(("text", "got"), [("", "NoneType"), ("- 1\n- 2\n", "list"), ("psnet\n", "str")])
def test_non_mapping_is_refused_at_top_level(tmp_path, text, got):
    path = write(tmp_path, text)
    assert refusal(path) == f"{path}: (top level): expected a mapping of fields, got {got}"


def test_unreadable_file_names_the_path(tmp_path):
    path = tmp_path / "absent.yaml"
    msg = refusal(path)
    assert msg.startswith(f"{path}: cannot read the file")


# --- the emulator ceiling ------------------------------------------------------------------

CEILING = {
    "worker_mbps": ({**BCUBE, "worker_mbps": 5000, "scale": 1}, "worker_mbps", 5),
    "K": ({**PSNET, "K": 2.5, "worker_mbps": 1000, "scale": 1, "uplink_mbps": 100}, "K", 2.5),
    "uplink_mbps": ({**PSNET, "uplink_mbps": 30000, "scale": 10}, "uplink_mbps", 30),
    "inter_module_mbps": ({**PSNET, "modules": 2, "inter_module_mbps": 8000, "scale": 4}, "inter_module_mbps", 8),
    "ps_mbps": ({**FATTREE, "ps_mbps": 4000, "scale": 2}, "ps_mbps", 4),
}


@pytest.mark.parametrize(("data", "field", "need"), CEILING.values(), ids=CEILING.keys())
def test_rate_above_ceiling_names_field_and_the_scale_that_fixes_it(tmp_path, data, field, need):
    path = write(tmp_path, data)
    msg = refusal(path)
    assert msg.startswith(f"{path}: {field}: "), msg
    assert f"above the emulator's ceiling of {EMULATOR_CEILING_MBPS:g}" in msg
    assert msg.endswith(f"set scale >= {need:g}"), msg
    # and the suggested scale is accepted
    fixed = load_spec(write(tmp_path, {**data, "scale": need}, "fixed.yaml"))
    assert fixed.scale == need


def test_rate_at_the_ceiling_is_accepted():
    spec = parse_spec({**BCUBE, "worker_mbps": 1000, "scale": 1})
    assert spec.emulated(spec.worker_mbps) == EMULATOR_CEILING_MBPS


def test_suggested_scale_is_accepted_for_4100_mbps(tmp_path):
    msg = refusal(write(tmp_path, {**BCUBE, "worker_mbps": 4100, "scale": 1}))
    suggested = float(msg.rsplit(">= ", 1)[1])
    assert suggested == 4.1
    assert parse_spec({**BCUBE, "worker_mbps": 4100, "scale": suggested}).scale == 4.1


def test_default_uplink_rate_is_held_to_the_ceiling():
    data = {**PSNET, "worker_mbps": 1000, "scale": 1}  # uplink default: R x B_w = 3000 Mbit/s
    try:
        net = build_network(parse_spec(data, "x.yaml"))
    except TopologyError as err:
        assert "scale >= 3" in str(err)
    else:
        assert max(ln.mbps for ln in net.links) <= EMULATOR_CEILING_MBPS


# --- holes in the PSNet/BCube checks -------------------------------------------------------


def test_negative_worker_count_is_refused(tmp_path):
    path = write(tmp_path, {**PSNET, "workers": -2})
    assert refusal(path).startswith(f"{path}: workers: ")


def test_balanced_count_above_tor_downlinks_is_refused(tmp_path):
    path = write(tmp_path, {**PSNET, "workers": 6, "tor_downlinks": 1})
    msg = refusal(path)
    assert msg.startswith(f"{path}: workers: ") and "tor_downlinks" in msg


def test_bcube_too_many_pss_names_ps(tmp_path):
    path = write(tmp_path, {**BCUBE, "n": 2, "k": 0, "ps": 3})
    msg = refusal(path)
    assert msg.startswith(f"{path}: ps: ") and "None" not in msg


# --- the README documents the schema --------------------------------------------------------


def test_readme_documents_every_field_and_shipped_file():
    readme = (TOPOLOGIES / "README.md").read_text()
    for cls in (PSNetSpec, FatTreeSpec, BCubeSpec, LeafSpineSpec, TorusSpec):
        for field in cls.model_fields:
            assert f"`{field}`" in readme, f"{cls.__name__}.{field} is not in topologies/README.md"
    for path in SHIPPED:
        assert f"`{path.name}`" in readme, f"{path.name} is not in topologies/README.md"


def test_each_file_validates_into_its_kinds_own_spec():
    """parse_spec picks the spec class of the kind module the file names (one home per kind)."""
    for data in (PSNET, FATTREE, BCUBE, TORUS):
        spec = parse_spec(data, "x.yaml")
        assert type(spec) is kinds.get(data["kind"]).spec_class
        assert type(spec) in (PSNetSpec, FatTreeSpec, BCubeSpec, TorusSpec)  # still importable from topologies.schema


def test_the_fidelity_budget_follows_the_mtu(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # nothing measured: the fixed figures
    assert fidelity_budget_mbps() == fidelity_budget_mbps(1500) == FIDELITY_BUDGETS_MBPS[1500]
    assert fidelity_budget_mbps(9000) == FIDELITY_BUDGETS_MBPS[9000] > FIDELITY_BUDGETS_MBPS[1500]
    assert fidelity_budget_mbps(4000) == FIDELITY_BUDGETS_MBPS[1500]  # not measured: the next lower MTU's
    assert load_spec(write(tmp_path, {**PSNET, "mtu": 9000})).mtu == 9000
