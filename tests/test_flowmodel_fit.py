"""The flow model's calibration: the fit recovers known factors, and the factors it writes do in
SimGrid what the fit's model says (a bandwidth factor scales every rate, the message latency is
paid once per dependent message). Unit level: SimGrid runs in a subprocess, nothing is emulated."""

from __future__ import annotations

import json
import math

import pytest

from models.flow.fit import Fit, Point, fit, held_out, settings, write_factors


def synthetic(b: float, c: float) -> list[Point]:
    """Points whose emulated times are exactly base / b + slope x c."""
    terms = [(1.0, 2), (2.0, 2), (0.5, 14), (2.0, 14), (1.0, 30), (0.8, 1)]
    return [Point(f"p{i}", base / b + slope * c, base, slope) for i, (base, slope) in enumerate(terms)]


def test_fit_recovers_known_factors():
    f = fit(synthetic(0.93, 0.004))
    assert f.bandwidth_factor == pytest.approx(0.93, rel=1e-4)
    assert f.message_latency_s == pytest.approx(0.004, rel=1e-3)
    assert f.rms_log_error < 1e-6 and f.points == 6


def test_bandwidth_factor_alone_cannot_fit_a_message_cost():
    """A per-message cost hurts the many-message points most; one rate factor leaves an error."""
    pts = synthetic(0.95, 0.02)
    alone, both = fit(pts, message_latency=False), fit(pts)
    assert alone.message_latency_s == 0.0
    assert alone.rms_log_error > 0.1 > both.rms_log_error


def test_fit_skips_points_without_an_emulated_time_and_refuses_none():
    pts = [*synthetic(1.0, 0.0), Point("failed", float("nan"), 1.0, 2)]
    assert fit(pts).points == 6
    with pytest.raises(ValueError, match="no point"):
        fit([Point("failed", float("nan"), 1.0, 2)])


def test_held_out_scores_each_topology_with_factors_fitted_on_the_others():
    """Leave one topology out: where every topology follows the same factors, the held-out errors
    are nil; a topology the others do not describe (25% slower than they imply) shows its own
    error held out, where the fit over everything would have spread it across all points."""
    same = [Point(f"t{t}.yaml {i}", base / 0.8, base, 0) for t in range(3) for i, base in enumerate((1.0, 2.0))]
    cv = held_out(same, lambda p: p.name.split()[0])
    assert cv.groups == 3 and len(cv.errors) == 6
    assert cv.median_abs < 1e-9 and cv.within(0.05) == 1.0
    odd = [*same[:4], *(Point(p.name, p.emulated_s * 1.25, p.base_s, 0) for p in same[4:])]
    cv = held_out(odd, lambda p: p.name.split()[0])
    assert cv.errors["t2.yaml 0"] == pytest.approx(1 / 1.25 - 1)  # fitted on t0, t1 only: exact there
    assert cv.within(0.05) == pytest.approx(0.0)  # t0 and t1 held out see a fit pulled by t2
    assert fit(odd).max_abs_error < abs(cv.errors["t2.yaml 0"])  # fitted on all: looks better than it is
    with pytest.raises(ValueError, match="two topologies"):
        held_out(same[:2], lambda p: p.name.split()[0])


def test_factors_file_round_trips_through_the_engine(tmp_path, monkeypatch):
    """What write_factors writes is what sim_config reads: the settings, not the record."""
    pytest.importorskip("simgrid", reason="python3-simgrid (scripts/setup.sh links it into the venv)")
    from models.flow.simgrid import MESSAGE_LATENCY, sim_config

    path = tmp_path / "f.json"
    f = Fit(0.9, 0.003, 0.01, 0.02, 6)
    data = write_factors(path, f, {"date": "today", "machine": "here"}, synthetic(0.9, 0.003))
    assert json.loads(path.read_text()) == data and len(data["points"]) == 6
    monkeypatch.setenv("PSNET_FLOWMODEL_FACTORS", str(path))
    cfg, note = sim_config()
    assert cfg == settings(f) and cfg[MESSAGE_LATENCY] == "0.003" and str(path) in note


@pytest.mark.parametrize("w", [3, 5])
def test_calibrated_ring_pays_the_message_latency_per_dependent_step(w):
    """Ring allreduce on a star: 2(W-1)/W x S/(b B) + 2(W-1) x c, the fit's model exactly."""
    pytest.importorskip("simgrid", reason="python3-simgrid (scripts/setup.sh links it into the venv)")
    from models.flow.demands import from_schedule
    from models.flow.simgrid import Platform, simulate
    from schemes import compile_scheme

    ws = [f"h{i}" for i in range(w)]
    mbit = 1e6 / 8
    links = [(f"l-{h}", 100 * mbit, 0.0) for h in ws]
    routes = {(a, b): [(i, True), (j, False)] for i, a in enumerate(ws) for j, b in enumerate(ws) if a != b}
    n_elems = 1_500_000  # 6 MB
    traffic = from_schedule(compile_scheme("ring", ws, n_elems))
    b, c = 0.9, 0.005
    res = simulate(Platform(links, routes), traffic, settings(Fit(b, c, 0.0, 0.0, 0)))
    base = 2 * (w - 1) / w * n_elems * 4 / (100 * mbit)
    assert res.iteration_s == pytest.approx(Point("ring", 0, base, 2 * (w - 1)).model_s(b, c), rel=1e-6)


def test_fit_recovers_a_fan_in_factor_and_held_out_judges_it():
    """Points slowed by (1 + k ln F) on top of b and c: the fit finds k; with no fan-in above 1 in
    the points there is nothing to fit it on, and it stays 0."""
    terms = [(1.0, 2, 1), (2.0, 2, 7), (0.5, 14, 1), (2.0, 14, 4), (1.0, 30, 15), (0.8, 1, 2)]
    b, c, k = 0.9, 0.003, 0.2
    pts = [
        Point(f"t{i % 3}.yaml p{i}", (base / b + slope * c) * (1 + k * math.log(f)), base, slope, f)
        for i, (base, slope, f) in enumerate(terms)
    ]
    got = fit(pts)
    assert (got.bandwidth_factor, got.message_latency_s, got.fan_in_factor) == pytest.approx((b, c, k), rel=1e-3)
    assert fit(pts, fan_in=False).rms_log_error > 0.05 > got.rms_log_error
    assert held_out(pts, lambda p: p.name.split()[0]).median_abs < 1e-3
    assert fit(synthetic(0.9, 0.003)).fan_in_factor == 0.0


def test_the_fan_in_factor_multiplies_the_simulated_time():
    """Three hosts pushing into one on a star (fan-in 3) and a two-host exchange (fan-in 1): the
    setting multiplies the first by 1 + k ln 3 and leaves the second alone."""
    pytest.importorskip("simgrid", reason="python3-simgrid (scripts/setup.sh links it into the venv)")
    from models.flow.demands import Traffic
    from models.flow.simgrid import BASE_CONFIG, FAN_IN_FACTOR, Platform, simulate

    hosts = ["a", "b", "c", "d"]
    links = [(f"l-{h}", 1e6, 0.0) for h in hosts]
    routes = {(x, y): [(i, True), (j, False)] for i, x in enumerate(hosts) for j, y in enumerate(hosts) if x != y}
    incast, pair = Traffic("incast"), Traffic("pair")
    for h in ("a", "b", "c"):
        incast.add(h, "d", 1e6)
    pair.add("a", "b", 1e6)
    for t, f in ((incast, 3), (pair, 1)):
        assert t.fan_in() == f
        mine = Platform(links, {pr: r for pr, r in routes.items() if set(pr) <= set(t.hosts())})
        plain = simulate(mine, t, dict(BASE_CONFIG)).iteration_s
        scaled = simulate(mine, t, {**BASE_CONFIG, FAN_IN_FACTOR: "0.25"}).iteration_s
        assert scaled == pytest.approx(plain * (1 + 0.25 * math.log(f)), rel=1e-9)
