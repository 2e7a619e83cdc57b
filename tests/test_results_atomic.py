"""Atomic, unambiguous results (issue 28): a result file is whole or absent, a re-run never leaves
the previous run's summary beside its own manifest, every reader requires `complete: true`,
--report-only never rewrites a run's summary, and a resumed sweep re-runs a point measured by
other code. Real files in tmp_path; only the emulator's bring-up is stood in for (where a run is
killed), and one rename made to fail."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from replays import figure, sweep
from replays.evidence import FigureSummary, SummaryError, read_summary, write_summary
from replays.provenance import REPO, capture, git_state
from replays.staleness import CURRENT, STALE, UNKNOWN, against_tree
from runs.results import RUN_FILES, start_run_dir
from testbed import cli
from testbed.compare import load_run
from tests.evidence_helpers import commit_all, git, init_repo
from topologies import files
from topologies.files import atomic_open, write_json_atomic, write_text_atomic
from topologies.spec import InputError


# --- whole or absent --------------------------------------------------------------------------------
def test_a_failed_rename_leaves_the_old_file_whole_and_no_temporary(tmp_path, monkeypatch):
    f = tmp_path / "summary.json"
    write_json_atomic(f, {"complete": True, "bct_s": {"mean": 1.0}})
    old = f.read_bytes()

    def fail(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files.os, "replace", fail)
    with pytest.raises(OSError, match="No space"):
        write_json_atomic(f, {"complete": False})
    assert f.read_bytes() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


def test_a_write_that_fails_half_way_leaves_the_old_file(tmp_path):
    f = tmp_path / "iterations.csv"
    write_text_atomic(f, "job,step\nj,1\n")
    with pytest.raises(RuntimeError), atomic_open(f, newline="") as fh:
        fh.write("job,step\nj,")
        raise RuntimeError("the writer died here")
    assert f.read_text() == "job,step\nj,1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["iterations.csv"]


def test_a_killed_writer_never_shows_half_a_file_and_the_next_run_clears_its_temporary(tmp_path):
    """SIGKILL in the middle of writing summary.json: the old one is whole; the hidden temporary the
    killed process left is removed when the next run starts in the folder."""
    f = tmp_path / "summary.json"
    write_json_atomic(f, {"complete": True, "n": 1})
    old = f.read_bytes()
    script = (
        "import os, signal, sys\n"
        "from topologies.files import atomic_open\n"
        "with atomic_open(sys.argv[1]) as fh:\n"
        "    fh.write('{\"complete\": tr'); fh.flush()\n"
        "    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    r = subprocess.run([sys.executable, "-c", script, str(f)], cwd=REPO, capture_output=True, timeout=60)
    assert r.returncode == -signal.SIGKILL
    assert f.read_bytes() == old
    left = [p for p in tmp_path.iterdir() if p.name != "summary.json"]
    assert len(left) == 1 and left[0].name.startswith(".summary.") and ".tmp" in left[0].name
    start_run_dir(tmp_path)
    assert list(tmp_path.iterdir()) == []


# --- a re-run into an existing folder ---------------------------------------------------------------
def previous_run(out: Path) -> dict:
    """The files a finished run left in `out` (and a user's own note beside them)."""
    out.mkdir(parents=True)
    summary = {"name": out.name, "run_id": "old", "complete": True, "bct_s": {"n": 3, "mean": 9.9}}
    (out / "manifest.json").write_text(json.dumps({"run_id": "old"}))
    (out / "iterations.csv").write_text("job,step\n")
    (out / "summary.json").write_text(json.dumps(summary))
    (out / "checkpoints" / "job").mkdir(parents=True)
    (out / "notes.md").write_text("mine\n")
    return summary


def scheme_experiment(tmp_path: Path) -> Path:
    """workloads/experiments/leafspine-rat.yaml (the run the issue killed) with a fixed compute time,
    so that nothing is calibrated."""
    data = yaml.safe_load((REPO / "workloads/experiments/leafspine-rat.yaml").read_text())
    data["topology"] = str(REPO / "topologies/leafspine-rat.yaml")
    data["job"]["compute_s"] = 0.01
    path = tmp_path / "leafspine-rat.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class Killed(BaseException):
    """Stands for SIGKILL: nothing after it runs (not even the run's own error handling)."""


def killed(*args, **kw):
    raise Killed


class UpNetwork:
    """Stands for the emulated network once up (emulation.net.Testbed holds the emulator lock);
    killed as the run starts its monitor, the first thing it does on the network."""

    def __init__(self, net):
        self.net = net

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    monitor = killed


def test_a_killed_rerun_leaves_no_old_summary_beside_its_manifest(tmp_path):
    """The issue's case: `testbed run leafspine-rat.yaml`, then the same run killed once its network
    is up. The real run_job up to the emulator; the emulator's bring-up and monitor stood in for."""
    from emulation.net import testbeds
    from runs.runner import run_experiment

    results = tmp_path / "results"
    out = results / "leafspine-rat"
    old = previous_run(out)
    with testbeds(UpNetwork), pytest.raises(Killed):  # the runs open this testbed (emulation.net.open_testbed)
        run_experiment(scheme_experiment(tmp_path), results, progress=False)
    assert sorted(p.name for p in out.iterdir()) == ["manifest.json", "notes.md"]  # the user's note stays
    assert json.loads((out / "manifest.json").read_text())["run_id"] != "old"
    prev = results / "leafspine-rat.prev"
    assert json.loads((prev / "summary.json").read_text()) == old  # the previous run, whole, kept
    assert sorted(p.name for p in prev.iterdir()) == ["checkpoints", "iterations.csv", "manifest.json", "summary.json"]
    with pytest.raises(FileNotFoundError) as err:
        load_run(str(out))  # compare cannot read the old numbers as the new run's
    assert str(err.value) == (
        f"{out / 'summary.json'}: missing beside manifest.json (the run did not finish; the run before it is in "
        f"{prev}); run it again: testbed run {tmp_path / 'leafspine-rat.yaml'}"
    )
    assert load_run(str(prev)).summary.as_dict() == old
    # killed again: the leftovers (no summary) are removed, the kept previous run is not replaced
    with testbeds(UpNetwork), pytest.raises(Killed):
        run_experiment(scheme_experiment(tmp_path), results, progress=False)
    assert json.loads((prev / "summary.json").read_text()) == old


def test_a_run_killed_before_its_network_is_up_leaves_the_folder_as_it_was(tmp_path):
    """Queued behind another emulation or killed in bring-up: the run never held the emulator, so it
    touched nothing (another run of the same name may still be writing there)."""
    from emulation.net import testbeds
    from runs.runner import run_experiment

    results = tmp_path / "results"
    old = previous_run(results / "leafspine-rat")
    listing = sorted(p.name for p in (results / "leafspine-rat").iterdir())
    with testbeds(killed), pytest.raises(Killed):
        run_experiment(scheme_experiment(tmp_path), results, progress=False)
    assert sorted(p.name for p in (results / "leafspine-rat").iterdir()) == listing
    assert load_run(str(results / "leafspine-rat")).summary.as_dict() == old
    assert not (results / "leafspine-rat.prev").exists()


def test_a_sweeps_repetition_is_cleared_of_the_previous_runs_files_only(tmp_path):
    d = tmp_path / "rep1"
    previous_run(d)
    (d / "attempt1-summary.json").write_text("{}")  # the sweep's own record of a retried attempt
    start_run_dir(d)
    assert sorted(p.name for p in d.iterdir()) == ["attempt1-summary.json", "notes.md"]
    assert not d.with_name("rep1.prev").exists()  # a rep*.prev would be read as a repetition
    assert "summary.json" in RUN_FILES and "notes.md" not in RUN_FILES


# --- readers require complete: true -----------------------------------------------------------------
def test_compare_refuses_an_incomplete_summary_naming_the_file(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    f = run / "summary.json"
    f.write_text(json.dumps({"complete": False, "error": "stalled at step 3", "bct_s": {"n": 2}}))
    with pytest.raises(InputError) as err:
        load_run(str(run))
    assert str(err.value).startswith(f"{f}: complete is not true (stalled at step 3); run it again")
    assert "\n" not in str(err.value)
    assert cli.main(["compare", str(run), str(run)]) == cli.EXIT_USAGE


def test_compare_refuses_a_summary_of_another_run_than_the_manifest(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text(json.dumps({"complete": True, "run_id": "a", "bct_s": {"n": 3}}))
    (run / "manifest.json").write_text(json.dumps({"run_id": "b"}))  # a later run, killed before its summary
    with pytest.raises(InputError, match=r"another run's than manifest\.json"):
        load_run(str(run))
    (run / "manifest.json").write_text(json.dumps({"run_id": "a"}))
    assert load_run(str(run)).summary["run_id"] == "a"


def test_the_reproduction_page_refuses_a_figure_summary_not_marked_complete(tmp_path):
    s = FigureSummary(name="figx", kind="figure", title="X", command="testbed replay figx", provenance=capture())
    (tmp_path / "figx").mkdir()
    (tmp_path / "figx" / "summary.json").write_text(s.dump())  # complete: false (not via write_summary)
    assert read_summary(tmp_path / "figx") is not None
    with pytest.raises(
        SummaryError, match=r"figx/summary.json: complete is not true.*run it again: testbed replay figx"
    ):
        read_summary(tmp_path / "figx", require_complete=True)
    write_summary(tmp_path / "figx", s)
    assert read_summary(tmp_path / "figx", require_complete=True).complete


# --- --report-only ----------------------------------------------------------------------------------
def test_report_only_leaves_every_runs_summary_byte_identical(tmp_path):
    """`testbed replay fig13 --quick --report-only`: the report has the model as the code has it now,
    the runs' summary.json files are the bytes the runs wrote."""
    fig = figure.load_figure("fig13")
    out = tmp_path / "fig13-quick"
    before = {}
    for p in sweep.points_to_run(fig, quick=True):
        spec, _, _ = sweep.point_topology(fig, p)
        exp = sweep.point_experiment(fig, p, quick=True)
        d = figure.rep_dir(out, p, 1)
        d.mkdir(parents=True)
        manifest = {"topology": spec.model_dump(), "job": exp.main.model_dump(), "width": 0.05}
        (d / "manifest.json").write_text(json.dumps({**manifest, "model_bytes_emulated": 1e6}))
        summary = {
            "complete": True,
            "scale": spec.scale,
            "compress": 1.0,
            "model_bytes_emulated": 1e6,
            "bct_s": {"n": 3, "mean": 2.0, "ci95": 0.1},
            "predicted": {"equation": "stale", "bct_min_s": 99.0, "bct_max_s": 99.0},
            "fidelity": {"faithful": True, "reason": "ok"},
        }
        (d / "summary.json").write_text(json.dumps(summary, indent=1))
        before[d] = (d / "summary.json").read_bytes()
    assert cli.main(["replay", "fig13", "--quick", "--report-only", "--results", str(tmp_path)]) == 0
    assert {d: (d / "summary.json").read_bytes() for d in before} == before
    assert sorted(p.name for d in before for p in d.iterdir()) == sorted(
        ["manifest.json", "summary.json"] * len(before)
    )
    rep = json.loads((out / "report.json").read_text())
    assert rep["points"] and all(p["equation"] != "stale" for p in rep["points"])  # redrawn from the model now


# --- a resumed sweep and other code -----------------------------------------------------------------
@pytest.fixture
def repo(tmp_path) -> Path:
    r = tmp_path / "repo"
    init_repo(r)
    (r / "pkg").mkdir()
    (r / "pkg" / "x.py").write_text("x = 1\n")
    (r / "notes.txt").write_text("a\n")
    commit_all(r, "one")
    return r


def rep_with(d: Path, commit: str | None, dirty: dict | None = None) -> Path:
    d.mkdir(parents=True)
    prov = {"commit": commit, "dirty_files": dirty or {}} if commit else None
    summary = {"complete": True, "provenance": prov, "fidelity": {"faithful": True}}
    (d / "summary.json").write_text(json.dumps(summary))
    return d


def test_a_resumed_sweep_reruns_a_point_measured_by_other_code(repo, tmp_path, caplog):
    first = git(repo, "rev-parse", "HEAD")
    old = rep_with(tmp_path / "p" / "rep1", first)
    (repo / "notes.txt").write_text("b\n")  # not a dependency: the point stands
    commit_all(repo, "notes")
    assert sweep.drop_other_code([old], capture(repo=repo), ["pkg/"], repo) == []
    (repo / "pkg" / "x.py").write_text("x = 2\n")
    second = commit_all(repo, "x changed")
    new = rep_with(tmp_path / "p" / "rep2", second)
    legacy = rep_with(tmp_path / "p" / "rep3", None)  # no provenance, no manifest: unknown
    dropped = sweep.drop_other_code([old, new, legacy], capture(repo=repo), ["pkg/"], repo)
    assert dropped == [old, legacy]
    assert sweep.finished(new) is not None and all(sweep.finished(d) is None for d in dropped)
    assert sweep.needs_run(old) and not sweep.needs_run(new)
    assert (
        "rep1/summary.json: ran on other code (stale: pkg/x.py changed since it ran): running it again" in caplog.text
    )
    assert "rep3/summary.json: ran on other code (unknown provenance (no commit recorded))" in caplog.text


def test_a_sweep_resumed_on_the_same_tree_keeps_its_points_local_changes_included(repo):
    head = git(repo, "rev-parse", "HEAD")
    (repo / "pkg" / "x.py").write_text("x = 'local'\n")
    commit, dirty, _ = git_state(repo)
    assert against_tree(head, dirty, commit, dirty, ["pkg/"], repo).state == CURRENT  # stopped and resumed
    assert against_tree(head, {}, commit, dirty, ["pkg/"], repo).state == STALE  # ran before the edit
    assert against_tree(head, dirty, commit, {}, ["pkg/"], repo).changed == ["pkg/x.py"]  # the edit undone since
    assert against_tree(head, {}, commit, dirty, ["other/"], repo).state == CURRENT  # not what it depends on
    (repo / "pkg" / "x.py").write_text("x = 'again'\n")
    commit, later, _ = git_state(repo)
    assert against_tree(head, dirty, commit, later, ["pkg/"], repo).changed == ["pkg/x.py"]
    assert against_tree(None, {}, commit, later, ["pkg/"], repo).state == UNKNOWN


def test_a_manifest_commit_stands_for_a_summary_without_provenance(tmp_path):
    d = rep_with(tmp_path / "rep1", None)
    (d / "manifest.json").write_text(json.dumps({"versions": {"git": "abc1234"}}))
    assert sweep.ran_on(d, json.loads((d / "summary.json").read_text())) == ("abc1234", {})
