"""Start one scheme process per host, wait for them, and fold their per-iteration lines.

The starter is a function (host, argv) -> Popen, so the same code runs the processes on
loopback (tests of the engine itself) and inside Mininet hosts (`Testbed.host(h).popen`).
"""

from __future__ import annotations

import json
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from schemes.registry import compile_from_config
from schemes.schedule import Schedule, host_part

Starter = Callable[[str, list[str]], subprocess.Popen]
BASE_PORT = 47000


@dataclass
class SchemeRun:
    """What the processes wrote: every host's iteration rows (warm-up excluded)."""

    run_dir: Path
    rows: list[dict]

    def iterations(self) -> list[dict]:
        """Per measured iteration: the slowest worker's sync time (GST) and compute, bytes moved;
        and how far apart the hosts began it (`start_skew_s`: the last host's sync start minus the
        first's, wall clock, hosts share one machine) and the time from the last start to the last
        end (`sync_after_last_start_s`): a host that starts early waits for the others inside its
        own sync time, so GST counts the skew, which Table 3's all-start-together formula does not."""
        out = []
        for it in sorted({r["iteration"] for r in self.rows}):
            rs = [r for r in self.rows if r["iteration"] == it]
            ws = [r for r in rs if r["role"] == "worker"]
            starts = [r["started"] + r["compute_s"] + r.get("barrier_s", 0.0) for r in rs]
            ends = [a + r["sync_s"] for a, r in zip(starts, rs, strict=True)]
            out.append(
                {
                    "iteration": it,
                    "sync_s": max(r["sync_s"] for r in ws),
                    "start_skew_s": max(starts) - min(starts),
                    "sync_after_last_start_s": max(ends) - max(starts),
                    "compute_s": max(r["compute_s"] for r in ws),
                    "sent_bytes": sum(r["sent_bytes"] for r in rs),
                    "sync_cpu_s": sum(r.get("sync_cpu_s", 0.0) for r in rs),
                    "raw_sent_bytes": sum(r.get("raw_sent_bytes", r["sent_bytes"]) for r in rs),
                    "loss": statistics.fmean(r["loss"] for r in ws) if ws[0]["loss"] is not None else None,
                }
            )
        return out

    def mean_sync_s(self) -> float:
        return statistics.fmean(i["sync_s"] for i in self.iterations())


def local_starter(log_dir: Path) -> Starter:
    """Processes on this machine (loopback addresses): for testing the engine without Mininet."""

    def start(host: str, argv: list[str]) -> subprocess.Popen:
        log = (log_dir / f"{host}.log").open("w")
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)

    return start


def run_scheme(
    cfg: dict[str, Any],
    hosts: Sequence[str],
    addresses: dict[str, str],
    run_dir: Path,
    start: Starter,
    timeout_s: float = 600.0,
    per_host: dict[str, dict[str, Any]] | None = None,
    on_tick: Callable[[], None] | None = None,
    schedule: Schedule | None = None,
) -> SchemeRun:
    """Write one config per host, start every process, wait, and read their rows.

    `cfg` holds the scheme, workers, servers, regions, n_elems, mode and iteration counts;
    `addresses` maps each host to the address it listens on (its emulated IP in Mininet);
    `per_host` adds host-specific fields (e.g. its pause windows); `on_tick` is called about
    every 0.1 s while the processes run (the job's timeline follows them through it; an
    exception it raises stops the run). The schedule (`schedule`, else compiled here from `cfg`
    through the scheme registry) goes into each host's config as that host's steps
    (schemes.schedule.host_part), so a host process never compiles a scheme by name.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    sched = schedule if schedule is not None else compile_from_config(cfg)
    ports = dict(zip(hosts, _ports(hosts, addresses), strict=True))
    table = {h: [addresses[h], ports[h]] for h in hosts}
    procs: dict[str, subprocess.Popen] = {}
    try:
        for h in hosts:
            path = run_dir / f"{h}.json"
            mine = {"name": h, "addresses": table, "run_dir": str(run_dir), "schedule": host_part(sched, h)}
            path.write_text(json.dumps({**cfg, **(per_host or {}).get(h, {}), **mine}))
            procs[h] = start(h, [sys.executable, "-m", "engine.host", str(path)])
        deadline = time.monotonic() + timeout_s
        running = dict(procs)
        while running:
            for h, p in list(running.items()):
                code = p.poll()
                if code is None:
                    continue
                del running[h]
                if code != 0:
                    tail = _tail(run_dir / f"{h}.log")
                    raise RuntimeError(f"scheme {cfg['scheme']}: {h} exited {code}: {tail}")
            if time.monotonic() > deadline:
                h = next(iter(running))
                raise RuntimeError(
                    f"scheme {cfg['scheme']}: {h} still running after {timeout_s:g} s; "
                    f"its last iteration: {_last_row(run_dir / f'{h}.jsonl')}"
                )
            if on_tick is not None:
                on_tick()
            time.sleep(0.1)
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    rows = []
    for h in hosts:
        for r in read_rows(run_dir / f"{h}.jsonl"):
            if "iteration" in r and not r["warmup"]:
                rows.append(r)
    return SchemeRun(run_dir, rows)


def publish_plan(run_dir: Path, version: int, schedule: Schedule) -> Path:
    """A new plan for a run whose hosts replan (config `replan`; engine.host.Plans): every host's
    part of `schedule` into `<run_dir>/plans/v<version>/`, written into a temporary folder first
    and renamed into place, so a host sees all of it or none. Hosts take it from the next
    iteration none of them has started (plans/at/<i> says which iteration ran which plan)."""
    plans = run_dir / "plans"
    tmp = plans / f".v{version}.tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    for h in schedule.hosts:
        (tmp / f"{h}.json").write_text(json.dumps(host_part(schedule, h)))
    final = plans / f"v{version}"
    tmp.rename(final)
    return final


def plan_of_iteration(run_dir: Path, iteration: int) -> int | None:
    """The plan version an iteration ran on (None: not decided yet, or the hosts do not replan)."""
    try:
        return int((run_dir / "plans" / "at" / str(iteration)).read_text())
    except (OSError, ValueError):
        return None


def _ports(hosts: Sequence[str], addresses: dict[str, str]) -> list[int]:
    """One port per host: BASE_PORT + i inside Mininet hosts (each has its own namespace); on a
    shared address (loopback tests and benchmarks) ports the kernel has free now, so two runs on
    one machine do not collide."""
    if len({addresses[h] for h in hosts}) == len(hosts):
        return [BASE_PORT + i for i in range(len(hosts))]
    socks = [socket.socket() for _ in hosts]
    try:
        for s in socks:
            s.bind((addresses[hosts[0]], 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def read_rows(path: Path) -> list[dict]:
    """The complete JSON lines a host has written so far (a line being written is skipped)."""
    try:
        text = path.read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            break
    return out


class Follower:
    """Follows one host's lines while it runs: t0 (start of its first measured iteration) and the
    iterations it completed (warm-up included), which the timeline's at_s and at_step count from."""

    def __init__(self, path: Path, warmup: int) -> None:
        self.path = path
        self.warmup = warmup
        self.t0: float | None = None
        self.step = 0

    def poll(self) -> None:
        lines = read_rows(self.path)
        rows = [r for r in lines if "iteration" in r]
        self.step = len(rows)
        if self.t0 is not None:
            return
        if self.warmup == 0 and lines:  # the ready line: iteration 0 starts right after it
            self.t0 = float(lines[0]["t"])
        elif 0 < self.warmup <= len(rows):  # the last warm-up iteration's end: the next one's start
            self.t0 = float(rows[self.warmup - 1]["ended"])


def _last_row(path: Path) -> str:
    rows = [r for r in read_rows(path) if "iteration" in r]
    if not rows:
        return "none (still connecting: " + ("ready" if read_rows(path) else "not ready") + ")"
    r = rows[-1]
    return f"{r['iteration']} ended at sync {r['sync_s']:.2f} s"


def _tail(path: Path, lines: int = 3) -> str:
    try:
        return " | ".join(path.read_text().strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
