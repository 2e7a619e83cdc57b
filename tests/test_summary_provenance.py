"""A replay's summary.json names the tree its points started on, not the one that wrote its report,
and beside it the tree whose code drew the report (`drawn`).

A replay runs for 20 minutes; a commit made meanwhile must not pass for the code its points ran
on (staleness compares that commit with the files the result depends on). A replay that kept
points run on older code draws them with the code it loaded: `drawn` says which."""

from __future__ import annotations

from pathlib import Path

from replays import figsummary, outputs
from replays.evidence import loaded_tree, read_summary
from replays.provenance import capture
from topologies.files import write_json_atomic


def _files() -> outputs.ReportFiles:
    return outputs.ReportFiles(("report.md", "# r\n"), ("report.json", {}), outputs.Table("summary.csv", ["x"], []))


def test_the_summary_keeps_the_start_provenance_from_run_json(tmp_path: Path):
    started = capture(quick=False).model_copy(update={"commit": "a" * 40, "date": "2026-11-29T18:00:00+00:00"})
    write_json_atomic(tmp_path / "run.json", figsummary.run_record(600.0, 20.0, started), indent=None)
    wall_s, read_back = figsummary.last_run(tmp_path)
    assert wall_s == 580.0  # the time queued for the emulator left out
    assert read_back is not None and read_back.commit == "a" * 40

    outputs.write_report_files(tmp_path, _files())
    figsummary.write_figure_summary(
        tmp_path, figure="fig13", kind="figure", title="t", command="testbed replay fig13", quick=False,
        wall_s=wall_s, depends_on=[], files=_files(), points=[], started=read_back,
    )  # fmt: skip
    summary = read_summary(tmp_path, require_complete=True)
    assert summary is not None
    assert summary.provenance.commit == "a" * 40
    assert summary.provenance.date == "2026-11-29T18:00:00+00:00"
    assert summary.provenance.wall_s == 580.0
    assert summary.drawn is not None and summary.drawn == loaded_tree()  # this process's tree, not run.json's
    assert summary.drawn.commit == capture().commit != "a" * 40


def test_without_a_run_record_the_summary_names_the_tree_that_drew_it(tmp_path: Path):
    assert figsummary.last_run(tmp_path) == (None, None)
    outputs.write_report_files(tmp_path, _files())
    figsummary.write_figure_summary(
        tmp_path, figure="fig13", kind="figure", title="t", command="testbed replay fig13", quick=True,
        wall_s=None, depends_on=[], files=_files(), points=[],
    )  # fmt: skip
    summary = read_summary(tmp_path, require_complete=True)
    assert summary is not None
    assert summary.provenance.commit == capture().commit
