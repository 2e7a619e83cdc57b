"""Where a measured result came from: the tree it ran on, the machine, the command, how long it took.

Every figure-level summary (replays.evidence) and every benchmark carries one `provenance` block,
so a number in results/ can be traced to the commit and machine that produced it, and
`testbed report` can tell whether the code it depends on changed since (replays.staleness).

Use: `prov = capture(quick=...)` when the work starts (commit, dirty files, date, machine, load
average, command line are read then), `prov.finished()` when it ends (wall time since capture; or
`prov.finished(wall_s)` with a wall time measured elsewhere, e.g. one that leaves out time queued
for the emulator).

A tree with local changes is recorded as `dirty`, with the content hash (git's blob id) of every
changed input file in `dirty_files`: a result re-run with a change and committed in the same
commit as that change is then recognised as current, not stale. Outputs under results/ (all but
reference/ and calibration/, which are inputs) and the reproduction page docs/reproduction.md do
not make a tree dirty: a re-run or `testbed report` rewrites them.
"""

from __future__ import annotations

import datetime
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

REPO = Path(__file__).resolve().parent.parent
#: at most this many changed files are hashed into `dirty_files` (a tree with more is marked dirty all the same)
MAX_DIRTY_FILES = 200
#: folders under results/ that are inputs (the papers' numbers, the flow model's factors), not outputs
RESULT_INPUTS = ("reference", "calibration")
#: outputs outside results/: the reproduction page `testbed report` writes
PAGES = ("docs/reproduction.md",)


class Machine(BaseModel):
    """The machine a result was measured on (2 cores shared with other work change every number)."""

    model_config = ConfigDict(extra="allow")

    cpu: str = Field(description="CPU model (/proc/cpuinfo's model name)")
    cores: int | None = Field(description="logical CPUs")
    memory_gb: float | None = Field(description="MemTotal in GiB")
    kernel: str = Field(description="uname -r")


class Provenance(BaseModel):
    """The provenance block of a figure-level summary (figure-summary/1) or a benchmark's json."""

    model_config = ConfigDict(extra="allow")

    commit: str | None = Field(description="40-hex commit of the tree it ran on; None outside a git checkout")
    dirty: bool = Field(default=False, description="the tree had local changes to inputs (not counting outputs)")
    dirty_files: dict[str, str | None] = Field(
        default_factory=dict, description="changed input file -> git blob id of its content then (None: deleted)"
    )
    date: str = Field(description="ISO 8601 start time with its UTC offset")
    machine: Machine
    wall_s: float | None = Field(default=None, description="wall time of the whole run (None until finished)")
    load_before: float | None = Field(default=None, description="1-minute load average at the start (idle: ~0)")
    command_line: str = Field(default="", description="the command as it was typed (argv)")
    quick: bool = Field(default=False, description="a --quick (smoke) run, not the full one")
    _t0: float | None = PrivateAttr(default=None)

    def finished(self, wall_s: float | None = None) -> Provenance:
        """A copy with the wall time: `wall_s` if given, else the time since capture() in this process."""
        if wall_s is None and self._t0 is not None:
            wall_s = time.monotonic() - self._t0
        return self.model_copy(update={"wall_s": wall_s})

    @property
    def mode(self) -> str:
        return "quick" if self.quick else "full"


def capture(quick: bool = False, argv: list[str] | None = None, repo: Path = REPO) -> Provenance:
    """The provenance of a run starting now (wall time pending: call .finished() at its end)."""
    commit, dirty_files, dirty = git_state(repo)
    prov = Provenance(
        commit=commit,
        dirty=dirty,
        dirty_files=dirty_files,
        date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        machine=machine(),
        load_before=load_average(),
        command_line=command_line(argv),
        quick=quick,
    )
    prov._t0 = time.monotonic()
    return prov


# --- the tree -------------------------------------------------------------------------------------
def _git(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True, check=False, timeout=60
    )


def is_output(path: str) -> bool:
    """A path runs and `testbed report` write: under results/ (all but the inputs RESULT_INPUTS), the page."""
    parts = path.split("/")
    return path in PAGES or (parts[0] == "results" and not (len(parts) > 1 and parts[1] in RESULT_INPUTS))


def git_state(repo: Path = REPO) -> tuple[str | None, dict[str, str | None], bool]:
    """(HEAD's commit, changed input files with their blob ids, dirty?); (None, {}, False) outside git."""
    try:
        head = _git(repo, "rev-parse", "--verify", "HEAD")
    except (OSError, subprocess.TimeoutExpired):
        return None, {}, False
    if head.returncode != 0:
        return None, {}, False
    status = _git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all")
    changed = [p for p in _status_paths(status.stdout) if not is_output(p)]
    hashes = blob_ids(repo, changed[:MAX_DIRTY_FILES])
    return head.stdout.strip(), hashes, bool(changed)


def _status_paths(porcelain_z: str) -> list[str]:
    """Paths of `git status --porcelain=v1 -z`: 'XY path' entries; a rename's second entry is its old name."""
    out, fields = [], porcelain_z.split("\0")
    i = 0
    while i < len(fields):
        entry = fields[i]
        i += 1
        if len(entry) < 4:
            continue
        out.append(entry[3:])
        if entry[0] in "RC":  # rename/copy: the old path follows; it changed too (it is gone)
            out.append(fields[i])
            i += 1
    return sorted(dict.fromkeys(out))


def blob_ids(repo: Path, paths: list[str]) -> dict[str, str | None]:
    """Git's blob id of each file's content in the work tree (None where it does not exist)."""
    present = [p for p in paths if (repo / p).is_file()]
    ids: dict[str, str | None] = dict.fromkeys(paths)
    if present:
        r = _git(repo, "hash-object", "--stdin-paths", stdin="\n".join(present) + "\n")
        if r.returncode == 0:
            ids.update(zip(present, r.stdout.split(), strict=False))
    return ids


# --- the machine ----------------------------------------------------------------------------------
def machine() -> Machine:
    return Machine(cpu=cpu_model(), cores=os.cpu_count(), memory_gb=memory_gb(), kernel=platform.release())


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The first 'model name' of /proc/cpuinfo (else platform's processor, else the architecture)."""
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def memory_gb(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    """MemTotal in GiB, one decimal (None where /proc/meminfo is missing)."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def load_average() -> float | None:
    """The 1-minute load average (other work on 2 cores skews every timing)."""
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed: the `testbed` entry point (its console script or `python -m
    testbed.cli`) shown as `testbed`, a module run with -m as `python -m package.module`."""
    argv = list(sys.argv if argv is None else argv)
    if not argv:
        return ""
    prog = Path(argv[0])
    if prog.name == "testbed" or prog.parts[-2:] == ("testbed", "cli.py"):
        head = "testbed"
    elif prog.suffix == ".py" and prog.parent.name and (prog.parent / "__init__.py").exists():
        head = f"python -m {prog.parent.name}.{prog.stem}"
    else:
        head = argv[0]
    return " ".join([head, *(shlex.quote(a) for a in argv[1:])])
