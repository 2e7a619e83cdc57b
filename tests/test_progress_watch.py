"""The scheme engine's stall rule (runs.stall.ProgressWatch): armed once every host is ready,
progress is an iteration or a window that moved bytes; a minute of neither is a stall."""

from __future__ import annotations

import pytest

from emulation.phases import Window
from runs.stall import ProgressWatch, Stalled


def watch(state: dict) -> ProgressWatch:
    return ProgressWatch(
        ready=lambda: state["ready"],
        count=lambda: state["count"],
        windows=lambda: state["windows"],
        doing=lambda: "h1: iteration 3 done",
        limit_s=45,
    )


def test_no_stall_before_every_host_is_ready():
    state = {"ready": False, "count": 0, "windows": []}
    w = watch(state)
    for t in (0, 100, 1000):
        w.check(now=t)  # starting up is the deadline's business


def test_iterations_or_moving_links_are_progress_and_a_quiet_minute_is_a_stall():
    state = {"ready": True, "count": 0, "windows": []}
    w = watch(state)
    w.check(now=1000)  # armed here
    state["count"] = 2
    w.check(now=1040)  # an iteration: progress
    state["windows"] = [Window(t=1080, dt_s=0.25, util=0.5, link="l0-eth1")]
    w.check(now=1100)  # a link moved bytes at 1080
    w.check(now=1124)
    with pytest.raises(Stalled, match=r"no iteration and no link moving bytes for 45 s .* h1: iteration 3 done"):
        w.check(now=1125)


def test_frequent_checks_read_the_hosts_once_a_second():
    reads = []

    def count() -> int:
        reads.append(1)
        return 0

    w = ProgressWatch(lambda: True, count, lambda: [], lambda: "", limit_s=45)
    for i in range(30):  # 3 s of the launcher's 0.1-s loop
        w.check(now=1000 + i / 10)
    assert len(reads) == 3
