"""Run a scheme's processes inside the emulated hosts of a live Testbed, on their emulated addresses."""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from emulation.net import Testbed, clean_env
from engine.processes import SchemeRun, Starter, run_scheme
from schemes.schedule import Schedule

REPO = Path(__file__).resolve().parents[1]


def testbed_starter(tb: Testbed, log_dir: Path) -> Starter:
    """Start a process in a Mininet host's namespaces (traffic to 10.x only from inside hosts)."""

    def start(host: str, argv: list[str]) -> subprocess.Popen:
        log = (log_dir / f"{host}.log").open("w")
        return tb.host(host).popen(argv, stdout=log, stderr=subprocess.STDOUT, env=clean_env(), cwd=str(REPO))

    return start


def run_in_testbed(
    tb: Testbed,
    cfg: dict[str, Any],
    hosts: Sequence[str],
    run_dir: Path,
    timeout_s: float = 600.0,
    per_host: dict[str, dict[str, Any]] | None = None,
    on_tick: Callable[[], None] | None = None,
    schedule: Schedule | None = None,
) -> SchemeRun:
    """The scheme's processes, one per host, listening on each host's emulated address
    (`schedule`: the compiled one, else compiled from `cfg`, engine.processes.run_scheme)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    addresses = {h: tb.model.nodes[h].ip for h in hosts}
    start = testbed_starter(tb, run_dir)
    return run_scheme(cfg, hosts, addresses, run_dir, start, timeout_s, per_host, on_tick, schedule)
