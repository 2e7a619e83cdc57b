"""What every benchmark shares: its log lines, the emulator-lock wait, summary helpers, markdown
tables, the record of what produced the numbers, and a SIGTERM that unwinds the testbed.

Benchmarks are applications (the top floor): they import the emulation core and the workloads,
and nothing imports them but their scripts and tests.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import psutil

from emulation.net import unwind_on_sigterm

TOP = Path(__file__).resolve().parent.parent


def lock_wait_s() -> float:
    """PSNET_LOCK_WAIT_S: how long to queue for the emulator lock (0 = fail at once if busy)."""
    return float(os.environ.get("PSNET_LOCK_WAIT_S", "0"))


def bench_parser(prog: str, doc: str | None, quick: str) -> argparse.ArgumentParser:
    """The options every benchmark has: --quick (its reduced run; `quick` says what it is), --out
    and -v; the benchmark adds its own."""
    p = argparse.ArgumentParser(prog=prog, description=(doc or "").split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument("--out", default=str(TOP / "results" / "bench"), help="output folder (default results/bench)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return p


def begin(args: argparse.Namespace) -> Path:
    """What every benchmark's main() does first: log lines on, SIGTERM unwinds a testbed in flight
    as Ctrl-C does (the default action would leave bridges and shells behind), the output folder
    made; returns it (absolute). TensorFlow's start-up chatter (a calibration imports it in this
    process) is kept out of the terminal, as `testbed` keeps it."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    setup_logging(args.verbose)
    unwind_on_sigterm()
    out_dir = Path(args.out).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def setup_logging(verbose: bool) -> None:
    """Timestamped log lines on stderr (a benchmark's progress), debug with -v."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


def median(xs: list[float | None]) -> float | None:
    """Median of the values that were measured (None: not measured)."""
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def maximum(xs: list[float | None]) -> float | None:
    """Largest measured value (None: not measured)."""
    return max((x for x in xs if x is not None), default=None)


def fmt(x: float | None, fmt: str = ".2f", none: str = "-") -> str:
    return none if x is None else format(x, fmt)


def md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def meta(args: argparse.Namespace) -> dict:
    """What produced these numbers: commit, versions, machine, arguments."""

    def out(*argv: str) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, check=False, cwd=TOP).stdout.strip()
        except OSError:
            return ""

    return {
        "git_commit": out("git", "rev-parse", "HEAD"),
        "git_dirty": bool(out("git", "status", "--porcelain")),
        "kernel": platform.release(),
        "ovs": out("ovs-vswitchd", "--version").splitlines()[0] if out("ovs-vswitchd", "--version") else "",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "args": vars(args),
        # other work on the box spoils every figure here (2 cores): note how idle it was at the start
        "idle_before_pct": psutil.cpu_times_percent(interval=2.0).idle,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def write_results(out_dir: Path, stem: str, title: str, res: dict, table: str, quick: bool) -> None:
    """<stem>.json (everything measured, with `meta`) and <stem>.md (a header saying what produced the
    numbers, then the tables), and the tables on stdout with the wall time."""
    m = res["meta"]
    mode = "quick" if quick else "full"
    (out_dir / f"{stem}.json").write_text(json.dumps(res, indent=1))
    (out_dir / f"{stem}.md").write_text(
        f"# {title} ({mode}, {m['started']}, commit {m['git_commit'][:10]}"
        f"{' + local changes' if m['git_dirty'] else ''}, {m['wall_s']:.0f} s, "
        f"machine {m['idle_before_pct']:.0f}% idle before the run)\n\n{table}"
    )
    print(f"machine idle before the run: {m['idle_before_pct']:.0f}% (other work skews every figure)")
    print(table)
    print(f"wall time: {m['wall_s']:.1f} s ({mode}); written: {out_dir / f'{stem}.json'}, {out_dir / f'{stem}.md'}")
