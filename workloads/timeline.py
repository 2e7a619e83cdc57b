"""Timelines: network events applied while a PS job runs, and what each one cost the job.

The paper's failure claims (a PSNet module keeps training when a link, a switch or a PS NIC
fails, and an ECS reconfiguration only darkens a circuit for milliseconds) are about *time*: how
long the job stalls, how many iterations are slow, whether the BCT comes back. A single mean BCT
hides all of that, so an experiment can carry a `timeline:` of events and `random_failures:`
(RAT's scenario: k random elements fail, every d seconds they are repaired and k new ones drawn,
seeded so that a run can be repeated):

    timeline:
      - {at_s: 20, action: link_down, link: [ps1_1, t1_1]}
      - {at_s: 40, action: link_up, link: [ps1_1, t1_1]}
      - {at_step: 30, action: set_rate, link: [t1_1, s1], mbps: 50}
      - {at_s: 60, action: reconfigure, worker: w1_1_1, tor: t1_3, dark_ms: 5}
    random_failures: {k: 2, every_s: 15, count: 3, what: links, seed: 7}

This module holds the schema, the expansion of random failures into concrete events, the
per-iteration steps of a run, the per-event recovery metrics and the CSV/PNG outputs. It knows
nothing about Mininet: the runner applies the events and records when each one happened.
"""

from __future__ import annotations

import csv
import random
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Action = Literal["link_down", "link_up", "fail_switch", "repair_switch", "fail_ps", "set_rate", "reconfigure"]

#: The fields each action needs (all others but dark_ms must be absent).
_NEEDS: dict[str, tuple[str, ...]] = {
    "link_down": ("link",),
    "link_up": ("link",),
    "set_rate": ("link", "mbps"),
    "fail_switch": ("node",),
    "repair_switch": ("node",),
    "fail_ps": ("node",),
    "reconfigure": ("worker", "tor"),
}
#: How each target field is written in a file, for the error messages.
_FORMS: dict[str, str] = {
    "link": "link: [a, b] (the two node names of the cable)",
    "mbps": "mbps: RATE (paper-equivalent Mbit/s)",
    "node": "node: NAME",
    "worker": "worker: NAME (the worker to move)",
    "tor": "tor: NAME (the ToR it moves to)",
}
#: Actions whose effect on PSNet goes through an ECS circuit, so a dark period applies.
_DARK_OK = frozenset({"reconfigure", "link_down", "link_up", "fail_switch", "repair_switch"})

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


class TimelineEvent(BaseModel):
    """One event of an experiment's timeline: when (seconds or a step) and what to do to which element."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    at_s: float | None = Field(default=None, ge=0, description="seconds after t0 (start of the first measured step)")
    at_step: int | None = Field(default=None, ge=1, description="when the first job's chief completes this step")
    action: Action
    link: tuple[str, str] | None = Field(default=None, description="link_down/link_up/set_rate: the cable's ends")
    node: str | None = Field(default=None, description="fail_switch/repair_switch/fail_ps: the element")
    mbps: float | None = Field(default=None, gt=0, description="set_rate: paper-equivalent Mbit/s")
    worker: str | None = Field(default=None, description="reconfigure: the worker moved to `tor`")
    tor: str | None = None
    dark_ms: float | None = Field(default=None, ge=0, description="ECS dark period override (PSNet)")

    @model_validator(mode="after")
    def _check(self) -> TimelineEvent:
        _check_when(self.at_s, self.at_step)
        needs = _NEEDS[self.action]
        for name in needs:
            if getattr(self, name) is None:
                raise ValueError(f"{name}: {self.action} needs {_FORMS[name]}; add it")
        for name in _FORMS:
            if name not in needs and getattr(self, name) is not None:
                takes = ", ".join(needs)
                raise ValueError(f"{name}: {self.action} does not take {name}; remove it ({self.action} takes {takes})")
        if self.dark_ms is not None and self.action not in _DARK_OK:
            raise ValueError(
                f"dark_ms: {self.action} has no ECS dark period; remove dark_ms "
                f"(it applies to {', '.join(sorted(_DARK_OK))})"
            )
        if self.link is not None and self.link[0] == self.link[1]:
            raise ValueError(f"link: both ends are {self.link[0]}; give the two different nodes of the cable")
        return self

    def target(self) -> str:
        """Human label of what the event acts on: "ps1_1-t1_1", "t1_2", "w1_1_1->t1_3", "a-b @ 50 Mbit/s"."""
        if self.action == "reconfigure":
            return f"{self.worker}->{self.tor}"
        if self.link is not None:
            label = f"{self.link[0]}-{self.link[1]}"
            return f"{label} @ {self.mbps:g} Mbit/s" if self.mbps is not None else label
        return str(self.node)


def _check_when(at_s: float | None, at_step: int | None) -> None:
    """Exactly one of at_s / at_step must say when the event happens."""
    if at_s is not None and at_step is not None:
        raise ValueError("at_s: give either at_s or at_step, not both; remove one")
    if at_s is None and at_step is None:
        raise ValueError("at_s: an event needs a time; add at_s (seconds after t0) or at_step (a global step)")


class RandomFailures(BaseModel):
    """RAT's scenario: k random elements fail; every `every_s` they are repaired and k new ones drawn.

    `kinds` is applied by the caller when it builds the candidates for expand() (only it knows
    each link's kind and each switch's role); expand() draws from whatever it is given.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    k: int = Field(ge=1, description="elements failed at once")
    every_s: float = Field(gt=0, description="d: period after which the k are repaired and k new ones drawn")
    start_s: float = Field(default=0, ge=0, description="seconds after t0 of the first draw")
    count: int = Field(default=3, ge=1, description="number of draws (rounds)")
    seed: int = 1
    what: Literal["links", "switches"] = "links"
    kinds: tuple[str, ...] = Field(default=(), description="link kinds (ps-tor, tor-agg) or switch roles (tor, agg)")


def expand(
    events: Sequence[TimelineEvent],
    random_failures: RandomFailures | None,
    candidates: Mapping[str, Sequence[str] | Sequence[tuple[str, str]]],
) -> list[TimelineEvent]:
    """Concrete events: the explicit at_s ones and the random rounds sorted by time, then the at_step ones.

    `candidates` has "links" ((a, b) pairs that may fail without cutting a worker off) and
    "switches" (names). Round i (0-based) at start_s + i * every_s first repairs the previous
    round's elements, then fails k drawn with random.Random(seed) without replacement; one last
    repair follows at start_s + count * every_s. The sort is stable: at equal times explicit
    events come before random ones, and a round's repairs before its failures. Events with
    at_step keep their own order at the end (the runner triggers them by step, not by time).
    """
    timed = [e for e in events if e.at_s is not None]
    by_step = [e for e in events if e.at_s is None]
    if random_failures is not None:
        timed += _random_rounds(random_failures, candidates)
    timed.sort(key=lambda e: e.at_s)  # type: ignore[arg-type, return-value]
    return timed + by_step


def _random_rounds(
    rf: RandomFailures, candidates: Mapping[str, Sequence[str] | Sequence[tuple[str, str]]]
) -> list[TimelineEvent]:
    """The fail/repair events of every round of `rf`, in time order."""
    pool = _pool(rf.what, candidates)
    if rf.k > len(pool):
        raise ValueError(
            f"random_failures.k: k={rf.k} but only {len(pool)} {rf.what} may fail (candidates); lower k"
            + (" or widen kinds" if rf.kinds else "")
        )
    rng = random.Random(rf.seed)
    out: list[TimelineEvent] = []
    failed: list = []
    for i in range(rf.count + 1):
        t = rf.start_s + i * rf.every_s
        out += [_event(rf.what, x, t, fail=False) for x in failed]
        failed = rng.sample(pool, rf.k) if i < rf.count else []
        out += [_event(rf.what, x, t, fail=True) for x in failed]
    return out


def _pool(what: str, candidates: Mapping[str, Sequence[str] | Sequence[tuple[str, str]]]) -> list:
    """The candidates of one kind, normalised and sorted so the draws depend only on the set and the seed."""
    raw = candidates.get(what, ())
    if what == "links":
        return sorted({(str(a), str(b)) for a, b in raw})
    return sorted({str(x) for x in raw})


def _event(what: str, element: str | tuple[str, str], t: float, *, fail: bool) -> TimelineEvent:
    """The failure or repair of one link or switch at t."""
    if what == "links":
        return TimelineEvent(at_s=t, action="link_down" if fail else "link_up", link=element)  # type: ignore[arg-type]
    return TimelineEvent(at_s=t, action="fail_switch" if fail else "repair_switch", node=element)  # type: ignore[arg-type]


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


def _fmt(value: object, decimals: int = 4) -> object:
    """A CSV cell: floats rounded to `decimals`, None empty, everything else as is."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.{decimals}f}"
    return value


def write_csv(
    out_dir: Path, steps_by_job: Mapping[str, Sequence[Step]], metrics: Sequence[dict], t0: float
) -> tuple[Path, Path]:
    """timeline.csv (one row per step, times relative to t0) and events.csv (one row per event).

    events.csv has t_s = t - t0 first, then the other keys of the metrics dicts (without the
    absolute t); floats have 4 decimals, None is an empty cell.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    steps_path, events_path = out_dir / "timeline.csv", out_dir / "events.csv"
    with steps_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["job", "attempt", "step", "t_start_s", "t_end_s", "bct_s"])
        for job, steps in steps_by_job.items():
            for s in steps:
                w.writerow(
                    [job, s.attempt, s.step, _fmt(s.t_start - t0, 3), _fmt(s.t_end - t0, 3), _fmt(float(s.bct_s))]
                )
    keys = list(dict.fromkeys([*METRIC_KEYS, *(k for m in metrics for k in m)]))
    keys.remove("t")
    with events_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", *keys])
        for m in metrics:
            w.writerow([_fmt(float(m["t"]) - t0), *(_fmt(m.get(k)) for k in keys)])
    return steps_path, events_path


def plot(
    out_dir: Path, steps_by_job: Mapping[str, Sequence[Step]], metrics: Sequence[dict], t0: float, title: str
) -> Path:
    """timeline.png: each step's BCT at its end time, events as dashed lines, recoveries shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for i, (job, steps) in enumerate(steps_by_job.items()):
        attempts = sorted({s.attempt for s in steps})
        for a in attempts:
            seg = sorted((s for s in steps if s.attempt == a), key=lambda s: s.t_end)
            label = job if a == 0 else f"{job} (attempt {a})"
            style = "o-" if a == 0 else "s--"  # a restart (standby PS) draws on in another style
            ax.plot([s.t_end - t0 for s in seg], [s.bct_s for s in seg], style, ms=3, color=f"C{i}", label=label)
    for t, labels in _event_labels(metrics).items():
        x = t - t0
        ax.axvline(x, color="0.3", ls="--", lw=0.8)
        ax.text(
            x,
            0.98,
            "\n".join(labels),
            transform=ax.get_xaxis_transform(),
            rotation=90,
            va="top",
            ha="right",
            fontsize=6,
            bbox={"fc": "white", "alpha": 0.7, "lw": 0, "pad": 1},
        )
    for m in metrics:
        rec = m.get("recovery_s")
        if rec is not None and rec > 0:
            ax.axvspan(m["t"] - t0, m["t"] - t0 + rec, color="C3", alpha=0.12, lw=0)
    ax.set_xlabel("time since t0 (s)")
    ax.set_ylabel("BCT (s, emulated)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "timeline.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _event_labels(metrics: Sequence[dict]) -> dict[float, list[str]]:
    """Short "action target" labels grouped by event time (a random round shares one line)."""
    out: dict[float, list[str]] = {}
    for m in metrics:
        out.setdefault(float(m["t"]), []).append(f"{m['action']} {m['target']}")
    return out
