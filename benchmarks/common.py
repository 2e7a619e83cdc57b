"""What every benchmark shares: its log lines, the emulator-lock wait, summary helpers, markdown
tables, the record of what produced the numbers, and a SIGTERM or SIGHUP that unwinds the testbed.

What produced the numbers: `meta(args)` at the start (commit, versions, machine, arguments, and
the provenance block of replays.provenance, captured then); `finish(res)` at the end moves that
block to `res["provenance"]` with the wall time, and `write_summary` leaves the figure-level
summary (replays.evidence, kind "benchmark") as <stem>.summary.json beside <stem>.json and
<stem>.md, for the reproduction page (`testbed report`). `write_results` does all three.

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

from emulation.net import unwind_on_signals
from replays import benchdata, evidence, staleness
from replays.provenance import Provenance, capture
from topologies.files import write_text_atomic

TOP = Path(__file__).resolve().parent.parent
#: what every benchmark's numbers depend on besides its own module and script: the platform and the
#: schemes (a change there makes a committed benchmark result stale: replays.staleness)
PLATFORM = staleness.PLATFORM


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
    """What every benchmark's main() does first: log lines on, SIGTERM/SIGHUP unwind a testbed in flight
    as Ctrl-C does (the default action would leave bridges and shells behind), the output folder
    made; returns it (absolute). TensorFlow's start-up chatter (a calibration imports it in this
    process) is kept out of the terminal, as `testbed` keeps it."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    setup_logging(args.verbose)
    unwind_on_signals()
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
    """What produced these numbers: commit, versions, machine, arguments; `provenance` the block
    of replays.provenance, captured now (finish() completes it with the wall time)."""
    prov = capture(quick=bool(getattr(args, "quick", False)))

    def out(*argv: str) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, check=False, cwd=TOP).stdout.strip()
        except OSError:
            return ""

    return {
        "git_commit": out("git", "rev-parse", "HEAD"),
        "git_dirty": prov.dirty,  # local changes to inputs: results being written do not count
        "kernel": platform.release(),
        "ovs": out("ovs-vswitchd", "--version").splitlines()[0] if out("ovs-vswitchd", "--version") else "",
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "args": vars(args),
        # other work on the box spoils every figure here (2 cores): note how idle it was at the start
        "idle_before_pct": psutil.cpu_times_percent(interval=2.0).idle,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "provenance": prov.model_dump(),
    }


def finish(res: dict) -> Provenance:
    """The run's provenance, finished with its wall time (res["meta"]["wall_s"]), moved from meta to
    res["provenance"] (the block every result carries; replays.provenance)."""
    m = res["meta"]
    prov = Provenance.model_validate(m.pop("provenance")).finished(m.get("wall_s"))
    res["provenance"] = prov.model_dump()
    return prov


def depends_on(name: str, *extra: str) -> list[str]:
    """What a benchmark's numbers depend on: its module, script and the shared code, then `extra`
    and the platform (PLATFORM)."""
    return [f"benchmarks/{name}.py", "benchmarks/common.py", f"scripts/bench_{name}.sh", *extra, *PLATFORM]


def write_summary(
    out_dir: Path,
    stem: str,
    title: str,
    res: dict,
    quick: bool,
    depends: list[str] | None = None,
    headlines: list[evidence.Headline] | None = None,
    data: str | None = None,
) -> Path:
    """<stem>.summary.json: the figure-level summary of this benchmark (kind "benchmark": no seed
    paper; its report <stem>.md, its data `data`, <stem>.json unless named), for the reproduction
    page. Call finish() first."""
    name = stem.removesuffix("-quick")
    summary = evidence.FigureSummary(
        name=stem,
        kind="benchmark",
        paper=None,
        title=title,
        command=f"scripts/bench_{name}.sh" + (" --quick" if quick else ""),
        quick=quick,
        provenance=Provenance.model_validate(res["provenance"]),
        depends_on=depends if depends is not None else depends_on(name),
        files=evidence.Files(report=f"{stem}.md", data=data or f"{stem}.json"),
        headlines=headlines or [],
    )
    return evidence.write_summary(out_dir, summary, f"{stem}{evidence.BENCH_SUFFIX}")


def write_results(
    out_dir: Path, stem: str, title: str, res: dict, table: str, quick: bool, depends: list[str] | None = None
) -> None:
    """<stem>.json (everything measured, with `meta` and `provenance`; gzipped as <stem>.json.gz
    when big, benchdata.write_bench_data), <stem>.md (a header saying what produced the numbers,
    then the tables) and <stem>.summary.json (write_summary), and the tables on stdout with the
    wall time."""
    m = res["meta"]
    mode = "quick" if quick else "full"
    finish(res)
    data = benchdata.write_bench_data(out_dir, stem, json.dumps(res, indent=1))
    write_text_atomic(
        out_dir / f"{stem}.md",
        f"# {title} ({mode}, {m['started']}, commit {m['git_commit'][:10]}"
        f"{' + local changes' if m['git_dirty'] else ''}, {m['wall_s']:.0f} s, "
        f"machine {m['idle_before_pct']:.0f}% idle before the run)\n\n{table}",
    )
    write_summary(out_dir, stem, title, res, quick, depends, data=data)
    print(f"machine idle before the run: {m['idle_before_pct']:.0f}% (other work skews every figure)")
    print(table)
    print(
        f"wall time: {m['wall_s']:.1f} s ({mode}); written: {out_dir / data}, {out_dir / f'{stem}.md'}, "
        f"{out_dir / f'{stem}{evidence.BENCH_SUFFIX}'}"
    )
