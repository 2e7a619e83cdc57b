"""summary.json as one typed record (runs.summary): every shipped run summary and one written by
the writers' own helpers round-trip through the model unchanged, and a reader refuses a malformed
summary in one line naming the file and the field. No emulation, no TensorFlow."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from replays import figure, report
from runs.rounds import plan
from runs.stats import describe
from runs.summary import RunSummary, SummaryError, read_summary, summary_of, write_summary
from servers.hardware import HardwareVerdict

ROOT = Path(__file__).resolve().parent.parent
#: run summaries as the orchestrators wrote them (a TF PS job that hit its deadline, a scheme job)
SHIPPED = sorted((ROOT / "tests" / "fixtures" / "runs").glob("*/summary.json"))


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.parent.name)
def test_every_shipped_run_summary_round_trips_unchanged(path, tmp_path):
    s = read_summary(path)
    assert isinstance(s, RunSummary) and s.name and isinstance(s.complete, bool)
    assert json.dumps(s.as_dict(), indent=1) == path.read_text()  # same keys, order, values, ints
    again = write_summary(tmp_path / "summary.json", s)
    assert (tmp_path / "summary.json").read_text() == path.read_text()
    assert json.dumps(again.as_dict(), indent=1) == path.read_text()


def test_the_shipped_summaries_cover_a_tf_job_and_a_scheme_job():
    kinds = {("scheme" if read_summary(p).scheme else "tf-ps") for p in SHIPPED}
    assert kinds == {"tf-ps", "scheme"}, SHIPPED


def writers_summary() -> dict:
    """A summary with every part the writers add: runs.results.summarize's fields, a scheme's,
    several jobs, a round (runs.rounds), a timeline, a hardware run's, a sweep's retry."""
    bct = describe([1.2, 1.4, 1.3])
    one = describe([2.0])  # one step: ci95 NaN
    job = {"name": "a", "complete": True, "scale": 20, "bct_s": bct, "restarts": [], "fidelity": {"faithful": True}}
    rnd = plan(warmup=1, iterations=3, rounds=2)[1]
    return {
        "name": "mix",
        "complete": True,
        "compress": 2.0,
        "error": "",
        "scale": 40,
        "routing": "balanced",
        "mtu": 1500,
        "flows_on_busiest_link": {"c": 2, "link": "t1_1-eth3", "streams": 6, "unmapped": 0, "from_routes": None},
        "model": "vgg16",
        "workers": 6,
        "ps": 2,
        "ps_hosts": ["ps1_1", "ps1_2"],
        "worker_hosts": ["w1_1_1"],
        "batch_size": 1,
        "model_bytes_emulated": 13200000.0,
        "bct_s": bct,
        "gst_s": one,
        "bytes_per_ps": {"/job:ps/task:0": 6600000, "/job:ps/task:1": 6600000.5},
        "global_step": 12,
        "restarts": [{"failed": "ps1_2", "standby": "ps1_3", "reached_step": 9, "attempt": 1}],
        "fidelity": {"faithful": False, "reason": "ovs at 99%", "links": {"t1_1-eth3": 0.97}, "transfer_util": None},
        "predicted": {"equation": "Eq. 5", "bct_min_s": 1.0, "bct_max_s": 2.0, "t_push_s": 0.5, "t_compute_s": 0.1},
        "predicted_placement": {},
        "host_time_mode": "scaled",
        "host_time_pad_s": 0.0,
        "host_time": {"mode": "scaled"},
        "step_split": {"comm_s": bct, "rest_s": one, "link_s": {"n": 0}, "method": "busiest link"},
        "jobs": {"a": job, "b": {**job, "name": "b", "complete": False, "error": "boom", "bct_s": {"n": 0}}},
        "timings": {"bring_up_s": 1.5, "lock_wait_s": 0},
        "ps_nic_bytes": {"ps1_1": {"ps1_1-eth1": {"rx": 5, "tx": 7}}},
        "timeline": {
            "t0": 1700000000.5,
            "events": [{"action": "fail_ps", "target": "ps1_2", "t": 1.0}],
            "not_applied": [],
        },
        "round": rnd.as_dict([Path("rep1"), Path("rep2")]),
        "retries": [{"why": "not faithful at scale 20: ovs at 99%", "scale": 20, "rerun_scale": 40.0}],
        "mode": "hardware",
        "prediction_applies": "when the real network is that topology",
        "hardware": {"inventory": "inv.yaml", "placements": {"ps1_1": {"server": "s1"}}, "servers": {}},
        "hardware_verdict": HardwareVerdict().as_dict(),  # a field the model does not know: kept as it is
        "expected_sync_s": 0.8,
        "gst_formula_s": None,
        "bytes_per_host": {"w1_1_1": {"sent": 10, "received": 10}},
        "cross_region_bytes": [3000000, 0],
        "chain_length": 6,
        "loss": None,
        "sums_checked": True,
        "sum_problems": [],
    }


def test_a_freshly_written_summary_round_trips(tmp_path):
    d = writers_summary()
    f = tmp_path / "summary.json"
    written = write_summary(f, d)
    assert f.read_text() == json.dumps(d, indent=1)  # what the writers wrote before the model
    back = read_summary(tmp_path)  # a run's folder works as well as its file
    # (compared as JSON text: a one-step ci95 is NaN, which equals nothing)
    assert json.dumps(back.as_dict(), indent=1) == json.dumps(written.as_dict(), indent=1) == f.read_text()
    # typed attributes, nested records included
    assert back.bct_s.n == 3 and back.gst_s is not None and math.isnan(back.gst_s.ci95)
    assert back.jobs is not None and back.jobs["b"].error == "boom" and back.jobs["b"].bct_s.n == 0
    assert back.round is not None and back.round.steps == [5, 7] and back.round.shared_with == ["rep1", "rep2"]
    assert back.retries[0].rerun_scale == 40.0 and back.faithful is False and back.lock_wait_s == 0.0
    assert back.hardware is not None and back.hardware.placements["ps1_1"]["server"] == "s1"
    assert back.step_split is not None and back.step_split.link_s is not None and back.step_split.link_s.n == 0
    assert isinstance(back.scale, int) and isinstance(back.bytes_per_ps["/job:ps/task:0"], int)  # ints stay ints
    # the JSON view by key, for callers not on attributes yet: exactly the old dict's
    assert back["bct_s"] == bct_of(d) and "round" in back and back.get("nothing", 7) == 7
    with pytest.raises(KeyError):
        read_summary(write_summary_dict(tmp_path / "small", {"complete": True}))["bct_s"]


def bct_of(d: dict) -> dict:
    return d["bct_s"]


def write_summary_dict(folder: Path, d: dict) -> Path:
    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps(d))
    return folder / "summary.json"


def test_a_summary_missing_a_required_field_is_refused_in_one_line(tmp_path):
    f = write_summary_dict(tmp_path / "a", {"name": "x", "bct_s": {"n": 0}})
    with pytest.raises(SummaryError) as err:
        read_summary(f)
    assert str(err.value) == f"{f}: complete: Field required"
    bad = write_summary_dict(tmp_path / "b", {"complete": True, "fidelity": {"reason": "ok"}})
    with pytest.raises(SummaryError, match=r"/b/summary.json: fidelity.faithful: Field required$"):
        read_summary(bad)
    typo = write_summary_dict(tmp_path / "c", {"complete": True, "bct_s": {"n": "five"}})
    with pytest.raises(SummaryError) as err:
        read_summary(typo)
    assert "\n" not in str(err.value) and str(err.value).startswith(f"{typo}: bct_s.n: Input should be a valid integer")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "summary.json").write_text('{"complete": ')
    with pytest.raises(SummaryError, match=r"summary\.json: not readable JSON"):
        read_summary(tmp_path / "d")


def test_a_writer_with_a_mistyped_field_writes_nothing(tmp_path):
    f = tmp_path / "summary.json"
    with pytest.raises(SummaryError, match=r"summary\.json: retries\.0\.why: Field required"):
        write_summary(f, {"complete": True, "retries": [{"scale": 20, "rerun_scale": 40}]})
    assert list(tmp_path.iterdir()) == []  # no file, no temp file left


def test_compare_refuses_a_malformed_summary_in_one_line(tmp_path):
    f = write_summary_dict(tmp_path / "run", {"name": "run", "bct_s": {"n": 0}})
    r = subprocess.run(
        [sys.executable, "-m", "testbed.cli", "compare", str(f.parent), str(f.parent)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines() == [f"testbed: {f}: complete: Field required"], r.stderr


def test_the_report_names_a_malformed_repetition(tmp_path):
    fig = figure.load_figure("fig13")
    p = fig.points[0]
    d = figure.rep_dir(tmp_path, p, 1)
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({"complete": True, "bct_s": {"n": 5}, "fidelity": {"faithful": "?"}}))
    (row,) = report.collect(tmp_path, [p], 1)
    assert row.bcts == [] and row.failed == [
        f"rep1: {d / 'summary.json'}: fidelity.faithful: Input should be a valid boolean, unable to interpret input"
    ]


def test_summary_of_takes_a_model_as_it_is():
    s = summary_of({"complete": False})
    assert summary_of(s) is s and s.bct_s.n == 0 and s.faithful is None and s.as_dict() == {"complete": False}


def test_a_retry_that_wrote_nothing_leaves_a_typed_summary_saying_so(tmp_path, monkeypatch):
    """replays.sweep._retry writes the retry's record through the model too."""
    from replays import sweep
    from topologies.schema import load_spec

    monkeypatch.setattr(sweep, "_attempt", lambda *a, **k: None)  # the run wrote no summary
    d = tmp_path / "rep1"
    d.mkdir()
    spec = load_spec(ROOT / "topologies" / "psnet-testbed.yaml")
    sweep._retry(None, spec, "t.yaml", [d], "origin", 1.0, {d: "stalled: no step"})  # type: ignore[arg-type]
    s = read_summary(d)
    assert (s.complete, s.error) == (False, "the retry wrote no summary")
    assert [(r.why, r.scale, r.rerun_scale) for r in s.retries] == [("stalled: no step", spec.scale, spec.scale)]


def test_testbed_run_prints_a_typed_summary(tmp_path, monkeypatch, capsys):
    """`testbed run`'s report reads the RunResult's typed summary (TF job, several jobs, hardware)."""
    from runs import runner
    from runs.runloop import RunResult
    from testbed import cli

    d = writers_summary()
    for k in ("gst_s", "timeline", "retries"):
        d.pop(k)
    d["jobs"]["b"] = {**d["jobs"]["a"], "name": "b"}  # both finished: `testbed run` prints after a success
    server = {"cpu_mean": None, "plays": ["ps1_1"], "nic": "eth1", "rx_bytes": 2e6, "tx_bytes": 1e6, "seconds": 9.0}
    d["hardware"]["servers"] = {"s1": server}
    s = summary_of(d)
    monkeypatch.setattr(runner, "run_experiment", lambda *a, **k: RunResult("mix", tmp_path, True, s))
    assert cli.main(["run", "whatever.yaml"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("mix: vgg16 W=6 P=2 BS=1 scale 40, 13.20 MB pushed per worker-step (x40 = paper S)\n")
    assert "  BCT measured  mean 1.300 s  p50 1.300  p95 1.400" in out and "BCT mean 1.300 s (n=3)" in out
    assert "  routing       balanced: C = 2 connections on t1_1-eth3" in out
    assert (
        "  model         when the real network is that topology" in out and "server s1 (ps1_1): eth1 rx 2.00 MB" in out
    )
    d.pop("mode"), d.pop("hardware")
    monkeypatch.setattr(runner, "run_experiment", lambda *a, **k: RunResult("mix", tmp_path, True, summary_of(d)))
    assert cli.main(["--strict", "run", "whatever.yaml"]) == cli.EXIT_NOT_FAITHFUL
    assert "  fidelity      NOT faithful: ovs at 99%" in capsys.readouterr().out
