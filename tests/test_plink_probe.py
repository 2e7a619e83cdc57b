"""PLink's probes on a real emulated network (runs/probe.py): a 16-host leaf-spine with 4:1
oversubscribed uplinks, bandwidth probed in 15 rounds of disjoint pairs from inside the hosts;
pairs behind a shared uplink measure less than pairs in one rack, the raw probes order PAIA's
triplets as the racks do, and ProbeEmbed's groups follow the racks (AMI > 0.5; random groups score
about 0). Not AMI >= 0.9 here: a cross-rack pair that had an uplink to itself in its round measures like a
rack mate; on 2026-11-27 one run put one host in another rack's group (AMI 0.85), and with a 3-D
embedding (tried, not kept) two of six runs failed the stricter test for a reason not captured.
The algorithm's own AMI >= 0.9 on seeded noise is tests/test_plink_groups.py's."""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from emulation.net import Testbed
from runs import probe
from topologies.build import build_network
from topologies.schema import parse_spec

pytestmark = pytest.mark.root
TESTBED = [sys.executable, "-m", "testbed.cli"]


def test_bandwidth_probes_find_the_racks_of_an_oversubscribed_leaf_spine(tmp_path):
    spec = parse_spec(
        {"kind": "leafspine", "spines": 2, "leaves": 4, "hosts_per_leaf": 4, "oversubscription": 4,
         "worker_mbps": 1000, "scale": 50},
        "plink probe test",
    )  # fmt: skip
    net = build_network(spec)
    hosts = [h.name for h in net.hosts()]
    with Testbed(net) as tb:
        p = probe.probe(tb, hosts, "bandwidth", seconds=1.0)
    assert p.rounds == 15 and len(p.values) == 16 * 15 // 2
    rack = dict(zip(hosts, (e for e, _ in probe.true_places(net, hosts)), strict=True))
    inside = [v for (a, b), v in p.values.items() if rack[a] == rack[b]]
    across = [v for (a, b), v in p.values.items() if rack[a] != rack[b]]
    assert statistics.median(inside) > 1.5 * statistics.median(across), (inside, across)
    g = probe.embed_and_group(p, net, seed=0)
    assert g.paia_raw >= 0.9 and g.ami > 0.5, (g, p.values)
    png = probe.heatmap(p, tmp_path / "probes.png")
    assert png.stat().st_size > 5_000


def test_probing_a_host_the_file_does_not_have_is_one_line_and_builds_nothing():
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run(
        [*TESTBED, "topo", "probe", "topologies/leafspine-rat.yaml", "--hosts", "h0_2", "zz"],
        capture_output=True,
        text=True,
        cwd=root,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "--hosts: no host zz in it; its hosts: h0_2" in r.stderr
