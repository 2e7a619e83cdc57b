"""The reproduction page, rendered: docs/reproduction.md and the gallery results/index.html.

Both come from the same sections (replays.reproduction.collect) and say the same: per seed paper,
per figure, the result's provenance and stale mark, the command that reproduces it, the figure,
and one card per paper headline (the paper's number, ours with its 95% CI and repetitions, the
verdict and why, the fidelity of every point it rests on, the decomposition where there is one).

The HTML page is static: inline CSS, no script, no external resource; it links the PNGs and
reports beside it by relative paths, so it opens from a clone (file://) with no server and no
network. It is rendered with Jinja2 (autoescaping every value a result file supplies) from
replays/templates/reproduction.html.j2. The markdown is plain lines, as the figure reports are.
Neither carries the time it was generated: the same results give the same bytes (a re-run of
`testbed report` changes nothing that did not change).
"""

from __future__ import annotations

import datetime
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from replays.evidence import DOES_NOT_HOLD, HOLDS, NOT_JUDGED, NOT_MEASURED
from replays.provenance import REPO
from replays.reproduction import (
    MEASURED,
    NO_REPLAY,
    NOT_RUN,
    UNREADABLE,
    Entry,
    Section,
    counts,
    fmt_number,
    headline_rows,
    short_title,
)
from replays.staleness import STALE, UNKNOWN
from replays.verdict_split import Split, rule_text, split
from replays.verdict_split import table as split_rows
from topologies.files import write_text_atomic

TEMPLATES = Path(__file__).resolve().parent / "templates"
MD_PATH = REPO / "docs" / "reproduction.md"
HTML_PATH = REPO / "results" / "index.html"
#: where the page says how the fidelity verdict splits the points
SPLIT_ANCHOR = "fidelity-verdict"
TITLE = "Reproduction: the seed papers' numbers beside ours"
KIND_WORDS = {"figure": "emulated figure", "model-figure": "model figure", "matrix": "matrix", "benchmark": "benchmark"}
VERDICT_ORDER = (HOLDS, DOES_NOT_HOLD, NOT_JUDGED, NOT_MEASURED, NOT_RUN)


# --- shared pieces --------------------------------------------------------------------------------
def when(date: str) -> str:
    """'2026-11-25 18:00 +00:00' of an ISO date (as written where it does not parse)."""
    try:
        d = datetime.datetime.fromisoformat(date)
    except ValueError:
        return date
    return d.strftime("%Y-%m-%d %H:%M") + (d.strftime(" %z") if d.tzinfo else "")


def minutes(wall_s: float | None) -> str:
    if wall_s is None:
        return "-"
    return f"{wall_s:.0f} s" if wall_s < 120 else f"{wall_s / 60:.1f} min"


def provenance_items(e: Entry) -> list[tuple[str, str]]:
    """(label, text) of a result's provenance, in the order the page shows them."""
    if e.summary is None:
        return []
    s, p = e.summary, e.summary.provenance
    m = p.machine
    run = "quick (--quick: a smoke run, not the figure)" if s.quick else "full"
    if s.repetitions:
        run += f", {s.repetitions} repetition{'s' if s.repetitions != 1 else ''} per point"
    commit = (p.commit[:10] if p.commit else "none recorded") + (" + local changes" if p.dirty else "")
    machine = ", ".join(
        x
        for x in (
            m.cpu,
            f"{m.cores} cores" if m.cores else "",
            f"{m.memory_gb:g} GiB" if m.memory_gb else "",
            f"kernel {m.kernel}" if m.kernel else "",
        )
        if x
    )
    items = [
        ("measured", when(p.date)),
        ("run", run),
        ("commit", commit),
        ("machine", machine),
        ("wall time", minutes(p.wall_s)),
        ("load before", "-" if p.load_before is None else f"{p.load_before:.2f} (1-min load average at the start)"),
    ]
    if p.command_line:
        items.append(("command line", p.command_line))
    return items


def status_text(e: Entry) -> str:
    if e.state == MEASURED and e.staleness is not None:
        return e.staleness.text
    if e.state == UNREADABLE:
        return f"summary unreadable: {e.problem}"
    return f"{e.state}: {e.problem}" if e.problem else e.state


def status_class(e: Entry) -> str:
    if e.state == MEASURED and e.staleness is not None:
        return {STALE: "stale", UNKNOWN: "unknown"}.get(e.staleness.state, "current")
    return "notrun" if e.state in (NOT_RUN, NO_REPLAY) else "unknown"


def fidelity_text(faithful: bool | None) -> str:
    return "faithful" if faithful else "NOT faithful" if faithful is False else "no verdict"


@dataclass
class Table:
    """A decomposition (or any nested result) as rows and columns."""

    columns: list[str]
    rows: list[list[str]]


def _cell(v: Any) -> str:
    if isinstance(v, bool) or v is None:
        return "-" if v is None else str(v).lower()
    if isinstance(v, int | float):
        return fmt_number(float(v))
    if isinstance(v, dict | list):
        return ", ".join(f"{k} {_cell(x)}" for k, x in v.items()) if isinstance(v, dict) else ", ".join(map(_cell, v))
    return str(v)


def as_table(obj: Any) -> Table | None:
    """A list of records as a table with their keys as columns; a record as key / value rows; a
    mapping of records as one row per key."""
    if obj is None or obj == {} or obj == []:
        return None
    if isinstance(obj, list) and all(isinstance(r, dict) for r in obj):
        cols = list(dict.fromkeys(k for r in obj for k in r))
        return Table(cols, [[_cell(r.get(c)) for c in cols] for r in obj])
    if isinstance(obj, dict) and obj and all(isinstance(v, dict) for v in obj.values()):
        cols = list(dict.fromkeys(k for v in obj.values() for k in v))
        return Table(["", *cols], [[str(k), *(_cell(v.get(c)) for c in cols)] for k, v in obj.items()])
    if isinstance(obj, dict):
        return Table(["", "value"], [[str(k), _cell(v)] for k, v in obj.items()])
    return Table(["value"], [[_cell(obj)]])


def rel(target: Path, page: Path) -> str:
    """A link from `page` to `target` (relative, forward slashes, spaces escaped)."""
    return os.path.relpath(target, page.parent).replace(os.sep, "/").replace(" ", "%20")


def replay_wall_s(sections: list[Section]) -> tuple[float, int]:
    """The full replays' wall times added up (figures, model figures, matrices; not benchmarks or
    quick runs), and how many there are: what `testbed replay all` plus the matrix took when they ran."""
    walls = [
        e.summary.provenance.wall_s
        for s in sections
        for e in s.entries
        if e.summary and e.kind != "benchmark" and not e.summary.quick and e.summary.provenance.wall_s is not None
    ]
    return sum(walls), len(walls)


def summary_line(sections: list[Section]) -> str:
    c = counts(sections)
    verdicts = ", ".join(f"{c[v]} {v}" for v in VERDICT_ORDER if c[v])
    wall, n = replay_wall_s(sections)
    walls = f" The {n} full replays committed took {minutes(wall)} in all (their wall times added)." if n else ""
    redo = " `testbed replay stale` re-runs the figures among the stale ones." if c["stale"] or c["unknown"] else ""
    return (
        f"{c['measured']} of {c['entries']} figures, matrices and benchmarks have a committed result "
        f"({c['stale']} stale, {c['unknown']} of unknown provenance, {c['quick']} quick); "
        f"{c['cards']} paper headlines: {verdicts or 'none'}.{walls}{redo}"
    )


def verdict_split(sections: list[Section]) -> Split:
    """The fidelity verdict across every committed point (replays.verdict_split)."""
    return split(
        (e.name, p.id, p.faithful, p.fidelity)
        for s in sections
        for e in s.entries
        if e.summary
        for p in e.summary.points
    )


def split_table(s: Split) -> Table:
    return Table(*split_rows(s))


# --- markdown -------------------------------------------------------------------------------------
def _md(text: str) -> str:
    """Text safe in a markdown table cell."""
    return " ".join(str(text).split()).replace("|", "/")


def _md_table(table: Table) -> list[str]:
    return [
        "| " + " | ".join(_md(c) for c in table.columns) + " |",
        "|" + "---|" * len(table.columns),
        *("| " + " | ".join(_md(c) for c in r) + " |" for r in table.rows),
    ]


def markdown(sections: list[Section], md_path: Path = MD_PATH, html_path: Path = HTML_PATH) -> str:
    """docs/reproduction.md: the headline table, then every paper's figures with their cards."""
    lines = [
        f"# {TITLE}",
        "",
        "Generated by `testbed report` from the committed results (`results/*/summary.json`, "
        "`results/bench/*.summary.json`); it runs nothing. Do not edit: run `testbed report` again. "
        f"The same with the figures: [the gallery]({rel(html_path, md_path)}). `testbed` is `.venv/bin/testbed`; "
        "emulated replays, the matrix and the benchmarks run as root.",
        "",
        summary_line(sections),
        "",
        "## Headlines",
        "",
        *headline_table(sections, md_path),
        "",
        "Verdicts: **holds** / **does not hold** (the claim judged on faithful points), **not judged** (a point "
        "it rests on was not faithful: the emulator did not deliver the configured rates), **not measured** (a "
        "point has no finished run). A result is **stale** where a file it depends on changed since the commit it "
        "ran on.",
    ]
    for s in sections:
        lines += ["", f"## {s.paper.name} ({s.paper.source})", "", s.paper.idea[:1].upper() + s.paper.idea[1:] + "."]
        for e in s.entries:
            lines += ["", *_md_entry(e, md_path)]
    return "\n".join([*lines, "", *_md_split(verdict_split(sections))]) + "\n"


def _md_split(s: Split) -> list[str]:
    lines = [f'<a id="{SPLIT_ANCHOR}"></a>', "## The fidelity verdict on these points", "", rule_text(), ""]
    lines += [*_md_table(split_table(s)), "", s.conclusion()]
    if s.doubtful:
        lines += ["", "The starved points it passed under that share:", ""]
        lines += [f"- {p.result} {p.id}: {p.signals.transfer_util:.0%}" for p in s.doubtful]
    if s.without_text():
        lines += ["", s.without_text()]
    return lines


def headline_table(sections: list[Section], md_path: Path) -> list[str]:
    out = ["| paper | figure | claim | paper's number | ours (95% CI, n) | verdict |", "|---|---|---|---|---|---|"]
    for r in headline_rows(sections):
        fig = f"[{short_title(r.entry)}](#{r.entry.anchor})"
        out.append(f"| {r.paper} | {fig} | {_md(r.claim)} | {_md(r.paper_number)} | {_md(r.ours)} | {r.verdict} |")
    return out


def _md_entry(e: Entry, md_path: Path) -> list[str]:
    state = "" if e.state == MEASURED else f": {e.state}"
    lines = [f'<a id="{e.anchor}"></a>', f"### {e.title} (`{e.name}`){state}", ""]
    if e.statement:
        lines.append(f"- the paper: {e.statement}")
    if e.state == MEASURED:
        mark = "**STALE**: " + e.staleness.text.removeprefix("stale: ") if e.stale else status_text(e)
        lines.append(f"- {mark}")
        lines += [f"- {k}: {v}" for k, v in provenance_items(e)]
    elif e.state == UNREADABLE or e.problem:
        lines.append(f"- {status_text(e)}")
    if e.command:
        defined = e.source and not e.command.endswith(e.source)
        lines.append(f"- reproduce: `{e.command}`" + (f" (defined in `{e.source}`)" if defined else ""))
    if not e.shipped:
        lines.append("- its file is not shipped any more: no command reproduces it as it was")
    links = [f"[{lbl}]({rel(p, md_path)})" for lbl, p in (("report", e.report), ("data", e.data), ("csv", e.csv)) if p]
    if links:
        lines.append("- files: " + ", ".join(links))
    if e.missing:
        lines.append("- missing files the summary names: " + ", ".join(e.missing))
    for fig in e.figures:
        lines += ["", f"![{e.name}]({rel(fig, md_path)})"]
    if e.cards:
        lines += ["", "| headline | paper | ours (95% CI, n) | verdict | why |", "|---|---|---|---|---|"]
        for c in e.cards:
            lines.append(
                f"| {_md(c.claim)} | {_md(c.paper)} | {_md(c.measured)} | **{c.verdict}** | {_md(c.why) or '-'} |"
            )
    used = [p for c in e.cards for p in c.points]
    if used:
        lines += ["", "Fidelity of the points used:", ""]
        seen: set[str] = set()
        for p in used:
            if p.id not in seen:
                seen.add(p.id)
                lines.append(f"- {p.id}: {fidelity_text(p.faithful)}" + (f" ({_md(p.fidelity)})" if p.fidelity else ""))
    for c in e.cards:
        table = as_table(c.decomposition)
        if table:
            lines += ["", f"Decomposition ({_md(c.claim)}):", "", *_md_table(table)]
    return lines


# --- HTML -----------------------------------------------------------------------------------------
def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html", "j2"]),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["slug"] = _slug
    return env


def html(sections: list[Section], html_path: Path = HTML_PATH, md_path: Path = MD_PATH) -> str:
    """results/index.html: the same content as the markdown, as cards with the figures."""
    link = lambda p: rel(p, html_path)  # noqa: E731
    return (
        environment()
        .get_template("reproduction.html.j2")
        .render(
            title=TITLE,
            sections=sections,
            summary=summary_line(sections),
            rows=headline_rows(sections),
            md_link=link(md_path),
            link=link,
            short_title=short_title,
            provenance_items=provenance_items,
            status_text=status_text,
            status_class=status_class,
            fidelity_text=fidelity_text,
            as_table=as_table,
            kind_words=KIND_WORDS,
            MEASURED=MEASURED,
            split=verdict_split(sections),
            split_table=split_table,
            split_rule=rule_text(),
            split_anchor=SPLIT_ANCHOR,
        )
    )


def write(sections: list[Section], md_path: Path = MD_PATH, html_path: Path = HTML_PATH) -> list[Path]:
    """Write both pages; returns their paths."""
    pages = {md_path: markdown(sections, md_path, html_path), html_path: html(sections, html_path, md_path)}
    for path, text in pages.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, text)
    return [md_path, html_path]
