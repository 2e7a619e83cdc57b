"""RAT's failure model: from `start`, k random hosts stop sending; every d seconds k new ones are drawn.

The runner draws the plan once from its seed and hands each host its own windows, so every host
pauses exactly as planned (the engine holds its sends inside a window) and a run can be repeated.
Times are whatever origin the caller chooses; scheme jobs use seconds after t0 (the start of the
first measured iteration), which each host turns into its own clock when it gets there.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def pause_plan(
    hosts: Sequence[str], k: int, d_s: float, seed: int, start: float, duration_s: float
) -> dict[str, list[tuple[float, float]]]:
    """Per host, the windows (start, end) in which it sends nothing (same origin as `start`)."""
    if not 0 < k < len(hosts):
        raise ValueError(
            f"paused senders: k = {k} must be between 1 and {len(hosts) - 1} (there are {len(hosts)} hosts)"
        )
    if d_s <= 0:
        raise ValueError(f"paused senders: d = {d_s} s must be positive")
    rng = random.Random(seed)
    plan: dict[str, list[tuple[float, float]]] = {h: [] for h in hosts}
    t = start
    while t < start + duration_s:
        for h in rng.sample(list(hosts), k):
            plan[h].append((t, t + d_s))
        t += d_s
    return plan
