"""Each measured step split into communication and the rest, both measured, so they add up.

The model's communication time (T_push + T_pull) is no part of this: the FatTree r=1 VGG-16 step
measured 17.36 s against a modelled 19.53 s of communication, and "BCT minus the model" left a
negative rest. Here the communication of a step is *measured*, as the links' busy time within the
step's slowest worker's [t_start, t_end]: per transfer-sampler window (emulation.traffic, 0.25 s)
that moved bytes, the time its bottleneck link needed for what it carried (bytes / rate), clipped
to the step. It is a lower bound where links ran below their rate (a TCP ramp, a starved
emulator: that time lands in the rest), and coarse for steps of a few windows.
The rest (compute, serialisation, PS update, TF overhead: this machine's host time at the run's
model size) is the step's BCT minus that. Both are scaled to the step's BCT by the share of its
wall interval the links were busy, so comm + rest = BCT exactly and neither is negative.
"""

from __future__ import annotations

from collections.abc import Sequence

from emulation.traffic import PHASE_S, Window, busy_s
from workloads.stats import describe

METHOD = (
    "communication = the links' busy time in each measured step (its slowest worker's interval): per "
    f"{PHASE_S:g}-s window moving bytes, bytes / rate of its busiest link; rest = BCT - communication"
)


def split_step(t_start: float, t_end: float, bct_s: float, windows: Sequence[Window]) -> tuple[float, float]:
    """(communication s, rest s) of one step; they add up to bct_s."""
    span = t_end - t_start
    if span <= 0:
        return 0.0, bct_s
    share = min(1.0, busy_s(windows, t_start, t_end) / span)
    return share * bct_s, (1 - share) * bct_s


def step_split(iterations: Sequence[dict], warmup: int, windows: Sequence[Window]) -> dict:
    """Per measured step (the slowest worker's row, as the BCT takes it): communication and rest,
    described (mean, CI...) over the steps; {} when no transfer window was sampled."""
    if not windows:
        return {}
    slowest: dict[tuple[int, int], dict] = {}
    for r in iterations:
        if r["step"] > warmup and "t_start" in r:
            key = (r.get("attempt", 0), r["step"])
            if key not in slowest or r["bct_s"] > slowest[key]["bct_s"]:
                slowest[key] = r
    parts = [split_step(r["t_start"], r["t_end"], r["bct_s"], windows) for r in slowest.values()]
    if not parts:
        return {}
    return {
        "comm_s": describe([c for c, _ in parts]),
        "rest_s": describe([x for _, x in parts]),
        "method": METHOD,
    }
