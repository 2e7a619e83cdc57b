"""Each benchmark's figure and csv (replays/benchfigures.py), drawn from a copy of its committed
results/bench/<stem>.json in a temporary folder: a valid PNG of sensible size, a csv with a header
and a row per point of the benchmark's main table, the summary naming both and otherwise
unchanged; the same data drawn again changes no byte; a json that lacks what the plot needs gets a
figure saying so, an unknown stem is skipped with a log line; `testbed report` draws them before
it builds the page, which shows them; and drawing them stales no committed result."""

from __future__ import annotations

import csv
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from replays import benchfigures as figures
from replays import reproduction, reproduction_page
from replays.benchdata import GZIP_DATA_BYTES, bench_data_path, read_bench_data, write_bench_data
from replays.evidence import BENCH_SUFFIX, read_summary
from replays.provenance import REPO
from replays.staleness import CURRENT, PAGE, STALE, staleness
from tests.evidence_helpers import commit_all, init_repo

BENCH = REPO / "results" / "bench"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def points(stem: str, data: dict) -> int:
    """How many points the benchmark's main table has, read from its json as its md shows them."""
    if stem == "failures":  # one row per event of every run
        return sum(len(r["events"]) for r in data["runs"])
    key = {
        "alltoall": "rows",
        "bct": "points",
        "cluster": "rows",
        "dvf": "rows",
        "flowmodel": "points",
        "kills": "kills",
        "network": "shaping",
        "patchports": "rows",
        "replay": "groups",
        "scale": "points",
        "schemes": "expected",
    }[stem]
    return len(data[key])


def copy_bench(stem: str, dest: Path, as_stem: str | None = None) -> Path:
    """The committed json, md and summary of `stem` in `dest` (as `as_stem`'s); returns `dest`."""
    dest.mkdir(parents=True, exist_ok=True)
    name = as_stem or stem
    data = bench_data_path(BENCH, stem)  # <stem>.json, or .json.gz when big
    shutil.copyfile(data, dest / data.name.replace(stem, name, 1))
    shutil.copyfile(BENCH / f"{stem}.md", dest / f"{name}.md")
    shutil.copyfile(BENCH / f"{stem}{BENCH_SUFFIX}", dest / f"{name}{BENCH_SUFFIX}")
    return dest


def rows_of(path: Path) -> tuple[list[str], list[dict[str, str]]]:
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def assert_png(path: Path) -> None:
    content = path.read_bytes()
    assert content.startswith(PNG_SIGNATURE), f"{path.name} is not a PNG"
    assert 5_000 < len(content) < 300_000, f"{path.name}: {len(content)} bytes"
    with Image.open(path) as im:
        im.verify()
    with Image.open(path) as im:
        w, h = im.size
        assert 600 <= w <= 2400 and 300 <= h <= 1400, f"{path.name}: {w}x{h}"
        assert figures.SOURCE_KEY in im.info and "json sha256" in im.info[figures.SOURCE_KEY]


def test_every_committed_benchmark_has_a_figure_function():
    stems = {p.name.removesuffix(BENCH_SUFFIX) for p in BENCH.glob(f"*{BENCH_SUFFIX}")}
    assert stems, "no benchmark summaries committed"
    assert stems <= set(figures.FIGURES), f"no figure for {sorted(stems - set(figures.FIGURES))}"


@pytest.mark.parametrize("stem", sorted(figures.FIGURES))
def test_the_figure_and_csv_of_each_benchmark_from_its_committed_json(stem, tmp_path):
    folder = copy_bench(stem, tmp_path / "bench")
    data = read_bench_data(folder, stem)
    before = read_summary(folder / f"{stem}{BENCH_SUFFIX}")
    drawn = figures.draw(stem, folder)
    assert drawn is not None and drawn.problem == "", drawn and drawn.problem
    assert_png(folder / f"{stem}.png")
    head, rows = rows_of(folder / f"{stem}.csv")
    assert len(head) >= 4 and all(head), head
    assert len(rows) == points(stem, data)
    after = read_summary(folder / f"{stem}{BENCH_SUFFIX}", require_complete=True)
    assert after is not None and before is not None
    assert f"{stem}.png" in after.files.figures
    assert (after.files.model_extra or {}).get(figures.CSV_KEY) == f"{stem}.csv"
    assert after.model_dump(exclude={"files"}) == before.model_dump(exclude={"files"})  # provenance: the run's
    assert (after.files.report, after.files.data) == (before.files.report, before.files.data)
    again = figures.draw(stem, folder)
    assert again is not None and again.changed == []  # the same json: nothing rewritten


@pytest.mark.parametrize("stem", ["kills", "schemes"])
def test_the_same_data_drawn_again_gives_the_same_bytes(stem, tmp_path):
    folder = copy_bench(stem, tmp_path / "bench")
    figures.draw(stem, folder)
    first = (folder / f"{stem}.png").read_bytes()
    (folder / f"{stem}.png").unlink()  # drawn again from scratch, not skipped
    figures.draw(stem, folder)
    assert (folder / f"{stem}.png").read_bytes() == first
    summary = (folder / f"{stem}{BENCH_SUFFIX}").read_text()
    assert figures.draw(stem, folder).changed == []
    assert (folder / f"{stem}{BENCH_SUFFIX}").read_text() == summary


def test_a_json_without_the_main_table_gets_a_figure_saying_so_and_no_csv(tmp_path, caplog):
    folder = copy_bench("schemes", tmp_path / "bench")
    figures.draw("schemes", folder)
    assert (folder / "schemes.csv").is_file()
    data = json.loads((folder / "schemes.json").read_text())
    del data["expected"]
    (folder / "schemes.json").write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING, logger="bench.figures"):
        drawn = figures.draw("schemes", folder)
    assert drawn is not None and "expected" in drawn.problem
    assert "lacks what the figure needs" in caplog.text
    assert_png(folder / "schemes.png")
    assert not (folder / "schemes.csv").exists()  # the old table is not this json's
    summary = read_summary(folder / f"schemes{BENCH_SUFFIX}")
    assert summary is not None and summary.files.figures == ["schemes.png"]
    assert figures.CSV_KEY not in (summary.files.model_extra or {})


def test_a_point_missing_a_field_or_a_broken_json_is_said_so_not_raised(tmp_path):
    folder = copy_bench("alltoall", tmp_path / "bench")
    data = json.loads((folder / "alltoall.json").read_text())
    del data["rows"][0]["raw_end_s"]
    (folder / "alltoall.json").write_text(json.dumps(data))
    drawn = figures.draw("alltoall", folder)
    assert drawn is not None and "raw_end_s" in drawn.problem and drawn.csv is None
    assert_png(folder / "alltoall.png")
    (folder / "alltoall.json").write_text('{"rows": [')
    drawn = figures.draw("alltoall", folder)
    assert drawn is not None and "not readable JSON" in drawn.problem
    assert_png(folder / "alltoall.png")


def test_an_unknown_stem_is_skipped_with_a_log_line(tmp_path, caplog):
    folder = copy_bench("kills", tmp_path / "bench")
    copy_bench("kills", folder, as_stem="mystery")
    with caplog.at_level(logging.INFO, logger="bench.figures"):
        drawn = figures.draw_all(folder)
    assert [d.stem for d in drawn] == ["kills"]
    assert "mystery: skipped" in caplog.text
    assert not (folder / "mystery.png").exists() and not (folder / "mystery.csv").exists()
    assert figures.draw("mystery", folder) is None


def test_a_quick_run_is_drawn_by_its_benchmark_s_function(tmp_path):
    folder = copy_bench("replay", tmp_path / "bench", as_stem="replay-quick")
    drawn = figures.draw("replay-quick", folder)
    assert drawn is not None and drawn.problem == ""
    assert_png(folder / "replay-quick.png")


def test_a_summary_not_marked_complete_is_left_alone(tmp_path, caplog):
    folder = copy_bench("kills", tmp_path / "bench")
    path = folder / f"kills{BENCH_SUFFIX}"
    path.write_text(path.read_text().replace('"complete": true', '"complete": false'))
    text = path.read_text()
    with caplog.at_level(logging.WARNING, logger="bench.figures"):
        figures.draw("kills", folder)
    assert path.read_text() == text and "not complete" in caplog.text
    assert (folder / "kills.png").is_file()


def test_testbed_report_draws_them_and_the_page_shows_figure_and_csv(tmp_path):
    results = tmp_path / "results"
    for stem in ("kills", "schemes"):
        copy_bench(stem, results / "bench")
    md = tmp_path / "docs" / "reproduction.md"
    cmd = [sys.executable, "-m", "testbed.cli", "report", "--results", str(results), "--md", str(md)]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=300)
    assert out.returncode == 0, out.stderr
    for stem in ("kills", "schemes"):
        assert_png(results / "bench" / f"{stem}.png")
        assert (results / "bench" / f"{stem}.csv").is_file()
    entries = {e.name: e for s in reproduction.collect(results, REPO) for e in s.entries}
    e = entries["schemes"]
    assert e.figures == [results / "bench" / "schemes.png"] and e.csv == results / "bench" / "schemes.csv"
    assert e.missing == []
    page = md.read_text()
    assert "![schemes](../results/bench/schemes.png)" in page and "[csv](../results/bench/schemes.csv)" in page
    html = (results / "index.html").read_text()
    assert '<img src="bench/schemes.png"' in html and '<a href="bench/schemes.csv">csv</a>' in html
    assert html == reproduction_page.html(reproduction.collect(results, REPO), results / "index.html", md)


def test_drawing_the_benchmarks_figures_stales_no_result(tmp_path):
    """replays/benchfigures.py is one of the page's files (replays.staleness.PAGE): a result that
    names it stays current when it changes; a replay's own module still counts."""
    assert "replays/benchfigures.py" in PAGE
    r = tmp_path / "repo"
    init_repo(r)
    (r / "replays").mkdir()
    (r / "replays" / "benchfigures.py").write_text("a = 1\n")
    (r / "replays" / "figure.py").write_text("a = 1\n")
    first = commit_all(r, "first")
    (r / "replays" / "benchfigures.py").write_text("a = 2\n")
    commit_all(r, "a figure drawn otherwise")
    deps = ["replays/benchfigures.py", "replays/figure.py"]
    assert staleness(first, deps, repo=r).state == CURRENT
    (r / "replays" / "figure.py").write_text("a = 2\n")
    commit_all(r, "what the replay measures")
    s = staleness(first, deps, repo=r)
    assert (s.state, s.changed) == (STALE, ["replays/figure.py"])


def test_big_benchmark_data_is_gzipped_and_read_back_the_same(tmp_path):
    small = json.dumps({"rows": [1, 2, 3]})
    big = json.dumps({"rows": list(range(GZIP_DATA_BYTES // 4))})
    assert len(big) > GZIP_DATA_BYTES
    assert write_bench_data(tmp_path, "x", big) == "x.json.gz"
    first = (tmp_path / "x.json.gz").read_bytes()
    assert len(first) < len(big) / 2 and not (tmp_path / "x.json").exists()
    assert read_bench_data(tmp_path, "x") == json.loads(big)
    assert write_bench_data(tmp_path, "x", big) == "x.json.gz"
    assert (tmp_path / "x.json.gz").read_bytes() == first  # mtime 0: the same data, the same bytes
    # a smaller table replaces the gzipped one, which goes: a reader never finds the older one
    assert write_bench_data(tmp_path, "x", small) == "x.json"
    assert not (tmp_path / "x.json.gz").exists() and read_bench_data(tmp_path, "x") == {"rows": [1, 2, 3]}
