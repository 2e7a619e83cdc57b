"""What results/ commits (the evidence) stays small and of the kinds that belong there: each result
folder's report (md), data (csv), figure(s) (png) and figure-level summary.json, the benchmarks'
json, md, summary, figure (png) and table (csv), the papers' numbers, the flow model's factors
and the gallery. Per-point run folders, logs, TF output and checkpoints are ignored by
.gitignore; these tests read `git ls-files results/` and `git check-ignore` of this checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from replays.evidence import BENCH_SUFFIX, read_summary
from replays.provenance import REPO
from replays.reproduction import CSV_KEY

#: all of results/ tracked, at most ("a few MB"; the flow model's refit keeps the emulated repeats
#: it takes the median of gzipped, ~17 KB each: results/bench/flowmodel-emulated-<commit>.json.gz)
MAX_TOTAL_BYTES = 5 * 2**20
#: any one tracked file, at most (a figure at 120 dpi is ~100 KB)
MAX_FILE_BYTES = 1 * 2**20
RESULT_SUFFIXES = {".md", ".csv", ".png"}


def tracked() -> list[Path]:
    out = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--", "results/"], capture_output=True, text=True, check=True
    )
    return [Path(p) for p in out.stdout.split("\0") if p]


def kind(path: Path) -> str | None:
    """What a tracked file under results/ is, or None where it does not belong there."""
    parts = path.parts
    if parts == ("results", "index.html"):
        return "the gallery"
    if len(parts) != 3:
        return None  # nothing deeper than results/<folder>/<file>
    folder, name, suffix = parts[1], path.name, path.suffix
    if folder == "reference":
        return "the papers' numbers" if suffix == ".yaml" else None
    if folder == "calibration":
        return "calibration" if suffix == ".json" else None
    if folder == "bench":
        return "benchmark" if suffix in (".json", ".md", ".png", ".csv") or name.endswith(".json.gz") else None
    if suffix in RESULT_SUFFIXES or name == "summary.json":
        return "result"
    return None


def test_tracked_results_are_small_and_of_the_committed_kinds():
    files = tracked()
    assert Path("results/reference/psnet-paper.yaml") in files
    wrong = [str(f) for f in files if kind(f) is None]
    assert wrong == [], f"not a committed kind of result (see .gitignore): {wrong}"
    sizes = {f: (REPO / f).stat().st_size for f in files if (REPO / f).exists()}
    big = {str(f): n for f, n in sizes.items() if n > MAX_FILE_BYTES}
    assert big == {}, f"tracked results over {MAX_FILE_BYTES} bytes: {big}"
    total = sum(sizes.values())
    assert total <= MAX_TOTAL_BYTES, f"results/ tracks {total / 2**20:.1f} MB, more than {MAX_TOTAL_BYTES / 2**20:.0f}"


def test_every_committed_result_carries_a_figure_level_summary_with_provenance():
    files = set(tracked())
    folders = {f.parent for f in files if kind(f) == "result"}
    for folder in sorted(folders):
        summary = folder / "summary.json"
        assert summary in files, f"{folder}/ is committed without its figure-level summary.json"
        s = read_summary(REPO / summary)
        assert s is not None, f"{summary} is not a figure-level summary (schema figure-summary/1)"
        assert s.provenance.commit and s.provenance.date, f"{summary}: no provenance"
        for name in [*s.files.figures, s.files.report, s.files.data]:
            assert not name or folder / name in files, f"{summary} names {name}, which is not committed"
    for f in sorted(files):
        if f.parent.name == "bench" and f.name.endswith(BENCH_SUFFIX):
            s = read_summary(REPO / f)
            assert s is not None, f"{f}: not a figure-level summary"
            table = (s.files.model_extra or {}).get(CSV_KEY)
            for name in [*s.files.figures, s.files.report, s.files.data, table]:  # replays.benchfigures names the last
                assert not name or f.parent / name in files, f"{f} names {name}, which is not committed"


@pytest.mark.parametrize(
    ("path", "committed"),
    [
        ("results/fig13/report.md", True),
        ("results/fig13/summary.csv", True),
        ("results/fig13/fig13.png", True),
        ("results/fig13/fig13-ratio.png", True),
        ("results/fig13/summary.json", True),
        ("results/fig6-quick/summary.json", True),
        ("results/matrix/matrix.csv", True),
        ("results/bench/schemes.json", True),
        ("results/bench/schemes.md", True),
        ("results/bench/schemes.summary.json", True),
        ("results/bench/schemes.png", True),
        ("results/bench/schemes.csv", True),
        ("results/bench/flowmodel-emulated-842e510.json.gz", True),
        ("results/reference/psnet-paper.yaml", True),
        ("results/calibration/flowmodel-factors.json", True),
        ("results/index.html", True),
        ("results/fig13/report.json", False),
        ("results/fig13/run.json", False),
        ("results/fig13/points/psnet-vgg16/rep1/summary.json", False),
        ("results/fig13/points/psnet-vgg16/rep1/tf-worker0.log", False),
        ("results/fig13/points/psnet-vgg16/rep1/report.md", False),
        ("results/fig13/checkpoints/model.ckpt-100.index", False),
        ("results/fig6/points/a-K=2-W192.json", False),
        ("results/bench/bct-runs/psnet-50/summary.json", False),
        ("results/bench/replay-run1/fig13/report.md", False),
        ("results/resnet50/iterations.csv", False),
        ("results/resnet50/links.csv", False),
        ("results/resnet50/events.jsonl", False),
        ("results/topologies/psnet-testbed.png", False),
    ],
)
def test_gitignore_keeps_the_small_artefacts_and_ignores_the_rest(path: str, committed: bool):
    ignored = subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "--no-index", path]).returncode == 0
    assert ignored is not committed
