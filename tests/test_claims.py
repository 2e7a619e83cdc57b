"""The claim types of figure files (replays.claims), each judged on report rows built from run
summaries: what holds, what does not, what is not measured, and what is not judged because a point
it rests on was not faithful."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from replays.claims import Claim, evaluate, paper_number, paper_reference, paper_value
from replays.figure import Point
from replays.report import Row
from runs.summary import summary_of

CLAIM = TypeAdapter(Claim)
REFERENCE = {"figX": {"speedup": {"A": 2.0, "B": 1.5}, "one": 3}}


def row(series: str, bct: float | None, group: str = "A", x: float | None = None, faithful: bool = True, **pred):
    """A measured point (one repetition) as the report folds it; bct None: the run failed."""
    p = Point(id=f"{group}-{series}-{x}".lower(), topology="t.yaml", series=series, group=group, x=x)
    if bct is None:
        return Row(p, failed=["rep1: boom"])
    s = {
        "complete": True,
        "bct_s": {"n": 5, "mean": bct, "ci95": 0.1},
        "predicted": pred.get("predicted", {}),
        "predicted_placement": pred.get("placed", {}),
        "fidelity": {"faithful": faithful, "reason": "ok" if faithful else "machine starved, link at 40%"},
    }
    if "split" in pred:  # (communication, rest[, the busiest link's busy time]) of a step (runs.steptime)
        keys = ("comm_s", "rest_s", "link_s")[: len(pred["split"])]
        s["step_split"] = {k: {"n": 5, "mean": v} for k, v in zip(keys, pred["split"], strict=True)}
    if "mtu" in pred:
        s["mtu"] = pred["mtu"]
    return Row(p, bcts=[bct], summaries=[summary_of(s)])


def judge(claim: dict, rows: list[Row]) -> list:
    return evaluate([CLAIM.validate_python(claim)], rows, REFERENCE)


def test_faster_than_judges_the_ratio_and_the_paper_number_per_group():
    c = {"type": "faster_than", "series": "new", "than": "old", "paper": "figX.speedup", "tolerance": 0.15}
    faster, paper = judge(c, [row("new", 2.0), row("old", 4.4)])
    assert (faster.label, faster.holds, faster.values["ratio"]) == ("A: new faster than old", True, pytest.approx(2.2))
    assert faster.detail == "old 4.40 s / new 2.00 s = 2.20x (paper 2.0x)"
    # 2.2 is 10% off the paper's 2.0 (tolerance 15%): holds
    assert (paper.label, paper.holds, paper.compares_paper) == (
        "A: speed-up within 15% of the paper's 2.0x",
        True,
        True,
    )
    (slower,) = [r for r in judge(c, [row("new", 3.0, "B"), row("old", 2.0, "B")]) if not r.compares_paper]
    assert slower.holds is False and slower.verdict == "does NOT hold"
    # 1.2x against the paper's 1.5x in group B: 20% off
    assert judge(c, [row("new", 2.0, "B"), row("old", 2.4, "B")])[1].holds is False


def test_faster_than_without_both_points_is_not_measured_and_keeps_the_paper_number():
    c = {"type": "faster_than", "series": "new", "than": "old", "paper": "figX.speedup"}
    (r,) = judge(c, [row("new", 2.0), row("old", None)])
    assert (r.holds, r.verdict, r.values) == (None, "not measured", {"paper": 2.0})


def test_the_paper_numbers_come_from_the_reference_file_by_key():
    assert paper_number("figX.speedup", "B", REFERENCE) == 1.5
    assert paper_number("figX.one", "any group", REFERENCE) == 3.0
    assert paper_number("figX.speedup", "C", REFERENCE) is None
    assert paper_value("fig13.speedup_vs_fattree_r1") == {"VGG-16": 1.89, "ResNet50": 1.92}
    assert paper_reference()["fig13"]["speedup_vs_fattree_r1"]["ResNet50"] == 1.92
    with pytest.raises(KeyError, match=r"'figX.two' is not in reference/\*.yaml \(keys under figX: speedup, one\)"):
        paper_value("figX.two", REFERENCE)


def test_monotone_every_step_against_ends():
    rows = [row("s", 3.0, x=1), row("s", 2.9, x=4), row("s", 1.0, x=2), row("s", 2.0, x=3)]  # by x: 3, 1, 2, 2.9
    every = {"type": "monotone", "text": "{group}: falls along x", "direction": "falls"}
    (r,) = judge(every, rows)
    assert (r.label, r.holds) == ("A: falls along x", False)
    assert r.detail == "1: 3.00 s -> 2: 1.00 s -> 3: 2.00 s -> 4: 2.90 s"
    (r,) = judge({**every, "check": "ends"}, rows)  # only the last against the first: 2.9 < 3.0
    assert r.holds is True and r.points == ["a-s-1", "a-s-4"]
    rises = {"type": "monotone", "text": "r grows", "direction": "rises", "series": ["r1", "r2", "r5"]}
    assert judge(rises, [row("r5", 9.0), row("r1", 1.0), row("r2", 5.0)])[0].holds is True
    assert judge(rises, [row("r5", 9.0), row("r1", 1.0), row("r2", 9.0)])[0].holds is False  # strictly
    assert judge(rises, [row("r5", 9.0), row("r1", None)])[0].verdict == "not measured"


def test_monotone_allowing_ties_and_judged_at_every_x():
    """The checks model figures use (replays.modelfig_report judges them on each model's values):
    ties allowed at each step, the ends strictly apart; `per_x` judges the order at every x the
    series share, the ends at the largest x only, and an unfaithful point still withholds it."""
    ties = {"type": "monotone", "text": "t", "direction": "rises", "series": ["a", "b", "c"], "check": "no_reversal"}
    assert judge(ties, [row("a", 1.0), row("b", 1.0), row("c", 2.0)])[0].holds is True
    assert judge(ties, [row("a", 1.0), row("b", 0.9), row("c", 2.0)])[0].holds is False
    ends = {**ties, "check": "no_reversal_ends"}
    assert judge(ends, [row("a", 1.0), row("b", 1.0), row("c", 1.0)])[0].holds is False
    per_x = {**ends, "series": ["a", "b"], "per_x": True}
    rows = [row("a", 1.0, x=1), row("b", 1.0, x=1), row("a", 1.0, x=2), row("b", 3.0, x=2), row("b", 9.0, x=3)]
    (r,) = judge(per_x, rows)  # x=3 has no a: judged at 1 and 2, equal at 1, apart at the largest
    assert (r.holds, r.detail) == (True, "at x=2: a 1.000 s < b 3.000 s")
    assert r.points == ["a-a-1", "a-b-1", "a-a-2", "a-b-2"]
    flipped = [row("a", 2.0, x=1), row("b", 1.0, x=1), row("a", 1.0, x=2), row("b", 3.0, x=2)]
    assert judge(per_x, flipped)[0].holds is False  # a step the wrong way at a smaller x
    bad = [row("a", 1.0, x=1), row("b", 1.0, x=1), row("a", 1.0, x=2), row("b", 3.0, x=2, faithful=False)]
    assert judge(per_x, bad)[0].verdict.startswith("not judged (point not faithful: a-b-2")
    assert judge(per_x, [row("a", 1.0, x=1)])[0].verdict == "not measured"
    with pytest.raises(ValidationError, match="per_x: judging at every x needs `series`"):
        CLAIM.validate_python({"type": "monotone", "text": "t", "direction": "rises", "per_x": True})


def test_within_percent_of_at_every_x_judges_the_largest_gap():
    c = {"type": "within_percent_of", "text": "t", "series": "b", "of": "a", "percent": 10, "per_x": True}
    rows = [row("a", 2.0, x=1), row("b", 2.1, x=1), row("a", 4.0, x=2), row("b", 4.2, x=2), row("a", 1.0, x=3)]
    (r,) = judge(c, rows)
    assert (r.holds, r.detail, r.values["x"]) == (True, "largest gap 5.00% at x=1", 1)
    assert judge({**c, "percent": 4}, rows)[0].holds is False


def test_within_percent_of():
    c = {
        "type": "within_percent_of",
        "text": "{group}: {series} near {than}",
        "series": "K3",
        "of": "K2",
        "percent": 10,
    }
    (r,) = judge(c, [row("K2", 2.0), row("K3", 2.19)])
    assert (r.label, r.holds, r.detail) == ("A: K3 near ", True, "2.00 s vs 2.19 s (9.5%)")
    assert judge(c, [row("K2", 2.0), row("K3", 2.3)])[0].holds is False


def test_best_and_varies():
    best = {"type": "best", "text": "{group}: {series} is best", "series": "b"}
    assert judge(best, [row("a", 2.0), row("b", 1.0), row("c", 3.0)])[0].holds is True
    (r,) = judge(best, [row("a", 0.9), row("b", 1.0)])
    assert (r.label, r.holds, r.detail) == ("A: b is best", False, "a 0.90 s, b 1.00 s")
    assert judge(best, [row("a", 0.9), row("b", None), row("c", 1.0)])[0].verdict == "not measured"
    varies = {"type": "varies", "text": "depends", "percent": 10}
    assert judge(varies, [row("a", 1.0), row("b", 1.12)])[0].holds is True
    (r,) = judge(varies, [row("a", 1.0), row("b", 1.05)])
    assert (r.holds, r.detail) == (False, "a 1.00 s, b 1.05 s (spread 5%)")


def test_flattens_needs_three_points():
    c = {"type": "flattens", "text": "then flattens"}
    (r,) = judge(c, [row("s", 0.87, x=1000), row("s", 0.74, x=2000), row("s", 0.67, x=3000), row("s", 0.63, x=5000)])
    assert (r.holds, r.detail) == (True, "first step -0.13 s, last step -0.04 s")
    assert judge(c, [row("s", 3.0, x=1), row("s", 2.9, x=2), row("s", 1.0, x=3)])[0].holds is False
    (r,) = judge(c, [row("s", 0.78, x=1), row("s", 0.71, x=2), row("s", 0.72, x=3), row("s", 0.73, x=5)])
    assert r.detail == "first step -0.07 s, last step +0.01 s"  # the BCT rose on the last step (was '--0.01')
    assert judge(c, [row("s", 3.0, x=1), row("s", 2.0, x=2)])[0].verdict == "not measured"


def test_bounded_by_model_per_point_with_slack_and_the_byte_split():
    c = {"type": "bounded_by_model", "text": "{group} {series} B_w={x:g}: within", "slack": 0.05}
    inside = row("v", 2.1, x=200, predicted={"bct_min_s": 1.0, "bct_max_s": 2.0})
    above = row(
        "v",
        3.0,
        x=500,
        predicted={"bct_min_s": 1.0, "bct_max_s": 2.0},
        placed={"bct_max_s": 2.8, "largest_ps_share": 0.73},
    )
    r1, r2, r3 = judge(c, [inside, above, row("v", None, x=1000)])
    assert (r1.label, r1.holds, r1.detail) == ("A v B_w=200: within", True, "1.00 <= 2.10 <= 2.00 s (5% slack)")
    assert (
        r2.holds is False and "largest PS holds 73% instead of 1/P) the model gives BCT_max 2.80 s (1.07x" in r2.detail
    )
    assert (r3.label, r3.verdict) == ("A v B_w=1000: within", "not measured")


def test_a_point_above_its_bound_names_the_term_of_eq1_the_difference_is_in():
    c = {"type": "bounded_by_model", "text": "{group} {series} W1={x:g}: within", "slack": 0.05}
    model = {"bct_min_s": 0.82, "bct_max_s": 1.66, "t_comm_s": 1.64}  # T_compute + T_ps_update + T_sync 0.02 s
    host = row("v", 1.89, x=3, predicted=model, split=(1.62, 0.27))  # the links were busy 1.62 s of 1.89
    links = row("v", 2.60, x=4, predicted=model, split=(2.40, 0.20))
    r1, r2 = judge(c, [host, links])
    assert r1.holds is False and r1.detail.endswith(
        "; by Eq. 1's terms, communication 1.62 s measured (the links' busy time) vs T_pull + T_push 1.64 s "
        "(-0.02 s), the rest of a step 0.27 s vs T_compute + T_ps_update + T_sync 0.02 s (+0.25 s): most of "
        "the difference is in the host terms (T_compute + T_ps_update + T_sync)"
    )
    assert r2.detail.endswith(
        "(+0.76 s), the rest of a step 0.20 s vs T_compute + T_ps_update + T_sync 0.02 s (+0.18 s): most of "
        "the difference is in the communication (T_pull + T_push)"
    )
    (inside,) = judge(c, [row("v", 1.60, x=5, predicted=model, split=(1.40, 0.20))])
    assert inside.holds is True and "Eq. 1" not in inside.detail
    # with the busiest link's own busy time and the MTU: the method's two parts of the excess shown
    (wire,) = judge(c, [row("v", 1.90, x=6, predicted=model, split=(1.78, 0.12, 1.70), mtu=1500)])
    assert wire.detail.endswith(
        "; by Eq. 1's terms, communication 1.78 s measured (the links' busy time; the busiest link alone 1.70 s) "
        "vs T_pull + T_push 1.64 s (+0.14 s; 1.71 s with TCP/IP and Ethernet headers at MTU 1500), the rest of a "
        "step 0.12 s vs T_compute + T_ps_update + T_sync 0.02 s (+0.10 s): most of the difference is in the "
        "communication (T_pull + T_push)"
    )


def test_an_unfaithful_point_leaves_the_claims_resting_on_it_not_judged():
    rows = [row("s", 3.0, x=1), row("s", 1.0, x=2, faithful=False), row("s", 2.0, x=3)]
    c = {"type": "monotone", "text": "falls", "direction": "falls"}
    (r,) = judge(c, rows)
    assert r.holds is None
    assert r.verdict == "not judged (point not faithful: a-s-2: machine starved, link at 40%)"
    assert r.detail == "1: 3.00 s -> 2: 1.00 s -> 3: 2.00 s"  # the numbers are still shown
    (r,) = judge({**c, "check": "ends"}, rows)  # the unfaithful middle point is not used: judged
    assert (r.holds, r.verdict) == (True, "holds")


def test_claims_are_judged_group_by_group_and_can_be_limited_to_groups():
    rows = [row("a", 1.0, "G1"), row("b", 2.0, "G1"), row("a", 2.0, "G2"), row("b", 1.0, "G2")]
    claims = [
        CLAIM.validate_python({"type": "best", "text": "{group}: a best", "series": "a"}),
        CLAIM.validate_python({"type": "varies", "text": "{group}: varies", "percent": 10, "groups": ["G2"]}),
    ]
    out = evaluate(claims, rows, REFERENCE)
    assert [(r.label, r.holds) for r in out] == [("G1: a best", True), ("G2: a best", False), ("G2: varies", True)]


@pytest.mark.parametrize(
    ("claim", "problem"),
    [
        ({"type": "fastest", "text": "x"}, "does not match any of the expected tags"),
        ({"type": "best", "text": "{grup} best", "series": "a"}, "unknown placeholder 'grup'"),
        ({"type": "best", "series": "a"}, "Field required"),
        ({"type": "varies", "text": "x", "percent": 10, "tolerance": 1}, "Extra inputs are not permitted"),
        ({"type": "monotone", "text": "x", "direction": "up"}, "Input should be 'rises' or 'falls'"),
    ],
)
def test_a_malformed_claim_is_refused(claim, problem):
    with pytest.raises(ValidationError, match=problem):
        CLAIM.validate_python(claim)


def test_points_at_different_compress_are_compared_in_paper_equivalent_seconds():
    """Fig. 13 compresses its slow points more (a wall-time knob): as run, those carry a smaller
    fraction of the paper's communication, so an ordering is judged on communication x compress +
    the rest; without a step split to convert, it is not judged at all."""

    def at(series: str, bct: float, compress: float, comm: float | None = None) -> Row:
        r = row(series, bct)
        s = {**r.summaries[0].as_dict(), "compress": compress}
        if comm is not None:
            s["step_split"] = {"comm_s": {"n": 5, "mean": comm}, "rest_s": {"n": 5, "mean": bct - comm}}
        r.summaries[0] = summary_of(s)
        return r

    rises = {"type": "monotone", "text": "r grows", "direction": "rises", "series": ["r1", "r5"]}
    # as run r=5 (compress 4) is the faster; paper-equivalent it is the slower: 1.5 x 4 + 0.5 = 6.5 s
    (r,) = judge(rises, [at("r1", 3.0, 1, comm=2.5), at("r5", 2.0, 4, comm=1.5)])
    assert (r.holds, r.unit, r.detail) == (True, "paper-equivalent", "r1 3.00 s -> r5 6.50 s (paper-equivalent s)")
    (r,) = judge(rises, [at("r1", 3.0, 1), at("r5", 2.0, 4)])
    assert (r.holds, r.verdict) == (None, "not measured") and "compress differs" in r.detail
    (r,) = judge(rises, [at("r1", 3.0, 4), at("r5", 2.0, 4)])  # one compress: as run
    assert (r.holds, r.unit) == (False, "as run")
    best = {"type": "best", "text": "{group}: r1 best", "series": "r1"}
    (r,) = judge(best, [at("r1", 3.0, 1, comm=2.5), at("r5", 2.0, 4, comm=1.5)])
    assert r.holds is True and r.detail == "r1 3.00 s, r5 6.50 s (paper-equivalent s)"
