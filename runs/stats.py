"""Summary statistics of a run's per-step BCTs: mean, median, p95 and the 95% confidence interval.

The interval is Student's t (runs have 5-50 measured steps, too few for the normal quantile);
its quantiles come from a table rather than scipy, which the testbed does not otherwise need.
"""

from __future__ import annotations

import math
import statistics

#: two-sided 95% Student t quantiles t_{0.975, dof} (every dof to 30, then 40, 60, 120)
_T95 = {
    1: 12.706,
    2: 4.303,
    3: 3.182,
    4: 2.776,
    5: 2.571,
    6: 2.447,
    7: 2.365,
    8: 2.306,
    9: 2.262,
    10: 2.228,
    11: 2.201,
    12: 2.179,
    13: 2.160,
    14: 2.145,
    15: 2.131,
    16: 2.120,
    17: 2.110,
    18: 2.101,
    19: 2.093,
    20: 2.086,
    21: 2.080,
    22: 2.074,
    23: 2.069,
    24: 2.064,
    25: 2.060,
    26: 2.056,
    27: 2.052,
    28: 2.048,
    29: 2.045,
    30: 2.042,
    40: 2.021,
    60: 2.000,
    120: 1.980,
}
#: beyond the table: the normal quantile
_Z95 = 1.960


def t95(dof: int) -> float:
    """Two-sided 95% Student t quantile for `dof` degrees of freedom (NaN below 1). Exact to three
    decimals up to 30; between the later entries the lower dof's, which is larger, so the interval
    errs wide rather than narrow; beyond 120 the normal quantile."""
    if dof <= 0:
        return math.nan
    if dof > max(_T95):
        return _Z95
    return _T95[max(k for k in _T95 if k <= dof)]


def describe(values: list[float]) -> dict[str, float]:
    """n, mean, p50, p95 (nearest rank), min, max and the 95% confidence half-width of the mean
    (NaN for one value: no spread to estimate); {"n": 0} when there is nothing to describe."""
    if not values:
        return {"n": 0}
    v = sorted(values)
    n = len(v)
    sd = statistics.stdev(v) if n > 1 else 0.0
    return {
        "n": n,
        "mean": statistics.fmean(v),
        "p50": statistics.median(v),
        "p95": v[min(n - 1, math.ceil(0.95 * n) - 1)],
        "ci95": t95(n - 1) * sd / math.sqrt(n) if n > 1 else math.nan,
        "min": v[0],
        "max": v[-1],
    }
