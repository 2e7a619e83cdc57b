"""The job's transfer phases: when, and how fully, the emulated links moved bytes.

The fidelity sampler's 1-s windows are too coarse for this: a ResNet50 push lasts a fraction of a
second, so its busiest 1-s window reads half the link's rate even when the link ran full while
the transfer lasted. This sampler reads every switch-side interface's byte counters in both
directions (one read of /proc/net/dev) every `PHASE_S` and keeps, per window, the *bottleneck
utilisation*: the most any one link carried, as a share of its configured rate. Both directions
count because the switch-side end's rx is what the host end sent through its own shaper (a PS
answering a pull shows there, not on any switch-side tx).

A window *moves bytes* when its bottleneck utilisation reaches `MOVING` of a link's rate; a
*transfer phase* is a maximal run of such windows. Three things read them:
- the fidelity verdict (emulation.fidelity) judges each phase's bottleneck utilisation over its
  interior windows (the first and last are partial by construction);
- the runner's decomposition of each step into communication (the time within the step that some
  link moved bytes) and the rest (replays.decomposition reports it in paper-equivalent seconds);
- the runner's stall watch: a job whose links have not moved bytes for a minute, with no step.
"""

from __future__ import annotations

import csv
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from emulation.periodic import Periodic
from emulation.tso import wire_bytes
from topologies.files import atomic_open
from topologies.spec import DEFAULT_MTU

LOG = logging.getLogger(__name__)

#: window of the transfer-phase sampler (s): short against a ResNet50 push (~0.5-2 s emulated)
PHASE_S = 0.25
#: a window moves bytes when some link carried this share of its rate (TCP's retransmission
#: probes and gRPC keep-alives of a stalled job stay far below it)
MOVING = 0.05
PROC_NET_DEV = Path("/proc/net/dev")


def read_counters(path: Path = PROC_NET_DEV) -> dict[str, tuple[int, int, int, int]]:
    """(rx bytes, rx packets, tx bytes, tx packets) of every interface of this namespace, in one read."""
    out = {}
    for line in path.read_text().splitlines()[2:]:
        name, _, rest = line.partition(":")
        fields = rest.split()
        if len(fields) >= 10:
            out[name.strip()] = (int(fields[0]), int(fields[1]), int(fields[8]), int(fields[9]))
    return out


def moved_wire(
    now: Mapping[str, tuple[int, int, int, int]], last: Mapping[str, tuple[int, int, int, int]], mtu: int
) -> dict[str, tuple[int, int]]:
    """(rx, tx) bytes each interface moved between two reads, as frames of `mtu` on the wire
    (a GSO packet's frames each carry their headers: emulation.tso.wire_bytes)."""
    out = {}
    for i, (rb, rp, tb, tp) in now.items():
        if i in last:
            rb0, rp0, tb0, tp0 = last[i]
            out[i] = (wire_bytes(rb - rb0, rp - rp0, mtu), wire_bytes(tb - tb0, tp - tp0, mtu))
    return out


@dataclass(frozen=True)
class Window:
    """One sampler window: its end (unix s), length, and its bottleneck link's utilisation."""

    t: float
    dt_s: float
    util: float  # the most any link carried, as a share of its rate (one direction)
    link: str = ""  # that link's interface
    #: every link that moved bytes in the window (util >= MOVING), busiest first: (interface, util)
    links: tuple[tuple[str, float], ...] = ()

    @property
    def t0(self) -> float:
        return self.t - self.dt_s

    @property
    def moving(self) -> bool:
        return self.util >= MOVING


def window(t: float, dt_s: float, moved: Mapping[str, tuple[int, int]], rate_mbps: Mapping[str, float]) -> Window:
    """A window from the bytes each interface moved in it ((rx, tx) deltas) and their rates."""
    utils = []
    for intf, (rx, tx) in moved.items():
        rate = rate_mbps.get(intf, 0.0)
        if rate > 0 and dt_s > 0:
            utils.append((intf, max(rx, tx) * 8 / dt_s / 1e6 / rate))
    utils.sort(key=lambda iu: -iu[1])
    best, link = (utils[0][1], utils[0][0]) if utils else (0.0, "")
    return Window(t, dt_s, best, link, tuple((i, u) for i, u in utils if u >= MOVING))


@dataclass(frozen=True)
class Phase:
    """A maximal run of windows that moved bytes."""

    windows: tuple[Window, ...]

    @property
    def t0(self) -> float:
        return self.windows[0].t0

    @property
    def t1(self) -> float:
        return self.windows[-1].t

    @property
    def duration_s(self) -> float:
        return self.t1 - self.t0

    @property
    def interior(self) -> tuple[Window, ...]:
        """The windows wholly inside the transfer (the first and last are partial)."""
        return self.windows[1:-1]

    @property
    def judged(self) -> bool:
        """Long enough to have interior windows."""
        return len(self.windows) >= 3

    @property
    def util(self) -> float:
        """Mean bottleneck utilisation over the interior windows (all windows if too short), each
        window at most 1: one that read over its link's rate took bytes the window before it left
        at a counter read, so its excess is sampling, not a faster link (as in busy_s)."""
        ws = self.interior or self.windows
        return sum(min(1.0, w.util) * w.dt_s for w in ws) / sum(w.dt_s for w in ws)


def phases(windows: Sequence[Window]) -> list[Phase]:
    """The transfer phases of consecutive windows (a window that moved nothing ends one)."""
    out: list[Phase] = []
    run: list[Window] = []
    for w in windows:
        if w.moving:
            run.append(w)
        elif run:
            out.append(Phase(tuple(run)))
            run = []
    if run:
        out.append(Phase(tuple(run)))
    return out


def moving_s(windows: Sequence[Window], t0: float, t1: float) -> float:
    """Seconds of [t0, t1] covered by windows that moved bytes: never more than t1 - t0."""
    return sum(max(0.0, min(w.t, t1) - max(w.t0, t0)) for w in windows if w.moving)


def busy_s(windows: Sequence[Window], t0: float, t1: float) -> float:
    """Seconds of [t0, t1] the bottleneck link needed for what it carried (bytes / rate, per
    window, counted only where the window moved bytes): the links' busy time, finer than the
    window, never more than t1 - t0."""
    return sum(min(1.0, w.util) * max(0.0, min(w.t, t1) - max(w.t0, t0)) for w in windows if w.moving)


def link_busy_s(windows: Sequence[Window], t0: float, t1: float) -> float:
    """Seconds of [t0, t1] the one link that was busy longest needed for what it carried (bytes /
    rate, summed per link over the windows): what a model with one bottleneck link counts. At most
    busy_s; below it where parallel links took turns being the busiest (none paced the whole step)."""
    per: dict[str, float] = {}
    for w in windows:
        overlap = max(0.0, min(w.t, t1) - max(w.t0, t0))
        if overlap > 0 and w.moving:
            for intf, u in w.links:
                per[intf] = per.get(intf, 0.0) + min(1.0, u) * overlap
    return max(per.values(), default=0.0)


def last_moving(windows: Sequence[Window]) -> float | None:
    """End (unix s) of the last window that moved bytes, None if none did."""
    return next((w.t for w in reversed(windows) if w.moving), None)


LINKS_CSV_FIELDS = ("t_end", "dt_s", "link", "util")


def write_links_csv(path: Path, windows: Sequence[Window]) -> None:
    """Every window's links that moved bytes, one row each (t_end unix s, window s, switch-side
    interface, share of its rate): the run's link utilisation over time, for plots and for asking
    which links were busy when (a step's communication is the busiest link's, per window)."""
    with atomic_open(path, newline="") as f:
        w = csv.writer(f)
        w.writerow(LINKS_CSV_FIELDS)
        for win in windows:
            for intf, u in win.links:
                w.writerow((f"{win.t:.3f}", f"{win.dt_s:.3f}", intf, f"{u:.4f}"))


def read_links_csv(path: Path) -> list[Window]:
    """The windows of a run's links.csv (write_links_csv), for recomputing what was derived from
    them. Windows with no link at MOVING are not in the file; none of the uses counts them."""
    links: dict[tuple[float, float], list[tuple[str, float]]] = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            links.setdefault((float(row["t_end"]), float(row["dt_s"])), []).append((row["link"], float(row["util"])))
    out = []
    for (t, dt), ls in sorted(links.items()):
        ls.sort(key=lambda iu: -iu[1])
        out.append(Window(t, dt, ls[0][1], ls[0][0], tuple(ls)))
    return out


class TrafficSampler(Periodic):
    """Every `period_s`, one Window over the given switch-side interfaces (root namespace)."""

    def __init__(self, rate_mbps: Mapping[str, float], period_s: float = PHASE_S, mtu: int = DEFAULT_MTU) -> None:
        super().__init__(period_s, name="traffic-sampler")
        self.rate_mbps = dict(rate_mbps)
        self.mtu = mtu
        self.windows: list[Window] = []
        self._last: tuple[float, dict[str, tuple[int, int, int, int]]] | None = None

    def _counters(self) -> dict[str, tuple[int, int, int, int]]:
        try:
            c = read_counters()
        except OSError as err:  # not expected on Linux; the phases are then empty
            LOG.warning("cannot read %s: %s", PROC_NET_DEV, err)
            return {}
        return {i: c[i] for i in self.rate_mbps if i in c}

    def first(self) -> None:
        self._last = (time.monotonic(), self._counters())

    def tick(self) -> None:
        assert self._last is not None
        now, counters = time.monotonic(), self._counters()
        t_last, last = self._last
        self.windows.append(window(time.time(), now - t_last, moved_wire(counters, last, self.mtu), self.rate_mbps))
        self._last = (now, counters)

    def stop(self) -> list[Window]:
        self.halt()
        return self.windows
