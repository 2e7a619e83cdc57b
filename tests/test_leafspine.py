"""Leaf-spine in emulation (root): built, routed, reached and shaped like the other kinds, and the
bytes schemes put on the leaf uplinks are the ones their schedules count (RAT the fewest)."""

from __future__ import annotations

from pathlib import Path

import pytest

from emulation import measure
from emulation.net import Testbed
from engine.emulated import run_in_testbed
from schemes import compile_scheme
from schemes.schedule import cross_region_bytes
from testbed.check import run_checks
from topologies.model import LinkKind

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def tb():
    with Testbed("topologies/leafspine-rat.yaml") as t:
        yield t


def test_topo_check_passes(tb: Testbed):
    rows = run_checks(tb, iperf_s=3)
    verdicts = [r for r in rows if r.ok is not None]
    assert any(r.check == "reachability" and r.subject == "56 intended pairs" for r in verdicts)
    assert [r for r in verdicts if not r.ok] == []
    assert sum(r.check == "path" for r in verdicts) == 4  # one sampled pair per leaf


def test_an_uplink_is_shaped_to_n_b_over_o_s(tb: Testbed):
    """A cross-leaf flow is held to one spine cable: 2 x 50 / (2 x 2) = 25 Mbit/s emulated."""
    samples = measure.rates_measured_twice_if_slow(tb, [("h0_2", "h1_2")], 3, 0.90 * 25.0)
    (r,), _ = samples[-1]
    assert r.configured_mbps == pytest.approx(25.0)
    assert 0.90 <= r.ratio <= 1.0, measure.describe_samples(samples)


def _uplink_tx(tb: Testbed) -> int:
    """Bytes every leaf sent up to the spines (the switch-side counters of the leaf ports)."""
    total = 0
    for ln in tb.model.links:
        if ln.kind == LinkKind.LEAF_SPINE:
            total += int(Path(f"/sys/class/net/{ln.intf(ln.a)}/statistics/tx_bytes").read_text())
    return total


def test_rat_puts_the_fewest_bytes_on_the_uplinks(tb: Testbed, tmp_path: Path):
    workers = [w.name for w in tb.model.workers()]
    regions = tb.model.family.regions(tb.model)
    n = 200_000
    up = {}
    for scheme in ("mesh", "ring", "rat"):
        cfg = {"scheme": scheme, "workers": workers, "regions": regions, "n_elems": n, "mode": "calibrated",
               "compute_s": 0.0, "seed": 1, "warmup": 0, "iterations": 1, "check": False}  # fmt: skip
        before = _uplink_tx(tb)
        run_in_testbed(tb, cfg, workers, tmp_path / scheme, timeout_s=180)
        up[scheme] = _uplink_tx(tb) - before
        counted = cross_region_bytes(compile_scheme(scheme, workers, n, regions=regions), regions)[0]
        assert counted <= up[scheme] <= counted * 1.08 + 100_000, (scheme, counted, up[scheme])
    assert up["rat"] < up["ring"] < up["mesh"], up
