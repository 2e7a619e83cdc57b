"""The reproduction page's content: every paper headline, with the committed result that measures it.

`testbed report` renders it (replays.reproduction_page) as docs/reproduction.md and the gallery
results/index.html. Nothing is run: the page is built from

- the **catalogue** of what can be reproduced (replays.catalogue: every figure, matrix and
  benchmark the repository ships, with the command that runs it, and the seed papers);
- the **results** there are: the figure-level summaries (replays.evidence) under results/, each
  with its provenance, judged against HEAD for staleness (replays.staleness).

A catalogue entry with a result gets the result's headlines as cards; one without gets a card per
claim of its file saying "not run yet", with the command. A seed paper with no figure file yet
(PLink, Parameter Flow) gets a card saying so. A result whose file is no longer shipped is shown
all the same, under its paper.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replays.catalogue import PAPER_IDS, PAPERS, Expected, Paper, catalogue
from replays.evidence import (
    BENCH_SUFFIX,
    DOES_NOT_HOLD,
    FILENAME,
    HOLDS,
    NOT_JUDGED,
    NOT_MEASURED,
    FigureSummary,
    Headline,
    PointFidelity,
    SummaryError,
    read_summary,
    summary_name,
    summary_paths,
)
from replays.provenance import REPO
from replays.staleness import STALE, UNKNOWN, Staleness, result_staleness

NOT_RUN = "not run yet"
#: the key in a summary's `files` naming its main table as csv where `data` is another file: a
#: benchmark's json (replays.benchfigures draws <stem>.png and writes <stem>.csv from it); an extra
#: key, as replays.evidence's Files allows, so the summary's schema is unchanged
CSV_KEY = "csv"
MEASURED, UNREADABLE, NO_REPLAY = "measured", "unreadable", "no replay yet"


# --- the page's content ---------------------------------------------------------------------------
@dataclass
class Card:
    """One paper headline: the paper's number beside ours, the verdict and why."""

    id: str
    claim: str
    paper: str  # the paper's number as text ('-': it states none)
    measured: str  # ours with its 95% CI and repetitions, or 'not run yet'
    verdict: str  # one of replays.evidence.VERDICTS, or NOT_RUN
    verdict_text: str  # as the result wrote it
    why: str = ""
    unit: str = ""
    points: list[PointFidelity] = field(default_factory=list)
    decomposition: Any = None


@dataclass
class Entry:
    """One figure, matrix or benchmark: its result (or not yet) and its headline cards."""

    name: str
    kind: str
    paper: str | None
    title: str
    command: str
    state: str  # MEASURED | NOT_RUN | UNREADABLE | NO_REPLAY
    statement: str = ""
    source: str = ""
    summary: FigureSummary | None = None
    summary_path: Path | None = None
    staleness: Staleness | None = None
    cards: list[Card] = field(default_factory=list)
    figures: list[Path] = field(default_factory=list)
    report: Path | None = None
    data: Path | None = None
    csv: Path | None = None  # the main table as csv where `data` is not one (a benchmark's)
    missing: list[str] = field(default_factory=list)  # files the summary names that are not there
    problem: str = ""  # an unreadable summary's one line
    shipped: bool = True  # False: a result whose figure/matrix/benchmark file is gone

    @property
    def anchor(self) -> str:
        return "r-" + re.sub(r"[^a-z0-9-]+", "-", (f"{self.kind}-{self.name}" if self.kind else self.name).lower())

    @property
    def stale(self) -> bool:
        return self.staleness is not None and self.staleness.state == STALE

    @property
    def unknown(self) -> bool:
        return self.staleness is not None and self.staleness.state == UNKNOWN


@dataclass
class Section:
    paper: Paper
    entries: list[Entry]

    @property
    def anchor(self) -> str:
        return f"paper-{self.paper.id or 'testbed'}"


def fmt_number(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"


def fmt_value(v: float | None, unit: str = "") -> str:
    """'2.74x (paper-equivalent seconds)' for a unit starting with x, '12.3 s' for others."""
    if v is None:
        return "-"
    if unit.startswith("x"):
        return f"{fmt_number(v)}x{unit[1:]}"
    return f"{fmt_number(v)} {unit}".strip()


def measured_text(h: Headline) -> str:
    """Ours: the value, its 95% CI and the repetitions behind it."""
    if h.measured is None:  # a claim on an order or a bound: no one number, its detail says what was measured
        return h.detail or NOT_MEASURED
    value, ci = fmt_number(h.measured), ""
    if h.ci95 is not None:  # the value to the CI's decimals, as testbed replay prints it: 2.60x ± 0.02
        places = 2 if h.ci95 >= 0.005 or h.ci95 == 0 else 3
        value, ci = f"{h.measured:.{places}f}", f" ± {h.ci95:.{places}f}"
    if h.unit.startswith("x"):
        head, rest = f"{value}x", h.unit[1:].strip()
    else:
        head, rest = value, h.unit
    n = f", n = {h.n}" + (" (no CI)" if h.ci95 is None else "") if h.n is not None else ""
    return f"{head}{ci}" + (f" {rest}" if rest else "") + n


def paper_text(h: Headline) -> str:
    if h.paper_text:
        return h.paper_text
    if h.paper_value is not None:
        return fmt_value(h.paper_value, "x" if h.unit.startswith("x") else "")
    return "-"


def card_of(h: Headline, points: dict[str, PointFidelity]) -> Card:
    return Card(
        id=h.id,
        claim=h.claim,
        paper=paper_text(h),
        measured=measured_text(h),
        verdict=h.verdict_kind,
        verdict_text=h.verdict,
        why=h.reason,
        unit=h.unit,
        points=[points.get(p) or PointFidelity(id=p, faithful=None, fidelity="not in the summary") for p in h.points],
        decomposition=h.decomposition,
    )


def measured_entry(exp: Expected | None, path: Path, summary: FigureSummary, repo: Path, shipped: bool = True) -> Entry:
    """An entry with its result: cards from the summary's headlines, its files, its staleness."""
    folder = path.parent
    points = {p.id: p for p in summary.points}
    table = (summary.files.model_extra or {}).get(CSV_KEY)
    table = table if isinstance(table, str) and table else None
    named = [*summary.files.figures, summary.files.report, summary.files.data, table]
    present = {f: (folder / f).is_file() for f in named if f}
    prov = summary.provenance
    return Entry(
        name=exp.name if exp else summary.name,
        kind=exp.kind if exp else summary.kind,
        paper=exp.paper if exp else summary.paper,
        title=summary.title or (exp.title if exp else summary.name),
        command=summary.command or (exp.command if exp else ""),
        state=MEASURED,
        statement=exp.statement if exp else "",
        source=exp.source if exp else "",
        summary=summary,
        summary_path=path,
        staleness=result_staleness(
            prov.commit, summary.depends_on, prov.dirty_files, summary.drawn, repo, kind=summary.kind
        ),
        cards=[card_of(h, points) for h in summary.headlines],
        figures=[folder / f for f in summary.files.figures if present[f]],
        report=folder / summary.files.report if summary.files.report and present[summary.files.report] else None,
        data=folder / summary.files.data if summary.files.data and present[summary.files.data] else None,
        csv=folder / table if table and present[table] else None,
        missing=[f for f, ok in present.items() if not ok],
        shipped=shipped,
    )


def not_run_entry(exp: Expected) -> Entry:
    cards = [
        Card(
            id=f"{exp.name}.{i + 1}",
            claim=c.text,
            paper=c.paper_text or "-",
            measured=NOT_RUN,
            verdict=NOT_RUN,
            verdict_text=NOT_RUN,
        )
        for i, c in enumerate(exp.claims)
    ]
    return Entry(
        name=exp.name,
        kind=exp.kind,
        paper=exp.paper,
        title=exp.title,
        command=exp.command,
        state=NOT_RUN,
        statement=exp.statement,
        source=exp.source,
        cards=cards,
    )


def _candidates(results: Path, exp: Expected) -> list[Path]:
    """Where exp's summary would be: the full run's first, then the quick one's."""
    if exp.kind == "benchmark":
        return [results / "bench" / f"{n}{BENCH_SUFFIX}" for n in (exp.name, f"{exp.name}-quick")]
    return [results / n / FILENAME for n in (exp.name, f"{exp.name}-quick")]


def _without_summary(results: Path, exp: Expected) -> str:
    """What to say of a result there is without a figure-level summary (written before there were
    any): its report exists, its summary does not."""
    for path in _candidates(results, exp):
        if exp.kind == "benchmark":
            reports = [path.with_name(path.name.replace(BENCH_SUFFIX, ".md"))]
        else:
            reports = [path.parent / "report.md", path.parent / f"{exp.name}.md", path.parent / "matrix.md"]
        for report in reports:
            if report.is_file():
                shown = report.relative_to(results.parent) if report.is_relative_to(results.parent) else report
                return f"{shown} exists but no figure-level summary: run it again (a replay: --report-only redraws it)"
    return ""


def _read(path: Path) -> tuple[FigureSummary | None, str]:
    """The summary, or (None, its problem in one line, the file named from the results' parent)."""
    try:
        return read_summary(path, require_complete=True), ""
    except SummaryError as err:
        shown = path.relative_to(path.parents[2]) if len(path.parents) > 2 else path
        return None, str(err).replace(str(path), str(shown))


def collect(results: Path = REPO / "results", repo: Path = REPO) -> list[Section]:
    """The page's sections: one per seed paper (then the testbed's own), each with its entries."""
    entries: list[Entry] = []
    used: set[Path] = set()
    for exp in catalogue(repo):
        entry = None
        for path in _candidates(results, exp):
            if not path.is_file():
                continue
            used.add(path.resolve())
            summary, problem = _read(path)
            if summary is not None:
                entry = measured_entry(exp, path, summary, repo)
                break
            if problem:
                entry = not_run_entry(exp)
                entry.state, entry.problem, entry.summary_path = UNREADABLE, problem, path
                break
        if entry is None:
            entry = not_run_entry(exp)
            entry.problem = _without_summary(results, exp)
        entries.append(entry)
    orphans = {summary_name(p): p for p in summary_paths(results) if p.resolve() not in used}
    for name, path in orphans.items():  # results whose figure file is not shipped (any more)
        if name.endswith("-quick") and name.removesuffix("-quick") in orphans:
            continue  # its full run is shown
        summary, problem = _read(path)
        if summary is not None:
            entries.append(measured_entry(None, path, summary, repo, shipped=False))
        elif problem:
            entries.append(
                Entry(name, "", None, name, "", UNREADABLE, problem=problem, summary_path=path, shipped=False)
            )
    sections = []
    for paper in PAPERS:
        mine = [e for e in entries if (e.paper if e.paper in PAPER_IDS else None) == paper.id]
        if not mine and paper.id is not None:
            mine = [no_replay_entry(paper)]
        sections.append(Section(paper, mine))
    return sections


def no_replay_entry(paper: Paper) -> Entry:
    """A seed paper with no figure file yet: one card saying so."""
    return Entry(
        name=paper.id or "none",
        kind="",
        paper=paper.id,
        title=f"{paper.name}: no replay yet",
        command="",
        state=NO_REPLAY,
        cards=[
            Card(
                id=f"{paper.id}.headline",
                claim=paper.headline or paper.idea,
                paper=paper.numbers or "-",
                measured=NOT_RUN,
                verdict=NOT_RUN,
                verdict_text=NOT_RUN,
                why=f"no figure file of {paper.name} in workloads/figures/ yet (its schemes and figures are to come): "
                "nothing to run",
            )
        ],
    )


# --- counts and the README's headline table -------------------------------------------------------
def counts(sections: list[Section]) -> dict[str, int]:
    """How many results and headline cards the page shows, by state and verdict."""
    entries = [e for s in sections for e in s.entries if e.state != NO_REPLAY]
    cards = [c for s in sections for e in s.entries for c in e.cards]
    out = {
        "entries": len(entries),
        "measured": sum(e.state == MEASURED for e in entries),
        "stale": sum(e.stale for e in entries),
        "unknown": sum(e.unknown for e in entries),
        "quick": sum(bool(e.summary and e.summary.quick) for e in entries),
        "cards": len(cards),
    }
    for v in (HOLDS, DOES_NOT_HOLD, NOT_JUDGED, NOT_MEASURED, NOT_RUN):
        out[v] = sum(c.verdict == v for c in cards)
    return out


def to_redo(sections: list[Section]) -> list[Entry]:
    """The shipped results a re-run would bring up to date, in the page's order: stale, of unknown
    provenance, unreadable, only a `--quick` run, or never run (`testbed replay stale` runs the
    figures among them and names the rest's commands)."""
    return [
        e
        for s in sections
        for e in s.entries
        if e.shipped
        and e.state != NO_REPLAY
        and (e.stale or e.unknown or e.state in (NOT_RUN, UNREADABLE) or bool(e.summary and e.summary.quick))
    ]


@dataclass
class Row:
    """A line of the headline table: one paper number of one figure, ours beside it."""

    paper: str
    entry: Entry
    claim: str
    paper_number: str
    ours: str
    verdict: str


def _family_claim(claims: list[str]) -> str:
    """Claims of several groups ('2:1: RAT faster than PS', '4:1: ...') as one: the common text."""
    tails = {c.split(": ", 1)[-1] for c in claims}
    return next(iter(tails)) if len(claims) > 1 and len(tails) == 1 else claims[0]


def _verdicts(cards: list[Card]) -> str:
    kinds = [c.verdict for c in cards]
    if len(set(kinds)) == 1:
        return kinds[0] + (f" ({len(kinds)} results)" if len(kinds) > 1 else "")
    order = (HOLDS, DOES_NOT_HOLD, NOT_JUDGED, NOT_MEASURED)
    plural = {HOLDS: "hold", DOES_NOT_HOLD: "do not hold"}
    return ", ".join(f"{n} {plural.get(v, v) if n > 1 else v}" for v in order if (n := kinds.count(v)))


def _range(cards: list[Card], headlines: dict[str, Headline]) -> str:
    """Ours for several results sharing a paper number: the one value where they share it (a claim
    and its comparison with the paper), else the range and how many results it spans."""
    hs = [headlines[c.id] for c in cards if c.id in headlines and headlines[c.id].measured is not None]
    if not hs:
        return NOT_MEASURED
    if len({c.measured for c in cards}) == 1:
        return cards[0].measured
    lo, hi = min(h.measured for h in hs), max(h.measured for h in hs)  # type: ignore[type-var]
    unit = "x" if hs[0].unit.startswith("x") else f" {hs[0].unit}".rstrip()
    span = fmt_number(lo) if lo == hi else f"{fmt_number(lo)}-{fmt_number(hi)}"
    measured = f", {len(hs)} measured" if len(hs) < len(cards) else ""
    return f"{span}{unit} ({len(cards)} results{measured})"


def headline_rows(sections: list[Section]) -> list[Row]:
    """Per seed paper, each paper number with ours: measured headlines that have one (grouped where
    several groups share it), a not-run figure's claims that name one, or 'no replay yet'."""
    rows: list[Row] = []
    for s in sections:
        if s.paper.id is None:
            continue
        for e in s.entries:
            if e.state == NO_REPLAY:
                rows.append(Row(s.paper.name, e, e.cards[0].claim, e.cards[0].paper, NO_REPLAY, "-"))
                continue
            if e.state != MEASURED:
                rows += [
                    Row(s.paper.name, e, c.claim, c.paper, NOT_RUN if e.state == NOT_RUN else e.state, "-")
                    for c in e.cards
                    if c.paper != "-"
                ]
                continue
            headlines = {h.id: h for h in e.summary.headlines} if e.summary else {}
            families: dict[str, list[Card]] = {}
            for c in e.cards:
                if c.paper != "-":
                    families.setdefault(c.paper, []).append(c)
            for number, cards in families.items():
                rows.append(
                    Row(
                        s.paper.name,
                        e,
                        _family_claim([c.claim for c in cards]),
                        number,
                        _range(cards, headlines),
                        _verdicts(cards),
                    )
                )
    return rows


def short_title(e: Entry) -> str:
    """'Fig. 13' of 'Fig. 13: BCT of PSNet and FatTree'; the name where the title has no colon."""
    head = e.title.split(":")[0].strip()
    return head if ":" in e.title and len(head) <= 24 else e.name


def readme_table(sections: list[Section], page: str = "docs/reproduction.md") -> str:
    """The README's headline table (markdown): paper, figure, claim, the paper's number, ours, verdict."""
    lines = [
        "| paper | figure | claim | paper's number | ours (95% CI, n) | verdict |",
        "|---|---|---|---|---|---|",
    ]
    for r in headline_rows(sections):
        link = f"[{short_title(r.entry)}]({page}#{r.entry.anchor})"
        cells = [r.paper, link, r.claim, r.paper_number, r.ours, r.verdict]
        lines.append("| " + " | ".join(c.replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)
