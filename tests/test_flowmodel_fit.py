"""The flow model's calibration: the fit recovers known terms and chooses its grid value, the
held-out split never lets a topology's points into its own fit, and every term the calibration
can set does in SimGrid what it says (headers, LV08's RTT-weighted sharing by a latency per
cable, by weight-S and by a standing queue, the datapath's capacity, the message latency, the
fan-in factor). Unit level: SimGrid runs in a subprocess, nothing is emulated."""

from __future__ import annotations

import json
import math

import pytest

from models.flow.fit import (
    HEADERS,
    MAX_MIN,
    Fit,
    Form,
    Point,
    Sharing,
    candidate_forms,
    fit,
    grid_of,
    held_out,
    select_held_out,
    settings,
    write_factors,
)

LEGACY = Form("legacy", legacy=True, rate=True, fan_in=True)


def topology(p: Point) -> str:
    return p.name.split()[0]


def synthetic(b: float, c: float) -> list[Point]:
    """Points whose emulated times are exactly base / b + slope x c (the legacy form)."""
    terms = [(1.0, 2), (2.0, 2), (0.5, 14), (2.0, 14), (1.0, 30), (0.8, 1)]
    return [Point(f"t{i % 3}.yaml p{i}", base / b + slope * c, base, slope) for i, (base, slope) in enumerate(terms)]


def test_legacy_form_recovers_known_factors():
    f = fit(synthetic(0.93, 0.004), LEGACY)
    assert f.bandwidth_factor == pytest.approx(0.93, rel=1e-3)
    assert f.message_latency_s == pytest.approx(0.004, rel=1e-2)
    assert f.rms_log_error < 1e-4 and f.points == 6 and f.legacy


def test_fit_chooses_the_grid_value_the_times_follow_and_its_rate_factor():
    """Two simulated grid values; the emulated times are the second's, 10% slower: the fit takes
    that value and b = 1 / 1.1, the first value's best b leaves an error."""
    a, z = Sharing(message_s=1e-4), Sharing(message_s=1e-4, hop_s=1e-4)
    pts = [
        Point(f"t{i % 3}.yaml p{i}", 1.1 * tz, 1.0, sims={a.label: ta, z.label: tz})
        for i, (ta, tz) in enumerate([(1.0, 1.2), (2.0, 2.1), (1.5, 1.9), (0.7, 0.7), (3.0, 3.3), (1.0, 1.05)])
    ]
    f = fit(pts, Form("grid", (a, z), rate=True))
    assert f.sharing == z and f.bandwidth_factor == pytest.approx(1 / 1.1, rel=1e-3) and f.rms_log_error < 1e-6
    assert fit(pts, Form("first", (a,), rate=True)).rms_log_error > 0.05


def test_fit_skips_points_without_an_emulated_time_and_refuses_none():
    pts = [*synthetic(1.0, 0.0), Point("failed", float("nan"), 1.0, 2)]
    assert fit(pts, LEGACY).points == 6
    with pytest.raises(ValueError, match="no point"):
        fit([Point("failed", float("nan"), 1.0, 2)], LEGACY)


def test_held_out_scores_each_topology_with_a_fit_that_never_saw_it():
    """Leave one topology out: where every topology follows the same factor, the held-out errors
    are nil; a topology the others do not describe (25% slower) shows its own error held out, and
    the fit it was scored with is the one on the other two alone (exact there)."""
    form = Form("b", (MAX_MIN,), rate=True)
    same = [Point(f"t{t}.yaml {i}", base / 0.8, base) for t in range(3) for i, base in enumerate((1.0, 2.0))]
    cv = held_out(same, topology, form)
    assert cv.groups == 3 and len(cv.errors) == 6 and sorted(cv.fits) == ["t0.yaml", "t1.yaml", "t2.yaml"]
    assert cv.median_abs < 1e-9 and cv.within(0.05) == 1.0 and cv.meets()
    odd = [*same[:4], *(Point(p.name, p.emulated_s * 1.25, p.base_s) for p in same[4:])]
    cv = held_out(odd, topology, form)
    assert cv.fits["t2.yaml"].bandwidth_factor == pytest.approx(0.8)  # fitted on t0, t1 only
    assert cv.errors["t2.yaml 0"] == pytest.approx(1 / 1.25 - 1)
    assert cv.within(0.05) == pytest.approx(0.0) and not cv.meets()  # t0 and t1 held out see a fit pulled by t2
    assert fit(odd, form).max_abs_error < abs(cv.errors["t2.yaml 0"])  # fitted on all: looks better than it is
    with pytest.raises(ValueError, match="two topologies"):
        held_out(same[:2], topology, form)


def test_select_held_out_chooses_the_form_without_the_left_out_topology():
    """Two forms: exact max-min, and a fitted rate. t0..t2 run 20% slower than max-min, t3 at it:
    left out, t3 is scored with the rate form the others chose (20% off); each of the others with
    the rate form chosen on the rest, its b pulled by t3 (the geometric mean: 1.2^(2/3) of 1.2)."""
    forms = [Form("max-min", (MAX_MIN,)), Form("b", (MAX_MIN,), rate=True)]
    pts = [
        Point(f"t{t}.yaml {i}", base * (1.2 if t < 3 else 1.0), base) for t in range(4) for i, base in enumerate((1, 2))
    ]
    nested = select_held_out(pts, topology, forms)
    assert nested.forms == {f"t{t}.yaml": "b" for t in range(4)}
    assert nested.errors["t3.yaml 0"] == pytest.approx(0.2)
    assert nested.errors["t0.yaml 0"] == pytest.approx(1.2 ** (-1 / 3) - 1)


def test_the_candidate_forms_and_their_grid():
    forms = candidate_forms()
    names = [f.name for f in forms]
    assert names[0] == "exact max-min" and len(names) == len(set(names))
    grid = grid_of(forms)
    assert grid[0] == MAX_MIN and HEADERS in grid and len(grid) == len({s.label for s in grid})
    assert all(f.legacy or set(f.grid) <= set(grid) for f in forms)


def test_factors_file_round_trips_through_the_engine(tmp_path, monkeypatch):
    """What write_factors writes is what sim_config reads: the settings, not the record."""
    pytest.importorskip("simgrid", reason="python3-simgrid (scripts/setup.sh links it into the venv)")
    from models.flow.simgrid import HOP_LATENCY, MESSAGE_LATENCY, TCP_HEADERS, sim_config

    path = tmp_path / "f.json"
    f = Fit(0.9, 0.003, 0.01, 0.02, 6, hop_latency_s=1e-4, headers=True)
    data = write_factors(path, f, {"date": "today", "machine": "here"}, synthetic(0.9, 0.003))
    assert json.loads(path.read_text()) == data and len(data["points"]) == 6
    monkeypatch.setenv("PSNET_FLOWMODEL_FACTORS", str(path))
    cfg, note = sim_config()
    assert cfg == settings(f) and str(path) in note
    assert (cfg[MESSAGE_LATENCY], cfg[HOP_LATENCY], cfg[TCP_HEADERS]) == ("0.003", "0.0001", "1")


# ------------------------------------------------------------------ each term, on real SimGrid runs

MBIT = 1e6 / 8


def _sg():
    pytest.importorskip("simgrid", reason="python3-simgrid (scripts/setup.sh links it into the venv)")


def two_racks():
    """Two leaves of two hosts under one spine, every cable 100 Mbit/s: a1 -> b0 is in-rack (2
    cables), b1 -> b0 is too, a0 -> b0 crosses the spine (4 cables)."""
    from models.flow.simgrid import Platform

    names = ["a0", "a1", "b0", "b1", "la", "lb"]  # host cables, then the leaves' uplinks
    links = [(f"l-{n}", 100 * MBIT, 0.0) for n in names]
    i = {n: k for k, n in enumerate(names)}
    rack = {"a0": "a", "a1": "a", "b0": "b", "b1": "b"}

    def route(x: str, y: str) -> list[tuple[int, bool]]:
        if rack[x] == rack[y]:
            return [(i[x], True), (i[y], False)]
        return [(i[x], True), (i["l" + rack[x]], True), (i["l" + rack[y]], False), (i[y], False)]

    return Platform(links, {(x, y): route(x, y) for x in rack for y in rack if x != y})


def incast():
    """b1 (in-rack) and a0 (across the spine) each send 12.5 MB to b0 at once."""
    from models.flow.demands import Traffic

    t = Traffic("incast")
    t.add("b1", "b0", 12.5e6)
    t.add("a0", "b0", 12.5e6)
    return t


def finishes(sharing: Sharing, **kw) -> tuple[float, float]:
    from models.flow.simgrid import simulate

    res = simulate(two_racks(), incast(), sharing.settings(**kw))
    return res.finish_s[0], res.finish_s[1]


def test_headers_charge_every_payload_byte_its_wire_share():
    """One 12.5 MB flow on a 100 Mbit/s cable: 1 s of payload, 1514 / 1448 s on the wire; at MTU
    9000, (9014) / (8948)."""
    _sg()
    from dataclasses import replace

    from emulation.wire import header_factor
    from models.flow.demands import Traffic
    from models.flow.simgrid import simulate

    t = Traffic("one")
    t.add("a1", "a0", 12.5e6)
    plat = two_racks()
    assert simulate(plat, t, MAX_MIN.settings()).iteration_s == pytest.approx(1.0, rel=1e-6)
    assert simulate(plat, t, HEADERS.settings()).iteration_s == pytest.approx(1514 / 1448, rel=1e-6)
    jumbo = simulate(replace(plat, mtu=9000), t, HEADERS.settings()).iteration_s
    assert jumbo == pytest.approx(1 / header_factor(9000), rel=1e-6) and header_factor(9000) == 8948 / 9014


def test_exact_max_min_shares_the_receiver_equally():
    """Without any latency LV08's weighting has nothing to weigh: both flows get 50 Mbit/s, 2 s."""
    _sg()
    assert finishes(MAX_MIN) == pytest.approx((2.0, 2.0), rel=1e-6)
    assert finishes(Sharing(weight_s=1000, headers=False)) == pytest.approx((2.0, 2.0), rel=1e-6)


@pytest.mark.parametrize(
    "sharing",
    [
        Sharing(hop_s=1e-4, headers=False),  # penalties 2 x 0.1 ms and 4 x 0.1 ms: shares 2:1
        Sharing(message_s=1e-6, weight_s=1000, headers=False),  # weight-S / rate per cable, the same 2:1
        Sharing(queue_bytes=1250, headers=False),  # 1250 B standing per cable: 0.1 ms each, 2:1
    ],
    ids=["latency per cable", "weight-S", "standing queue"],
)
def test_a_longer_path_gets_a_smaller_share(sharing):
    """LV08's RTT-weighted sharing: the flow over 4 cables gets half the in-rack flow's share of
    b0's cable (2:1), so the in-rack flow ends at 1.5 s (12.5 MB at 2/3 of 100 Mbit/s) and the
    other at 2 s (the cable is never idle); exact max-min ends both at 2 s."""
    _sg()
    near, far = finishes(sharing)
    assert near == pytest.approx(1.5, abs=2e-3) and far == pytest.approx(2.0, abs=2e-3)


def test_a_message_latency_dilutes_the_weighting_and_delays_each_message():
    """c adds to every flow's penalty alike: with 0.2 ms per message beside 0.1 ms per cable the
    shares are (0.2 + 0.4) : (0.2 + 0.2) = 3:2, and each message starts c + its cables later."""
    _sg()
    near, far = finishes(Sharing(message_s=2e-4, hop_s=1e-4, headers=False))
    # the in-rack flow at 3/5 of 12.5 MB/s: 12.5 MB in 1/0.6 s, after its 0.4 ms of latency
    assert near == pytest.approx(1 / 0.6 + 4e-4, abs=2e-3) and far == pytest.approx(2.0 + 6e-4, abs=2e-3)


def test_the_datapath_caps_bytes_times_cables():
    """A datapath of 600 Mbit/s x cables: 12.5 MB over 2 cables and 12.5 MB over 4 take 75 MB of
    cable-bytes; at 75 MB/s the pair needs 1 s, so b0's cable (2 s) still binds. At 150 Mbit/s x
    cables (18.75 MB/s) the datapath binds: 75 MB of cable-bytes take 4 s (max-min on it: equal
    rates, 3.125 MB/s each)."""
    _sg()
    assert finishes(Sharing(datapath_bps=600 * MBIT, headers=False)) == pytest.approx((2.0, 2.0), rel=1e-6)
    assert finishes(Sharing(datapath_bps=150 * MBIT, headers=False)) == pytest.approx((4.0, 4.0), rel=1e-6)


@pytest.mark.parametrize("w", [3, 5])
def test_calibrated_ring_pays_the_message_latency_per_dependent_step(w):
    """Ring allreduce on a star: 2(W-1)/W x S/(b B) + 2(W-1) x c, the legacy form's model exactly."""
    _sg()
    from models.flow.demands import from_schedule
    from models.flow.simgrid import Platform, simulate
    from schemes import compile_scheme

    ws = [f"h{i}" for i in range(w)]
    links = [(f"l-{h}", 100 * MBIT, 0.0) for h in ws]
    routes = {(a, b): [(i, True), (j, False)] for i, a in enumerate(ws) for j, b in enumerate(ws) if a != b}
    n_elems = 1_500_000  # 6 MB
    traffic = from_schedule(compile_scheme("ring", ws, n_elems))
    b, c = 0.9, 0.005
    f = Fit(b, c, 0.0, 0.0, 0, legacy=True)
    res = simulate(Platform(links, routes), traffic, settings(f))
    base = 2 * (w - 1) / w * n_elems * 4 / (100 * MBIT)
    assert res.iteration_s == pytest.approx(f.model_s(Point("ring", 0, base, 2 * (w - 1))), rel=1e-6)


def test_fit_recovers_a_fan_in_factor_and_held_out_judges_it():
    """Points slowed by (1 + k ln F) on top of b and c: the fit finds k; with no fan-in above 1 in
    the points there is nothing to fit it on, and it stays 0."""
    terms = [(1.0, 2, 1), (2.0, 2, 7), (0.5, 14, 1), (2.0, 14, 4), (1.0, 30, 15), (0.8, 1, 2)]
    b, c, k = 0.9, 0.003, 0.2
    pts = [
        Point(f"t{i % 3}.yaml p{i}", (base / b + slope * c) * (1 + k * math.log(f)), base, slope, f)
        for i, (base, slope, f) in enumerate(terms)
    ]
    got = fit(pts, LEGACY)
    assert (got.bandwidth_factor, got.message_latency_s, got.fan_in_factor) == pytest.approx((b, c, k), rel=1e-2)
    no_k = Form("no k", legacy=True, rate=True)
    assert fit(pts, no_k).rms_log_error > 0.05 > got.rms_log_error
    assert held_out(pts, topology, LEGACY).median_abs < 1e-2
    assert fit(synthetic(0.9, 0.003), LEGACY).fan_in_factor == 0.0


def test_the_fan_in_factor_multiplies_the_simulated_time():
    """Three hosts pushing into one on a star (fan-in 3) and a two-host exchange (fan-in 1): the
    setting multiplies the first by 1 + k ln 3 and leaves the second alone."""
    _sg()
    from models.flow.demands import Traffic
    from models.flow.simgrid import BASE_CONFIG, FAN_IN_FACTOR, Platform, simulate

    hosts = ["a", "b", "c", "d"]
    links = [(f"l-{h}", 1e6, 0.0) for h in hosts]
    routes = {(x, y): [(i, True), (j, False)] for i, x in enumerate(hosts) for j, y in enumerate(hosts) if x != y}
    incast3, pair = Traffic("incast"), Traffic("pair")
    for h in ("a", "b", "c"):
        incast3.add(h, "d", 1e6)
    pair.add("a", "b", 1e6)
    for t, f in ((incast3, 3), (pair, 1)):
        assert t.fan_in() == f
        mine = Platform(links, {pr: r for pr, r in routes.items() if set(pr) <= set(t.hosts())})
        plain = simulate(mine, t, dict(BASE_CONFIG)).iteration_s
        scaled = simulate(mine, t, {**BASE_CONFIG, FAN_IN_FACTOR: "0.25"}).iteration_s
        assert scaled == pytest.approx(plain * (1 + 0.25 * math.log(f)), rel=1e-9)


def test_simulate_many_forks_the_same_simulations():
    """The calibration's batch (forked processes) gives what one spawned simulation gives."""
    _sg()
    from models.flow.simgrid import simulate, simulate_many

    jobs = [(two_racks(), incast(), s.settings()) for s in (MAX_MIN, Sharing(hop_s=1e-4, headers=False))]
    got = simulate_many(jobs, 2)
    assert [r.finish_s for r in got] == [simulate(*job).finish_s for job in jobs]


def test_a_simulation_whose_process_dies_or_hangs_fails_alone(caplog):
    """SimGrid aborts its process on a bad setting (here an unknown network model: exit code -6):
    that simulation is None with a log line saying so, and the batch's other simulations still
    give their results (multiprocessing.Pool waited forever there). One past the timeout is
    killed and is None too."""
    _sg()
    from models.flow.simgrid import BASE_CONFIG, simulate_many

    good = (two_racks(), incast(), MAX_MIN.settings())
    bad = (two_racks(), incast(), {**BASE_CONFIG, "network/model": "NoSuchModel"})
    got = simulate_many([good, bad, good], 2)
    assert got[1] is None and got[0] is not None and got[0].iteration_s == got[2].iteration_s > 0
    assert "its process died (exit code -6)" in caplog.text
    assert simulate_many([good], 1, timeout_s=0.0) == [None]
    assert "no result in 0 s: killed" in caplog.text


def test_fit_recovers_the_emulators_load_factor_and_held_out_judges_it():
    """Points slowed by (1 + a L) on top of the headers and a fan-in term: the form with the load
    term finds a (and k); without it the fit is worse; held out, each topology's a comes from the
    others and still predicts it."""
    a, k = 0.12, 0.05
    terms = [(1.0, 1, 0.3), (2.0, 4, 1.5), (0.5, 1, 3.0), (2.0, 7, 0.8), (1.0, 15, 4.2), (0.8, 2, 2.0)]
    pts = [
        Point(f"t{i % 3}.yaml p{i}", h * (1 + k * math.log(f)) * (1 + a * load), h / 1.05, 0.0, f,
              {HEADERS.label: h}, load)
        for i, (h, f, load) in enumerate(terms)
    ]  # fmt: skip
    with_load = Form("headers, k, load a", (HEADERS,), fan_in=True, load=True)
    got = fit(pts, with_load)
    assert (got.load_factor, got.fan_in_factor) == pytest.approx((a, k), rel=1e-3)
    assert got.model_s(pts[4]) == pytest.approx(pts[4].emulated_s, rel=1e-6)
    assert fit(pts, Form("headers, k", (HEADERS,), fan_in=True)).rms_log_error > 0.05 > got.rms_log_error
    assert held_out(pts, topology, with_load).median_abs < 1e-3
    names = [f.name for f in candidate_forms()]
    assert "headers, load a" in names and "headers, message latency, k, load a" in names
    # points with no load known: nothing to fit a on
    assert fit([Point(p.name, p.emulated_s, p.base_s, 0.0, p.fan_in, p.sims) for p in pts], with_load).load_factor == 0


def test_fit_recovers_the_load_terms_shape_and_the_settings_carry_it():
    """Points slowed by (1 + a L^q P^j) on top of the headers: the shaped load form finds a, q and
    j; the plain load form (a L) cannot fit them; the settings it writes give SimGrid's multiplier
    (models.flow.simgrid.load_multiplier) the same time as the fit's own formula."""
    from models.flow.simgrid import LOAD_FACTOR, load_multiplier, load_shape

    a, q, j = 0.034, 1.6, 0.5
    terms = [
        (1.0, 0.3, 2),
        (2.0, 1.5, 12),
        (0.5, 3.0, 56),
        (2.0, 0.8, 6),
        (1.0, 2.2, 24),
        (0.8, 1.0, 80),
        (1.5, 2.6, 8),
    ]
    pts = [
        Point(f"t{i % 3}.yaml p{i}", h * (1 + a * load**q * n**j), h / 1.05, 0.0, 1, {HEADERS.label: h}, load, n)
        for i, (h, load, n) in enumerate(terms)
    ]
    shaped = Form("headers, load a L^q P^j", (HEADERS,), load=True, load_shape=True)
    got = fit(pts, shaped)
    assert (got.load_factor, got.load_power, got.pairs_power) == pytest.approx((a, q, j), rel=1e-3)
    assert fit(pts, Form("headers, load a", (HEADERS,), load=True)).rms_log_error > 0.02 > got.rms_log_error
    cfg = settings(got)
    p = pts[2]
    fa, fq, fj = load_shape(cfg)
    assert fa == float(cfg[LOAD_FACTOR])
    simulated = p.sims[HEADERS.label] * load_multiplier(fa, p.load_gbps, p.pairs, fq, fj)
    assert simulated == pytest.approx(got.model_s(p), rel=1e-5)
    assert "headers, load a L^q P^j" in [f.name for f in candidate_forms()]


def test_the_load_factor_multiplies_the_simulated_time_by_the_cables_load():
    """Two hosts on one 1 MB/s switch path (two cables) exchanging 1 MB each way: every directed
    cable carries 1 MB at 1 MB/s, four of them, so the traffic's load is 4 x 8 Mbit/s = 0.032
    Gbit/s; the load factor multiplies the simulated time by 1 + a x 0.032 (and the fan-in term,
    1 here, by nothing)."""
    _sg()
    from models.flow.demands import Traffic
    from models.flow.simgrid import BASE_CONFIG, LOAD_FACTOR, Platform, cable_load_gbps, simulate

    links = [("l-a", 1e6, 0.0), ("l-b", 1e6, 0.0)]
    plat = Platform(links, {("a", "b"): [(0, True), (1, False)], ("b", "a"): [(1, True), (0, False)]})
    t = Traffic("exchange")
    t.add("a", "b", 1e6)
    t.add("b", "a", 1e6)
    assert cable_load_gbps(plat, t) == pytest.approx(0.032)
    plain = simulate(plat, t, dict(BASE_CONFIG))
    scaled = simulate(plat, t, {**BASE_CONFIG, LOAD_FACTOR: "2.5"})
    assert plain.cable_load_gbps == scaled.cable_load_gbps == pytest.approx(0.032)
    assert plain.iteration_s == pytest.approx(1.0, rel=1e-3)
    assert scaled.iteration_s == pytest.approx(plain.iteration_s * (1 + 2.5 * 0.032), rel=1e-9)
