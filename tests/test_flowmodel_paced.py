"""The flow-model fit's bar beside the verdict (benchmarks.flowmodel.network_paced): it reads the
transfer phases' utilisation from the real verdict's text (emulation.fidelity.judge) and keeps a
point where the busiest link carried >= 90% of what the point's own schedule allows."""

from __future__ import annotations

import pytest

from benchmarks.flowmodel import network_paced, phase_utilisation, why_not
from emulation.fidelity import FidelityInputs, judge
from emulation.phases import Window, phases

RATES = {"t1_1-eth1": 100.0}


def _verdict_text(*utils: float) -> tuple[bool, str]:
    """A starved machine's verdict (idle 1%, ovs-vswitchd at 97%) over 0.25-s windows whose busiest
    link carried these shares of its rate: (faithful, its text)."""
    ws = phases([Window(100 + 0.25 * (i + 1), 0.25, u, "t1_1-eth1") for i, u in enumerate(utils)])
    v = judge(FidelityInputs([0.97] * len(utils), [0.01] * len(utils), {"t1_1-eth1": 100.0}, RATES, phases=ws))
    return v.faithful, v.reason


def test_the_verdict_passes_a_run_at_80_percent_and_the_fit_leaves_it_out():
    faithful, text = _verdict_text(0.5, 0.8, 0.8, 0.8, 0.8, 0.5)
    assert faithful  # above the verdict's 75%
    assert phase_utilisation(text) == pytest.approx(0.80)
    row = {"fidelity": text, "expected_s": 2.0}
    assert not network_paced(row, 2.0)  # a ring: its schedule allows 100%
    # a schedule whose dependencies leave its busiest cable idle a fifth of the time allows 80%
    assert network_paced(row, 2.5)


def test_a_run_at_the_rate_is_paced_and_a_verdict_without_phases_is_kept():
    faithful, text = _verdict_text(0.5, 0.97, 0.99, 0.98, 0.5)
    assert faithful and phase_utilisation(text) == pytest.approx(0.98)
    assert network_paced({"fidelity": text, "expected_s": 1.0}, 1.0)
    assert phase_utilisation("ovs-vswitchd p95 33% of a core, idle p5 27%") is None
    assert network_paced({"fidelity": "ovs-vswitchd p95 33% of a core", "expected_s": 1.0}, 1.0)


def test_a_point_left_out_says_why_in_the_table():
    _, text = _verdict_text(0.5, 0.8, 0.8, 0.8, 0.8, 0.5)
    row = {"fidelity": text, "expected_s": 2.0, "uncalibrated_s": 2.0, "emulated_s": 3.0, "calibrated_s": 2.1,
           "faithful": True, "within_goal": False, "network_paced": False, "error": ""}  # fmt: skip
    why = why_not(row)
    assert why.startswith("left out of the fit: its transfer phases kept the busiest link at 80% (< 90% of the 100%")
    assert "emulated 1.50x max-min, the model 1.05x" in why
