"""A timeline's files: timeline.csv (BCT per step), events.csv (what each event cost), timeline.png."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path

from runs.recovery import METRIC_KEYS, Step
from topologies.files import atomic_open, atomic_path


def _fmt(value: object, decimals: int = 4) -> object:
    """A CSV cell: floats rounded to `decimals`, None empty, everything else as is."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.{decimals}f}"
    return value


def write_csv(
    out_dir: Path, steps_by_job: Mapping[str, Sequence[Step]], metrics: Sequence[dict], t0: float
) -> tuple[Path, Path]:
    """timeline.csv (one row per step, times relative to t0) and events.csv (one row per event).

    events.csv has t_s = t - t0 first, then the other keys of the metrics dicts (without the
    absolute t); floats have 4 decimals, None is an empty cell.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    steps_path, events_path = out_dir / "timeline.csv", out_dir / "events.csv"
    with atomic_open(steps_path, newline="") as f:
        w = csv.writer(f)
        w.writerow(["job", "attempt", "step", "t_start_s", "t_end_s", "bct_s"])
        for job, steps in steps_by_job.items():
            for s in steps:
                w.writerow(
                    [job, s.attempt, s.step, _fmt(s.t_start - t0, 3), _fmt(s.t_end - t0, 3), _fmt(float(s.bct_s))]
                )
    keys = list(dict.fromkeys([*METRIC_KEYS, *(k for m in metrics for k in m)]))
    keys.remove("t")
    with atomic_open(events_path, newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", *keys])
        for m in metrics:
            w.writerow([_fmt(float(m["t"]) - t0), *(_fmt(m.get(k)) for k in keys)])
    return steps_path, events_path


def plot(
    out_dir: Path, steps_by_job: Mapping[str, Sequence[Step]], metrics: Sequence[dict], t0: float, title: str
) -> Path:
    """timeline.png: each step's BCT at its end time, events as dashed lines, recoveries shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    for i, (job, steps) in enumerate(steps_by_job.items()):
        attempts = sorted({s.attempt for s in steps})
        for a in attempts:
            seg = sorted((s for s in steps if s.attempt == a), key=lambda s: s.t_end)
            label = job if a == 0 else f"{job} (attempt {a})"
            style = "o-" if a == 0 else "s--"  # a restart (standby PS) draws on in another style
            ax.plot([s.t_end - t0 for s in seg], [s.bct_s for s in seg], style, ms=3, color=f"C{i}", label=label)
    for t, labels in _event_labels(metrics).items():
        x = t - t0
        ax.axvline(x, color="0.3", ls="--", lw=0.8)
        ax.text(
            x,
            0.98,
            "\n".join(labels),
            transform=ax.get_xaxis_transform(),
            rotation=90,
            va="top",
            ha="right",
            fontsize=6,
            bbox={"fc": "white", "alpha": 0.7, "lw": 0, "pad": 1},
        )
    for m in metrics:
        rec = m.get("recovery_s")
        if rec is not None and rec > 0:
            ax.axvspan(m["t"] - t0, m["t"] - t0 + rec, color="C3", alpha=0.12, lw=0)
    ax.set_xlabel("time since t0 (s)")
    ax.set_ylabel("BCT (s, emulated)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="lower right")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "timeline.png"
    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=120)
    plt.close(fig)
    return path


def _event_labels(metrics: Sequence[dict]) -> dict[float, list[str]]:
    """Short "action target" labels grouped by event time (a random round shares one line)."""
    out: dict[float, list[str]] = {}
    for m in metrics:
        out.setdefault(float(m["t"]), []).append(f"{m['action']} {m['target']}")
    return out
