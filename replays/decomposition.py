"""A speed-up against the paper's, by method: each BCT split into parts that add up, and the ratio
as a function of per-step host time (Fig. 13: PSNet vs FatTree r=1).

**One unit: paper-equivalent seconds.** A run divides link rates by `scale` and model bytes by
`scale x compress`, so its communication takes 1/compress of the paper's time; host time (compute,
serialisation, PS update, TF overhead) is what this machine spent and is not rescaled. So:

    communication (paper-eq.) = measured communication x compress
    BCT (paper-eq.)           = communication (paper-eq.) + rest

The communication is *measured* (runs.steptime: the links' busy time within each step, bytes /
rate of the busiest link per 0.25-s window), never the model's, so the rest is BCT minus a part
of itself: never negative.

**The ratio curve.** With the same host time h per step on both topologies,
ratio(h) = (T_slow + h) / (T_fast + h), where T is the model's communication (bct_model via
runs.predict: T_push + T_pull, paper-equivalent). It falls from T_slow / T_fast at h = 0
toward 1. The paper's ratio r implies h* = (T_slow - r T_fast) / (r - 1) (none when r is above
the model's ratio at h = 0). Measured points sit at (mean rest of the two runs, their ratio in
paper-equivalent seconds); a second, dotted curve uses the measured communication instead of the
model's. Nothing here is fitted to the paper's number.

**Host-time modes.** A run states its mode in its summary (`host_time_mode`, or `host_time`:
"scaled", the run's own host time at the scaled model size, by default; "full" where every step
is padded to the full-size job's host time): points of each mode are paired and drawn apart,
labelled.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from pydantic import BaseModel, Field

from models import bct_model
from topologies.files import atomic_path

#: the mode of runs that state none: their host time is the scaled job's own
DEFAULT_MODE = "scaled"


class PointLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def series(self) -> str: ...
    @property
    def group(self) -> str: ...


class RowLike(Protocol):
    """A figure's point with its repetitions (report.Row)."""

    @property
    def point(self) -> PointLike: ...
    @property
    def bct(self) -> float | None: ...
    @property
    def summaries(self) -> list[dict]: ...
    @property
    def pred(self) -> dict: ...


def host_time_mode(summary: dict) -> str:
    """The run's host-time mode (see the module docstring)."""
    mode = summary.get("host_time_mode") or summary.get("host_time")
    if isinstance(mode, dict):
        mode = mode.get("mode")
    return str(mode) if mode else DEFAULT_MODE


def implied_host_s(t_fast: float, t_slow: float, ratio: float) -> float | None:
    """Host time per step that turns (t_slow + h) / (t_fast + h) into `ratio`; None if no h >= 0 does."""
    if ratio <= 1 or t_fast <= 0:
        return None
    h = (t_slow - ratio * t_fast) / (ratio - 1)
    return h if h >= 0 else None


def ratio_at(t_fast: float, t_slow: float, host_s: float) -> float:
    return (t_slow + host_s) / (t_fast + host_s)


class Decomposition(BaseModel):
    """One point's BCT in paper-equivalent seconds: measured communication + the rest."""

    id: str
    series: str
    group: str
    mode: str
    compress: float
    bct_s: float = Field(description="measured BCT, emulated seconds (the mean over repetitions)")
    comm_s: float = Field(description="measured communication, paper-equivalent s (emulated x compress)")
    rest_s: float = Field(description="measured BCT minus measured communication (host time, not rescaled)")
    model_comm_s: float | None = Field(description="the model's T_push + T_pull, paper-equivalent s")
    link_s: float | None = Field(
        default=None,
        description="busy time of the one link busy longest in each step, paper-equivalent s (runs.steptime)",
    )

    @property
    def bct_paper_s(self) -> float:
        return self.comm_s + self.rest_s


def has_split(summary: dict) -> bool:
    """The run recorded its steps' measured communication and rest (runs.steptime)."""
    return bool((summary.get("step_split") or {}).get("comm_s", {}).get("n"))


def paper_bct_s(summary: dict) -> float | None:
    """One run's mean BCT in paper-equivalent seconds (communication x compress + the rest), None
    without a split."""
    if not has_split(summary):
        return None
    split = summary["step_split"]
    return split["comm_s"]["mean"] * float(summary.get("compress") or 1.0) + split["rest_s"]["mean"]


def paper_bounds(pred: dict, compress: float) -> tuple[float, float] | None:
    """The model's (BCT_min, BCT_max) in paper-equivalent seconds: T_pull and T_push x compress,
    the host terms (T_compute, T_ps_update, T_sync) as they are; None without the model's terms."""
    if not all(pred.get(k) is not None for k in ("t_pull_s", "t_push_s", "t_compute_s", "t_ps_update_s")):
        return None
    terms = (
        pred["t_pull_s"] * compress,
        pred["t_compute_s"],
        pred["t_push_s"] * compress,
        pred["t_ps_update_s"],
        pred.get("t_sync_s") or 0.0,
    )
    return bct_model.bct_min_s(*terms), bct_model.bct_max_s(*terms)


def decompose(row: RowLike) -> Decomposition | None:
    """The point's decomposition (means over its repetitions), None without measured splits."""
    splits = [s for s in row.summaries if has_split(s)]
    if not splits or row.bct is None:
        return None
    compress = float(splits[0].get("compress") or 1.0)
    comm = statistics.fmean(s["step_split"]["comm_s"]["mean"] for s in splits)
    rest = statistics.fmean(s["step_split"]["rest_s"]["mean"] for s in splits)
    model = row.pred.get("t_comm_s")
    links = [s["step_split"]["link_s"]["mean"] for s in splits if (s["step_split"].get("link_s") or {}).get("n")]
    return Decomposition(
        id=row.point.id,
        series=row.point.series,
        group=row.point.group,
        mode=host_time_mode(splits[0]),
        compress=compress,
        bct_s=comm + rest,
        comm_s=comm * compress,
        rest_s=rest,
        model_comm_s=None if model is None else model * compress,
        link_s=statistics.fmean(links) * compress if len(links) == len(splits) else None,
    )


class MeasuredRatio(BaseModel):
    mode: str
    host_s: float = Field(description="mean measured rest per step of the two points")
    ratio: float = Field(description="slow / fast in paper-equivalent seconds")
    ratio_emulated: float = Field(description="slow / fast of the measured BCTs as run (the headline's)")
    comm_fast_s: float
    comm_slow_s: float


class RatioCurve(BaseModel):
    """One group's speed-up as a function of per-step host time, with what was measured on it."""

    group: str
    fast: str
    slow: str
    paper: float | None
    model_comm_fast_s: float | None = Field(description="paper-equivalent s")
    model_comm_slow_s: float | None
    implied_host_s: float | None = Field(description="host time at which the model gives the paper's ratio")
    measured: list[MeasuredRatio] = Field(default_factory=list)


def model_comm_s(row: RowLike) -> float | None:
    """The model's T_push + T_pull for the point, paper-equivalent seconds (None: no model)."""
    t = row.pred.get("t_comm_s")
    compress = float(row.summaries[0].get("compress") or 1.0) if row.summaries else 1.0
    return None if not t else t * compress


def ratio_curve(
    group: str,
    names: tuple[str, str],
    model: tuple[float | None, float | None],
    paper: float | None,
    pairs: Sequence[tuple[Decomposition, Decomposition]],
) -> RatioCurve:
    """The curve of one group: `names` and `model` communication (fast, slow), measured (fast, slow)
    decompositions, one pair per host-time mode."""
    mf, ms = model
    measured = [
        MeasuredRatio(
            mode=f.mode,
            host_s=(f.rest_s + s.rest_s) / 2,
            ratio=s.bct_paper_s / f.bct_paper_s,
            ratio_emulated=s.bct_s / f.bct_s,
            comm_fast_s=f.comm_s,
            comm_slow_s=s.comm_s,
        )
        for f, s in pairs
    ]
    return RatioCurve(
        group=group,
        fast=names[0],
        slow=names[1],
        paper=paper,
        model_comm_fast_s=mf,
        model_comm_slow_s=ms,
        implied_host_s=implied_host_s(mf, ms, paper) if (mf and ms and paper) else None,
        measured=measured,
    )


def curves(
    rows: Sequence[RowLike], speedups: Sequence[tuple[str, str, Any]], paper_of: Any
) -> tuple[list[Decomposition], list[RatioCurve]]:
    """Decompositions of every measured point, and one ratio curve per (group, fast, slow) of the
    figure's paper speed-ups; `speedups` lists (fast series, slow series, paper key), `paper_of`
    maps (key, group) to the paper's number."""
    decs = [d for d in (decompose(r) for r in rows) if d]
    out = []
    for group in dict.fromkeys(r.point.group for r in rows):
        for fast, slow, key in speedups:
            pairs = [
                (f, s)
                for f in decs
                for s in decs
                if f.group == s.group == group and f.series == fast and s.series == slow and f.mode == s.mode
            ]
            model = tuple(
                next(
                    (m for r in rows if r.point.group == group and r.point.series == name if (m := model_comm_s(r))),
                    None,
                )
                for name in (fast, slow)
            )
            if any(model) or pairs:
                out.append(ratio_curve(group, (fast, slow), model, paper_of(key, group), pairs))  # type: ignore[arg-type]
    return decs, out


# --- outputs --------------------------------------------------------------------------------------
def markdown(decs: Sequence[Decomposition], cvs: Sequence[RatioCurve], png: str) -> list[str]:
    """report.md's section: the decomposition table, the curve, the host time the paper implies."""
    lines = [
        "",
        "## Where the time goes (paper-equivalent seconds)",
        "",
        "Communication is measured (the links' busy time within each step: per 0.25-s window, bytes / rate of "
        "its busiest link) and multiplied by compress; the rest (compute, PS update, TF overhead: this "
        "machine's host time) is the measured BCT minus it, not rescaled. The parts add up to the BCT in "
        "paper-equivalent seconds. 'One link' is the busy time of the single link that was busy longest in "
        "the step (what the model, with one bottleneck, counts): communication above it means parallel links "
        "took turns being the busiest, so no one link paced the whole step (links.csv of each run shows when).",
        "",
        "| point | host time | BCT as run (s) | communication (s) | one link (s) | rest (s) | BCT paper-eq. (s) "
        "| model comm. (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for d in decs:
        model = "-" if d.model_comm_s is None else f"{d.model_comm_s:.2f}"
        link = "-" if d.link_s is None else f"{d.link_s:.2f}"
        lines.append(
            f"| {d.id} | {d.mode} | {d.bct_s:.3f} | {d.comm_s:.2f} | {link} | {d.rest_s:.2f} | {d.bct_paper_s:.2f} "
            f"| {model} |"
        )
    if not decs:
        lines.append("| (no run recorded its transfer phases: rerun to decompose) | | | | | | | |")
    if not cvs:
        return lines
    lines += ["", "## The speed-up as a function of per-step host time", "", f"![ratio]({png})", ""]
    for c in cvs:
        lines.append(f"- **{c.group}** ({c.slow} / {c.fast}): " + curve_sentence(c))
    return lines


def curve_sentence(c: RatioCurve) -> str:
    """The model's ratio range, the host time the paper's ratio implies, and each measured point."""
    parts = []
    if c.model_comm_fast_s and c.model_comm_slow_s:
        r0 = c.model_comm_slow_s / c.model_comm_fast_s
        parts.append(
            f"the model's communication is {c.model_comm_slow_s:.2f} s vs {c.model_comm_fast_s:.2f} s per step "
            f"(ratio {r0:.2f}x with no host time, falling toward 1 as host time grows)"
        )
        if c.paper:
            if c.implied_host_s is not None:
                parts.append(f"the paper's {c.paper}x implies {c.implied_host_s:.2f} s of host time per step")
            else:
                parts.append(f"no host time gives the paper's {c.paper}x (above the model's {r0:.2f}x at zero)")
    for m in c.measured:
        gap = f", {m.ratio / c.paper - 1:+.0%} from the paper's" if c.paper else ""
        parts.append(
            f"measured ({m.mode} host time): host time {m.host_s:.2f} s, ratio {m.ratio:.2f}x in paper-equivalent "
            f"seconds{gap} (as run: {m.ratio_emulated:.2f}x)"
        )
        if c.model_comm_fast_s and c.model_comm_slow_s:
            at = ratio_at(c.model_comm_fast_s, c.model_comm_slow_s, m.host_s)
            parts.append(f"the model at that host time gives {at:.2f}x")
    if not c.measured:
        parts.append("no measured pair with transfer phases")
    return "; ".join(parts) + "."


def plot(cvs: Sequence[RatioCurve], path: Path, title: str) -> None:
    """One panel per group: the model's ratio curve over host time, the measured-communication
    curve (dotted), the measured points per mode, and the paper's ratio at the host time it implies."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, max(1, len(cvs)), figsize=(5 * max(1, len(cvs)), 4), squeeze=False)
    for ax, c in zip(axes[0], cvs, strict=False):
        xs_known = [m.host_s for m in c.measured] + ([c.implied_host_s] if c.implied_host_s else [])
        top = max([*xs_known, (c.model_comm_slow_s or 1.0)]) * 1.5
        h = np.linspace(0, top, 200)
        if c.model_comm_fast_s and c.model_comm_slow_s:
            ax.plot(h, ratio_at(c.model_comm_fast_s, c.model_comm_slow_s, h), "-", color="C0", label="model")
        for i, m in enumerate(c.measured):
            color = f"C{i + 1}"
            if m.comm_fast_s > 0:  # no measured communication (e.g. a colocated PS): no curve to draw
                ax.plot(h, ratio_at(m.comm_fast_s, m.comm_slow_s, h), ":", color=color, alpha=0.7)
            ax.plot([m.host_s], [m.ratio], "o", color=color, label=f"measured, {m.mode} host time (dotted: its comm.)")
        if c.paper:
            ax.axhline(c.paper, color="grey", lw=0.8, ls="--")
            if c.implied_host_s is not None:
                ax.plot([c.implied_host_s], [c.paper], "*", ms=12, color="black", label=f"paper {c.paper}x")
            elif c.model_comm_fast_s and c.model_comm_slow_s:
                ax.plot([], [], "--", color="grey", label=f"paper {c.paper}x (no host time reaches it)")
        ax.set_title(f"{c.group}: {c.slow} / {c.fast}")
        ax.set_xlabel("host time per step (s)")
        ax.set_ylabel("BCT ratio (paper-equivalent s)")
        ax.set_ylim(bottom=1.0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
