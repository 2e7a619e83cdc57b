"""The figure-level summary (schema `figure-summary/1`): what a replay or benchmark leaves as evidence.

Every replay (emulated figure, model figure, the topology x scheme matrix) writes one
`summary.json` at the top of its folder results/<name>/, beside report.md, its csv and png(s);
every benchmark writes `results/bench/<stem>.summary.json` beside its <stem>.json and .md. The
reproduction page (`testbed report`, replays.reproduction) reads only these files and never runs
anything. The contract: one name, kind, seed paper, title, the command that reproduces it, its
provenance (replays.provenance), what it depends on (replays.staleness), its files, each point's
fidelity and one headline per paper claim the page shows as a card. `complete: true` is set by
`write_summary` only, which writers call after their other files and which writes the file whole
(topologies.files); the page refuses a summary without it, naming the file and the command to
run again.

A per-run folder also has a summary.json (the run's RunResult); the figure-level one is told apart
by `"schema": "figure-summary/1"`. Readers tolerate extra keys (every model allows them), so a
writer may add what it likes.

A report is drawn by code too (its claims, tables, plots: replays.staleness.DRAWING), which can be
newer than the code its points ran on: a replay that keeps its points draws them with the code it
loaded. `loaded_tree()` is that tree (commit and local changes, read once per process, as its
replay starts), which the summary records as `drawn` beside the points' provenance. It lives here,
with the schema it fills, rather than in replays.provenance, which every run imports.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from replays.provenance import REPO, Provenance, git_state
from topologies.files import write_text_atomic

SCHEMA = "figure-summary/1"
FILENAME = "summary.json"
#: a benchmark's summary beside its json and md in results/bench/
BENCH_SUFFIX = ".summary.json"
KINDS = ("figure", "model-figure", "matrix", "benchmark")
#: the verdicts a headline can have, as the page groups them
HOLDS, DOES_NOT_HOLD, NOT_JUDGED, NOT_MEASURED = "holds", "does not hold", "not judged", "not measured"
VERDICTS = (HOLDS, DOES_NOT_HOLD, NOT_JUDGED, NOT_MEASURED)


class Tree(BaseModel):
    """A tree code was loaded from: its commit and local changes, as a Provenance records them."""

    commit: str | None = Field(description="40-hex commit; None outside a git checkout")
    dirty_files: dict[str, str | None] = Field(default_factory=dict, description="as Provenance.dirty_files")


@functools.cache
def loaded_tree(repo: Path = REPO) -> Tree:
    """The tree this process draws with: read on the first call and kept, since Python does not
    reload a module whatever its file becomes (`testbed replay` calls it as it starts, before a
    figure's points run; a later call in the same process gets the same tree)."""
    commit, dirty_files, _ = git_state(repo)
    return Tree(commit=commit, dirty_files=dirty_files)


class SummaryError(ValueError):
    """A summary.json that cannot be read; the message is one line naming the file."""


class PointFidelity(BaseModel):
    """One point of the figure and whether its runs were faithful (emulation.fidelity)."""

    model_config = ConfigDict(extra="allow")

    id: str
    faithful: bool | None = Field(default=None, description="None: not run")
    fidelity: str = Field(default="", description="the verdict's reason")


class Headline(BaseModel):
    """One paper claim as measured: the page's card."""

    model_config = ConfigDict(extra="allow")

    id: str = Field(description="stable id, e.g. fig13.vgg16")
    claim: str
    paper_value: float | None = None
    paper_text: str | None = Field(default=None, description="the paper's number as it states it (e.g. '1.89x')")
    measured: float | None = None
    ci95: float | None = Field(default=None, description="half-width of the 95% CI of `measured`")
    n: int | None = Field(default=None, description="repetitions behind `measured`")
    unit: str = ""
    verdict: str = Field(default=NOT_MEASURED, description="holds | does not hold | not judged | not measured")
    why: str = Field(default="", description="why it does not hold / is not judged, in words")
    detail: str = Field(default="", description="the numbers behind the verdict, as the claims engine wrote them")
    points: list[str] = Field(default_factory=list, description="ids of the points it rests on")
    decomposition: Any = Field(default=None, description="the figure's decomposition where it has one")

    @property
    def verdict_kind(self) -> str:
        return verdict_kind(self.verdict)

    @property
    def reason(self) -> str:
        """`why`, else what a verdict like 'not judged (point not faithful: ...)' says in parentheses."""
        if self.why:
            return self.why
        head, _, rest = self.verdict.partition("(")
        return rest.rstrip(")").strip() if rest and head.strip() else ""


class Files(BaseModel):
    """The result's files, relative to its summary's folder."""

    model_config = ConfigDict(extra="allow")

    report: str | None = None
    data: str | None = None
    figures: list[str] = Field(default_factory=list)


class FigureSummary(BaseModel):
    """The figure-level summary.json (schema figure-summary/1)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    schema_: Literal["figure-summary/1"] = Field(default=SCHEMA, alias="schema")
    name: str = Field(description="results/<name>/ (a benchmark: its stem in results/bench/)")
    kind: Literal["figure", "model-figure", "matrix", "benchmark"]
    paper: str | None = Field(default=None, description="the seed paper it replays: psnet, rat, hips, plink, pf")
    title: str
    command: str = Field(description="the exact command that reproduces it (quick: with --quick)")
    quick: bool = False
    provenance: Provenance
    drawn: Tree | None = Field(
        default=None,
        description="the tree whose code drew its report (loaded_tree): newer than `provenance` "
        "where a replay kept points run on older code; None: written before it was recorded (judged as drawn by the "
        "code its points ran on)",
    )
    depends_on: list[str] = Field(default_factory=list, description="files/folders whose change makes it stale")
    files: Files = Field(default_factory=Files)
    repetitions: int | None = None
    points: list[PointFidelity] = Field(default_factory=list)
    headlines: list[Headline] = Field(default_factory=list)
    complete: bool = Field(
        default=False,
        description="true only as write_summary writes it, the result's last file: a reader refuses one without it",
    )

    def dump(self) -> str:
        return self.model_dump_json(indent=1, by_alias=True, exclude_none=False) + "\n"


def verdict_kind(verdict: str) -> str:
    """One of VERDICTS for a verdict as written ('does NOT hold', 'not judged (point not faithful: ...)')."""
    v = " ".join(verdict.lower().split())
    for kind in (DOES_NOT_HOLD, NOT_JUDGED, NOT_MEASURED, HOLDS):
        if v.startswith(kind):
            return kind
    return NOT_MEASURED if v.startswith(("not run", "failed")) else NOT_JUDGED


def write_summary(folder: Path, summary: FigureSummary, filename: str = FILENAME) -> Path:
    """Write `summary` into `folder` (summary.json; a benchmark: <stem>.summary.json), marked
    `complete`, whole (topologies.files); call it after the result's other files. Returns the file."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / filename
    write_text_atomic(target, summary.model_copy(update={"complete": True}).dump())
    return target


def read_summary(path: Path, require_complete: bool = False) -> FigureSummary | None:
    """The figure-level summary in `path` (a file, or a folder's summary.json); None where there
    is none or the file is another kind of summary (a run's); SummaryError where it is broken or,
    with `require_complete`, not marked complete (written before the mark, or by hand)."""
    target = path / FILENAME if path.is_dir() else path
    try:
        data = json.loads(target.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as err:
        raise SummaryError(f"{target}: not readable JSON ({err})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        return None
    try:
        summary = FigureSummary.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise SummaryError(f"{target}: {where}: {first['msg']} ({err.error_count()} problem(s))") from None
    if require_complete and not summary.complete:
        raise SummaryError(
            f"{target}: complete is not true (not written whole by this testbed); run it again: {summary.command}"
        )
    return summary


def summary_paths(results: Path) -> list[Path]:
    """Every figure-level summary file under `results`: results/*/summary.json and
    results/bench/*.summary.json (a run's summary.json deeper down is never one)."""
    found = sorted(results.glob(f"*/{FILENAME}")) + sorted((results / "bench").glob(f"*{BENCH_SUFFIX}"))
    return [p for p in found if p.is_file()]


def summary_name(path: Path) -> str:
    """The result's name as its path gives it: the folder, or a benchmark summary's stem."""
    return path.name.removesuffix(BENCH_SUFFIX) if path.name.endswith(BENCH_SUFFIX) else path.parent.name
