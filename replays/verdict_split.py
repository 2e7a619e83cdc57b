"""How the fidelity verdict splits the committed points: is its rule for a starved machine lenient?

The verdict (emulation.fidelity.judge) calls a run on a starved machine (ovs-vswitchd over
OVS_CPU_LIMIT of a core, or the machine's idle p5 under IDLE_LIMIT) faithful when its transfer
phases kept the busiest link at PHASE_FULL (75%) of its rate or more on average. Whether 75% lets
CPU-paced runs through is a question of how that utilisation spreads on runs the CPU cannot have
paced: if unstarved runs sit anywhere from 70% to 100% (TCP's ramp, staggered ends), a starved run
at 85% is within what the network alone does; if they all sit at 95-100%, a starved 85% is the
CPU's. The committed summaries answer it without running anything, and `testbed report` prints
the answer on the reproduction page each time they change.

Why the text is parsed: the summaries (figure-summary/1) keep each point's verdict as the text
`judge` wrote, not its numbers. The three numbers are read back from that text, in both its forms
(the faithful detail and the starved reason); a point whose text lacks one is left out and counted.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from emulation.fidelity import IDLE_LIMIT, LINK_FULL, OVS_CPU_LIMIT, PHASE_FULL

_OVS = re.compile(r"ovs-vswitchd (?:p95 |at )(\d+)% of a core")
_IDLE = re.compile(r"idle (?:p5 |down to )(\d+)%")
_UTIL = re.compile(r"kept the busiest link at (\d+)% of its rate on average")


@dataclass(frozen=True)
class Signals:
    """One point's verdict numbers (shares of 1), as its text states them (whole percent)."""

    ovs_p95: float | None  # None: ovs-vswitchd under its limit, so the starved reason left it out
    idle_p5: float | None
    transfer_util: float

    @property
    def starved(self) -> bool:
        return (self.ovs_p95 or 0.0) > OVS_CPU_LIMIT or (self.idle_p5 if self.idle_p5 is not None else 1.0) < IDLE_LIMIT


def signals(text: str) -> Signals | None:
    """The numbers in a verdict's text; None where it names no transfer-phase utilisation (no phase
    sampled, a loopback job) or neither CPU figure."""
    ovs, idle, util = _OVS.search(text), _IDLE.search(text), _UTIL.search(text)
    if util is None or (ovs is None and idle is None):
        return None
    pct = lambda m: None if m is None else int(m.group(1)) / 100  # noqa: E731
    return Signals(pct(ovs), pct(idle), int(util.group(1)) / 100)


@dataclass(frozen=True)
class Point:
    result: str
    id: str
    faithful: bool
    signals: Signals


@dataclass(frozen=True)
class Group:
    """Faithful points of one kind (starved or not): how their transfer utilisation spreads."""

    name: str
    utils: tuple[float, ...]

    @property
    def n(self) -> int:
        return len(self.utils)

    def quantile(self, q: float) -> float:
        s = sorted(self.utils)
        return s[min(len(s) - 1, int(q * (len(s) - 1)))]

    @property
    def under_full(self) -> int:
        return sum(u < LINK_FULL for u in self.utils)


@dataclass(frozen=True)
class Split:
    starved: Group
    unstarved: Group
    #: starved points the verdict passed at a utilisation under LINK_FULL: the ones a rule of
    #: "starved and under 90%" would drop
    doubtful: tuple[Point, ...]
    without_numbers: int  # points with a verdict whose text names no transfer-phase utilisation

    def conclusion(self) -> str:
        """One sentence: where the doubtful points sit against the unstarved ones' spread."""
        if not self.doubtful:
            return f"No starved point passed under {LINK_FULL:.0%}: the rule's leniency decided nothing here."
        if not self.unstarved.n:
            return "No unstarved point to compare with."
        low = min(p.signals.transfer_util for p in self.doubtful)
        u = self.unstarved
        share = sum(x <= low for x in u.utils) / u.n
        return (
            f"{len(self.doubtful)} starved point(s) passed under {LINK_FULL:.0%} (lowest {low:.0%}); "
            f"{u.under_full} of {u.n} unstarved points ({u.under_full / u.n:.0%}) are under {LINK_FULL:.0%} too, "
            f"{share:.0%} at or under {low:.0%}: the emulated network runs in that range with the CPU to spare, so "
            "the utilisation alone does not say the CPU set these points' pace (a stricter PHASE_FULL would drop "
            "them with as much reason as the unstarved ones)."
        )

    def without_text(self) -> str:
        if not self.without_numbers:
            return ""
        return (
            f"{self.without_numbers} judged points name no transfer-phase utilisation "
            "(no phase sampled, or a loopback job): not counted above."
        )


def split(points: Iterable[tuple[str, str, bool | None, str]]) -> Split:
    """(result, point id, faithful, verdict text) of every committed point -> the split."""
    judged: list[Point] = []
    without = 0
    for result, pid, faithful, text in points:
        if faithful is None or not text:
            continue
        sig = signals(text)
        if sig is None:
            without += 1
            continue
        judged.append(Point(result, pid, faithful, sig))
    ok = [p for p in judged if p.faithful]
    starved = tuple(p.signals.transfer_util for p in ok if p.signals.starved)
    unstarved = tuple(p.signals.transfer_util for p in ok if not p.signals.starved)
    doubtful = tuple(
        sorted(
            (p for p in ok if p.signals.starved and p.signals.transfer_util < LINK_FULL),
            key=lambda p: p.signals.transfer_util,
        )
    )
    return Split(Group("starved", starved), Group("not starved", unstarved), doubtful, without)


def table(s: Split) -> tuple[list[str], list[list[str]]]:
    """Columns and rows: per group, its faithful points and their utilisation's spread."""
    cols = ["faithful points", "n", "lowest", "10th pct", "median", f"under {LINK_FULL:.0%}"]
    rows = [
        [
            g.name,
            str(g.n),
            f"{min(g.utils):.0%}",
            f"{g.quantile(0.1):.0%}",
            f"{statistics.median(g.utils):.0%}",
            str(g.under_full),
        ]
        if g.n
        else [g.name, "0", "-", "-", "-", "0"]
        for g in (s.unstarved, s.starved)
    ]
    return cols, rows


def rule_text() -> str:
    return (
        f"A run is starved where ovs-vswitchd's p95 is over {OVS_CPU_LIMIT:.0%} of a core or the machine's idle p5 "
        f"under {IDLE_LIMIT:.0%}; a starved run is faithful where its transfer phases kept the busiest link at "
        f"{PHASE_FULL:.0%} of its rate or more on average (emulation/fidelity.py). The spread of that utilisation "
        "on the committed faithful points, starved and not:"
    )
