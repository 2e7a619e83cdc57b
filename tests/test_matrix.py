"""The topology x scheme matrix without emulation: the shipped file plans every cell at one rate
and gradient size within the emulator's budget, the cells that do not apply say why, bad files are
refused on one line, and the report (table, CSV, JSON, heat map) is written from cell summaries.
Also: a gst figure's report shows HiPS Table 3's formula beside the schedule's expectation."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml

from replays import figure, sweep
from replays.evidence import read_summary
from replays.matrix import DEFAULT_FILE, MatrixError, MatrixRun, load_matrix, plan
from replays.matrix_report import write_matrix_report
from replays.report import write_report
from runs.predict import choose_width

NOT_APPLICABLE = {  # cell -> words of its reason
    "psnet-hips": "address digit",
    "psnet-rat": "no oversubscribed region",
    "fattree-hips": "address digit",
    "fattree-rat": "no oversubscribed region",
    "bcube-tf-ps": "16 > max_tf_processes 8",
    "bcube-rat": "no oversubscribed region",
    "torus-tf-ps": "needs PS hosts",
    "torus-ps": "needs PS hosts",
    "torus-rat": "no oversubscribed region",
    "leafspine-tf-ps": "needs PS hosts",
    "leafspine-ps": "needs PS hosts",
    "leafspine-hips": "address digit",
}


def test_shipped_matrix_plans_every_cell_at_one_rate_and_gradient():
    m = load_matrix(DEFAULT_FILE)
    fig, cells = plan(m, DEFAULT_FILE)
    assert {c.topo.id for c in cells} == {"psnet", "fattree", "bcube", "torus", "leafspine"}
    assert {c.scheme for c in cells} == {"tf-ps", "ps", "mesh", "ring", "halving-doubling", "rat", "hips", "plink"}
    assert {c.point.id: c.why.split(":")[0] for c in cells if not c.applies}.keys() == NOT_APPLICABLE.keys()
    for c in cells:
        if not c.applies:
            assert NOT_APPLICABLE[c.point.id] in c.why, c.why
            continue
        exp = sweep.point_experiment(fig, c.point, quick=False)
        assert sweep.offered_load_mbps(c.spec, exp.job.scheme) <= 300, c.point.id
        assert c.spec.worker_mbps / c.spec.scale == pytest.approx(m.emulated_mbps), c.point.id
    sizes = {choose_width(sweep.point_experiment(fig, c.point, False).job, c.spec.scale * m.compress)[1] for c in cells}
    assert len(sizes) == 1  # one gradient size for every cell
    qfig, quick = plan(m, DEFAULT_FILE, quick=True)
    assert qfig.figure == "matrix-quick" and qfig.job["iterations"] <= 2
    assert sum(c.applies for c in quick) == 3 and sum(not c.applies for c in quick) == 3


def _write(tmp_path: Path, **over) -> Path:
    data = yaml.safe_load(DEFAULT_FILE.read_text()) | over
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_a_cell_over_the_budget_refuses_the_file_naming_the_fix(tmp_path):
    path = _write(tmp_path, emulated_mbps=100)
    with pytest.raises(MatrixError) as err:
        plan(load_matrix(path), path)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(f"{path}: emulated_mbps: cell ") and "lower emulated_mbps to" in msg


@pytest.mark.parametrize(
    ("over", "words"),
    [
        ({"job": {"model": "resnet50", "scheme": "ring"}}, "job.scheme: the matrix sets it per cell"),
        ({"schemes": ["ring", "allgather"]}, "schemes.1"),
        ({"quick": {"topologies": ["nope"], "schemes": ["ring"]}}, "quick.topologies: nope is no topology id"),
        ({"job": {"model": "alexnet"}}, "(job): model"),
    ],
)
def test_bad_matrix_files_are_one_line(tmp_path, over, words):
    path = _write(tmp_path, **over)
    with pytest.raises(MatrixError) as err:
        load_matrix(path)
    assert "\n" not in str(err.value) and words in str(err.value), str(err.value)


def _summary(gst: float, bct: float, faithful: bool = True, tf: bool = False) -> dict:
    s = {
        "complete": True,
        "workers": 6 if tf else 8,
        "model_bytes_emulated": 1_000_000.0,
        "bct_s": {"n": 5, "mean": bct, "ci95": 0.1},
        "fidelity": {"faithful": faithful, "reason": "ovs 60%" if faithful else "ovs at 99%"},
    }
    if tf:
        return s | {"step_split": {"comm_s": {"n": 5, "mean": gst, "ci95": 0.05}}}
    return s | {"gst_s": {"n": 5, "mean": gst, "ci95": 0.05}, "expected_sync_s": 1.5, "gst_formula_s": None,
                "cross_region_bytes": [3_000_000]}  # fmt: skip


def test_matrix_report_from_cell_summaries(tmp_path):
    path = _write(tmp_path, topologies=[
        {"id": "psnet", "label": "PSNet", "topology": "psnet-testbed.yaml"},
        {"id": "ls", "label": "Leaf-spine", "topology": "leafspine-rat.yaml"},
    ], schemes=["tf-ps", "ring", "hips"], quick=None)  # fmt: skip
    m = load_matrix(path)
    fig, cells = plan(m, path)
    out = tmp_path / "results" / "matrix"
    seeded = {
        "psnet-tf-ps": _summary(2.0, 3.0, tf=True),
        "psnet-ring": _summary(1.8, 1.9),
        "ls-ring": _summary(2.6, 2.7, False),
    }
    for pid, s in seeded.items():
        d = figure.rep_dir(out, next(c.point for c in cells if c.point.id == pid), 1)
        d.mkdir(parents=True)
        (d / "summary.json").write_text(json.dumps(s))
    rep = write_matrix_report(MatrixRun(m, fig, cells, out, 1, False, path))
    by = {f"{c.topology}-{c.scheme}": c for c in rep.cells}
    assert by["psnet-ring"].gst_mean_s == 1.8 and by["psnet-ring"].ci_over == "iterations"
    assert by["psnet-tf-ps"].gst_mean_s == 2.0 and by["psnet-tf-ps"].expected_sync_s > 0  # counted on ps
    assert by["ls-ring"].faithful is False and by["ls-ring"].cross_region_bytes == 3_000_000
    assert by["psnet-hips"].applies is False and "address digit" in by["psnet-hips"].why
    assert by["ls-tf-ps"].why == "tf-ps needs PS hosts; this leafspine has none"
    md = (out / "matrix.md").read_text()
    assert "| PSNet | ring | 8 | 1.80 ±0.05 | 1.90 ±0.10 | 1.50 | - | 3.00 | faithful |" in md
    assert "| Leaf-spine | ring | 8 | 2.60 ±0.05 | 2.70 ±0.10 | 1.50 | - | 3.00 | NOT faithful: ovs at 99% |" in md
    assert "0.001 MB emulated" not in md and "1.000 MB emulated" in md
    rows = list(csv.DictReader((out / "matrix.csv").open()))
    assert len(rows) == 6 and {r["why"] for r in rows if r["applies"] == "False"} >= {by["ls-tf-ps"].why}
    assert json.loads((out / "matrix.json").read_text())["cells"][1]["scheme"] == "ring"
    assert (out / "matrix.png").read_bytes()[:4] == b"\x89PNG"
    s = read_summary(out)  # the figure-level summary, written as every replay kind writes it
    assert s is not None and (s.kind, s.paper, s.files.report, s.files.data) == (
        "matrix",
        None,
        "matrix.md",
        "matrix.csv",
    )
    assert s.command == f"testbed matrix {path}" and s.files.figures == ["matrix.png"] and s.headlines == []
    assert {p.id: p.faithful for p in s.points}["ls-ring"] is False and len(s.points) == 6


def test_gst_figure_report_shows_the_table3_formula(tmp_path):
    fig = figure.load_figure("hips-table3")
    out = tmp_path / "hips-table3"
    for p in fig.points[:3]:  # BCube(4,1): HiPS, PSS/MS, RS
        d = figure.rep_dir(out, p, 1)
        d.mkdir(parents=True)
        formula = {"b41-hips": 3.9, "b41-ms": 6.3, "b41-rs": 7.9}[p.id]
        s = {
            "complete": True, "scale": 200.0, "compress": 1.0, "model_bytes_emulated": 2.6e6,
            "gst_s": {"n": 5, "mean": formula * 1.1, "ci95": 0.1}, "bct_s": {"n": 5, "mean": formula * 1.2},
            "predicted": {"gst_s": formula * 0.9}, "gst_formula_s": formula,
            "fidelity": {"faithful": True, "reason": "ok"},
        }  # fmt: skip
        (d / "summary.json").write_text(json.dumps(s))
    write_report(fig, out, fig.points[:3], 1, {})
    points = {p["id"]: p for p in json.loads((out / "report.json").read_text())["points"]}
    assert points["b41-hips"]["model_gst_formula_s"] == 3.9 and points["b41-rs"]["model_gst_s"] == pytest.approx(7.11)
    assert "| 3.51 (schedule); 3.90 (Table 3) |" in (out / "report.md").read_text()
    assert (out / "hips-table3.png").read_bytes()[:4] == b"\x89PNG"


def test_the_matrix_is_a_figure_kind_of_the_replay_framework(tmp_path):
    """`testbed matrix` goes through replays.framework like `testbed replay`: a matrix file is
    owned by the matrix kind; --report-only with nothing run writes the table of not-run cells,
    the heat map and the figure-level summary."""
    from replays import framework

    assert isinstance(framework.kind_of(str(DEFAULT_FILE)), framework.Matrices)
    assert isinstance(framework.kind_of("fig6"), framework.ModelFigures)
    assert isinstance(framework.kind_of("fig13"), framework.EmulatedFigures)
    opts = framework.ReplayOptions(quick=True, report_only=True, results=tmp_path)
    done = framework.Matrices().replay(str(DEFAULT_FILE), opts)
    assert done.report.is_file() and done.figure.is_file() and done.shortfalls == []
    s = read_summary(done.out)
    assert s is not None and s.kind == "matrix" and s.command == "testbed matrix --quick"
