"""A job that stopped: no step and no byte on any link for its `stall_s` (default STALL_S, 45 s), found
while the run goes on.

Without it a stalled job waited for its deadline (900-1200 s) and the message quoted TensorFlow's
start-up banner. The watch is armed once every worker of every job's current attempt is ready
(before that, TensorFlow starting 8 processes on 2 cores moves nothing for tens of seconds, and
the deadline covers a start that never ends); a PS failover disarms it until the new attempt's
workers are ready. Progress is any line of a job's processes after arming (a step, a checkpoint)
or a transfer-sampler window in which some link moved bytes (emulation.phases.MOVING: TCP's
backed-off retransmission probes do not count). A stall raises `Stalled` with what each process
was doing: its kernel state and wait channels (/proc) and its own last lines.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from emulation.phases import Window, last_moving
from tfjob.procs import JobRun
from workloads.errors import RunError
from workloads.experiment import STALL_S

__all__ = ["STALL_S", "ProgressWatch", "StallWatch", "Stalled"]


class Stalled(RunError):
    """The jobs made no progress for their stall_s; the message says what each process was doing."""


class StallWatch:
    """Follows the jobs' progress; `check` raises Stalled once they made none for `limit_s`."""

    def __init__(
        self, jobs: Sequence[JobRun], windows: Callable[[], Sequence[Window]], limit_s: float = STALL_S
    ) -> None:
        self.jobs = list(jobs)
        self.windows = windows
        self.limit_s = limit_s
        self.armed_at: float | None = None
        self.last_line: float | None = None

    def armed(self) -> bool:
        """Every job's current attempt has all its workers ready."""
        for jr in self.jobs:
            workers = [p for p in jr.current() if p.job == "worker"]
            if len(workers) < len(jr.workers) or not all(p.ready for p in workers):
                return False
        return True

    def saw(self, rec: dict) -> None:
        """A process line: progress, once armed (start-up lines arm, they do not count)."""
        if rec.get("event") in ("iter", "checkpoint", "done"):
            self.last_line = time.time()

    def idle_s(self, now: float | None = None) -> float:
        """Seconds since the last progress (a line or a window moving bytes) since arming; 0 unarmed."""
        now = time.time() if now is None else now
        if not self.armed():
            self.armed_at = None
            return 0.0
        if self.armed_at is None:
            self.armed_at = now
        seen = [t for t in (self.armed_at, self.last_line, last_moving(self.windows())) if t is not None]
        return now - max(seen)

    def check(self, now: float | None = None) -> None:
        idle = self.idle_s(now)
        if idle >= self.limit_s:
            doing = "; ".join(p.doing() for jr in self.jobs for p in jr.current())
            raise Stalled(
                f"stalled: no step and no link moving bytes for {idle:.0f} s (limit {self.limit_s:g} s); "
                f"the processes: {doing}"
            )


class ProgressWatch:
    """The same rule for processes that report progress as a count (the scheme engine's hosts):
    armed once `ready()`, progress is the count growing or a window moving bytes; `check` raises
    Stalled with `doing()` (what each process was at) after `limit_s` without either.

    `check` may be called often (the scheme launcher's 0.1-s loop); it looks at most every
    `every_s`, since `ready` and `count` read every host's files and a stall is counted in tens
    of seconds."""

    def __init__(
        self,
        ready: Callable[[], bool],
        count: Callable[[], int],
        windows: Callable[[], Sequence[Window]],
        doing: Callable[[], str],
        limit_s: float = STALL_S,
        every_s: float = 1.0,
    ) -> None:
        self.ready, self.count, self.windows, self.doing = ready, count, windows, doing
        self.limit_s, self.every_s = limit_s, every_s
        self.last: tuple[int, float] | None = None  # (count, when it last grew or the watch armed)
        self.looked = float("-inf")

    def check(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        if now - self.looked < self.every_s:
            return
        self.looked = now
        if not self.ready():
            return
        n = self.count()
        if self.last is None or n > self.last[0]:
            self.last = (n, now)
        seen = max(t for t in (self.last[1], last_moving(self.windows())) if t is not None)
        if now - seen >= self.limit_s:
            raise Stalled(
                f"stalled: no iteration and no link moving bytes for {now - seen:.0f} s (limit {self.limit_s:g} s); "
                f"the processes: {self.doing()}"
            )
