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
      - {at_s: 5, action: pause_senders, k: 2, every_s: 1, for_s: 30, seed: 3}   # scheme jobs
      - {at_s: 0, action: shuffle, hosts: [h3_0_2, h3_1_2, h3_1_3], mb: 40, every_s: 6}   # scheme jobs
    random_failures: {k: 2, every_s: 15, count: 3, what: links, seed: 7}

`pause_senders` is RAT's failure model (its Fig. 7): from at_s, k hosts drawn at random send
nothing for every_s seconds, then k others are drawn, until for_s has passed (default: the end of
the run). The scheme engine holds the hosts' sends itself (engine.pauses), so only
scheme jobs take it; the network-level variant is link_down.

`shuffle` is Parameter Flow's shared cluster: from at_s, the background `hosts` (none of the
job's) shuffle all-to-all every every_s seconds, each sending `mb` paper-equivalent MB (divided by
the run's scale and compress, as the model bytes are) to each of the others, then idle until the
next period, until for_s has passed (default: the end of the run). The traffic comes from
engine.shuffle processes inside the background hosts (runs.background); scheme jobs only.

This module holds the schema and the expansion of random failures into concrete events;
runs.recovery measures what each applied event cost the job, runs.timeline_out writes
the CSV/PNG. None of them knows about Mininet: the runner applies the events (runs.inject)
and records when each one happened.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from topologies.schema import InputError

Action = Literal[
    "link_down",
    "link_up",
    "fail_switch",
    "repair_switch",
    "fail_ps",
    "set_rate",
    "reconfigure",
    "pause_senders",
    "shuffle",
]

#: The fields each action needs (all others but dark_ms must be absent).
_NEEDS: dict[str, tuple[str, ...]] = {
    "link_down": ("link",),
    "link_up": ("link",),
    "set_rate": ("link", "mbps"),
    "fail_switch": ("node",),
    "repair_switch": ("node",),
    "fail_ps": ("node",),
    "reconfigure": ("worker", "tor"),
    "pause_senders": ("k", "every_s"),
    "shuffle": ("hosts", "mb", "every_s"),
}
#: Fields an action may take but does not need.
_OPTIONAL: dict[str, tuple[str, ...]] = {"pause_senders": ("for_s", "seed"), "shuffle": ("for_s",)}
#: Actions that run inside the scheme engine's world (not the controller's): at_s only, scheme jobs only
ENGINE_ACTIONS = frozenset({"pause_senders", "shuffle"})
#: How each target field is written in a file, for the error messages.
_FORMS: dict[str, str] = {
    "link": "link: [a, b] (the two node names of the cable)",
    "mbps": "mbps: RATE (paper-equivalent Mbit/s)",
    "node": "node: NAME",
    "worker": "worker: NAME (the worker to move)",
    "tor": "tor: NAME (the ToR it moves to)",
    "k": "k: N (hosts paused at once)",
    "every_s": "every_s: D (seconds each draw lasts; then k others are drawn)",
    "for_s": "for_s: SECONDS (how long the draws go on)",
    "seed": "seed: N (the draws' seed)",
    "hosts": "hosts: [a, b, ...] (the background hosts, at least two, none of the job's)",
    "mb": "mb: MB (paper-equivalent MB each host sends to each other per shuffle)",
}
#: Actions whose effect on PSNet goes through an ECS circuit, so a dark period applies.
_DARK_OK = frozenset({"reconfigure", "link_down", "link_up", "fail_switch", "repair_switch"})


class TimelineError(InputError):
    """A timeline that does not fit its topology (or draws more failures than it has candidates);
    the message is the one line shown to the user."""


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
    k: int | None = Field(default=None, ge=1, description="pause_senders: hosts paused at once")
    every_s: float | None = Field(
        default=None,
        gt=0,
        description="pause_senders: d, seconds per draw; shuffle: seconds from one shuffle's start to the next's",
    )
    for_s: float | None = Field(
        default=None, gt=0, description="pause_senders, shuffle: how long (default: to the end)"
    )
    seed: int | None = Field(default=None, description="pause_senders: seed of the draws (default 1)")
    hosts: list[str] | None = Field(default=None, description="shuffle: the background hosts")
    mb: float | None = Field(default=None, gt=0, description="shuffle: paper-equivalent MB per pair and shuffle")

    @model_validator(mode="after")
    def _check(self) -> TimelineEvent:
        _check_when(self.at_s, self.at_step)
        needs = _NEEDS[self.action]
        for name in needs:
            if getattr(self, name) is None:
                raise ValueError(f"{name}: {self.action} needs {_FORMS[name]}; add it")
        for name in _FORMS:
            if name not in needs + _OPTIONAL.get(self.action, ()) and getattr(self, name) is not None:
                takes = ", ".join(needs)
                raise ValueError(f"{name}: {self.action} does not take {name}; remove it ({self.action} takes {takes})")
        if self.dark_ms is not None and self.action not in _DARK_OK:
            raise ValueError(
                f"dark_ms: {self.action} has no ECS dark period; remove dark_ms "
                f"(it applies to {', '.join(sorted(_DARK_OK))})"
            )
        if self.action in ENGINE_ACTIONS and self.at_s is None:
            what = "draws its pauses" if self.action == "pause_senders" else "starts its shuffles"
            raise ValueError(f"at_step: {self.action} {what} from a time; give at_s instead")
        if self.hosts is not None and len(set(self.hosts)) < 2:
            raise ValueError(f"hosts: a shuffle needs at least two distinct background hosts, got {self.hosts}")
        if self.link is not None and self.link[0] == self.link[1]:
            raise ValueError(f"link: both ends are {self.link[0]}; give the two different nodes of the cable")
        return self

    def target(self) -> str:
        """Human label of what the event acts on: "ps1_1-t1_1", "t1_2", "w1_1_1->t1_3", "a-b @ 50 Mbit/s"."""
        if self.action == "reconfigure":
            return f"{self.worker}->{self.tor}"
        if self.action == "pause_senders":
            return f"k={self.k} every {self.every_s:g} s" + (f" for {self.for_s:g} s" if self.for_s else "")
        if self.action == "shuffle":
            return f"{len(self.hosts or [])} hosts, {self.mb:g} MB each way every {self.every_s:g} s" + (
                f" for {self.for_s:g} s" if self.for_s else ""
            )
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
