"""One sampler of what an emulation costs the machine, shared by the fidelity monitor and the
benchmarks: machine idle and busy CPU, ovs-vswitchd's CPU, the CPU of a set of processes,
optionally their peak memory, and interface byte counters, per window of `period_s`.

Everything is read as cumulative counters (psutil.cpu_times, Process.cpu_times, /sys tx_bytes)
and differenced here, so several samplers in one process (a benchmark's beside a run's fidelity
monitor) never disturb each other, as psutil's interval-less *_percent calls would (they share
one module-level baseline).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from emulation.periodic import Periodic
from emulation.tso import OVS_PID_FILES, wire_bytes
from topologies.spec import DEFAULT_MTU

LOG = logging.getLogger(__name__)
OVS_NAME = "ovs-vswitchd"


def ovs_process() -> psutil.Process | None:
    """The running ovs-vswitchd, or None: from its PID file (checked by name, since a stale
    file's PID may have been reused), else by its exact process name."""
    for f in OVS_PID_FILES:
        try:
            p = psutil.Process(int(f.read_text().strip()))
            if p.name() == OVS_NAME:
                return p
        except (OSError, ValueError, psutil.Error):
            continue
    for p in psutil.process_iter(["name"]):
        if p.info["name"] == OVS_NAME:
            return p
    return None


def tx_counters(intf: str) -> tuple[int, int]:
    """(bytes, packets) `intf` (root namespace) has transmitted so far; zeros if it is gone."""
    try:
        stats = Path(f"/sys/class/net/{intf}/statistics")
        return int((stats / "tx_bytes").read_text()), int((stats / "tx_packets").read_text())
    except (OSError, ValueError):
        return 0, 0


def tx_bytes(intf: str) -> int:
    """Bytes `intf` (root namespace) has transmitted so far, as its counter counts them; 0 if it is gone."""
    return tx_counters(intf)[0]


def hwm_bytes(pid: int) -> int | None:
    """The kernel's peak resident set (VmHWM) of a process, None if it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@dataclass(frozen=True)
class Sample:
    """One window: what the machine, ovs-vswitchd, the watched processes and the interfaces did."""

    t: float  # unix time at the end of the window
    dt_s: float  # length of the window
    idle: float  # machine idle share over the window, all CPUs (0-1)
    busy_s: float  # machine busy CPU seconds (user, nice, system) in the window
    ovs_cpu: float | None  # ovs-vswitchd's share of one core (None: not running)
    procs_cpu_s: float  # CPU seconds the watched processes used in the window
    tx_bytes: dict[str, int]  # per interface: bytes transmitted in the window, as frames on the wire
    tracked: int = 0  # watched processes whose memory is tracked, alive at the end of the window

    def rate_mbps(self, intf: str) -> float:
        """The interface's transmit rate over the window (Mbit/s)."""
        return self.tx_bytes.get(intf, 0) * 8 / self.dt_s / 1e6 if self.dt_s > 0 else 0.0


@dataclass
class Memory:
    """Peak resident memory of one tracked process (max of sampled RSS and the kernel's VmHWM)."""

    pid: int
    cmdline: list[str]
    peak_rss: int = 0
    samples: int = 0


def _cpu_s(p: psutil.Process) -> float:
    c = p.cpu_times()
    return c.user + c.system


def _machine() -> tuple[float, float, float]:
    """(idle, busy, total) CPU seconds of the machine so far; total as psutil counts it (guest
    time is already inside user and nice)."""
    t = psutil.cpu_times()
    total = sum(t) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)
    return t.idle, t.user + t.nice + t.system, total


class Sampler(Periodic):
    """Samples every `period_s` between start() and stop(); `samples` holds the windows.

    intfs: root-namespace interfaces whose transmitted bytes are counted, as frames of `mtu` on the
    wire (emulation.tso.wire_bytes: a GSO packet's frames each carry headers). watch: returns the
    processes whose CPU is summed each window (asked anew each time, so processes that appear
    count from their start). track: of the watched processes, those whose peak memory is kept
    in `memory` (by PID).
    """

    def __init__(
        self,
        period_s: float = 1.0,
        intfs: Iterable[str] = (),
        watch: Callable[[], Iterable[psutil.Process]] | None = None,
        track: Callable[[psutil.Process], bool] | None = None,
        mtu: int = DEFAULT_MTU,
    ) -> None:
        super().__init__(period_s, name="sampler")
        self.intfs = list(intfs)
        self.mtu = mtu
        self.watch = watch
        self.track = track
        self.ovs = ovs_process()
        self.samples: list[Sample] = []
        self.memory: dict[int, Memory] = {}
        self._cpu: dict[int, float] = {}  # pid -> CPU seconds at its last look
        self._ovs_cpu = 0.0
        self._last: tuple[float, tuple[float, float, float], dict[str, tuple[int, int]]] | None = None

    def stop(self, final: bool = False) -> list[Sample]:
        """End sampling (with `final`, one last, shorter window up to now); returns the windows."""
        self.halt()
        if final:
            self.tick()
        return self.samples

    def first(self) -> None:
        """The baseline: CPU times, machine counters and interface bytes at start."""
        if self.ovs is not None:
            try:
                self._ovs_cpu = _cpu_s(self.ovs)
            except psutil.Error:
                self.ovs = None
        self._procs_cpu_s(baseline=True)
        self._last = (time.monotonic(), _machine(), {i: tx_counters(i) for i in self.intfs})

    def tick(self) -> None:
        assert self._last is not None
        now, machine, counters = time.monotonic(), _machine(), {i: tx_counters(i) for i in self.intfs}
        t_last, (idle0, busy0, total0), last = self._last
        dt = now - t_last
        d_total = machine[2] - total0
        ovs = None
        if self.ovs is not None:
            try:
                cpu = _cpu_s(self.ovs)
                ovs = (cpu - self._ovs_cpu) / dt if dt > 0 else 0.0
                self._ovs_cpu = cpu
            except psutil.Error:  # ovs-vswitchd went away
                self.ovs = None
        procs_s, tracked = self._procs_cpu_s()
        self.samples.append(
            Sample(
                t=time.time(),
                dt_s=dt,
                idle=(machine[0] - idle0) / d_total if d_total > 0 else 1.0,
                busy_s=machine[1] - busy0,
                ovs_cpu=ovs,
                procs_cpu_s=procs_s,
                tx_bytes={
                    i: wire_bytes(counters[i][0] - last[i][0], counters[i][1] - last[i][1], self.mtu)
                    for i in self.intfs
                },
                tracked=tracked,
            )
        )
        self._last = (now, machine, counters)

    def _procs_cpu_s(self, baseline: bool = False) -> tuple[float, int]:
        """CPU seconds the watched processes used since the last look (a new one: since it
        started; at the baseline nothing counts), and how many tracked ones are alive."""
        if self.watch is None:
            return 0.0, 0
        try:
            procs = list(self.watch())
        except psutil.Error:
            return 0.0, 0
        used, tracked = 0.0, 0
        for p in procs:
            try:
                cpu = _cpu_s(p)
                if not baseline:
                    used += max(0.0, cpu - self._cpu.get(p.pid, 0.0))
                self._cpu[p.pid] = cpu
                if self.track is not None and self._remember(p):
                    tracked += 1
            except psutil.Error:  # exited between the listing and the read
                continue
        return used, tracked

    def _remember(self, p: psutil.Process) -> bool:
        """Update the peak memory of `p` if it is tracked; False if it is not."""
        mem = self.memory.get(p.pid)
        if mem is None:
            if not self.track(p):  # type: ignore[misc]
                return False
            mem = self.memory[p.pid] = Memory(p.pid, p.cmdline())
        mem.peak_rss = max(mem.peak_rss, p.memory_info().rss, hwm_bytes(p.pid) or 0)
        mem.samples += 1
        return True


def after(samples: Sequence[Sample], since: float | None, until: float | None = None) -> list[Sample]:
    """The windows that ended at or after `since` (and, with `until`, that began by then: a window
    overlapping the span counts), or all of them if none did."""
    out = [s for s in samples if (since is None or s.t >= since) and (until is None or s.t - s.dt_s <= until)]
    return out or list(samples)
