"""Fit the flow model's factors to emulated communication times, and write the factors file.

Two costs the exact max-min model (CM02) lacks, and the factors that stand for them:
- a rate below the shaped one (TCP/IP headers, the shaper's and the engine's own pace): LV08's
  `network/bandwidth-factor` b, every flow's rate times b;
- a fixed cost per message (TCP's slow start on a connection that went idle, the engine's
  per-message work, the receiver's wake-up): the engine's `flowmodel/message-latency-s` c, added
  before each message's first byte (models.flow.simgrid). A schedule whose critical path
  is k dependent messages long (ring: 2(W-1)) pays k x c, which a bandwidth factor cannot mimic.
  LV08's own latency factor multiplies the cables' latency, which is 0 in every shipped topology.

- incasts: W TCP flows into one receiver share it worse than max-min (a flow that falls behind
  holds back every sum that waits for it), more so the more senders: the fan-in term k, every
  time x (1 + k ln F) with F the point's fan-in (distinct senders of its busiest receiver; 1 for a
  ring, where the term vanishes).

Per point the simulator gives its time at b = 1, c = 0 (`base_s`) and its growth with c
(`slope`: messages on the critical path, measured by a second simulation), so the fit's model is
T(b, c, k) = (base_s / b + slope x c) x (1 + k ln F) (exact in b and k; in c up to how the added
latency reshuffles the sharing). The fit is least squares on log(T / emulated) (scipy), i.e. on relative error; the
calibrated column of the benchmark is then simulated again with the fitted factors, not taken
from this formula.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import least_squares

from models.flow.simgrid import BASE_CONFIG, FAN_IN_FACTOR, MESSAGE_LATENCY, fan_in_multiplier
from topologies.files import write_text_atomic

#: bounds of the fit: a bandwidth factor within [0.1, 1.2], a message latency within [0, 0.5] s,
#: a fan-in factor within [0, 5]
BANDWIDTH_BOUNDS = (0.1, 1.2)
LATENCY_BOUNDS = (0.0, 0.5)
FAN_IN_BOUNDS = (0.0, 5.0)


@dataclass(frozen=True)
class Point:
    """One (topology, traffic, bytes) point: emulated seconds and the simulator's terms."""

    name: str
    emulated_s: float
    base_s: float  # simulated, b = 1, c = 0 (exact max-min)
    slope: float  # d simulated / d c: messages on the critical path
    fan_in: int = 1  # distinct senders of the busiest receiver (models.flow.demands.Traffic.fan_in)

    def model_s(self, bandwidth_factor: float, message_s: float, fan_in_factor: float = 0.0) -> float:
        return (self.base_s / bandwidth_factor + self.slope * message_s) * fan_in_multiplier(fan_in_factor, self.fan_in)


@dataclass(frozen=True)
class Fit:
    bandwidth_factor: float
    message_latency_s: float
    rms_log_error: float  # root mean square of log(model / emulated) over the points
    max_abs_error: float  # largest |model / emulated - 1|
    points: int
    fan_in_factor: float = 0.0  # k of (1 + k ln F); 0 where not fitted


def fit(points: Sequence[Point], message_latency: bool = True, fan_in: bool = True) -> Fit:
    """Least squares on log(T(b, c, k) / emulated); `message_latency=False` fits without c (c = 0),
    `fan_in=False` without k (k = 0)."""
    usable = [p for p in points if p.emulated_s > 0 and p.base_s > 0 and math.isfinite(p.emulated_s)]
    if not usable:
        raise ValueError("no point with an emulated and a simulated time to fit")
    emu = np.array([p.emulated_s for p in usable])
    base = np.array([p.base_s for p in usable])
    slope = np.array([p.slope for p in usable])
    log_f = np.log(np.maximum(1, [p.fan_in for p in usable]))
    fan_in = fan_in and bool(np.any(log_f > 0))  # no point with a fan-in above 1: nothing to fit k on
    names = ["b", *(["c"] if message_latency else []), *(["k"] if fan_in else [])]
    start = {"b": 0.95, "c": 0.001, "k": 0.05}
    bounds = {"b": BANDWIDTH_BOUNDS, "c": LATENCY_BOUNDS, "k": FAN_IN_BOUNDS}

    def unpack(x: np.ndarray) -> tuple[float, float, float]:
        v = dict(zip(names, x, strict=True))
        return v["b"], v.get("c", 0.0), v.get("k", 0.0)

    def residual(x: np.ndarray) -> np.ndarray:
        b, c, k = unpack(x)
        return np.log((base / b + slope * c) * (1 + k * log_f) / emu)

    res = least_squares(
        residual, [start[n] for n in names], bounds=([bounds[n][0] for n in names], [bounds[n][1] for n in names])
    )
    b, c, k = unpack(res.x)
    # to the microsecond: SimGrid crashes on latencies below its precision (1e-9 s, seen at 4.5e-14)
    c = round(c, 6)
    x = np.array([{"b": b, "c": c, "k": k}[n] for n in names])
    r = residual(x)
    return Fit(float(b), c, float(np.sqrt(np.mean(r**2))), float(np.max(np.abs(np.expm1(r)))), len(usable), float(k))


@dataclass(frozen=True)
class HeldOut:
    """How the fit does on points it never saw: each group (a topology) left out in turn, the
    factors fitted on the others, and the left-out points scored with those factors."""

    errors: dict[str, float]  # point name -> model / emulated - 1, fitted without its group
    groups: int

    @property
    def median_abs(self) -> float:
        return float(np.median(np.abs(list(self.errors.values()))))

    def within(self, tolerance: float) -> float:
        """The share of held-out points within `tolerance` (relative)."""
        return float(np.mean([abs(e) <= tolerance for e in self.errors.values()]))


def held_out(
    points: Sequence[Point], group: Callable[[Point], str], message_latency: bool = True, fan_in: bool = True
) -> HeldOut:
    """Leave-one-group-out cross-validation of `fit`: the honest error of a fitted factor.

    Groups are whole topologies (`group`), so a held-out point shares neither its network nor its
    sibling sizes with what the factors were fitted on. A loop over groups rather than
    scikit-learn's LeaveOneGroupOut: the split is five lines, the package would be a dependency
    for them alone."""
    names = sorted({group(p) for p in points})
    if len(names) < 2:
        raise ValueError("held-out validation needs points from at least two topologies")
    errors: dict[str, float] = {}
    for name in names:
        train = [p for p in points if group(p) != name]
        f = fit(train, message_latency, fan_in)
        for p in points:
            if group(p) == name:
                errors[p.name] = p.model_s(f.bandwidth_factor, f.message_latency_s, f.fan_in_factor) / p.emulated_s - 1
    return HeldOut(errors, len(names))


def settings(f: Fit) -> dict[str, str]:
    """The settings the engine reads (models.flow.simgrid.sim_config): LV08 with the fitted
    bandwidth factor, latency factor 1 and weight-S 0 (pure max-min sharing, as CM02 here), the
    message latency and the fan-in factor."""
    return {
        **BASE_CONFIG,
        "network/model": "LV08",
        "network/bandwidth-factor": f"{f.bandwidth_factor:.6g}",
        "network/latency-factor": "1",
        "network/weight-S": "0",
        MESSAGE_LATENCY: f"{f.message_latency_s:.6g}",
        FAN_IN_FACTOR: f"{f.fan_in_factor:.6g}",
    }


def write_factors(path: Path, f: Fit, record: dict, points: Sequence[Point]) -> dict:
    """The factors file: the settings (keys with a "/"), then the record (date, machine, the fit's
    quality, every point). Returns what it wrote."""
    data = {**settings(f), "fit": asdict(f), **record, "points": [asdict(p) for p in points]}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, indent=1) + "\n")
    return data
