"""Figure sweeps: every figure file is valid and samples enough, finished points are kept (resume),
and the report judges the figure file's claims on the data it is given (not on unfaithful points).
The end-to-end replay runs real jobs (root)."""

from __future__ import annotations

import csv
import functools
import json
import math
import time
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from replays import decomposition as decomp
from replays import figure, provenance, sweep
from replays.evidence import read_summary
from replays.report import bars_paper_equivalent, collect, lines_paper_equivalent, overview, write_report
from testbed import cli
from tests.png_helpers import drawn_colours
from topologies.schema import fidelity_budget_mbps, one_line_error


@pytest.mark.parametrize("name", figure.figure_names())
def test_every_figure_point_builds_within_budget(name):
    fig = figure.load_figure(name)
    assert fig.points and fig.quick and set(fig.quick.points) <= {p.id for p in fig.points}
    for p in fig.points:
        spec, _, note = sweep.point_topology(fig, p)
        exp = sweep.point_experiment(fig, p, quick=False)
        assert sweep.offered_load_mbps(spec, exp.job.scheme) <= fidelity_budget_mbps(spec.mtu) * 1.0001, (p.id, note)
        # mnist: HiPS Table 1; lr, mf, alexnet: Parameter Flow's (numpy models and a payload)
        assert exp.job.model in ("vgg16", "resnet50", "resnet110", "mnist", "lr", "mf", "alexnet")
        if fig.emulated_mbps:  # every B_w emulated at the same rate: scale = B_w / that rate
            assert spec.worker_mbps / spec.scale == pytest.approx(fig.emulated_mbps)


def test_unknown_figure_is_one_line():
    with pytest.raises(sweep.FigureError, match="fig99: no such figure; figures: fig1, fig10"):
        figure.load_figure("fig99")


@functools.cache
def tree_now() -> dict:
    """The provenance a run on this tree records (a resumed sweep keeps only runs on the same code)."""
    return provenance.capture().model_dump()


def fake_summary(
    bct: float, t_comm: float, faithful: bool = True, complete: bool = True, steps: int = 5, ci95: float = 0.1
) -> dict:
    return {
        "provenance": tree_now(),
        "complete": complete,
        "error": "" if complete else "boom",
        "scale": 20.0,
        "compress": 2.0,
        "model_bytes_emulated": 1e6,
        "bct_s": {"n": steps, "mean": bct, "ci95": ci95} if complete else {"n": 0},
        "predicted": {
            "equation": "Eq. 5",
            "bct_min_s": t_comm / 2,
            "bct_max_s": t_comm + 0.01,
            "t_push_s": t_comm / 2,
            "t_comm_s": t_comm,
        },
        "fidelity": {"faithful": faithful, "reason": "ovs 40%" if faithful else "ovs at 99%"},
    }


def seed_results(
    out: Path, fig: figure.Figure, bcts: dict[str, tuple[float, float]], reps: int = 1, unfaithful: tuple = ()
) -> None:
    """Finished repetitions; with reps > 1 they spread by 1% either side of the given BCT (same mean).
    A figure's `compare` runs are seeded too (its repeat), with the same numbers."""
    for p in fig.points:
        if p.id in bcts:
            bct, t_comm = bcts[p.id]
            runs = [(p, k, reps) for k in range(1, reps + 1)]
            if fig.compare and fig.compare.compares(p):
                runs += [(fig.compare.point(p), k, fig.compare.repeat) for k in range(1, fig.compare.repeat + 1)]
            for q, k, n in runs:
                d = figure.rep_dir(out, q, k)
                d.mkdir(parents=True)
                jitter = 1 + 0.01 * (k - (n + 1) / 2) if n > 1 else 1.0
                s = fake_summary(bct * jitter, t_comm, faithful=p.id not in unfaithful)
                (d / "summary.json").write_text(json.dumps(s))


FIG13 = {  # communication model: PSNet 2 s, FatTree 6/12/30 s per step; measured adds ~0.2 s
    "psnet-vgg16": (2.2, 2.0),
    "fattree-r1-vgg16": (6.2, 6.0),
    "fattree-r2-vgg16": (12.2, 12.0),
    "fattree-r5-vgg16": (30.2, 30.0),
    "psnet-resnet50": (0.5, 0.4),
    "fattree-r1-resnet50": (1.3, 1.2),
    "fattree-r2-resnet50": (2.5, 2.4),
    "fattree-r5-resnet50": (6.1, 6.0),
}


def test_every_replay_point_samples_enough_and_quick_stays_a_smoke_run():
    for name in figure.figure_names():
        fig = figure.load_figure(name)
        assert sweep.repetitions(fig, quick=False) >= 3, name
        assert sweep.repetitions(fig, quick=True) == 1, name
        assert sweep.repetitions(fig, quick=True, repeat=2) == 2, name
        for p in fig.points:
            assert sweep.point_experiment(fig, p, quick=False).job.iterations >= 5, (name, p.id)
        for pid in fig.quick.points:
            p = next(p for p in fig.points if p.id == pid)
            assert sweep.point_experiment(fig, p, quick=True).job.iterations <= 2, (name, pid)


def test_finished_points_are_kept_and_the_report_is_written(tmp_path):
    fig = figure.load_figure("fig13")
    seed_results(tmp_path / "fig13", fig, FIG13, reps=3)
    t0 = time.monotonic()
    out = sweep.run_figure("fig13", results=tmp_path, progress=False)  # all finished: nothing runs
    assert time.monotonic() - t0 < 20
    rows = {r["point"]: r for r in csv.DictReader((out / "summary.csv").open())}
    assert float(rows["fattree-r5-vgg16"]["bct_mean_s"]) == pytest.approx(30.2)
    # the 95% CI over 3 repetitions 29.898, 30.2, 30.502: t(2) 4.303 x sd 0.302 / sqrt(3)
    assert float(rows["fattree-r5-vgg16"]["bct_ci95_s"]) == pytest.approx(4.303 * 0.302 / 3**0.5, rel=1e-3)
    assert rows["fattree-r5-vgg16"]["ci_over"] == "repetitions" and rows["fattree-r5-vgg16"]["reps"] == "3"
    assert (out / "fig13.png").read_bytes()[:4] == b"\x89PNG"
    report = (out / "report.md").read_text()
    assert "**VGG-16: PSNet faster than FatTree r=1**: holds. FatTree r=1 6.20 s / PSNet 2.20 s = 2.82x" in report
    assert "**VGG-16: FatTree slower as r grows**: holds" in report
    # 2.82x is > 15% away from the paper's 1.89x: the report explains it with the model
    assert "**VGG-16: speed-up within 15% of the paper's 1.89x**: does NOT hold" in report
    assert "the paper's 1.89x at this S/B implies" in report
    assert "| fattree-r5-vgg16 | FatTree r=5 | VGG-16 |  | 30.200 | ±0.750 | 3 reps |" in report
    assert "Student t over the repetitions' mean BCTs" in report
    rep = report_json(out)
    assert [c["holds"] for c in rep["claims"] if c["group"] == "ResNet50"] == [True, False, True]
    assert all(p["faithful"] is True and p["repetitions"] == 3 for p in rep["points"])
    # the headline reads the paper's numbers from the one reference file, our ratios from report.json,
    # each with its 95% CI: the two points' relative half-widths in quadrature
    ci = {
        g: 2.82
        * math.hypot(
            float(rows[f"psnet-{g}"]["bct_ci95_s"]) / float(rows[f"psnet-{g}"]["bct_mean_s"]),
            float(rows[f"fattree-r1-{g}"]["bct_ci95_s"]) / float(rows[f"fattree-r1-{g}"]["bct_mean_s"]),
        )
        for g in ("vgg16",)
    }
    line = cli.speedup_table(out)
    assert line.startswith(
        f"PSNet vs FatTree r=1 speed-up: VGG-16: paper 1.89x, measured 2.82x ± {ci['vgg16']:.2f} (95% CI over 3 reps); "
        "ResNet50: paper 1.92x, measured 2.60x ± "
    ), line


def report_json(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


def test_a_claim_on_an_unfaithful_point_is_not_judged(tmp_path):
    fig = figure.load_figure("fig13")
    out = tmp_path / "fig13"
    seed_results(out, fig, FIG13, unfaithful=("fattree-r2-resnet50",))
    claims = {(c.group, c.label): c for c in write_report(fig, out, fig.points, 1, {})}
    mono = claims[("ResNet50", "ResNet50: FatTree slower as r grows")]
    assert mono.holds is None
    assert mono.verdict == "not judged (point not faithful: fattree-r2-resnet50: ovs at 99%)"
    assert "FatTree r=2 2.50 s" in mono.detail  # the numbers are shown all the same
    # claims on faithful points only are judged on the numbers: 1.3 / 0.5 = 2.60x, 2.60 vs 1.92 is 35% off
    assert claims[("ResNet50", "ResNet50: PSNet faster than FatTree r=1")].holds is True
    assert claims[("ResNet50", "ResNet50: speed-up within 15% of the paper's 1.92x")].holds is False
    assert claims[("VGG-16", "VGG-16: FatTree slower as r grows")].holds is True
    text = (out / "report.md").read_text()
    assert "**ResNet50: FatTree slower as r grows**: not judged (point not faithful: fattree-r2-resnet50" in text
    assert "| fattree-r2-resnet50 | FatTree r=2 | ResNet50 |  | 2.500 | ±0.100 | 5 steps |" in text
    # the figure-level summary beside it (replays.figsummary): a card per claim result, the same verdicts
    s = read_summary(out)
    assert s is not None and (s.name, s.kind, s.paper, s.command) == (
        "fig13",
        "figure",
        "psnet",
        "testbed replay fig13",
    )
    assert s.files.data == "summary.csv" and all((out / f).is_file() for f in [s.files.report, *s.files.figures])
    cards = {h.claim: h for h in s.headlines}
    assert [h.verdict for h in s.headlines] == [c.verdict for c in claims.values()]
    speedup = cards["ResNet50: PSNet faster than FatTree r=1"]
    assert (speedup.id, speedup.measured, speedup.paper_text) == (
        "fig13.resnet50.faster_than",
        pytest.approx(2.6),
        "1.92x",
    )
    # the card carries the speed-up's 95% CI, as `testbed replay` prints it: the two points' relative
    # half-widths in quadrature, in the claim's unit (as run here: these runs have no step split)
    pts = {p["id"]: p for p in json.loads((out / "report.json").read_text())["points"]}
    fast, slow = pts["psnet-resnet50"], pts["fattree-r1-resnet50"]
    rel = math.hypot(fast["ci95_s"] / fast["bct_mean_s"], slow["ci95_s"] / slow["bct_mean_s"])
    assert speedup.ci95 == pytest.approx(speedup.measured * rel) and speedup.ci95 > 0
    assert cards["ResNet50: FatTree slower as r grows"].verdict_kind == "not judged"
    assert cards["ResNet50: FatTree slower as r grows"].ci95 is None
    assert {p.id: p.faithful for p in s.points}["fattree-r2-resnet50"] is False


def test_incomplete_runs_show_as_failed_not_as_numbers(tmp_path):
    fig = figure.load_figure("fig10")
    out = tmp_path / "fig10"
    seed_results(out, fig, {"k1-vgg16": (4.0, 3.8), "k2-vgg16": (2.1, 1.9), "k3-vgg16": (2.05, 1.9)})
    d = figure.rep_dir(out, fig.points[3], 1)
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps(fake_summary(0, 0, complete=False)))
    claims = write_report(fig, out, fig.points, 1, {})
    text = (out / "report.md").read_text()
    assert "failed: rep1: boom" in text and "failed: rep1: not run" in text
    falls = next(c for c in claims if c.label == "VGG-16: BCT falls from K=1 to K=2")
    assert (falls.holds, falls.detail) == (True, "K=1 4.00 s -> K=2 2.10 s")
    assert any(c.label == "VGG-16: K=2 and K=3 almost equal (within 10%)" and c.holds is True for c in claims)
    # ResNet50 has no measured point: its claims are listed, not judged
    assert [c.verdict for c in claims if c.group == "ResNet50"] == ["not measured", "not measured"]
    assert sweep.finished(d) is None


def test_the_overview_reads_each_figures_report_json(tmp_path):
    fig = figure.load_figure("fig10")
    seed_results(tmp_path / "fig10", fig, {"k1-vgg16": (4.0, 3.8), "k2-vgg16": (2.1, 1.9)})
    write_report(fig, tmp_path / "fig10", fig.points, 1, {}, wall_s=90.0)
    table = overview(tmp_path, ["fig10", "fig11"]).splitlines()
    assert table[2].startswith("| fig10 | **VGG-16: BCT falls from K=1 to K=2**: holds. K=1 4.00 s -> K=2 2.10 s<br>")
    assert table[2].endswith("| 2/6 | 1.5 min |")
    assert table[3] == "| fig11 | not replayed yet | - | - |"


def test_a_claim_naming_a_missing_series_or_paper_number_is_one_line():
    data = yaml.safe_load((figure.FIGURES / "fig13.yaml").read_text())
    data["claims"][0]["than"] = "FatTree r=3"
    with pytest.raises(ValidationError) as err:
        figure.Figure.model_validate(data)
    assert one_line_error("fig13.yaml", err.value, figure.Figure) == (
        "fig13.yaml: claims.0.series: no point has series 'FatTree r=3'; use one of 'PSNet', 'FatTree r=1', "
        "'FatTree r=2', 'FatTree r=5'"
    )
    data["claims"][0].update(than="FatTree r=1", paper="fig13.speedup")
    with pytest.raises(ValidationError) as err:
        figure.Figure.model_validate(data)
    assert one_line_error("fig13.yaml", err.value, figure.Figure).startswith(
        "fig13.yaml: claims.0.paper: 'fig13.speedup' is not in reference/*.yaml (keys under fig13: "
        "speedup_vs_fattree_r1,"
    )


@pytest.mark.root
@pytest.mark.tf
def test_quick_replay_end_to_end_then_resume(tmp_path):
    """Two repetitions per point, run as two rounds of one job (runs.rounds): one set of TF
    processes per point, each round its own summary over its own step, the run's files in both."""
    out = sweep.run_figure("fig13", quick=True, repeat=2, results=tmp_path, progress=False)
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert [r["point"] for r in rows] == ["psnet-vgg16", "fattree-r1-vgg16"]
    assert all(float(r["bct_mean_s"]) > 0 and r["reps"] == "2" and r["fidelity"] for r in rows)
    for pid in ("psnet-vgg16", "fattree-r1-vgg16"):
        point = out / "points" / pid
        s1, s2 = (json.loads((point / f"rep{k}" / "summary.json").read_text()) for k in (1, 2))
        assert s1["complete"] and s2["complete"]
        assert (s1["round"]["steps"], s2["round"]["steps"]) == ([2, 2], [3, 3])  # warm-up 1, then 1 step each
        assert s1["bct_s"]["n"] == s2["bct_s"]["n"] == 1 and s1["bct_s"]["mean"] != s2["bct_s"]["mean"]
        events = [json.loads(ln) for ln in (point / "rep2" / "events.jsonl").read_text().splitlines()]
        ready = [(e["job"], e.get("task")) for e in events if e.get("event") == "ready"]
        assert len(ready) == len(set(ready)) == s1["workers"] + s1["ps"]  # each process started once
        iters = list(csv.DictReader((point / "rep1" / "iterations.csv").open()))
        assert sorted({int(r["step"]) for r in iters}) == [1, 2, 3]
    report = (out / "report.md").read_text()
    assert "## Fidelity" in report and "repetitions each: 2 (as rounds of one job per point" in report
    assert len(drawn_colours(out / "fig13.png")) >= 2  # a bar per topology, in its own colour
    # the claim's outcome follows the verdicts: judged on the numbers only when both points were faithful
    ps, ft = ({p["id"]: p for p in report_json(out)["points"]}[i] for i in ("psnet-vgg16", "fattree-r1-vgg16"))
    claim = next(c for c in report_json(out)["claims"] if c["label"] == "VGG-16: PSNet faster than FatTree r=1")
    if ps["faithful"] and ft["faithful"]:
        assert claim["holds"] is (ft["bct_mean_s"] / ps["bct_mean_s"] > 1)
        assert claim["verdict"] == ("holds" if claim["holds"] else "does NOT hold")
    else:
        assert ps["faithful"] is False or ft["faithful"] is False
        assert claim["holds"] is None and claim["verdict"].startswith("not judged (point not faithful: ")
    assert f"**VGG-16: PSNet faster than FatTree r=1**: {claim['verdict']}." in report
    t0 = time.monotonic()
    sweep.run_figure("fig13", quick=True, results=tmp_path, progress=False)
    assert time.monotonic() - t0 < 20  # both points kept, nothing rerun


def test_a_scheme_figure_plots_and_judges_gst_with_the_schedules_beside(tmp_path):
    """rat-fig6 judges the synchronisation time (gst_s), not the BCT, and explains a ratio that is
    not the paper's with the schedules' own expectation (bytes on the busiest cable / its rate)."""
    fig = figure.load_figure("rat-fig6")
    out = tmp_path / "rat-fig6"
    gst = {"ps": (2.6, 2.5), "ring": (1.9, 1.75), "rat": (1.1, 1.0)}
    for p in fig.points:
        if p.group != "4:1":
            continue
        measured, expected = gst[p.id.split("-")[1]]
        for k in (1, 2, 3):
            d = figure.rep_dir(out, p, k)
            d.mkdir(parents=True)
            s = {
                "complete": True,
                "scale": 25.0,
                "compress": 2.0,
                "bct_s": {"n": 5, "mean": measured + 0.5, "ci95": 0.1},  # not what the figure judges
                "gst_s": {"n": 5, "mean": measured * (1 + 0.01 * (k - 2)), "ci95": 0.1},
                "predicted": {"gst_s": expected},
                "fidelity": {"faithful": True, "reason": "ok"},
            }
            (d / "summary.json").write_text(json.dumps(s))
    claims = write_report(fig, out, fig.points, 3, {})
    ps = next(c for c in claims if c.group == "4:1" and c.label == "4:1: RAT faster than PS")
    assert ps.holds and ps.values["ratio"] == pytest.approx(2.6 / 1.1, rel=1e-6)
    vs_paper = next(c for c in claims if c.group == "4:1" and c.compares_paper and "PS" in c.detail)
    assert vs_paper.holds is False and "the schedules (bytes on the busiest cable over its rate) give 2.50x" in (
        vs_paper.detail
    )
    report = (out / "report.md").read_text()
    assert "| GST mean (s) |" in report and "| o4-rat | RAT | 4:1 |  | 1.100 |" in report
    assert "1.00 (schedule)" in report
    rows = {r["point"]: r for r in csv.DictReader((out / "summary.csv").open())}
    assert rows["o2-rat"]["reps"] == "0" and float(rows["o4-ps"]["bct_mean_s"]) == pytest.approx(2.6)


def test_the_headline_says_not_judged_when_a_point_is_not_faithful(tmp_path):
    fig = figure.load_figure("fig13")
    out = tmp_path / "fig13"
    seed_results(out, fig, FIG13, unfaithful=("psnet-resnet50",))
    write_report(fig, out, fig.points, 1, {})
    line = cli.speedup_table(out)
    assert (
        line.startswith("PSNet vs FatTree r=1 speed-up: VGG-16: paper 1.89x, measured 2.82x ± ")
        and (
            "(95% CI over steps of one run); ResNet50: paper 1.92x, measured 2.60x, not judged (point not faithful: "
            "psnet-resnet50: ovs at 99%)"
        )
        in line
    ), line
    claims = report_json(out)["claims"]
    assert all(c["holds"] is None for c in claims if c["group"] == "ResNet50" and c["type"] == "faster_than")


def test_an_unfaithful_or_stalled_repetition_is_retried_once(tmp_path):
    """Unfaithful: once more at twice the scale; stalled: once more at the same scale; failed otherwise,
    or already retried: not again."""
    bad = fake_summary(2.0, 1.0, faithful=False)
    assert sweep.retry_reason(bad) == ("not faithful at scale 20: ovs at 99%", 2.0)
    assert sweep.retry_reason(fake_summary(2.0, 1.0)) is None
    assert sweep.retry_reason(fake_summary(2.0, 1.0, faithful=False, complete=False)) is None
    assert sweep.retry_reason(None, "stalled: no step ...", stalled=True) == ("stalled: no step ...", 1.0)
    d = tmp_path / "rep1"
    d.mkdir()
    assert sweep.needs_run(d)
    (d / "summary.json").write_text(json.dumps(bad))
    assert sweep.needs_run(d)  # finished, not faithful, not retried yet: its retry is due
    (d / "summary.json").write_text(json.dumps({**bad, "retries": [{"why": "x", "scale": 20, "rerun_scale": 40}]}))
    assert not sweep.needs_run(d)
    (d / "summary.json").write_text(json.dumps(fake_summary(2.0, 1.0)))
    assert not sweep.needs_run(d)


def test_the_report_says_which_repetitions_were_retried_and_how_they_ended(tmp_path):
    fig = figure.load_figure("fig13")
    out = tmp_path / "fig13"
    seed_results(out, fig, FIG13)
    f = figure.rep_dir(out, fig.points[4], 1) / "summary.json"
    retry = {"why": "not faithful at scale 20: ovs at 99%", "scale": 20.0, "rerun_scale": 40.0}
    f.write_text(json.dumps({**json.loads(f.read_text()), "scale": 40.0, "retries": [retry]}))
    write_report(fig, out, fig.points, 1, {})
    text = (out / "report.md").read_text()
    assert (
        "- psnet-resnet50: faithful (ovs 40%); rep1 re-run once at scale 40 (faithful); first attempt: not "
        "faithful at scale 20: ovs at 99%" in text
    )


def with_split(summary: dict, comm: float, rest: float) -> dict:
    return {**summary, "step_split": {"comm_s": {"n": 5, "mean": comm}, "rest_s": {"n": 5, "mean": rest}}}


def test_the_fig13_report_decomposes_each_bct_and_draws_the_ratio_over_host_time(tmp_path):
    """Measured FatTree BCT (17.36 s) below the model's communication (19.53 s): the parts still add
    up, since the communication is the measured one. The curve, its paper point and both modes."""
    fig = figure.load_figure("fig13")
    out = tmp_path / "fig13"
    seed_results(out, fig, {"psnet-vgg16": (6.0, 6.5), "fattree-r1-vgg16": (17.36, 19.53)})
    splits = {"psnet-vgg16": (5.4, 0.6), "fattree-r1-vgg16": (16.6, 0.76)}  # emulated s, add up to the BCT
    for pid, (comm, rest) in splits.items():
        f = figure.rep_dir(out, next(p for p in fig.points if p.id == pid), 1) / "summary.json"
        f.write_text(json.dumps(with_split(json.loads(f.read_text()), comm, rest)))
    write_report(fig, out, fig.points, 1, {})
    rep = report_json(out)
    dec = {d["id"]: d for d in rep["decomposition"]}
    ft = dec["fattree-r1-vgg16"]
    assert (ft["comm_s"], ft["rest_s"], ft["model_comm_s"]) == (pytest.approx(33.2), 0.76, pytest.approx(39.06))
    assert ft["comm_s"] + ft["rest_s"] == pytest.approx(16.6 * 2 + 0.76) and ft["mode"] == "scaled"
    (vgg,) = [c for c in rep["ratio_curves"] if c["group"] == "VGG-16"]
    # model: 39.06 s vs 13.0 s of communication; the paper's 1.89x implies (39.06 - 1.89 x 13) / 0.89
    assert vgg["implied_host_s"] == pytest.approx((39.06 - 1.89 * 13.0) / 0.89)
    (m,) = vgg["measured"]
    assert (m["host_s"], m["ratio"]) == (pytest.approx(0.68), pytest.approx((33.2 + 0.76) / (10.8 + 0.6)))
    text = (out / "report.md").read_text()
    assert "## Where the time goes (paper-equivalent seconds)" in text
    assert "| fattree-r1-vgg16 | scaled | 17.360 | 33.20 | - | 0.76 | 33.96 | 39.06 |" in text  # no links.csv
    assert f"the paper's 1.89x implies {vgg['implied_host_s']:.2f} s of host time per step" in text
    assert "the rest of our step (compute, PS update, TF overhead: BCT minus the links" in text
    assert (out / "fig13-ratio.png").read_bytes()[:4] == b"\x89PNG"
    # a second host-time mode (full-size host time) is paired apart and drawn beside the first
    for pid, (comm, rest) in {"psnet-vgg16": (5.4, 8.0), "fattree-r1-vgg16": (16.6, 8.2)}.items():
        p = next(p for p in fig.points if p.id == pid)
        full = figure.Point(**{**p.model_dump(), "id": f"{pid}-full"})
        d = figure.rep_dir(out, full, 1)
        d.mkdir(parents=True)
        s = with_split(fake_summary(comm + rest, 6.5 if "psnet" in pid else 19.53), comm, rest)
        d.joinpath("summary.json").write_text(json.dumps({**s, "host_time_mode": "full"}))
        fig = fig.model_copy(update={"points": [*fig.points, full]})
    write_report(fig, out, fig.points, 1, {})
    (vgg,) = [c for c in report_json(out)["ratio_curves"] if c["group"] == "VGG-16"]
    assert [m["mode"] for m in vgg["measured"]] == ["scaled", "full"]
    assert "measured (full host time): host time 8.10 s" in (out / "report.md").read_text()


def test_fig13_runs_full_host_time_and_compares_the_scaled_mode(tmp_path):
    """The headline, claims and bars use the figure's own runs (host_time: full); `compare` runs the
    headline's points once more in scaled mode, into their own folders, and the ratio curve shows
    both modes. The speed-up is taken in paper-equivalent seconds (the runs are compressed)."""
    fig = figure.load_figure("fig13")
    todo = sweep.runs(fig, quick=False, reps=3)
    own, cmp = [t for t in todo if not t[2]], [t for t in todo if t[2]]
    assert len(own) == 3 * len(fig.points)
    assert sorted(p.id for p, _, _ in cmp) == [  # compare: 1 repetition of each headline point
        "fattree-r1-resnet50",
        "fattree-r1-vgg16",
        "psnet-resnet50",
        "psnet-vgg16",
    ]
    p = fig.points[0]
    assert sweep.point_experiment(fig, p, quick=False).job.host_time == "full"
    exp = sweep.point_experiment(fig, p, quick=False, compare=True)
    assert (exp.job.host_time, exp.name) == ("scaled", f"fig13-{p.id}.scaled")
    assert sweep.run_dir(tmp_path, fig, p, 1, True) == tmp_path / "points" / f"{p.id}.scaled" / "rep1"
    assert sweep.point_experiment(fig, p, quick=True).job.host_time == "full"
    assert not any(c for _, _, c in sweep.runs(fig, quick=True, reps=1))  # the smoke path stays two runs
    out = tmp_path / "fig13"
    seed_results(out, fig, {"psnet-vgg16": (9.0, 6.5), "fattree-r1-vgg16": (21.0, 19.53)})
    runs = {  # (point, compare run?): emulated comm, rest, mode
        ("psnet-vgg16", False): (5.4, 3.6, "full"),
        ("fattree-r1-vgg16", False): (16.6, 4.4, "full"),
        ("psnet-vgg16", True): (5.4, 0.6, "scaled"),
        ("fattree-r1-vgg16", True): (16.6, 0.8, "scaled"),
    }
    for (pid, compare), (comm, rest, mode) in runs.items():
        f = sweep.run_dir(out, fig, next(p for p in fig.points if p.id == pid), 1, compare) / "summary.json"
        s = with_split(json.loads(f.read_text()), comm, rest)
        f.write_text(json.dumps({**s, "bct_s": {**s["bct_s"], "mean": comm + rest}, "host_time_mode": mode}))
    write_report(fig, out, fig.points, 1, {})
    rep = report_json(out)
    claim = next(c for c in rep["claims"] if c["label"] == "VGG-16: PSNet faster than FatTree r=1")
    # the full-mode runs, compress 2 (the seeded summaries'): (16.6 x 2 + 4.4) / (5.4 x 2 + 3.6)
    assert claim["values"]["ratio"] == pytest.approx(37.6 / 14.4)
    assert claim["values"]["as_run"] == pytest.approx(21.0 / 9.0)
    assert "= 2.61x in paper-equivalent seconds (as run: 21.00 s / 9.00 s = 2.33x)" in claim["detail"]
    assert {(d["id"], d["mode"]) for d in rep["decomposition"]} == {
        ("psnet-vgg16", "full"),
        ("fattree-r1-vgg16", "full"),
        ("psnet-vgg16.scaled", "scaled"),
        ("fattree-r1-vgg16.scaled", "scaled"),
    }
    (vgg,) = [c for c in rep["ratio_curves"] if c["group"] == "VGG-16"]
    by_mode = {m["mode"]: m for m in vgg["measured"]}
    assert by_mode["full"]["host_s"] == pytest.approx(4.0) and by_mode["scaled"]["host_s"] == pytest.approx(0.7)
    assert by_mode["scaled"]["ratio"] == pytest.approx((33.2 + 0.8) / (10.8 + 0.6))
    assert "measured (scaled host time)" in (out / "report.md").read_text()


def point_compress(fig: figure.Figure, id_part: str) -> dict[str, float]:
    """The compress each point whose id holds `id_part` runs at (its own, else the figure's)."""
    return {p.id: sweep.point_experiment(fig, p, quick=False).compress for p in fig.points if id_part in p.id}


def test_a_compressed_figure_takes_its_speed_up_in_paper_equivalent_seconds(tmp_path):
    """Each point's runs split their steps (communication, rest); compress differs per group (VGG-16
    at 4, ResNet50 at 2, as fig13.yaml has it) and within it (the slow r=2 and r=5 points more).
    The claims, the headline, its CI and the bars are in paper-equivalent seconds, where compress
    cancels; the ratio as run is kept beside it."""
    fig = figure.load_figure("fig13")
    assert point_compress(fig, "fattree") == {
        "fattree-r1-vgg16": 4.0,
        "fattree-r2-vgg16": 16.0,
        "fattree-r5-vgg16": 32.0,
        "fattree-r1-resnet50": 2.0,
        "fattree-r2-resnet50": 8.0,
        "fattree-r5-resnet50": 8.0,
    }
    assert sweep.point_experiment(fig, fig.points[0], quick=True).compress == fig.quick.compress
    out = tmp_path / "fig13"
    splits = {  # emulated comm, rest per repetition (3 reps), compress
        "psnet-vgg16": ([2.5, 2.6, 2.7], 1.3, 4.0),
        "fattree-r1-vgg16": ([6.8, 6.9, 7.0], 0.3, 4.0),
        # as run shorter than r=1 (compressed 4x and 8x more), paper-equivalent longer: 29.1, 33.9 s
        "fattree-r2-vgg16": ([1.75, 1.8, 1.85], 0.3, 16.0),
        "fattree-r5-vgg16": ([1.0, 1.05, 1.1], 0.3, 32.0),
    }
    for pid, (comms, rest, compress) in splits.items():
        p = next(p for p in fig.points if p.id == pid)
        for k, comm in enumerate(comms, 1):
            d = figure.rep_dir(out, p, k)
            d.mkdir(parents=True)
            s = with_split(fake_summary(comm + rest, 1.0), comm, rest)
            s["step_split"]["link_s"] = {"n": 5, "mean": comm - 0.4}  # one link alone: parallel links took turns
            d.joinpath("summary.json").write_text(json.dumps({**s, "compress": compress}))
    write_report(fig, out, fig.points, 3, {})
    rep = report_json(out)
    pts = {p["id"]: p for p in rep["points"]}
    paper_eq = {pid: [c * k + rest for c in comms] for pid, (comms, rest, k) in splits.items()}
    assert pts["psnet-vgg16"]["bct_paper_s"] == pytest.approx(sum(paper_eq["psnet-vgg16"]) / 3)  # 11.7
    assert pts["fattree-r1-vgg16"]["bct_paper_s"] == pytest.approx(27.9)
    ratio = 27.9 / 11.7
    claim = next(c for c in rep["claims"] if c["label"] == "VGG-16: PSNet faster than FatTree r=1")
    assert claim["values"]["ratio"] == pytest.approx(ratio)
    assert claim["values"]["as_run"] == pytest.approx(7.2 / 3.9)  # host time weighs 4x more as run
    ci = ratio * math.hypot(pts["psnet-vgg16"]["ci95_paper_s"] / 11.7, pts["fattree-r1-vgg16"]["ci95_paper_s"] / 27.9)
    assert pts["psnet-vgg16"]["ci95_paper_s"] > pts["psnet-vgg16"]["ci95_s"]  # the comm spread x 4
    line = cli.speedup_table(out)
    assert line.startswith(
        f"PSNet vs FatTree r=1 speed-up: VGG-16: paper 1.89x, measured {ratio:.2f}x ± {ci:.2f} (95% CI over 3 reps) "
        f"in paper-equivalent seconds (as run {7.2 / 3.9:.2f}x); ResNet50: paper 1.92x, not measured"
    ), line
    # and what it rests on: the host time per step it measured (the two points' mean rest, (1.3 +
    # 0.3) / 2 s), and the ratio of the measured communication alone, paper-equivalent (r=1 / PSNet)
    comm = {pid: sum(c * k for c in comms) / 3 for pid, (comms, _, k) in splits.items()}
    assert line.endswith(
        f". Host time per step (scaled, this machine's): VGG-16 0.80 s; communication alone: VGG-16 "
        f"{comm['fattree-r1-vgg16'] / comm['psnet-vgg16']:.2f}x"
    ), line
    ordering = next(c for c in rep["claims"] if c["label"] == "VGG-16: FatTree slower as r grows")
    assert (ordering["holds"], ordering["unit"]) == (True, "paper-equivalent")  # as run it would fall
    assert ordering["detail"] == (
        "FatTree r=1 27.90 s -> FatTree r=2 29.10 s -> FatTree r=5 33.90 s (paper-equivalent s)"
    )
    rows = collect(out, fig.points, 3)
    assert bars_paper_equivalent(rows)
    assert [r.bct_paper for r in rows[:4]] == pytest.approx([sum(v) / 3 for v in paper_eq.values()])
    text = (out / "report.md").read_text()
    assert "compress VGG-16 4/16/32, ResNet50 2/8:" in text
    # decomposition: comm 2.6 x 4, one link (2.6 - 0.4) x 4, rest 1.3, in paper-equivalent seconds
    assert "| psnet-vgg16 | scaled | 3.900 | 10.40 | 8.80 | 1.30 | 11.70 |" in text
    assert "| 4 | 27.90 ±" in text


def test_a_compressed_line_chart_is_drawn_and_bounded_in_paper_equivalent_seconds(tmp_path):
    """Fig. 9 compresses VGG-16 4x more than ResNet50 (32 vs 8): a panel draws both, and the
    model's bounds, in paper-equivalent seconds (T_pull and T_push x compress, host terms as they
    are), where its bound claims judge them; the report names compress per model."""
    fig = figure.load_figure("fig9")
    assert point_compress(fig, "-200") == {
        "psnet-vgg16-200": 32.0,
        "psnet-resnet50-200": 8.0,
        "fattree-vgg16-200": 32.0,
        "fattree-resnet50-200": 8.0,
    }
    out = tmp_path / "fig9"
    runs = {"psnet-vgg16-200": (1.5, 0.2, 32.0), "psnet-resnet50-200": (1.2, 0.6, 8.0)}  # comm, rest, compress
    for pid, (comm, rest, compress) in runs.items():
        p = next(p for p in fig.points if p.id == pid)
        pred = {"t_pull_s": 0.7, "t_push_s": 0.7, "t_compute_s": 0.1, "t_ps_update_s": 0.05, "t_sync_s": 0.0}
        pred |= {"bct_min_s": 0.7, "bct_max_s": 1.55, "t_comm_s": 1.4, "equation": "Eq. 5"}
        for k in (1, 2, 3):
            d = figure.rep_dir(out, p, k)
            d.mkdir(parents=True)
            s = with_split(fake_summary(comm + rest, 1.4), comm, rest)
            d.joinpath("summary.json").write_text(json.dumps({**s, "predicted": pred, "compress": compress}))
    claims = {c.label: c for c in write_report(fig, out, fig.points, 3, {})}
    rows = [r for r in collect(out, fig.points, 3) if r.point.group == "(a) PSNet"]
    assert lines_paper_equivalent(rows)
    vgg = next(r for r in rows if r.point.id == "psnet-vgg16-200")
    assert vgg.bct_paper == pytest.approx(1.5 * 32 + 0.2)
    assert decomp.paper_bounds(vgg.pred, vgg.compress) == pytest.approx((0.7 * 32, 0.7 * 64 + 0.15))
    assert decomp.paper_bounds({"t_push_s": 1.0}, 2.0) is None  # no model terms: no model line
    # each bound claim reads its point in paper-equivalent seconds too, the bounds as run beside them
    bound = claims["(a) PSNet VGG-16 B_w=200: measured within [BCT_min, BCT_max]"]
    assert (bound.holds, bound.unit) == (False, "paper-equivalent")  # 48.2 > 44.95 x 1.05
    assert bound.detail == (
        "22.40 <= 48.20 <= 44.95 paper-equivalent s (as run 0.70 <= 1.70 <= 1.55 s) (5% slack); by Eq. 1's terms, "
        "communication 48.00 s measured (the links' busy time) vs T_pull + T_push 44.80 s (+3.20 s), the rest of a "
        "step 0.20 s vs T_compute + T_ps_update + T_sync 0.15 s (+0.05 s): most of the difference is in the "
        "communication (T_pull + T_push)"
    )  # communication x compress on both sides: 1.5 x 32 against (0.7 + 0.7) x 32
    bound = claims["(a) PSNet ResNet50 B_w=200: measured within [BCT_min, BCT_max]"]
    assert bound.holds is True  # as run 1.8 > 1.55 x 1.05 (host time weighs 8x); 1.2 x 8 + 0.6 = 10.2 <= 11.35
    assert bound.values == {"bct_min_s": pytest.approx(5.6), "bct_max_s": pytest.approx(11.35)}
    assert (out / "fig9.png").stat().st_size > 0
    assert "compress VGG-16 8/16/32, ResNet50 8:" in (out / "report.md").read_text()


def test_compare_points_must_be_the_figures_points():
    data = yaml.safe_load((figure.FIGURES / "fig13.yaml").read_text())
    data["compare"]["points"] = ["psnet-vgg16", "nonesuch"]
    with pytest.raises(ValidationError, match=r"compare\.points: no point 'nonesuch'"):
        figure.Figure.model_validate(data)
