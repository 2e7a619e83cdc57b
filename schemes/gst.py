"""HiPS's gradient synchronisation time (GST) formulas, Table 3 (HiPS paper §4).

GST in units of W/B (W: one server's gradient bytes, B: one NIC's rate), with N = n^h servers in
groups of n on h levels. The extracted paper prints 2·n^(h-1)/n^h; summing its own derivation's
geometric series (and the percentages it quotes) gives (N-1)/N, used here:

| | BCube | Torus |
| --- | --- | --- |
| HiPS | 2·((N-1)/N)/h | ((N-1)/N)/h |
| PSS/MS | 2·(n-1)/n | >= (n-1)/n (a lower bound) |
| RS | 2·((N-1)/N) | (N-1)/N |

The Torus column is the BCube column halved because its rings are cables that carry one ring
each way at once (`Kind.rings_both_ways`), so a network's column is chosen by that fact and its
(n, h) by its servers' address digits (`Kind.address_digits`): no kind names here.

Which of our schemes a row describes is each scheme's registry entry (`SchemeSpec.table3_row`):
`hips`/`hrs`/`hips-ms` with h parallel processes and no `ps` stage are HiPS (on a Torus only
with RS in every stage, the paper's Torus+HiPS: `hips_row`), `mesh` is MS and `ring` is RS.
Others (`ps`, `rat`, HiPS without parallel processes) have no formula.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from schemes.hips import stage_methods

Row = Literal["hips", "ms", "rs"]


@dataclass(frozen=True)
class Gst:
    """One Table 3 cell: GST in units of W/B, and whether it is only a lower bound."""

    units: float
    lower_bound: bool = False

    def seconds(self, w_bytes: float, b_mbps: float) -> float:
        """The cell for a gradient of `w_bytes` per server over NICs of `b_mbps` Mbit/s."""
        return self.units * w_bytes * 8 / (b_mbps * 1e6)


def table3(row: Row, n: int, h: int, both_ways: bool) -> Gst:
    """The Table 3 cell of `row` for n servers per group, h levels; `both_ways`: the Torus column."""
    if n < 2 or h < 1:
        raise ValueError(f"n = {n}, h = {h}: Table 3 needs n >= 2 servers per group and h >= 1 levels")
    big = n**h
    factor = 1 if both_ways else 2
    if row == "hips":
        return Gst(factor * (big - 1) / big / h)
    if row == "ms":
        return Gst(factor * (n - 1) / n, lower_bound=both_ways)
    if row == "rs":
        return Gst(factor * (big - 1) / big)
    raise ValueError(f"row {row!r}: Table 3 has hips, ms and rs")


def reduction(n: int, h: int, versus: Row, both_ways: bool = False) -> float:
    """How much less GST HiPS takes than `versus` (0.375 is 37.5%); both columns give the same."""
    return 1 - table3("hips", n, h, both_ways).units / table3(versus, n, h, both_ways).units


def hips_row(
    variant: str, stages: str | Sequence[str] | None, parallel: bool, levels: int, both_ways: bool
) -> Row | None:
    """A HiPS variant's row: HiPS with h parallel processes and no `ps` stage (on a Torus only RS in
    every stage, the paper's Torus+HiPS), else None."""
    if not parallel:
        return None
    methods = stage_methods(stages, levels, variant)
    if "ps" in methods or (both_ways and set(methods) != {"rs"}):
        return None
    return "hips"


def grid_shape(digits: Mapping[str, Sequence[int]]) -> tuple[int, int] | None:
    """(n, h) of a full address grid with n values on every level, else None (no Table 3 column)."""
    if not digits:
        return None
    lengths = {len(d) for d in digits.values()}
    if len(lengths) != 1:
        return None
    (h,) = lengths
    sizes = {len({d[i] for d in digits.values()}) for i in range(h)}
    if len(sizes) != 1:
        return None
    (n,) = sizes
    return (n, h) if n**h == len(digits) else None
