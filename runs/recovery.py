"""What each timeline event cost a running job: per-iteration steps and per-event recovery metrics.

A run's per-worker iteration rows become one Step per synchronous step; each applied event
(when it happened, what it did) is set against the steps around it: how long the job stalled,
how many steps were slow and what they cost, whether the BCT came back. Pure functions of those
two lists, so synthetic BCT series test them (tests/test_timeline.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

#: Keys of a recovery() dict, in the order they are written to events.csv.
METRIC_KEYS: tuple[str, ...] = (
    "t",
    "action",
    "target",
    "took_ms",
    "detail",
    "baseline_s",
    "resume_s",
    "recovery_s",
    "slow_steps",
    "extra_s",
    "after_ratio",
    "steps_lost",
)


@dataclass(frozen=True)
class Step:
    """One synchronous iteration of a job (all its workers), in unix seconds."""

    job: str
    step: int
    t_start: float
    t_end: float
    bct_s: float
    attempt: int = 0


def steps_from_rows(rows: Iterable[Mapping], job: str) -> list[Step]:
    """Per-worker iteration rows -> one Step per (attempt, global step), sorted by end time.

    Rows have task, step, global_step (optional), t_start, t_end, bct_s and attempt (optional, 0).
    A synchronous step starts with its first worker and ends with its last: t_start is the min,
    t_end and bct_s the max over workers (the slowest worker decides). Rows are keyed by
    global_step when they have one, else by step; a restarted attempt keeps its own steps.
    """
    groups: dict[tuple[int, int], list[Mapping]] = {}
    for row in rows:
        gs = row.get("global_step")
        key = int(gs) if gs not in (None, "") else int(row["step"])
        groups.setdefault((int(row.get("attempt") or 0), key), []).append(row)
    steps = [
        Step(
            job=job,
            step=key,
            t_start=min(float(r["t_start"]) for r in rs),
            t_end=max(float(r["t_end"]) for r in rs),
            bct_s=max(float(r["bct_s"]) for r in rs),
            attempt=attempt,
        )
        for (attempt, key), rs in groups.items()
    ]
    return sorted(steps, key=lambda s: (s.t_end, s.attempt, s.step))


@dataclass(frozen=True)
class Applied:
    """An event as it happened in a run."""

    t: float  # unix time it was applied
    action: str
    target: str
    took_ms: float = 0.0  # how long the testbed took to apply it (reaction time)
    detail: str = ""


def recovery(
    steps: Sequence[Step], events: Sequence[Applied], tolerance: float = 0.10, baseline_steps: int = 5
) -> list[dict]:
    """What each event cost the job: one dict per event (keys METRIC_KEYS, times in seconds).

    A step's "BCT" here is its duration as the job sees it: its BCT, or the time since the
    previous step ended when that is longer. The two differ only when the job stalled between
    steps: a job restarted on a standby PS makes no progress while its processes start, and the
    first step after the restart carries that whole outage.

    - baseline_s: median BCT of the last `baseline_steps` steps that ended before the event.
    - window: the steps ending after the event and no later than the next event with a larger t
      (events at the same t, such as a random round's repairs and failures, share one window).
    - resume_s: end of the window's first step - event t (the job makes progress again; the
      in-flight step below is skipped when it was not slow).
    - slow run: the longest prefix of the window with BCT > (1 + tolerance) x baseline;
      slow_steps is its length, extra_s the sum of its BCT - baseline (the time the event cost).
      A step already in flight at the event (started before it) that is not slow is skipped
      first: it had mostly run before the event and says nothing about the event's effect.
    - recovery_s: 0.0 if the slow run is empty, else the end of its last step - event t;
      None if the whole window is slow (not recovered before the run or the next event ended).
    - after_ratio: median BCT after the slow run / baseline, a lasting change (1.0: none). When
      the job never recovers it is the median of the whole slow run / baseline (1.5 when a link
      stays down and costs 50%), so a persistent slowdown still has a number.
    - steps_lost: 0 here; the caller fills it in.

    With no baseline, the baseline-relative metrics are None (and nothing is skipped). With no
    step in the window after the skipped one, resume_s, recovery_s and after_ratio are None: no
    progress was seen, so neither was a recovery.
    """
    ordered = _durations(steps)
    times = sorted({e.t for e in events})
    return [_one_event(ordered, e, _next_time(times, e.t), tolerance, baseline_steps) for e in events]


def _durations(steps: Sequence[Step]) -> list[Step]:
    """Steps sorted by end time, each with bct_s = max(its BCT, time since the previous step ended)."""
    out: list[Step] = []
    for s in sorted(steps, key=lambda s: s.t_end):
        out.append(replace(s, bct_s=max(s.bct_s, s.t_end - out[-1].t_end)) if out else s)
    return out


def _next_time(times: Sequence[float], t: float) -> float:
    """The first event time after t (inf if none)."""
    return next((x for x in times if x > t), float("inf"))


def _one_event(steps: Sequence[Step], e: Applied, until: float, tolerance: float, baseline_steps: int) -> dict:
    """recovery() for one event, given the steps sorted by end time and the window's end."""
    before = [s.bct_s for s in steps if s.t_end <= e.t][-baseline_steps:] if baseline_steps > 0 else []
    window = [s for s in steps if e.t < s.t_end <= until]
    baseline = statistics.median(before) if before else None
    out: dict = {
        "t": e.t,
        "action": e.action,
        "target": e.target,
        "took_ms": e.took_ms,
        "detail": e.detail,
        "baseline_s": baseline,
        "resume_s": window[0].t_end - e.t if window else None,
        "recovery_s": None,
        "slow_steps": None,
        "extra_s": None,
        "after_ratio": None,
        "steps_lost": 0,
    }
    if baseline is None:
        return out
    limit = (1 + tolerance) * baseline
    effect = _after_in_flight(window, e.t, limit)
    slow = _slow_prefix(effect, limit)
    rest = effect[len(slow) :]
    out["slow_steps"] = len(slow)
    out["extra_s"] = sum((s.bct_s - baseline for s in slow), 0.0)
    if not effect:
        out["resume_s"] = None
        return out
    out["resume_s"] = effect[0].t_end - e.t
    if not slow:
        out["recovery_s"] = 0.0
    elif rest:
        out["recovery_s"] = slow[-1].t_end - e.t
    level = rest or slow
    if baseline > 0:
        out["after_ratio"] = statistics.median(s.bct_s for s in level) / baseline
    return out


def _after_in_flight(window: Sequence[Step], t: float, limit: float) -> Sequence[Step]:
    """`window` without its leading steps that started before t and were not slow (in flight, unaffected)."""
    i = 0
    while i < len(window) and window[i].t_start < t and window[i].bct_s <= limit:
        i += 1
    return window[i:]


def _slow_prefix(window: Sequence[Step], limit: float) -> list[Step]:
    """The leading steps of `window` whose BCT exceeds `limit`."""
    out: list[Step] = []
    for s in window:
        if s.bct_s <= limit:
            break
        out.append(s)
    return out
