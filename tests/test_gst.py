"""HiPS Table 3's GST formulas (HiPS paper §4; docs/schemes.md): the paper's quoted reductions, the
derived table, and agreement with the bytes our schedules put on the busiest cable."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from controller.routing import compute_paths, path_links, taken_path
from controller.tc import initial_circuits
from schemes import compile_scheme
from schemes.count import link_loads
from schemes.gst import grid_shape, reduction, table3
from schemes.registry import SchemeInputs, gather, get
from schemes.schedule import pair_bytes
from topologies.build import build_network, load_network
from topologies.schema import parse_spec


@pytest.mark.parametrize("both_ways", [False, True], ids=["bcube", "torus"])
def test_the_papers_reductions(both_ways):
    """HiPS vs PSS/MS and vs RS: 37.5% and 50.0% at (4,2); 73.3% and 75.0% at (16,4)."""
    assert round(100 * reduction(4, 2, "ms", both_ways), 1) == 37.5
    assert round(100 * reduction(4, 2, "rs", both_ways), 1) == 50.0
    assert round(100 * reduction(16, 4, "ms", both_ways), 1) == 73.3
    assert round(100 * reduction(16, 4, "rs", both_ways), 1) == 75.0


def test_vs_rs_is_one_minus_one_over_h():
    for n, h in [(3, 2), (4, 2), (8, 3), (16, 4)]:
        assert reduction(n, h, "rs") == pytest.approx(1 - 1 / h)


@pytest.mark.parametrize(
    ("n", "h", "bcube", "torus"),
    [  # (HiPS, MS, RS) in W/B, the derived table of docs/schemes.md
        (3, 2, (0.889, 1.333, 1.778), (0.444, 0.667, 0.889)),
        (4, 2, (0.9375, 1.5, 1.875), (0.469, 0.75, 0.9375)),
        (8, 3, (0.665, 1.75, 1.996), (0.333, 0.875, 0.998)),
        (16, 4, (0.500, 1.875, 2.000), (0.250, 0.9375, 1.000)),
    ],
)
def test_derived_table(n, h, bcube, torus):
    for both_ways, want in ((False, bcube), (True, torus)):
        got = tuple(table3(row, n, h, both_ways).units for row in ("hips", "ms", "rs"))
        assert got == pytest.approx(want, abs=6e-4)
    assert table3("ms", n, h, True).lower_bound and not table3("ms", n, h, False).lower_bound


def test_seconds_scale_with_w_over_b():
    # a worked example: W = 40 MB, B = 100 Mbit/s -> W/B = 3.2 s; BCube(4,1) HiPS ~3.0 s
    assert table3("hips", 4, 2, False).seconds(40e6, 100) == pytest.approx(3.0)
    assert table3("rs", 4, 2, True).seconds(40e6, 100) == pytest.approx(3.0)


def row_of(scheme: str, stages, parallel: bool, levels: int, both_ways: bool):
    """The Table 3 row the registry gives a scheme job, or None."""
    spec = get(scheme)
    inputs = SchemeInputs((), 0, hips_stages=stages, hips_parallel=parallel, both_ways=both_ways)
    return None if spec.table3_row is None else spec.table3_row(inputs, levels)


def test_which_schemes_have_a_row():
    assert row_of("mesh", None, True, 2, False) == "ms" and row_of("ring", None, True, 2, True) == "rs"
    assert row_of("hips", None, True, 2, True) == "hips" and row_of("hips-ms", None, True, 2, False) == "hips"
    assert row_of("hips-ms", None, True, 2, True) is None  # the paper's Torus HiPS is RS per stage
    assert row_of("hips", ["ps", "rs"], True, 2, False) is None
    assert row_of("hrs", None, False, 2, False) is None  # one process: not Table 3's HiPS
    assert row_of("rat", None, True, 2, False) is None and row_of("ps", None, True, 2, False) is None


def test_grid_shape_needs_a_full_even_grid():
    assert grid_shape({f"s{i}{j}": (i, j) for i in range(4) for j in range(4)}) == (4, 2)
    assert grid_shape({f"s{i}{j}": (i, j) for i in range(4) for j in range(4) if (i, j) != (0, 0)}) is None
    assert grid_shape({f"s{i}{j}": (i, j) for i in range(2) for j in range(3)}) is None
    assert grid_shape({}) is None


@pytest.mark.parametrize(
    ("spec", "scheme"),
    [
        ({"kind": "bcube", "n": 4, "k": 1}, "hrs"),
        ({"kind": "bcube", "n": 4, "k": 1}, "hips-ms"),
        ({"kind": "bcube", "n": 3, "k": 1}, "hrs"),
        ({"kind": "torus", "n": 4, "h": 2}, "hrs"),
        ({"kind": "torus", "n": 3, "h": 2}, "hrs"),
        ({"kind": "bcube", "n": 4, "k": 1}, "ring"),
    ],
)
def test_the_formula_is_what_the_schedule_puts_on_the_busiest_cable(spec, scheme):
    """HiPS and RS are tight: the busiest cable's bytes over its rate equal the formula."""
    net = build_network(parse_spec({**spec, "worker_mbps": 1000, "scale": 40}))
    hosts = [h.name for h in net.hosts()]
    digits = net.family.address_digits(net)
    both = net.family.rings_both_ways
    n_elems = 2 * 16 * 4 * 9 * 1000  # whole chunks for every shape here
    sched = compile_scheme(scheme, hosts, n_elems, digits=digits, both_ways=both)
    busiest = link_loads(net, sched)[0].seconds()
    want = get(scheme).formula_s(gather(net, scheme, n_elems, workers=hosts), n_elems * 4, net.links[0].mbps)
    assert busiest == pytest.approx(want, rel=1e-3)


@pytest.mark.parametrize(
    "topology",
    ["bcube-4-1.yaml", "torus-4x4.yaml", "fattree-testbed.yaml", "psnet-2modules.yaml", "leafspine-rat.yaml"],
)
def test_the_counted_cables_are_the_emulators(topology):
    """schemes.count counts bytes on the routes the emulator installs (every pair routed, intended
    first): under least-loaded routing, routing only a schedule's own pairs once chose other
    paths, and BCube's host-order ring read half the busiest cable its packets met."""
    net = load_network(Path(__file__).resolve().parent.parent / "topologies" / topology)
    hosts = [h.name for h in net.hosts()]
    sched = compile_scheme("ring", hosts, 16 * 1000)
    paths = compute_paths(net, initial_circuits(net))  # what emulation.net.Testbed installs
    want: Counter = Counter()
    for (src, dst), n in pair_bytes(sched).items():
        node = src
        for ln in path_links(net, taken_path(net, paths, src, dst)):
            want[(ln.key, node)] += n
            node = ln.other(node)
    got = {(x.link.key, x.src): x.nbytes for x in link_loads(net, sched)}
    assert got == dict(want)
    if net.spec.kind == "bcube":  # BCubeRouting: no cable carries two hops of the ring
        assert max(want.values()) == max(pair_bytes(sched).values())
