"""Is a committed result still what the code would measure? Its provenance commit against HEAD.

A result names the files and folders it depends on (`depends_on`: its figure file, topology files,
the code packages of its platform and scheme). It is **stale** where one of them differs between
the commit it ran on and HEAD (`git diff --name-only <commit> HEAD -- <paths>`: trees compared,
so a commit on another branch that was merged is judged by its content), or where it ran with
local changes to one of them that HEAD does not hold. A local change that HEAD does hold (the
result was re-run with the change and committed with it) is not a change since: the provenance
records the blob id of each changed file (replays.provenance), compared with HEAD's.

A file added since (no blob at the result's commit, no local copy it ran with) is not a change:
nothing read it then. A module can act only through an import in a module that did exist, which
has then changed itself (imports are explicit here: no package scans its folder for modules); a
topology or figure YAML only by being named, in a file that then changed. The exception is a
result that names the file, or lists its folder (every topology file, say) as a glob dependency
(`TOPOLOGY_FILES`): a file added there counts. Nor, with the same exception, is an untracked
local file the result ran with and that is gone now (a scratch YAML under topologies/, say).

Code is what a run imports: a changed module inside a dependency folder counts only if the
result's entry modules reach it, by imports or by naming it (replays.imports), at the result's
commit or now. The entry modules are the `.py` files a result names (its benchmark's script, say)
and, where it depends on the whole replays/ folder, where its kind of figure is evaluated and
reported (`KIND_ENTRIES`: an emulated figure's sweep and report, a model figure's evaluator; the
replay framework, `ENTRIES`, for a kind not listed). A module of the cluster edition, which no
replay imports, then stales nothing it cannot act on; nor does the flow model's evaluator an
emulated figure, nor the emulator a closed-form model figure. A result
naming no entry module keeps the folder rule: every module in the folder counts. (Imports added
by an uncommitted edit are not followed: the closure is read from commits.)

Nor does the code that judges results (`JUDGES`: this module and its import reader), though
every replay imports it: it decides what a reader is told, not what a run measures. Nor does the
code that draws the reproduction page from committed results (`PAGE`: its modules, its HTML
template and the benchmarks' figures drawn from their committed json): `testbed report` reads
results, no run reads it, and a template is not a module whose imports could be followed.

Prose is not code: a markdown file (`*.md`) inside a dependency folder (a folder's README, say)
does not stale a result unless a dependency names that very file. Nor do a module's comments and
docstrings: a `.py` file whose syntax tree, docstrings left out, is the same at both ends is no
change (`same_code`), so correcting what a docstring says of a measurement does not stale the
hours of results that ran on that code.

A report is drawn from its saved points by code of its own (`DRAWING`: the claims judged on them,
the report, its tables, plots and summary), which a replay that keeps its points applies whole:
it draws with the code it loaded, whatever code the points ran on (replays.sweep keeps a run
whose platform code is unchanged; a model figure's kept points, replays.keptpoints). The summary
records that tree (`drawn`, replays.evidence.loaded_tree), and `result_staleness` judges the two
parts apart: a change to drawing code counts only since the tree that drew the report, any other
change since the tree its points ran on. A result stale by drawing code alone says so (`redraw`):
`testbed replay NAME` (no --fresh) keeps its runs and redraws it in seconds, where the runs are
(results/NAME/points/, which git does not hold: on the machine that ran them).

A result whose commit git does not know (a shallow clone, a rewritten branch, no commit recorded)
has **unknown provenance**: nothing can be said about it.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import glob
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from replays.evidence import Tree
from replays.imports import closure_at
from replays.provenance import REPO

CURRENT, STALE, UNKNOWN = "current", "stale", "unknown provenance"
#: what a run's numbers depend on: the platform and the schemes (a benchmark or a sweep adds its
#: own modules and files; benchmarks.common and replays.sweep build on this one list)
PLATFORM = (
    "topologies/",
    "controller/",
    "emulation/",
    "schemes/",
    "workloads/",
    "tfjob/",
    "models/",
    "engine/",
    "runs/",
)
#: where every replay starts (`testbed replay` runs figures through it): an entry module of any
#: result that depends on a folder holding it
ENTRIES = ("replays/framework.py",)
#: where each kind of figure (replays.evidence's `kind`) is evaluated and reported, which the
#: framework imports lazily (replays.framework); a scheme figure is a model figure whose summary
#: names runs/simulate.py
KIND_ENTRIES = {
    "figure": ("replays/sweep.py", "replays/report.py", "runs/predict.py", "runs/steptime.py"),
    "model-figure": ("replays/modelreplay.py", "replays/modelfig_report.py"),
    "scheme-figure": ("replays/schemefig_replay.py", "replays/schemefig_report.py"),
    "matrix": ("replays/matrix.py", "replays/matrix_report.py"),
}
#: files named in a stale mark's text
SHOWN = 3
#: the modules that judge results against the code (this one, and the import reader it uses): every
#: replay imports them (a resumed sweep asks whether its points are current), but no number a run
#: measures depends on them, so a change to how staleness is judged stales nothing
JUDGES = ("replays/staleness.py", "replays/imports.py")
#: what `testbed report` draws the reproduction page with, from the committed results: a change to
#: it changes the page, never a measured number (a folder, with its trailing slash, holds any file)
PAGE = (
    "replays/reproduction.py",
    "replays/reproduction_page.py",
    "replays/verdict_split.py",
    "replays/templates/",
    # each benchmark's figure and csv, drawn by `testbed report` from its committed json: a
    # drawing of numbers already measured, which no benchmark run imports
    "replays/benchfigures.py",
)
#: the code that draws a result from its saved points, applied whole by a redraw (module doc):
#: nothing a point measures is computed with it (the figure schemas import replays.claims for the
#: types of a figure file's `claims:`, not to run anything); the papers' numbers (results/reference/)
#: are not in it, as a model figure's points can read them
DRAWING = (
    "replays/catalogue.py",
    "replays/claims.py",
    "replays/decomposition.py",
    "replays/dvfclocks.py",
    "replays/evidence.py",
    "replays/figsummary.py",
    "replays/matrix_report.py",
    "replays/modelfig_report.py",
    "replays/outputs.py",
    "replays/report.py",
    "replays/schemefig_report.py",
)
#: the dependency of a result that runs every topology file (it lists the folder): a file added
#: there counts, where for any other result it is no change (see the module doc)
TOPOLOGY_FILES = "topologies/*.yaml"


class Staleness(BaseModel):
    """One result's state against HEAD."""

    state: Literal["current", "stale", "unknown provenance"]
    changed: list[str] = Field(default_factory=list, description="dependencies that changed since, in path order")
    reason: str = Field(default="", description="why unknown, in words")
    redraw: bool = Field(default=False, description="stale by drawing code alone (DRAWING): redrawn, not run again")

    @property
    def text(self) -> str:
        """The mark as a reader sees it: 'stale: a, b, c and 4 more changed since' and so on."""
        if self.state == STALE:
            names = ", ".join(self.changed[:SHOWN])
            more = f" and {len(self.changed) - SHOWN} more" if len(self.changed) > SHOWN else ""
            if self.redraw:
                return (
                    f"stale: {names}{more} changed since it was drawn; drawing code only: a replay without --fresh "
                    "keeps its runs (where its points/ folder has them) and redraws it"
                )
            return f"stale: {names}{more} changed since it ran"
        if self.state == UNKNOWN:
            return f"unknown provenance ({self.reason})" if self.reason else UNKNOWN
        return "current: nothing it depends on changed since it ran"


def _git(repo: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True, check=False, timeout=60
    )


def _within(path: str, deps: Iterable[str]) -> bool:
    return any(path == d.rstrip("/") or path.startswith(d.rstrip("/") + "/") for d in deps)


def _listed(path: str, deps: Iterable[str]) -> bool:
    """A dependency names `path`, or lists its folder: a glob dependency (TOPOLOGY_FILES) matches it."""
    return any(path == d or (glob.has_magic(d) and fnmatch.fnmatchcase(path, d)) for d in deps)


def _prose(path: str, deps: Iterable[str]) -> bool:
    """A markdown file that a dependency folder holds but no dependency names: no run reads it."""
    return path.endswith(".md") and not any(path == d for d in deps)


def entry_modules(depends_on: Iterable[str], kind: str | None = None) -> tuple[str, ...]:
    """The modules a result's run starts from: the `.py` files it names, and its kind's entries
    (`KIND_ENTRIES`, else `ENTRIES`) inside a folder it depends on."""
    deps = list(depends_on)
    named = [d for d in deps if d.endswith(".py")]
    folders = [d for d in deps if d.endswith("/")]
    if kind == "model-figure" and "runs/simulate.py" in deps:
        kind = "scheme-figure"
    entries = KIND_ENTRIES.get(kind or "", ENTRIES)
    return tuple(dict.fromkeys([*named, *(e for e in entries if _within(e, folders))]))


def _outside_closure(
    paths: list[str], depends_on: list[str], revs: tuple[str, str], repo: Path, kind: str | None = None
) -> set[str]:
    """The modules among `paths` that no entry module reaches at either commit (and that no
    dependency names): changes to them are no change to the result. Empty without entry modules."""
    roots = entry_modules(depends_on, kind)
    modules = [p for p in paths if p.endswith(".py") and p not in depends_on]
    if not roots or not modules:
        return set()
    reached = closure_at(repo, revs[0], roots) | closure_at(repo, revs[1], roots)
    return {p for p in modules if p not in reached}


def head_blobs(repo: Path, paths: list[str], rev: str = "HEAD") -> dict[str, str | None]:
    """Blob id of each path in `rev` (None where it holds no such file), in one git call."""
    if not paths:
        return {}
    r = _git(repo, "cat-file", "--batch-check", stdin="".join(f"{rev}:{p}\n" for p in paths))
    out: dict[str, str | None] = {}
    for p, line in zip(paths, r.stdout.splitlines(), strict=False):
        words = line.split()
        out[p] = words[0] if len(words) == 3 and words[1] == "blob" else None
    return out


def _without_docstrings(source: str) -> str | None:
    """The module's syntax tree with every docstring left out, as text (None: it does not parse).
    Comments are not in the tree; line numbers are not in its dump."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            text = first.value.value if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) else None
            if isinstance(text, str):
                node.body = node.body[1:] or [ast.Pass()]
    return ast.dump(tree)


def same_code(repo: Path, blob_a: str | None, blob_b: str | None) -> bool:
    """Two blobs of a module that differ only in comments and docstrings (False where either is
    missing, is not in git's object store, or does not parse)."""
    if not blob_a or not blob_b:
        return False
    a, b = _code_of(repo, blob_a), _code_of(repo, blob_b)
    return a is not None and a == b


@functools.lru_cache(maxsize=4096)
def _code_of(repo: Path, blob: str) -> str | None:
    """A blob's code without docstrings (`_without_docstrings`), once per blob: a report compares
    the same few changed modules for every result."""
    r = _git(repo, "cat-file", "blob", blob)
    return _without_docstrings(r.stdout) if r.returncode == 0 else None


def staleness(
    commit: str | None,
    depends_on: list[str],
    dirty_files: dict[str, str | None] | None = None,
    repo: Path = REPO,
    rev: str = "HEAD",
    kind: str | None = None,
) -> Staleness:
    """The result's state: stale where a dependency changed since `commit` (see the module doc):
    against_tree with `rev` as the tree, which has no local changes of its own. `kind`: the
    result's (replays.evidence), which names its entry modules."""
    return against_tree(commit, dirty_files, rev, {}, depends_on, repo, kind)


def result_staleness(
    commit: str | None,
    depends_on: list[str],
    dirty_files: dict[str, str | None] | None = None,
    drawn: Tree | None = None,
    repo: Path = REPO,
    rev: str = "HEAD",
    kind: str | None = None,
) -> Staleness:
    """A result's state with its drawing judged apart (module doc): changes since `commit` (its
    points' tree) to anything but drawing code, and changes to drawing code since `drawn` (the
    tree that drew its report; None: the points' tree). `redraw` where only drawing code changed."""
    ran = staleness(commit, depends_on, dirty_files, repo, rev, kind)
    if ran.state != STALE:
        return ran
    drawing = [p for p in ran.changed if p in DRAWING]
    if drawn is not None and drawing:
        since = staleness(drawn.commit, depends_on, drawn.dirty_files, repo, rev, kind)
        if since.state != UNKNOWN:  # a tree git does not know: judged as drawn with the points
            drawing = [p for p in since.changed if p in DRAWING]
    changed = sorted({*(p for p in ran.changed if p not in DRAWING), *drawing})
    if not changed:
        return Staleness(state=CURRENT)
    return Staleness(state=STALE, changed=changed, redraw=not any(p not in DRAWING for p in changed))


def _unknown(commit: str | None, repo: Path) -> Staleness | None:
    """Why a result's commit cannot be judged here (none recorded, not in this repository, no
    git checkout at all), else None."""
    if not commit:
        return Staleness(state=UNKNOWN, reason="no commit recorded")
    if _git(repo, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        if _git(repo, "rev-parse", "--git-dir").returncode != 0:
            return Staleness(state=UNKNOWN, reason="not a git checkout")
        return Staleness(state=UNKNOWN, reason=f"commit {commit[:10]} is not in this repository")
    return None


def against_tree(
    commit: str | None,
    dirty_files: dict[str, str | None] | None,
    now_commit: str | None,
    now_dirty: dict[str, str | None] | None,
    depends_on: list[str],
    repo: Path = REPO,
    kind: str | None = None,
) -> Staleness:
    """A result's state against the work tree now rather than HEAD: what a resumed sweep would run
    (`now_*`: replays.provenance.git_state of the tree). Each dependency's content then (its blob
    at `commit`, or the local change it ran with) is compared with its content now (at
    `now_commit`, or the tree's local change): a sweep resumed on the very tree it stopped on,
    local changes included, is current; one resumed after a commit or an edit that touches what it
    depends on is stale."""
    unknown = _unknown(commit, repo)
    if unknown is not None:
        return unknown
    if not now_commit:
        return Staleness(state=UNKNOWN, reason="not a git checkout")
    if not depends_on:
        return Staleness(state=CURRENT)
    diff = _git(repo, "diff", "-z", "--name-only", "--no-renames", commit, now_commit, "--", *depends_on)
    if diff.returncode != 0:
        return Staleness(state=UNKNOWN, reason=f"git diff failed: {diff.stderr.strip().splitlines()[-1:]}")
    then_dirty = {p: h for p, h in (dirty_files or {}).items() if _within(p, depends_on)}
    tree_dirty = {p: h for p, h in (now_dirty or {}).items() if _within(p, depends_on)}
    candidates = sorted({p for p in diff.stdout.split("\0") if p} | set(then_dirty) | set(tree_dirty))
    at_then = head_blobs(repo, candidates, commit)
    at_now = head_blobs(repo, candidates, now_commit)
    unreached = _outside_closure(candidates, depends_on, (commit, now_commit), repo, kind)

    def then(p: str) -> str | None:  # its content when the result ran
        return then_dirty.get(p, at_then.get(p))

    def now(p: str) -> str | None:  # its content now
        return tree_dirty.get(p, at_now.get(p))

    def came_or_went(p: str) -> bool:  # not in git when it ran, absent at one end, neither named nor listed
        return at_then.get(p) is None and None in (then(p), now(p)) and not _listed(p, depends_on)

    changed = [
        p
        for p in candidates
        if p not in unreached
        and p not in JUDGES
        and not _within(p, PAGE)
        and then(p) != now(p)
        and not came_or_went(p)  # added since, or an untracked file since removed: nothing named it
        and not _prose(p, depends_on)
        and not (p.endswith(".py") and same_code(repo, then(p), now(p)))  # comments and docstrings only
    ]
    return Staleness(state=STALE, changed=changed) if changed else Staleness(state=CURRENT)
