"""The flow model's calibration: the fit recovers known factors, and the factors it writes do in
SimGrid what the fit's model says (a bandwidth factor scales every rate, the message latency is
paid once per dependent message). Unit level: SimGrid runs in a subprocess, nothing is emulated."""

from __future__ import annotations

import json

import pytest

from models.flow.fit import Fit, Point, fit, settings, write_factors


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
