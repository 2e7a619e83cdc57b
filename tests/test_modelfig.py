"""Model-only figures (Figs. 6-7): the sizing goes through the topology model, the scale version of
Eqs. 5-7 agrees with bct_model.predict's every-pair one, the paper's claims are judged honestly,
and `testbed replay fig6 --quick` runs the whole path (analytic + SimGrid) with no emulation."""

from __future__ import annotations

import csv
import json
import math

import pytest
from pydantic import TypeAdapter

from models import bct_model
from models.bct_scale import analytic_comm
from models.flow.paper_scale import job_routes
from replays import figure
from replays.claims import Claim, ClaimResult
from replays.evidence import read_summary
from replays.figure import FigureError
from replays.modelfig import fattree_k, load_model_figure, spec_data
from replays.modelfig_report import judge
from replays.modelreplay import replay_model_figure
from testbed import cli
from topologies.build import build_network, load_network
from topologies.schema import parse_spec

S = 200e6


def test_model_figures_are_listed_apart_from_sweeps():
    assert figure.figure_names("model") == [
        "fig6",
        "fig7",
        "hips-table3-scale",
        "plink-fig8-scale",
        "rat-fig6-scale",
        "rat-fig7-scale",
    ]
    assert not {"fig6", "fig7"} & set(figure.figure_names())
    assert {"fig6", "fig7", "fig13"} <= set(figure.figure_names("all"))
    with pytest.raises(FigureError, match=r"fig6\.yaml: a model figure \(mode: model\)"):
        figure.load_figure("fig6")
    with pytest.raises(FigureError, match="fig13: no such model figure; model figures: fig6, fig7, hips-table3-scale"):
        load_model_figure("fig13")


def test_replay_groups_are_one_papers_figures_in_number_order():
    assert figure.group_names("psnet") == ["fig1", "fig6", "fig7", "fig9", "fig10", "fig11", "fig12", "fig13"]
    assert figure.group_names("psnet", "emulated") == ["fig1", "fig9", "fig10", "fig11", "fig12", "fig13"]
    assert figure.group_names("rat") == ["rat-fig6", "rat-fig6-scale", "rat-fig7", "rat-fig7-scale"]
    assert figure.group_names("hips") == ["hips-table1", "hips-table3", "hips-table3-scale"]
    assert sorted(figure.group_names("all")) == sorted(figure.figure_names("all"))  # psnet-modules too
    assert figure.group_names("fig13") is None  # one figure, not a group


def test_fattree_radix_is_the_smallest_two_pods_holding_the_job():
    assert [fattree_k(n) for n in (128, 129, 224, 752)] == [16, 18, 22, 40]


@pytest.mark.parametrize("name", ["fig6", "fig7"])
def test_every_point_builds_and_its_job_is_the_figures(name):
    fig = load_model_figure(name)
    for panel in fig.panels:
        for series in panel.series:
            for w in (fig.workers[0], fig.workers[-1]):
                net = build_network(parse_spec(spec_data(fig, series, w), name))
                assert (len(net.workers()), len(net.pss())) == (w, fig.ps), (series.label, w)
                assert net.spec.delay_ms == pytest.approx(0.02)


def test_two_modules_split_the_job_and_run_supernode_links_at_b_s():
    fig = load_model_figure("fig6")
    two = next(s for p in fig.panels for s in p.series if s.layout == "psnet-two-modules")
    data = spec_data(fig, two, 48)
    assert (data["modules"], data["workers"], data["ps"]) == (2, 24, 16)
    assert data["inter_module_mbps"] == two.K * fig.worker_mbps
    with pytest.raises(FigureError, match="W=7 and P=32 must split over 2"):
        spec_data(fig, two, 7)


@pytest.mark.parametrize("topology", ["psnet-testbed.yaml", "psnet-2modules.yaml", "fattree-testbed.yaml"])
def test_scale_model_equals_the_every_pair_model(topology):
    """Same equation, C and hops as bct_model.predict (compute_paths over every pair)."""
    net = load_network(figure.TOPOLOGIES / topology)
    job = job_routes(net, S)
    a = analytic_comm(net, job.routes, S, job.workers, job.pss)
    p = bct_model.predict(net, S, 1, math.inf, math.inf, latency_s=net.spec.delay_ms / 1000, scaled=False)
    assert (a.equation, a.c, a.hops) == (p.equation, p.c, p.hops)
    assert a.t_push_s == pytest.approx(p.t_push_s, rel=1e-12)
    assert a.t_comm_s == pytest.approx(p.t_comm_s, rel=1e-12)


ROWS = [
    {"panel": "a", "series": s, "W": w, "analytic_s": v, "flowmodel_s": f}
    for s, w, v, f in [
        ("K=1", 48, 0.32, 0.32),
        ("K=1", 192, 0.64, 0.64),
        ("K=2", 48, 0.32, 0.32),
        ("K=2", 192, 0.32, 0.33),
        ("K=4", 48, 0.32, None),
        ("K=4", 192, 0.32, None),
    ]
]


CLAIM = TypeAdapter(Claim)


def verdicts(claim: dict, rows: list[dict] = ROWS) -> dict[str, tuple[str, str]]:
    """(verdict, detail) per model of one claim, judged by replays.claims as the report does."""
    return {v["model"]: (v["verdict"], v["detail"]) for v in judge([CLAIM.validate_python(claim)], rows)}


def test_a_monotone_claim_at_every_w_needs_every_step_and_strict_ends():
    order = {"type": "monotone", "direction": "falls", "check": "no_reversal_ends", "per_x": True, "text": "t"}
    claim = {**order, "groups": ["a"], "series": ["K=1", "K=2", "K=4"]}
    got = verdicts(claim)
    assert got["analytic"] == ("holds", "at W=192: K=1 0.640 s > K=2 0.320 s > K=4 0.320 s")
    assert got["flow model"][0] == "not measured"  # K=4 has no flow-model point
    assert verdicts({**claim, "series": ["K=2", "K=1"]})["analytic"][0] == "does NOT hold"
    # ties allowed at every step, but the ends strictly apart at the largest W
    assert verdicts({**claim, "series": ["K=2", "K=4"]})["analytic"][0] == "does NOT hold"
    assert verdicts({**claim, "series": ["K=2", "K=4"], "check": "no_reversal"})["analytic"][0] == "holds"


def test_a_within_percent_claim_at_every_w_reports_the_largest_gap():
    claim = {"type": "within_percent_of", "per_x": True, "text": "t", "groups": ["a"], "series": "K=2", "of": "K=1"}
    assert verdicts({**claim, "percent": 1})["analytic"] == ("does NOT hold", "largest gap 50.00% at W=192")
    near = {**claim, "series": "K=4", "of": "K=2", "percent": 1}
    assert verdicts(near)["analytic"] == ("holds", "largest gap 0.00% at W=48")


def test_the_model_figures_judge_with_the_figure_claims_words():
    """One claims engine: a model figure's results are replays.claims.ClaimResults, with the model."""
    claim = {"type": "within_percent_of", "per_x": True, "text": "t", "series": "K=4", "of": "K=2", "percent": 1}
    (result, flow) = judge([CLAIM.validate_python({**claim, "groups": ["a"]})], ROWS)
    assert ClaimResult.model_validate(result).holds is True and result["group"] == "a"
    assert (result["model"], flow["model"], flow["verdict"]) == ("analytic", "flow model", "not measured")
    assert result["points"] == ["a-K=2-W48", "a-K=4-W48", "a-K=2-W192", "a-K=4-W192"]


@pytest.mark.parametrize(
    ("claim", "error"),
    [
        (
            {"type": "monotone", "direction": "falls", "per_x": True, "text": "t", "groups": ["a"], "series": ["K=3"]},
            r"claims\.0: panel a has no series 'K=3'",
        ),
        (
            {"type": "monotone", "direction": "falls", "per_x": True, "text": "t", "groups": ["c"], "series": ["K=1"]},
            r"claims\.0\.groups: no panel 'c'; panels: a, b",
        ),
        (
            {"type": "monotone", "direction": "falls", "text": "t", "groups": ["a"], "series": ["K=1", "K=2"]},
            r"claims\.0\.per_x: a model figure's claims are judged at every W",
        ),
        ({"type": "best", "series": "K=1", "text": "t"}, r"claims\.0\.type: a model figure judges monotone"),
    ],
)
def test_a_claim_a_model_figure_cannot_judge_is_refused(claim, error):
    data = load_model_figure("fig6").model_dump()
    data["claims"] = [claim]
    with pytest.raises(ValueError, match=error):
        type(load_model_figure("fig6")).model_validate(data)


def test_fig6_quick_replay_runs_both_models(tmp_path, monkeypatch):
    """The whole path, no emulation: exact max-min (no calibration file), flow model = Eq. 5."""
    pytest.importorskip("simgrid", reason="python3-simgrid (scripts/setup.sh links it into the venv)")
    monkeypatch.setenv("PSNET_FLOWMODEL_FACTORS", str(tmp_path / "none.json"))
    out = replay_model_figure("fig6", quick=True, results=tmp_path)
    assert (out / "fig6.png").stat().st_size > 0
    rows = list(csv.DictReader((out / "summary.csv").open()))
    fig = load_model_figure("fig6")
    assert len(rows) == sum(len(p.series) for p in fig.panels) * len(fig.quick.workers)
    one_module = [r for r in rows if r["equation"] == "Eq. 5"]
    assert one_module and all(float(r["flow_over_analytic"]) == pytest.approx(1.0, abs=1e-3) for r in one_module)
    # W = 192, P = 32, R = 3, B_w = 10 Gbit/s: K = 1 is PS-bound (2 S/B_w per phase), K >= 2 worker-bound
    by = {(r["panel"], r["series"]): float(r["analytic_s"]) for r in rows}
    assert by[("a", "K=1")] == pytest.approx(2 * 2 * S * 8 / 10e9 + 4 * 20e-6)
    assert by[("a", "K=2")] == by[("a", "K=4")] == pytest.approx(2 * S * 8 / 10e9 + 4 * 20e-6)
    report = json.loads((out / "report.json").read_text())
    got = {(c["label"], c["model"]): c["verdict"] for c in report["claims"]}
    assert set(got.values()) == {"holds"}, got
    summary = read_summary(out)  # the figure-level summary: one card per claim and model, the same verdicts
    assert summary is not None and (summary.name, summary.kind, summary.paper) == (
        "fig6-quick",
        "model-figure",
        "psnet",
    )
    assert summary.command == "testbed replay fig6 --quick" and summary.files.figures == ["fig6.png"]
    assert [(h.claim, h.verdict) for h in summary.headlines] == [
        (f"{c['label']} [{c['model']}]", "holds") for c in report["claims"]
    ]
    assert summary.headlines[2].id == "fig6.a.within_percent_of.analytic" and summary.headlines[2].measured == 0.0
    first = summary.provenance
    again = replay_model_figure("fig6", quick=True, results=tmp_path)  # every point kept: no simulation
    kept = read_summary(again)
    # ...so the provenance is the replay that computed them, its date and wall time, not a run of its own
    assert kept is not None and (kept.provenance.date, kept.provenance.wall_s) == (first.date, first.wall_s)
    # a point computed on other code (here: a local change to the flow model then) is computed again
    point = sorted((out / "points").glob("*.json"))[0]
    saved = json.loads(point.read_text())
    assert saved["computed_on"]["commit"] == first.commit
    point.write_text(json.dumps({**saved, "analytic_s": -1.0, "computed_on": {**saved["computed_on"],
                                 "dirty_files": {"models/flow/simgrid.py": "0" * 40}}}))  # fmt: skip
    ended = json.loads((out / "run.json").read_text())["ended"]
    replay_model_figure("fig6", quick=True, results=tmp_path)
    redone = json.loads(point.read_text())
    assert redone["analytic_s"] == saved["analytic_s"]
    assert "models/flow/simgrid.py" not in redone["computed_on"]["dirty_files"]
    assert json.loads((out / "run.json").read_text())["ended"] > ended  # this replay computed a point


def test_replay_cli_dispatches_a_model_figure(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(
        "replays.modelreplay.replay_model_figure", lambda name, **kw: calls.append((name, kw)) or tmp_path
    )
    assert cli.main(["replay", "fig7", "--quick"]) == 0
    assert calls == [("fig7", {"quick": True, "fresh": False, "results": cli.REPO_DIR / "results"})]
    assert "fig7: " in capsys.readouterr().out


def test_routes_rebound_to_another_r_carry_its_rates():
    """A FatTree is routed once for all r: the rebound cables are the other build's, same paths."""
    from models.flow.paper_scale import rebind

    def build(r: float):
        data = {**load_network(figure.TOPOLOGIES / "fattree-testbed.yaml").spec.model_dump(), "oversubscription": r}
        return build_network(parse_spec(data, "fattree-testbed.yaml"))

    one, two = build(1), build(2)
    fresh, moved = job_routes(two, S), rebind(job_routes(one, S), two)
    assert moved.routes.cables.keys() == fresh.routes.cables.keys()
    for pair, hops in fresh.routes.cables.items():
        assert [(ln.key, ln.paper_mbps, frm) for ln, frm in moved.routes.cables[pair]] == [
            (ln.key, ln.paper_mbps, frm) for ln, frm in hops
        ]
    assert any(ln.paper_mbps == 500 for hops in moved.routes.cables.values() for ln, _ in hops)


def test_fattree_point_flow_model_equals_eq7_with_c_from_routes(tmp_path, monkeypatch):
    """Fig. 7's FatTree at W = 48, r = 2: the 48 x 32 flows into the PS ToRs spread over their k/2
    downlinks (C = W), so Eq. 7's B_a / C binds and max-min gives every flow that share."""
    pytest.importorskip("simgrid", reason="python3-simgrid (scripts/setup.sh links it into the venv)")
    from replays.modelfig import compute_point

    monkeypatch.setenv("PSNET_FLOWMODEL_FACTORS", str(tmp_path / "none.json"))
    fig = load_model_figure("fig7")
    r2 = next(s for s in fig.panels[0].series if s.r == 2)
    point = compute_point(fig, r2, 48, flow_cap=48)
    assert (point["equation"], point["c"], point["hops"]) == ("Eq. 7", 48, 6)
    # (S/P) / (B_w / r / C) per phase, + 6 hops of 20 us, twice
    assert point["analytic_s"] == pytest.approx(2 * (S / 32) * 8 / (10e9 / 2 / 48) + 2 * 6 * 20e-6)
    assert point["flowmodel_s"] == pytest.approx(point["analytic_s"], rel=1e-3)
