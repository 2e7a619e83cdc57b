"""The reproduction page (replays/reproduction.py, replays/reproduction_page.py, `testbed report`)
from the fixture of committed-style results (tests/fixtures/evidence/): a card for every headline,
negative results with their reason, stale and unknown-provenance marks judged against a real git
repository, "not run yet" with the command for every shipped figure without a result, and links
that resolve."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from replays import catalogue, reproduction, reproduction_page
from replays.evidence import FigureSummary, read_summary, summary_paths
from replays.provenance import REPO
from replays.reproduction import MEASURED, NOT_RUN, UNREADABLE
from tests.evidence_helpers import build_results, catalogue_repo


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> dict:
    """The fixture's results judged in a repository where fig13.yaml changed after fig13 ran."""
    tmp = tmp_path_factory.mktemp("site")
    repo = tmp / "repo"
    old, new = catalogue_repo(repo)
    results = build_results(repo, old=old, new=new)
    sections = reproduction.collect(results, repo)
    md_path, html_path = repo / "docs" / "reproduction.md", results / "index.html"
    reproduction_page.write(sections, md_path, html_path)
    entries = {e.name: e for s in sections for e in s.entries}
    return {
        "repo": repo,
        "results": results,
        "sections": sections,
        "entries": entries,
        "md": md_path.read_text(),
        "html": html_path.read_text(),
        "md_path": md_path,
        "html_path": html_path,
    }


def fixture_summaries(results: Path) -> list[FigureSummary]:
    out = []
    for p in summary_paths(results):
        try:
            s = read_summary(p)
        except ValueError:
            continue  # the fixture's broken one
        if s:
            out.append(s)
    return out


def test_every_headline_of_the_results_has_a_card_on_both_pages(site):
    summaries = fixture_summaries(site["results"])
    headlines = [h for s in summaries for h in s.headlines]
    assert len(headlines) == 9
    for h in headlines:
        assert h.claim in site["md"], h.id
        assert h.claim.replace("'", "&#39;") in site["html"], h.id
    cards = {c.id: c for e in site["entries"].values() for c in e.cards}
    assert {h.id for h in headlines} <= set(cards)
    vgg = cards["fig13.vgg16"]
    assert (vgg.paper, vgg.measured, vgg.verdict) == (
        "1.89x",
        "2.74x ± 0.08 (paper-equivalent seconds), n = 3",
        "holds",
    )
    assert [p.id for p in vgg.points] == ["psnet-vgg16", "fattree-r1-vgg16"]
    assert (
        "| VGG-16: PSNet faster than FatTree r=1 | 1.89x | 2.74x ± 0.08 (paper-equivalent seconds), n = 3 |"
        in (site["md"])
    )


def test_negative_results_stay_with_their_reason(site):
    cards = {c.id: c for e in site["entries"].values() for c in e.cards}
    rat = cards["rat-fig6.o2.ps.paper"]
    assert rat.verdict == "does not hold" and "tends to the hosts per rack (2), not 25" in rat.why
    assert rat.why in site["md"] and "**does not hold**" in site["md"]
    assert rat.why in site["html"]
    paper_gap = cards["fig13.vgg16.paper"]
    assert paper_gap.verdict == "does not hold" and paper_gap.verdict_text == "does NOT hold"
    # not judged: the reason only in the verdict's parentheses becomes the card's why
    hips = cards["hips-table1.mnist"]
    assert hips.verdict == "not judged"
    assert hips.why == "point not faithful: tcp: the worker's link delivered 61% of its rate"
    assert "the worker&#39;s link delivered 61% of its rate" in site["html"]
    unfaithful = {p.id: p for p in cards["fig13.resnet50"].points}["fattree-r1-resnet50"]
    assert unfaithful.faithful is False and "dropped 312 packets" in site["md"]


def test_stale_current_and_unknown_marks(site):
    e = site["entries"]
    assert e["fig13"].stale and e["fig13"].staleness.changed == ["workloads/figures/fig13.yaml"]
    assert "**STALE**: workloads/figures/fig13.yaml changed since it ran" in site["md"]
    assert 'class="badge b-stale"' in site["html"]
    assert e["rat-fig6"].staleness.state == "current" and not e["rat-fig6"].stale
    assert e["hips-table1"].unknown and "is not in this repository" in e["hips-table1"].staleness.text
    assert e["old-figure"].unknown and "no commit recorded" in e["old-figure"].staleness.text
    assert e["schemes"].state == MEASURED and e["schemes"].staleness.state == "current"


def test_every_shipped_figure_without_a_result_says_not_run_yet_with_its_command(site):
    e = site["entries"]
    shipped = [x.name for x in catalogue.catalogue(site["repo"])]
    assert set(shipped) <= set(e)
    measured = {"fig13", "rat-fig6", "hips-table1", "fig6", "schemes"}
    for name in shipped:
        entry = e[name]
        if name in measured:
            assert entry.state == MEASURED, name
        elif name == "fig1":
            assert entry.state == UNREADABLE and "fig1/summary.json: title: Field required" in entry.problem
        else:
            assert entry.state == NOT_RUN, name
            assert f"`{entry.command}`" in site["md"] and entry.command in site["html"]
            assert all(c.verdict == NOT_RUN for c in entry.cards)
    assert e["fig9"].command == "testbed replay fig9" and e["matrix"].command == "testbed matrix"
    assert e["bct"].command == "scripts/bench_bct.sh" and e["bct"].kind == "benchmark"
    # a figure file's claims become its cards, with the paper's numbers they name
    fig9 = [c.claim for c in e["fig9"].cards]
    assert len(fig9) == 1 and "measured within [BCT_min, BCT_max]" in fig9[0]
    t3 = [(c.claim, c.paper) for c in e["hips-table3"].cards]
    assert ("HiPS faster than PSS/MS", "1.6x (BCube(4,1)), 1.5x (BCube(3,1))") in t3


def test_papers_without_a_replay_quick_results_and_unshipped_ones(site):
    sections = {s.paper.id: s for s in site["sections"]}
    assert list(sections) == ["psnet", "rat", "hips", "plink", "pf", None]
    for paper, names in (
        ("plink", ["plink-fig8", "plink-fig8-scale", "plink-fig10"]),
        ("pf", ["pf-fig9", "pf-fig11", "pf-fig13", "pf-fig14"]),
    ):
        entries = sections[paper].entries  # their figure files, none run in the fixture
        assert [e.name for e in entries] == names
        assert all(e.state == NOT_RUN for e in entries)
    fig6 = site["entries"]["fig6"]
    assert fig6.summary.quick and fig6.summary_path.parent.name == "fig6-quick"
    assert "quick (--quick: a smoke run, not the figure)" in site["md"]
    old = site["entries"]["old-figure"]
    assert not old.shipped and old in sections["psnet"].entries and old.missing == ["gone.png"]
    assert "its file is not shipped any more" in site["md"]
    # no paper: the matrix, then the shipped benchmarks by name (scripts/bench_*.sh)
    rest = [x.name for x in sections[None].entries]
    assert rest[:3] == ["matrix", "alltoall", "bct"], rest


def test_the_decomposition_and_provenance_are_shown(site):
    md, html = site["md"], site["html"]
    assert "Decomposition (VGG-16: PSNet faster than FatTree r=1):" in md
    assert "| psnet-vgg16 | PSNet | full | 4.12 | 1.21 | 4 |" in md
    assert "<summary>decomposition</summary>" in html
    assert "- machine: AMD EPYC (fixture), 2 cores, 23.5 GiB, kernel 6.1.0-fixture" in md
    assert "- wall time: 13.6 min" in md and "- measured: 2026-11-24 18:00 +0000" in md
    assert "- run: full, 3 repetitions per point" in md


def test_links_of_the_markdown_resolve(site):
    md_path = site["md_path"]
    targets = re.findall(r"\]\(([^)\s]+)\)", site["md"])
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', site["md"]))
    assert len(targets) > 20
    for t in targets:
        path, _, frag = t.partition("#")
        if path:
            assert (md_path.parent / path).resolve().exists(), t
        else:
            assert frag in anchors, t


def test_counts_the_headline_table_and_the_same_bytes_twice(site):
    c = reproduction.counts(site["sections"])
    assert (c["measured"], c["stale"], c["quick"]) == (6, 1, 1)
    assert c["holds"] == 4 and c["does not hold"] == 3 and c["not judged"] == 2
    table = reproduction.readme_table(site["sections"]).splitlines()
    assert table[0].startswith("| paper | figure | claim |")
    rows = {r.split(" | ")[1] + " " + r.split(" | ")[3]: r for r in table[2:]}
    fig13 = rows["[Fig. 13](docs/reproduction.md#r-figure-fig13) 1.89x"]
    assert "| 2.74x ± 0.08 (paper-equivalent seconds), n = 3 | 1 holds, 1 does not hold |" in fig13
    rat = rows["[RAT Fig. 6](docs/reproduction.md#r-figure-rat-fig6) 25x"]
    assert "| 1.52-2.48x (3 results) | 1 holds, 2 do not hold |" in rat
    assert not any("no replay yet" in r for r in table)  # every paper has its figure files now
    # a row per paper number: Parameter Flow's four figures name nine, the scale figures five
    assert 8 <= len(table) <= 40
    again = reproduction.collect(site["results"], site["repo"])
    assert reproduction_page.markdown(again, site["md_path"], site["html_path"]) == site["md"]
    assert reproduction_page.html(again, site["html_path"], site["md_path"]) == site["html"]


def test_the_html_is_static(site):
    html = site["html"]
    assert "<script" not in html.lower()
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "an external resource"
    assert "<style>" in html and 'rel="stylesheet"' not in html


def test_testbed_report_writes_both_pages_and_prints_the_table(site, tmp_path):
    results = build_results(tmp_path)
    md = tmp_path / "docs" / "reproduction.md"
    cmd = [sys.executable, "-m", "testbed.cli", "report", "--results", str(results), "--md", str(md)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert md.exists() and (results / "index.html").exists()
    assert "fig13: unknown provenance (commit 0000000000 is not in this repository)" in out.stdout
    assert "fig1: summary unreadable" in out.stdout
    shipped = len(catalogue.catalogue(REPO))
    assert f"6 of {shipped + 1} figures, matrices and benchmarks have a committed result" in out.stdout
    table = subprocess.run([*cmd, "--readme-table"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert table.returncode == 0 and table.stdout.startswith("| paper | figure | claim |")


def test_the_summaries_read_back_what_write_summary_wrote(tmp_path):
    from replays.evidence import Headline, write_summary
    from replays.provenance import capture

    s = FigureSummary(
        name="figx",
        kind="figure",
        paper="psnet",
        title="X",
        command="testbed replay figx",
        provenance=capture().finished(1.0),
        headlines=[Headline(id="figx.a", claim="a", measured=1.0, verdict="holds")],
    )
    path = write_summary(tmp_path / "figx", s)
    data = json.loads(path.read_text())
    assert data["schema"] == "figure-summary/1" and data["provenance"]["wall_s"] == 1.0
    assert data["complete"] is True and s.complete is False  # written last, whole, by write_summary only
    assert read_summary(tmp_path / "figx").model_dump() == s.model_copy(update={"complete": True}).model_dump()
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "summary.json").write_text('{"complete": true}')  # a run's own summary
    assert read_summary(tmp_path / "run") is None


def test_results_no_file_ships_are_shown_quick_ones_too_and_broken_ones_say_so(tmp_path):
    results = build_results(tmp_path)
    quick = json.loads((results / "fig6-quick" / "summary.json").read_text())
    (results / "mine-quick").mkdir()
    (results / "mine-quick" / "summary.json").write_text(json.dumps(quick | {"name": "mine-quick", "paper": "rat"}))
    (results / "broken").mkdir()
    (results / "broken" / "summary.json").write_text('{"schema": "figure-summary/1", "name": ')
    sections = {s.paper.id: s for s in reproduction.collect(results, REPO)}
    mine = next(e for e in sections["rat"].entries if e.name == "mine-quick")
    assert mine.state == MEASURED and not mine.shipped and mine.summary.quick
    broken = next(e for e in sections[None].entries if e.name == "broken")
    assert broken.state == UNREADABLE and broken.problem.startswith("results/broken/summary.json: not readable JSON")
    md = reproduction_page.markdown(list(sections.values()), tmp_path / "docs" / "r.md", results / "index.html")
    assert "summary unreadable: results/broken/summary.json: not readable JSON" in md


def test_the_full_replays_wall_times_are_added_up(site):
    # fig13 816 s, rat-fig6 3522 s, hips-table1 95 s, old-figure none; quick fig6 and the benchmark left out
    assert reproduction_page.replay_wall_s(site["sections"]) == (816.0 + 3522.0 + 95.0, 3)
    assert "The 3 full replays committed took 73.9 min in all (their wall times added)." in site["md"]


def test_a_result_written_before_summaries_existed_is_named(tmp_path):
    results = tmp_path / "results"
    (results / "fig9").mkdir(parents=True)
    (results / "fig9" / "report.md").write_text("# Fig. 9 (an older replay)\n")
    (results / "bench").mkdir()
    (results / "bench" / "network.md").write_text("# Network benchmark\n")
    entries = {e.name: e for s in reproduction.collect(results, REPO) for e in s.entries}
    assert entries["fig9"].state == NOT_RUN
    assert entries["fig9"].problem == (
        "results/fig9/report.md exists but no figure-level summary: run it again (a replay: --report-only redraws it)"
    )
    assert entries["network"].problem.startswith("results/bench/network.md exists but no figure-level summary")
    assert entries["fig10"].problem == ""
    md = reproduction_page.markdown(
        reproduction.collect(results, REPO), tmp_path / "docs" / "r.md", results / "index.html"
    )
    assert "- not run yet: results/fig9/report.md exists but no figure-level summary" in md


def test_what_a_rerun_would_bring_up_to_date(site):
    """`testbed replay stale`'s list: stale, unknown provenance, unreadable, quick only, never run;
    not a current result, nor one whose file is no longer shipped."""
    redo = {e.name: e for e in reproduction.to_redo(site["sections"])}
    assert {"fig13", "hips-table1", "fig1", "fig6", "fig9", "matrix", "bct"} <= set(redo)
    assert not {"rat-fig6", "schemes", "old-figure"} & set(redo)
    shipped = {x.name for x in catalogue.catalogue(site["repo"])}
    assert set(redo) == shipped - {"rat-fig6", "schemes"}


def test_replay_stale_picks_the_figures_and_names_the_other_commands(tmp_path, capsys):
    from testbed.cli import _stale_figures

    results = build_results(tmp_path)  # judged against this repository: commit 0000... is unknown
    names, redraw = _stale_figures(results)
    out = capsys.readouterr().out
    assert redraw == set()  # unknown provenance: run again, not redrawn
    assert "fig13" in names and "fig1" in names and "matrix" not in names and "bct" not in names
    assert "also out of date, not a figure: matrix: testbed matrix" in out
    assert "also out of date, not a figure: bct: scripts/bench_bct.sh" in out
    assert out.startswith(f"to replay ({len(names)}): ")
