"""The BCT statistics of a run (runs.stats) against hand-computed values and the published
two-sided 95% Student t quantiles."""

from __future__ import annotations

import math

import pytest

from runs.stats import describe, t95

#: t_{0.975, dof} as statistics tables print it (scipy.stats.t.ppf(0.975, dof), rounded)
PUBLISHED_T95 = {1: 12.706, 4: 2.776, 7: 2.365, 11: 2.201, 19: 2.093, 30: 2.042, 40: 2.021, 120: 1.980}


@pytest.mark.parametrize("dof", sorted(PUBLISHED_T95))
def test_t95_is_the_published_quantile(dof):
    assert t95(dof) == pytest.approx(PUBLISHED_T95[dof], abs=5e-4)


@pytest.mark.parametrize(("dof", "exact"), [(35, 2.030), (50, 2.009), (100, 1.984)])
def test_t95_between_entries_errs_wide(dof, exact):
    """Beyond 30 the table is sparse: the lower entry's quantile, wider than the exact one by < 1%."""
    assert exact <= t95(dof) <= exact * 1.01


def test_t95_edges():
    assert math.isnan(t95(0))
    assert t95(121) == 1.96 and t95(10_000) == 1.96


def test_describe_five_values_by_hand():
    s = describe([5.0, 1.0, 4.0, 2.0, 3.0])
    sd = math.sqrt(((1 - 3) ** 2 + (2 - 3) ** 2 + 0 + (4 - 3) ** 2 + (5 - 3) ** 2) / 4)  # sample sd: sqrt(2.5)
    assert s["n"] == 5
    assert s["mean"] == pytest.approx(3.0)
    assert s["p50"] == 3.0
    assert s["p95"] == 5.0  # nearest rank: ceil(0.95 * 5) = 5th value
    assert (s["min"], s["max"]) == (1.0, 5.0)
    assert s["ci95"] == pytest.approx(2.776 * sd / math.sqrt(5))  # 1.9632


def test_describe_percentile_is_nearest_rank():
    values = [float(i) for i in range(1, 21)]  # 1..20
    s = describe(values)
    assert s["p95"] == 19.0  # ceil(0.95 * 20) = 19th value
    assert s["p50"] == 10.5
    assert s["ci95"] == pytest.approx(2.093 * math.sqrt(35.0) / math.sqrt(20))  # sd of 1..20 = sqrt(35)


def test_describe_one_value_and_none():
    one = describe([2.5])
    assert one["n"] == 1 and one["mean"] == 2.5 and one["p95"] == 2.5
    assert math.isnan(one["ci95"])
    assert describe([]) == {"n": 0}
