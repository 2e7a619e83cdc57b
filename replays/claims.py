"""The paper's claims about a figure, as data: declared in the figure file, judged on its points.

A figure file (workloads/figures/<figure>.yaml) lists `claims:`, each one of a few generic types
(documented in workloads/figures/README.md). The report evaluates them on the measured points,
group by group (or point by point for `bounded_by_model`), and writes every result into report.md
and report.json. Claims name points by the `series` labels of the same file, and the paper's
numbers by a key into results/reference/psnet-paper.yaml (the one place they are written); both
are checked when the figure file is loaded.

A result holds True or False only when every point it rests on was faithful; with an unfaithful
point it is "not judged (point not faithful: ...)" and with a missing one "not measured" (holds
None in both cases), the numbers shown all the same.

This module knows the figure's points only through the `Measured` protocol (report.Row), so the
figure schema can import the claim types without an import cycle.
"""

from __future__ import annotations

import functools
import itertools
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from emulation.wire import header_factor
from replays import decomposition as decomp
from replays.decomposition import implied_host_s

REFERENCE = Path(__file__).resolve().parent.parent / "results" / "reference" / "psnet-paper.yaml"
NOT_MEASURED = "not measured"
#: the units a speed-up is taken in (ClaimResult.unit)
AS_RUN, PAPER_EQ = "as run", "paper-equivalent"


class PointLike(decomp.PointLike, Protocol):
    """A figure's point as a claim reads it: fig13's (id, series, group) and its x."""

    @property
    def x(self) -> float | None: ...


class Measured(Protocol):
    """One point of a figure with its repetitions folded (report.Row), or one model's value of a
    model figure's point (modelfig_report.ModelValue): what every evaluator's points are to a claim."""

    @property
    def point(self) -> PointLike: ...
    @property
    def bct(self) -> float | None: ...
    @property
    def faithful(self) -> bool | None: ...
    @property
    def unfaithful_reason(self) -> str: ...
    @property
    def pred(self) -> dict: ...
    @property
    def placed(self) -> dict: ...
    @property
    def compress(self) -> float: ...
    @property
    def rest_s(self) -> float | None: ...
    @property
    def link_s(self) -> float | None: ...
    @property
    def mtu(self) -> int | None: ...
    @property
    def bct_paper(self) -> float | None: ...


class ClaimResult(BaseModel):
    """One claim judged on one group (or point): what report.md prints and report.json keeps."""

    model_config = ConfigDict(frozen=True)

    type: str = Field(description="the claim type in the figure file")
    label: str = Field(description="the paper's claim, in words")
    holds: bool | None = Field(description="None: not measured, or not judged (an unfaithful point)")
    verdict: str = Field(description="holds | does NOT hold | not measured | not judged (point not faithful: ...)")
    detail: str = Field(default="", description="the numbers behind the verdict")
    group: str = ""
    series: list[str] = Field(default_factory=list, description="the series the claim names, in its order")
    points: list[str] = Field(default_factory=list, description="ids of the points the verdict rests on")
    values: dict[str, float | None] = Field(default_factory=dict, description="key numbers (ratio, paper...)")
    compares_paper: bool = Field(default=False, description="judges agreement with the paper's number")
    unit: str = Field(
        default=AS_RUN, description="what a speed-up's BCTs are: 'as run' or 'paper-equivalent' (compress cancels)"
    )


# --- the paper's stated numbers -------------------------------------------------------------------
@functools.cache
def paper_reference(folder: Path = REFERENCE.parent) -> dict[str, Any]:
    """What the papers state in numbers (read once): every results/reference/*.yaml merged, so a
    figure's entry is found by its name (psnet-paper.yaml holds fig1..fig13, rat-paper.yaml
    rat-fig6 and rat-fig7, ...)."""
    merged: dict[str, Any] = {}
    for path in sorted(folder.glob("*.yaml")):
        merged.update(yaml.safe_load(path.read_text()) or {})
    return merged


def paper_value(key: str, reference: dict[str, Any] | None = None) -> Any:
    """The entry at a dotted key (e.g. `fig13.speedup_vs_fattree_r1`); KeyError naming the keys there."""
    node: Any = paper_reference() if reference is None else reference
    for i, part in enumerate(key.split(".")):
        if not isinstance(node, dict) or part not in node:
            where = ".".join(key.split(".")[:i]) or "(top level)"
            keys = ", ".join(node) if isinstance(node, dict) else "none: it is a value"
            raise KeyError(f"{key!r} is not in {REFERENCE.parent.name}/*.yaml (keys under {where}: {keys})")
        node = node[part]
    return node


def paper_number(key: str | None, group: str, reference: dict[str, Any]) -> float | None:
    """A paper number for a group: the entry itself, or its value for the group if it is per group."""
    if not key:
        return None
    v = paper_value(key, reference)
    if isinstance(v, dict):
        v = v.get(group)
    return float(v) if isinstance(v, int | float) else None


# --- judging --------------------------------------------------------------------------------------
def judged(
    claim: _Claim, label: str, used: Sequence[Measured], holds: bool, detail: str, group: str, **values: Any
) -> ClaimResult:
    """A result on measured points: its verdict, unless one of them was not faithful."""
    bad = [r for r in used if r.faithful is False]
    verdict, result = ("holds" if holds else "does NOT hold"), holds
    if bad:
        why = "; ".join(f"{r.point.id}: {r.unfaithful_reason}" for r in bad)
        verdict, result = f"not judged (point not faithful: {why})", None
    return ClaimResult(
        type=claim.type,
        label=label,
        holds=result,
        verdict=verdict,
        detail=detail,
        group=group,
        series=claim.named_series(),
        points=[r.point.id for r in used],
        values=values,
    )


def not_measured(claim: _Claim, label: str, group: str, detail: str = "", **values: Any) -> ClaimResult:
    """A result on points that were not (all) measured: nothing to judge."""
    return ClaimResult(
        type=claim.type,
        label=label,
        holds=None,
        verdict=NOT_MEASURED,
        detail=detail,
        group=group,
        series=claim.named_series(),
        values=values,
    )


def _measured(rows: Sequence[Measured]) -> list[Measured]:
    return [r for r in rows if r.bct]


def _of(rows: Sequence[Measured], series: str) -> Measured | None:
    return next((r for r in rows if r.point.series == series and r.bct), None)


def _listing(rows: Sequence[Measured], bct: Callable[[Measured], float] = lambda r: r.bct) -> str:
    return ", ".join(f"{r.point.series} {bct(r):.2f} s" for r in rows)


View = tuple[Callable[[Measured], float], str]
MIXED = "compress differs between these points and one has no step split to convert it to paper-equivalent seconds"


def bct_view(rows: Sequence[Measured]) -> View | None:
    """How a claim reads several points' BCTs, and the unit: as run where the points share one
    compress; in paper-equivalent seconds (communication x compress + the rest) where their
    compress differs, since as run each carries a different fraction of the paper's communication
    (Fig. 13 compresses its slow FatTree points more, a wall-time knob); None where compress
    differs and a point has no step split to convert."""
    if len({r.compress for r in rows}) <= 1:
        return (lambda r: r.bct), AS_RUN
    if all(r.bct_paper for r in rows):
        return (lambda r: float(r.bct_paper)), PAPER_EQ
    return None


def _in_unit(result: ClaimResult, unit: str) -> ClaimResult:
    """The result with its unit, and the detail saying so where it is not the BCT as run."""
    if unit == AS_RUN:
        return result
    return result.model_copy(update={"unit": unit, "detail": f"{result.detail} (paper-equivalent s)"})


def _by_x(rows: Sequence[Measured]) -> list[Measured]:
    return sorted(_measured(rows), key=lambda r: r.point.x or 0)


# --- the claim types ------------------------------------------------------------------------------
class _Claim(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str
    text: str = Field(description="the claim in words; {group} (and {series}, {x} per point) filled in")
    groups: list[str] | None = Field(default=None, description="judge only in these groups (default: all)")

    @field_validator("text")
    @classmethod
    def _placeholders_known(cls, v: str) -> str:
        try:
            v.format(group="g", series="s", than="t", x=1.0)
        except (KeyError, IndexError, ValueError) as err:
            raise ValueError(
                f"unknown placeholder {err} in {v!r}; use {{group}}, {{series}}, {{than}} or {{x}}"
            ) from None
        return v

    def named_series(self) -> list[str]:
        """The series labels this claim names (checked against the figure's points at load)."""
        return []

    def label(self, group: str, series: str | None = None, x: float | None = None) -> str:
        """The text with {group}, {series} (the point's, else the first the claim names), {than}, {x}."""
        if series is None:
            series = next(iter(self.named_series()), "")
        return self.text.format(group=group, series=series, than=getattr(self, "than", ""), x=x)

    def evaluate(self, group: str, rows: Sequence[Measured], reference: dict[str, Any]) -> list[ClaimResult]:
        """The claim judged on one group's rows (figure order)."""
        raise NotImplementedError


class FasterThan(_Claim):
    """`series` has a lower BCT than `than` (speed-up = BCT(than) / BCT(series) > 1). With `paper`
    (a key into the reference file: one number, or one per group) a second result judges the
    speed-up within `tolerance` of the paper's, explained with the model where it is not."""

    type: Literal["faster_than"]
    text: str = "{group}: {series} faster than {than}"
    series: str
    than: str
    paper: str | None = Field(default=None, description="key into results/reference/psnet-paper.yaml")
    tolerance: float = Field(default=0.15, gt=0, description="relative, for the comparison with the paper")
    unit: str = Field(default="s", description="the figure's metric's unit (s; MB for metric wire)")

    def named_series(self) -> list[str]:
        return [self.series, self.than]

    def evaluate(self, group: str, rows: Sequence[Measured], reference: dict[str, Any]) -> list[ClaimResult]:
        label = self.label(group)
        fast, slow = _of(rows, self.series), _of(rows, self.than)
        paper = paper_number(self.paper, group, reference)
        if not (fast and slow):
            return [not_measured(self, label, group, paper=paper)]
        as_run = slow.bct / fast.bct
        paper_eq = paper_equivalent_ratio(fast, slow)
        ratio, unit = (as_run, AS_RUN) if paper_eq is None else (paper_eq, PAPER_EQ)
        if unit == PAPER_EQ:
            detail = (
                f"{self.than} {slow.bct_paper:.2f} s / {self.series} {fast.bct_paper:.2f} s = {ratio:.2f}x "
                "in paper-equivalent seconds "
                f"(as run: {slow.bct:.2f} s / {fast.bct:.2f} s = {as_run:.2f}x)"
            )
        else:
            detail = f"{self.than} {slow.bct:.2f} {self.unit} / {self.series} {fast.bct:.2f} {self.unit} = {ratio:.2f}x"
        detail += f" (paper {paper}x)" if paper else ""
        first = judged(self, label, [fast, slow], ratio > 1, detail, group, ratio=ratio, as_run=as_run, paper=paper)
        out = [first.model_copy(update={"unit": unit})]
        if paper:
            off = abs(ratio - paper) / paper
            r = judged(
                self,
                f"{group}: speed-up within {self.tolerance:.0%} of the paper's {paper}x",
                [fast, slow],
                off <= self.tolerance,
                self._explain(fast, slow, ratio, paper, off, unit),
                group,
                ratio=ratio,
                as_run=as_run,
                paper=paper,
                off=off,
            )
            out.append(r.model_copy(update={"compares_paper": True, "unit": unit}))
        return out

    def _explain(
        self, fast: Measured, slow: Measured, ratio: float, paper: float, off: float, unit: str = AS_RUN
    ) -> str:
        """Our speed-up beside the model's, in the same unit (paper-equivalent: the model's
        communication x compress, its host time as it is); where it is off by more than the
        tolerance, the rest of a step (compute, PS update, TF overhead) that the paper's ratio
        implies, beside ours."""
        pp, pf = fast.pred, slow.pred
        if self.unit != "s":  # not a time: no model of it to set beside
            return f"measured {ratio:.2f}x"
        if pp.get("gst_s") and pf.get("gst_s"):  # scheme jobs: the schedules' own expectation
            return (
                f"measured {ratio:.2f}x; the schedules (bytes on the busiest cable over its rate) give "
                f"{pf['gst_s'] / pp['gst_s']:.2f}x ({self.than} {pf['gst_s']:.2f} s, {self.series} {pp['gst_s']:.2f} s)"
            )
        if not (pp.get("t_comm_s") and pf.get("t_comm_s")):
            return f"measured {ratio:.2f}x"

        def bct_max(pred: dict, point: Measured) -> float:
            extra = pred["t_comm_s"] * (point.compress - 1) if unit == PAPER_EQ else 0.0
            return pred["bct_max_s"] + extra

        cp, cf = pp["t_comm_s"], pf["t_comm_s"]
        model = bct_max(pf, slow) / bct_max(pp, fast)
        detail = f"measured {ratio:.2f}x; the paper's model (S/P per PS) gives {model:.2f}x"
        lp, lf = fast.placed, slow.placed
        if lp.get("t_comm_s") and lf.get("t_comm_s"):
            cp, cf = lp["t_comm_s"], lf["t_comm_s"]
            detail += (
                f", with our measured PS byte split (largest PS {lf['largest_ps_share']:.0%}) "
                f"{bct_max(lf, slow) / bct_max(lp, fast):.2f}x"
            )
        if off > self.tolerance:
            # in paper-equivalent seconds (replays.decomposition): communication x compress, host time as it is
            c = fast.compress
            h_paper = implied_host_s(cp * c, cf * c, paper)
            rests = [r for r in (fast.rest_s, slow.rest_s) if r is not None]
            ours = (
                f"the rest of our step (compute, PS update, TF overhead: BCT minus the links' measured "
                f"busy time) is {statistics.fmean(rests):.2f} s"
                if len(rests) == 2
                else "the rest of our step was not measured in these runs (no transfer phases recorded)"
            )
            implied = (
                f"the paper's {paper}x at this S/B implies {h_paper:.2f} s"
                if h_paper is not None
                else f"no host time gives the paper's {paper}x at this S/B (the model's ratio is lower even without)"
            )
            detail += (
                f". Communication per step (model, paper-equivalent) is {cf * c:.2f} s ({self.than}) vs "
                f"{cp * c:.2f} s ({self.series}), a {cf / cp:.1f}x ratio; {ours}, while {implied}: "
                "a longer host time per step pulls the ratio toward 1 (see the speed-up curve below)"
            )
        return detail


def paper_equivalent_ratio(fast: Measured, slow: Measured) -> float | None:
    """The speed-up in paper-equivalent seconds (communication x compress + the rest, replays.decomposition)
    where either point ran compressed and both split their steps; else None (the BCTs as run are
    the paper's units already, or cannot be converted). A compressed run's own ratio mixes 1/compress
    of the paper's communication with full host time, so it moves with compress; this one does not."""
    if fast.compress == 1 and slow.compress == 1:
        return None
    if not (fast.bct_paper and slow.bct_paper):
        return None
    return slow.bct_paper / fast.bct_paper


#: ties within this relative amount count as equal where a check allows ties (the models' floats)
TIE = 1e-9


def _x_name(r: Measured) -> str:
    """What x is called in a per-x detail: the point's `x_name` where it has one (a model
    figure's W), else x."""
    return str(getattr(r.point, "x_name", "x"))


def _at_each_x(rows: Sequence[Measured], names: Sequence[str]) -> dict[float, dict[str, Measured]]:
    """Per x (ascending), the measured point of each named series, at every x all of them have:
    what a `per_x` claim judges (a model figure's W, where every series has one point per W)."""
    by_x: dict[float, dict[str, Measured]] = {}
    for r in _measured(rows):
        if r.point.x is not None and r.point.series in names:
            by_x.setdefault(r.point.x, {}).setdefault(r.point.series, r)
    return {x: by_x[x] for x in sorted(by_x) if all(n in by_x[x] for n in names)}


class Monotone(_Claim):
    """BCT rises or falls along `series` (in that order) or, without it, along x. `every_step`: each
    measured step strictly; `ends`: the last measured point against the first; `no_reversal`: no
    step the other way (ties allowed); `no_reversal_ends`: that, and the last strictly beyond the
    first. `per_x` (with `series`): judged at every x all the series have, the verdict over all of
    them, the `ends` part at the largest x (a model figure: the order at every W, a gap at scale)."""

    type: Literal["monotone"]
    direction: Literal["rises", "falls"]
    series: list[str] | None = Field(default=None, description="the order; default: the group's points by x")
    check: Literal["every_step", "ends", "no_reversal", "no_reversal_ends"] = "every_step"
    per_x: bool = Field(default=False, description="judge the order of `series` at every x they share")

    @model_validator(mode="after")
    def _per_x_needs_series(self) -> Monotone:
        if self.per_x and not self.series:
            raise ValueError("per_x: judging at every x needs `series` (the order at each x)")
        return self

    def named_series(self) -> list[str]:
        return list(self.series or [])

    def _holds(self, values: Sequence[float], ends: bool = True) -> bool:
        """The check on one sequence of values; `ends` False leaves the ends part out (per_x: it
        is judged at the largest x only)."""
        rises = self.direction == "rises"
        strict = (lambda a, b: a < b) if rises else (lambda a, b: a > b)
        if self.check == "every_step":
            return all(strict(a, b) for a, b in itertools.pairwise(values))
        if self.check == "ends":
            return strict(values[0], values[-1]) if ends else True
        no_back = (lambda a, b: a <= b * (1 + TIE)) if rises else (lambda a, b: a >= b * (1 - TIE))
        ok = all(no_back(a, b) for a, b in itertools.pairwise(values))
        if self.check == "no_reversal_ends" and ends:
            first, last = values[0], values[-1]
            ok = ok and (last > first * (1 + TIE) if rises else first > last * (1 + TIE))
        return ok

    def evaluate(self, group: str, rows: Sequence[Measured], reference: dict[str, Any]) -> list[ClaimResult]:
        label = self.label(group)
        if self.per_x:
            return [self._per_x(group, label, rows)]
        if self.series:
            seq = [r for r in (_of(rows, s) for s in self.series) if r]
            name: Callable[[Measured], str] = lambda r: r.point.series  # noqa: E731
        else:
            seq = _by_x(rows)
            name = lambda r: f"{r.point.x:g}:"  # noqa: E731
        view = bct_view(seq)
        if len(seq) < 2 or view is None:
            return [not_measured(self, label, group, _listing(seq) if view else MIXED)]
        bct, unit = view
        used = seq if self.check != "ends" else [seq[0], seq[-1]]
        holds = self._holds([bct(r) for r in seq])
        detail = " -> ".join(f"{name(r)} {bct(r):.2f} s" for r in seq)
        return [_in_unit(judged(self, label, used, holds, detail, group), unit)]

    def _per_x(self, group: str, label: str, rows: Sequence[Measured]) -> ClaimResult:
        """The order of `series` at every x they share; the numbers at the largest x."""
        names = self.series or []
        at = _at_each_x(rows, names)
        if len(names) < 2 or not at:
            return not_measured(self, label, group)
        xs = list(at)
        holds = all(self._holds([at[x][s].bct for s in names], ends=x == xs[-1]) for x in xs)
        last = at[xs[-1]]
        sign = " < " if self.direction == "rises" else " > "
        where = f"{_x_name(last[names[0]])}={xs[-1]:g}"
        detail = f"at {where}: " + sign.join(f"{s} {last[s].bct:.3f} s" for s in names)
        used = [at[x][s] for x in xs for s in names]
        return judged(self, label, used, holds, detail, group)


class WithinPercentOf(_Claim):
    """`series`'s BCT within `percent` of `of`'s (|a - b| / b). `per_x`: at every x both have, the
    largest gap judged (a model figure: two lines that overlap over the whole range)."""

    type: Literal["within_percent_of"]
    series: str
    of: str
    percent: float = Field(gt=0)
    per_x: bool = Field(default=False, description="judge the largest gap over every x both series have")

    def named_series(self) -> list[str]:
        return [self.series, self.of]

    def evaluate(self, group: str, rows: Sequence[Measured], reference: dict[str, Any]) -> list[ClaimResult]:
        label = self.label(group)
        if self.per_x:
            return [self._per_x(group, label, rows)]
        a, b = _of(rows, self.series), _of(rows, self.of)
        view = bct_view([a, b]) if a and b else None
        if not (a and b and view):
            return [not_measured(self, label, group, MIXED if a and b else "")]
        bct, unit = view
        d = abs(bct(a) - bct(b)) / bct(b)
        detail = f"{bct(b):.2f} s vs {bct(a):.2f} s ({d:.1%})"
        return [_in_unit(judged(self, label, [b, a], d <= self.percent / 100, detail, group, difference=d), unit)]

    def _per_x(self, group: str, label: str, rows: Sequence[Measured]) -> ClaimResult:
        at = _at_each_x(rows, [self.series, self.of])
        if not at:
            return not_measured(self, label, group)
        gaps = {x: abs(p[self.series].bct - p[self.of].bct) / p[self.of].bct for x, p in at.items()}
        worst = max(gaps, key=lambda x: gaps[x])
        where = f"{_x_name(at[worst][self.of])}={worst:g}"
        detail = f"largest gap {gaps[worst] * 100:.2f}% at {where}"
        used = [p[s] for p in at.values() for s in (self.of, self.series)]
        return judged(
            self, label, used, gaps[worst] <= self.percent / 100, detail, group, difference=gaps[worst], x=worst
        )


class Best(_Claim):
    """`series` has the lowest BCT of the group's measured points (at least two)."""

    type: Literal["best"]
    series: str

    def named_series(self) -> list[str]:
        return [self.series]

    def evaluate(self, group: str, rows: Sequence[Measured], reference: dict[str, Any]) -> list[ClaimResult]:
        label = self.label(group)
        rs = _measured(rows)
        view = bct_view(rs)
        if len(rs) < 2 or not _of(rs, self.series) or view is None:
            return [not_measured(self, label, group, _listing(rs) if view else MIXED)]
        bct, unit = view
        best = min(rs, key=bct)
        return [_in_unit(judged(self, label, rs, best.point.series == self.series, _listing(rs, bct), group), unit)]


class Varies(_Claim):
    """The group's measured BCTs spread by more than `percent` ((max - min) / min)."""

    type: Literal["varies"]
    percent: float = Field(gt=0)

    def evaluate(self, group: str, rows: Sequence[Measured], reference: dict[str, Any]) -> list[ClaimResult]:
        label = self.label(group)
        rs = _measured(rows)
        view = bct_view(rs)
        if len(rs) < 2 or view is None:
            return [not_measured(self, label, group, _listing(rs) if view else MIXED)]
        bct, unit = view
        lo, hi = min(map(bct, rs)), max(map(bct, rs))
        spread = (hi - lo) / lo
        detail = f"{_listing(rs, bct)} (spread {spread:.0%})"
        return [_in_unit(judged(self, label, rs, spread > self.percent / 100, detail, group, spread=spread), unit)]


class Flattens(_Claim):
    """Along x, the last step gains less than the first (at least three measured points)."""

    type: Literal["flattens"]

    def evaluate(self, group: str, rows: Sequence[Measured], reference: dict[str, Any]) -> list[ClaimResult]:
        label = self.label(group)
        rs = _by_x(rows)
        view = bct_view(rs)
        if len(rs) < 3 or view is None:
            return [not_measured(self, label, group, "" if view else MIXED)]
        bct, unit = view
        first, last = bct(rs[0]) - bct(rs[1]), bct(rs[-2]) - bct(rs[-1])
        used = [rs[i] for i in sorted({0, 1, len(rs) - 2, len(rs) - 1})]
        detail = f"first step {-first:+.2f} s, last step {-last:+.2f} s"  # the BCT's change: a gain is -
        result = judged(self, label, used, last < first, detail, group, first_gain_s=first, last_gain_s=last)
        return [_in_unit(result, unit)]


class BoundedByModel(_Claim):
    """Every point's BCT within the model's [BCT_min, BCT_max] with `slack` either side; where not,
    the model with the measured per-PS byte split is set beside it. One result per point.

    A compressed point (compress > 1) with a step split is judged in paper-equivalent seconds: its
    measured communication x compress + the rest against the model's T_pull and T_push x compress
    + its host terms (decomp.paper_bounds). As run, the step's fixed host cost weighs compress times
    more against the shrunken transfers, so the verdict would move with a wall-time knob; the
    bounds as run stay in the detail."""

    type: Literal["bounded_by_model"]
    slack: float = Field(default=0.05, ge=0)

    def evaluate(self, group: str, rows: Sequence[Measured], reference: dict[str, Any]) -> list[ClaimResult]:
        out = []
        for r in rows:
            label = self.label(group, series=r.point.series, x=r.point.x)
            if not (r.bct and r.pred.get("bct_min_s")):
                out.append(not_measured(self, label, group))
                continue
            lo, hi = r.pred["bct_min_s"], r.pred["bct_max_s"]
            detail = f"{lo:.2f} <= {r.bct:.2f} <= {hi:.2f} s"
            bct, unit, placed_max = r.bct, AS_RUN, r.placed.get("bct_max_s")
            paper = decomp.paper_bounds(r.pred, r.compress) if r.compress != 1 and r.bct_paper else None
            if paper:
                bct, unit, (lo, hi) = float(r.bct_paper), PAPER_EQ, paper
                placed = decomp.paper_bounds(r.placed, r.compress) if placed_max else None
                placed_max = placed[1] if placed else None
                detail = f"{lo:.2f} <= {bct:.2f} <= {hi:.2f} paper-equivalent s (as run {detail})"
            inside = lo * (1 - self.slack) <= bct <= hi * (1 + self.slack)
            detail += f" ({self.slack:.0%} slack)"
            if not inside and placed_max:  # the gap, explained by the PSs' byte split
                detail += (
                    f"; with the measured PS byte split (largest PS holds "
                    f"{r.placed['largest_ps_share']:.0%} instead of 1/P) the model gives "
                    f"BCT_max {placed_max:.2f}{' paper-equivalent' if unit == PAPER_EQ else ''} s "
                    f"({bct / placed_max:.2f}x measured)"
                )
            if not inside:
                detail += _gap_by_term(r, bct, unit, r.placed if placed_max else r.pred)
            result = judged(self, label, [r], inside, detail, group, bct_min_s=lo, bct_max_s=hi)
            out.append(result.model_copy(update={"unit": unit}))
        return out


def _gap_by_term(r: Measured, bct: float, unit: str, model: dict) -> str:
    """Where a point outside its bounds differs from the model, by Eq. 1's terms: the measured
    communication (BCT minus the rest of a step; runs.steptime's links' busy time) against the
    model's T_pull + T_push, and the rest (compute, PS update, TF overhead) against its T_compute +
    T_ps_update + T_sync; the larger difference is named. Empty without a step split or the terms.
    In paper-equivalent seconds (`unit`), the communication is x compress on both sides.

    Two parts of a communication excess are the method's, not the network's, and are shown where
    the run has them: the model counts payload, the wire carries TCP/IP and Ethernet headers too
    (T_pull + T_push over emulation.wire.header_factor at the run's MTU: 4.6% at 1500), and the
    step's communication is the union of the windows in which any link was busy, where the model's
    terms are one link's: the busiest link's own busy time (`link_s`) sets them side by side."""
    rest, t_comm, t_max = r.rest_s, model.get("t_comm_s"), model.get("bct_max_s")
    if rest is None or t_comm is None or t_max is None:
        return ""
    c = r.compress if unit == PAPER_EQ else 1.0
    comm, model_comm, model_host = bct - rest, t_comm * c, t_max - t_comm
    d_comm, d_host = comm - model_comm, rest - model_host
    where = (
        "the communication (T_pull + T_push)"
        if abs(d_comm) >= abs(d_host)
        else "the host terms (T_compute + T_ps_update + T_sync)"
    )
    link = "" if r.link_s is None else f"; the busiest link alone {r.link_s * c:.2f} s"
    wire = ""
    if r.mtu:
        wire = f"; {model_comm / header_factor(r.mtu):.2f} s with TCP/IP and Ethernet headers at MTU {r.mtu}"
    return (
        f"; by Eq. 1's terms, communication {comm:.2f} s measured (the links' busy time{link}) vs T_pull + T_push "
        f"{model_comm:.2f} s ({d_comm:+.2f} s{wire}), the rest of a step {rest:.2f} s vs T_compute + T_ps_update + "
        f"T_sync {model_host:.2f} s ({d_host:+.2f} s): most of the difference is in {where}"
    )


Claim = Annotated[
    FasterThan | Monotone | WithinPercentOf | Best | Varies | Flattens | BoundedByModel,
    Field(discriminator="type"),
]


def check_claim(claim: _Claim, points: Sequence[PointLike]) -> str | None:
    """Why a claim cannot be judged on a figure's points ("field: problem; fix"), or None."""
    series = list(dict.fromkeys(p.series for p in points))
    groups = list(dict.fromkeys(p.group for p in points))
    for s in claim.named_series():
        if s not in series:
            return f"series: no point has series {s!r}; use one of {', '.join(map(repr, series))}"
    for g in claim.groups or []:
        if g not in groups:
            return f"groups: no point has group {g!r}; use one of {', '.join(map(repr, groups))}"
    if isinstance(claim, FasterThan) and claim.paper:
        try:
            paper_value(claim.paper)
        except KeyError as err:
            return f"paper: {err.args[0]}"
    try:
        if isinstance(claim, BoundedByModel):  # one label per point
            for p in points:
                claim.label(p.group, series=p.series, x=p.x)
        else:
            for g in groups:
                claim.label(g)
    except (TypeError, ValueError) as err:
        return f"text: {err} formatting {claim.text!r}; points need x for {{x}}"
    return None


def evaluate(claims: Sequence[_Claim], rows: Sequence[Measured], reference: dict[str, Any]) -> list[ClaimResult]:
    """Every claim on every group of the rows (group by group, claims in file order)."""
    out: list[ClaimResult] = []
    for group in dict.fromkeys(r.point.group for r in rows):
        in_group = [r for r in rows if r.point.group == group]
        for c in claims:
            if c.groups is None or group in c.groups:
                out += c.evaluate(group, in_group, reference)
    return out
