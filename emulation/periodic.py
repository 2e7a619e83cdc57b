"""A thread that calls `tick()` every `period_s` between start() and halt(): the loop the run's
samplers share (CPU and interface bytes, transfer windows, TCP connections' paths).

Why not sched or a Timer: each sampler needs a first reading taken in the caller's thread
before start() returns (its baseline), a wait that stops at once when halted, and a join that
cannot hang a run's teardown; that is this much code, and threading.Event gives it.
"""

from __future__ import annotations

import threading


class Periodic(threading.Thread):
    """Subclasses implement `first()` (the baseline, run by start() in the caller's thread) and
    `tick()` (one sample), and end with `halt()` before reading their results."""

    def __init__(self, period_s: float, name: str | None = None) -> None:
        super().__init__(daemon=True, name=name)
        self.period_s = period_s
        self._halted = threading.Event()

    def first(self) -> None:
        """The reading taken before the thread starts (nothing by default)."""

    def tick(self) -> None:
        raise NotImplementedError

    def start(self) -> Periodic:  # type: ignore[override]
        self.first()
        super().start()
        return self

    def run(self) -> None:
        while not self._halted.wait(self.period_s):
            self.tick()

    def halt(self, timeout_s: float | None = 5.0) -> None:
        """Stop ticking and wait for the thread (at most `timeout_s`; None: as long as it takes)."""
        self._halted.set()
        if self.is_alive():
            self.join(timeout=timeout_s)
