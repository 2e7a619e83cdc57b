"""Fit the flow model's factors to emulated communication times, and write the factors file.

Two costs the exact max-min model (CM02) lacks, and the factors that stand for them:
- a rate below the shaped one (TCP/IP headers, the shaper's and the engine's own pace): LV08's
  `network/bandwidth-factor` b, every flow's rate times b;
- a fixed cost per message (TCP's slow start on a connection that went idle, the engine's
  per-message work, the receiver's wake-up): the engine's `flowmodel/message-latency-s` c, added
  before each message's first byte (models.flow.simgrid). A schedule whose critical path
  is k dependent messages long (ring: 2(W-1)) pays k x c, which a bandwidth factor cannot mimic.
  LV08's own latency factor multiplies the cables' latency, which is 0 in every shipped topology.

Per point the simulator gives its time at b = 1, c = 0 (`base_s`) and its growth with c
(`slope`: messages on the critical path, measured by a second simulation), so the fit's model is
T(b, c) = base_s / b + slope x c (exact in b; in c up to how the added latency reshuffles the
sharing). The fit is least squares on log(T / emulated) (scipy), i.e. on relative error; the
calibrated column of the benchmark is then simulated again with the fitted factors, not taken
from this formula.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from models.flow.simgrid import BASE_CONFIG, MESSAGE_LATENCY
from topologies.files import write_text_atomic

#: bounds of the fit: a bandwidth factor within [0.1, 1.2], a message latency within [0, 0.5] s
BANDWIDTH_BOUNDS = (0.1, 1.2)
LATENCY_BOUNDS = (0.0, 0.5)


@dataclass(frozen=True)
class Point:
    """One (topology, traffic, bytes) point: emulated seconds and the simulator's terms."""

    name: str
    emulated_s: float
    base_s: float  # simulated, b = 1, c = 0 (exact max-min)
    slope: float  # d simulated / d c: messages on the critical path

    def model_s(self, bandwidth_factor: float, message_s: float) -> float:
        return self.base_s / bandwidth_factor + self.slope * message_s


@dataclass(frozen=True)
class Fit:
    bandwidth_factor: float
    message_latency_s: float
    rms_log_error: float  # root mean square of log(model / emulated) over the points
    max_abs_error: float  # largest |model / emulated - 1|
    points: int


def fit(points: Sequence[Point], message_latency: bool = True) -> Fit:
    """Least squares on log(T(b, c) / emulated); `message_latency=False` fits b alone (c = 0)."""
    usable = [p for p in points if p.emulated_s > 0 and p.base_s > 0 and math.isfinite(p.emulated_s)]
    if not usable:
        raise ValueError("no point with an emulated and a simulated time to fit")
    emu = np.array([p.emulated_s for p in usable])
    base = np.array([p.base_s for p in usable])
    slope = np.array([p.slope for p in usable])

    def residual(x: np.ndarray) -> np.ndarray:
        c = x[1] if message_latency else 0.0
        return np.log((base / x[0] + slope * c) / emu)

    if message_latency:
        x0, lo, hi = [0.95, 0.001], [BANDWIDTH_BOUNDS[0], LATENCY_BOUNDS[0]], [BANDWIDTH_BOUNDS[1], LATENCY_BOUNDS[1]]
    else:
        x0, lo, hi = [0.95], [BANDWIDTH_BOUNDS[0]], [BANDWIDTH_BOUNDS[1]]
    res = least_squares(residual, x0, bounds=(lo, hi))
    r = residual(res.x)
    b = float(res.x[0])
    # to the microsecond: SimGrid crashes on latencies below its precision (1e-9 s, seen at 4.5e-14)
    c = round(float(res.x[1]), 6) if message_latency else 0.0
    r = residual(np.array([b, c]))
    return Fit(b, c, float(np.sqrt(np.mean(r**2))), float(np.max(np.abs(np.expm1(r)))), len(usable))


def settings(f: Fit) -> dict[str, str]:
    """The settings the engine reads (models.flow.simgrid.sim_config): LV08 with the fitted
    bandwidth factor, latency factor 1 and weight-S 0 (pure max-min sharing, as CM02 here), and
    the message latency."""
    return {
        **BASE_CONFIG,
        "network/model": "LV08",
        "network/bandwidth-factor": f"{f.bandwidth_factor:.6g}",
        "network/latency-factor": "1",
        "network/weight-S": "0",
        MESSAGE_LATENCY: f"{f.message_latency_s:.6g}",
    }


def write_factors(path: Path, f: Fit, record: dict, points: Sequence[Point]) -> dict:
    """The factors file: the settings (keys with a "/"), then the record (date, machine, the fit's
    quality, every point). Returns what it wrote."""
    data = {**settings(f), "fit": asdict(f), **record, "points": [asdict(p) for p in points]}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")
    return data
