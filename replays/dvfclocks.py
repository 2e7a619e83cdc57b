"""Parameter Flow's Fig. 9 view of a figure's runs: what DVF cut on the wire, clock by clock.

A pf run with DVF records per measured iteration (clock t = iteration + 1) the bytes its pushes and
broadcasts put on the wire against the raw float32 the same messages carry without it
(runs.engine_job.dvf_summary). The figure's claims judge the means (metric `wire`); this draws
and tabulates the curve the paper plots, for every point whose runs have them: the traffic cut
against raw float32, and, where the point's group has a point run with `dvf: encode` (PF's wire
form without filtering: what a sparse-aware PS sends), against that too, DVF's own share.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from replays import outputs


class RowLike(Protocol):
    point: Any
    summaries: list[Any]


def _clocks(row: RowLike) -> dict[int, dict[str, float]]:
    """clock -> wire bytes and raw bytes, the mean over the row's repetitions."""
    per: dict[int, list[tuple[float, float]]] = {}
    for s in row.summaries:
        for c in (s.dvf or {}).get("clocks", []):
            wire = c["push_bytes"] + c["broadcast_bytes"]
            per.setdefault(int(c["clock"]), []).append((wire, c["raw_push_bytes"] + c["raw_broadcast_bytes"]))
    return {
        t: {"wire": statistics.fmean(w for w, _ in v), "raw": statistics.fmean(r for _, r in v)}
        for t, v in sorted(per.items())
    }


def curves(rows: Sequence[RowLike]) -> list[dict[str, Any]]:
    """Per DVF point: its mode and, per clock, the share of traffic cut vs raw and vs its group's
    `encode` point (None where the group has none)."""
    modes = {id(r): (r.summaries[0].dvf or {}).get("mode") if r.summaries else None for r in rows}
    out = []
    for r in rows:
        if modes[id(r)] in (None, "off", "encode"):
            continue
        base = next((b for b in rows if b.point.group == r.point.group and modes[id(b)] == "encode"), None)
        mine, theirs = _clocks(r), _clocks(base) if base else {}
        out.append(
            {
                "id": r.point.id,
                "series": r.point.series,
                "group": r.point.group,
                "mode": modes[id(r)],
                "clocks": [
                    {
                        "clock": t,
                        "cut_vs_raw": 1 - v["wire"] / v["raw"],
                        "cut_vs_encode": 1 - v["wire"] / theirs[t]["wire"] if t in theirs else None,
                    }
                    for t, v in mine.items()
                ],
            }
        )
    return out


def markdown(data: list[dict[str, Any]]) -> list[str]:
    """report.md's section: the curve as a table (first, last and largest cut per point)."""
    if not data:
        return []
    lines = [
        "",
        "## DVF's cut per clock (the paper's Fig. 9)",
        "",
        "Bytes on the wire per clock against raw float32 (every worker pushes S and receives S), and against the "
        "same group's `encode` point (PF's wire form without filtering) where it has one: DVF's own cut. Means over "
        "repetitions; the engine's count (summary.json's nic_bytes has the interfaces').",
        "",
        "| point | group | mode | clocks | cut vs raw: first / last / largest "
        "| cut vs encode: first / last / largest |",
        "|---|---|---|---|---|---|",
    ]

    def three(vals: list[float | None]) -> str:
        v = [x for x in vals if x is not None]
        return f"{v[0]:.0%} / {v[-1]:.0%} / {max(v):.0%}" if v else "-"

    for d in data:
        cs = d["clocks"]
        span = f"{cs[0]['clock']}-{cs[-1]['clock']}" if cs else "-"
        lines.append(
            f"| {d['id']} | {d['group']} | {d['mode']} | {span} | {three([c['cut_vs_raw'] for c in cs])} "
            f"| {three([c['cut_vs_encode'] for c in cs])} |"
        )
    lines += ["", "![DVF per clock](CLOCKS_PNG)"]
    return lines


def plot(data: list[dict[str, Any]], path: Path, title: str) -> None:
    """One panel per group: the cut per clock, solid against encode where there is one, else vs raw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    groups = list(dict.fromkeys(d["group"] for d in data))
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.8), squeeze=False)
    for ax, g in zip(axes[0], groups, strict=True):
        for i, d in enumerate(x for x in data if x["group"] == g):
            cs = d["clocks"]
            xs = [c["clock"] for c in cs]
            ax.plot(xs, [100 * c["cut_vs_raw"] for c in cs], ":", color=f"C{i}", label=f"{d['series']} vs raw")
            if any(c["cut_vs_encode"] is not None for c in cs):
                ys = [100 * c["cut_vs_encode"] if c["cut_vs_encode"] is not None else float("nan") for c in cs]
                ax.plot(xs, ys, "o-", color=f"C{i}", label=f"{d['series']} vs encode")
        ax.set_title(g)
        ax.set_xlabel("clock (iteration)")
        ax.set_ylabel("% traffic reduced")
        ax.set_ylim(0, 100)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    outputs.save_png(fig, path)
