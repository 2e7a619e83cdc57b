"""Each benchmark's figure and table, drawn from its committed results/bench/<stem>.json.

A replay leaves its report, data (csv), figure (png) and figure-level summary; a benchmark leaves
<stem>.md, <stem>.json and <stem>.summary.json. This module gives each benchmark the other two:
`<stem>.png`, one figure of the benchmark's main finding, and `<stem>.csv`, its main table (one
row per point, plain columns), and names both in the summary's `files` (`figures`, and the extra
key `csv`), so the reproduction page shows a benchmark with its figure as it shows a replay.

Why from the committed json, drawn by `testbed report`, and not by the benchmark when it runs:
the benchmarks share benchmarks/common.py, which every committed benchmark result depends on;
writing figures there (or in each benchmarks/<stem>.py) would mark every committed result stale,
hours of emulation to run again for a drawing. A figure is a drawing of the run's committed data:
it changes no measured number, so this module is one of the page's files in replays.staleness
(`PAGE`), and the summary keeps the benchmark run's provenance.

One drawing function per benchmark (`FIGURES`: stem -> function), each reading the json as its
benchmark writes it and returning a `Chart`: its table and how to draw it. A json that lacks what
the plot needs gets a figure saying so (and no csv); a stem no function knows is skipped with a
log line. Output is deterministic: no timestamp in the PNG, and the PNG records what it was drawn
from (the json's and this module's hashes), so an unchanged json is not drawn again and a file
whose bytes would not change is not rewritten.

    python -m replays.benchfigures [--folder results/bench] [STEM ...]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import logging
import math
import statistics
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from emulation.wire import header_factor
from replays.benchdata import bench_data_path, read_data_bytes
from replays.evidence import BENCH_SUFFIX, Files, SummaryError, read_summary, write_summary
from replays.outputs import csv_text, png_bytes, pyplot
from replays.reproduction import CSV_KEY
from topologies.files import atomic_path
from topologies.spec import DEFAULT_MTU

LOG = logging.getLogger("bench.figures")
TOP = Path(__file__).resolve().parent.parent
BENCH = TOP / "results" / "bench"
#: the PNG text chunk recording what the figure was drawn from
SOURCE_KEY = "Source"
#: what the shaping benchmarks hold every flow's wire rate to (benchmarks.network.FIDELITY_TARGET;
#: not imported: that module imports Mininet)
WIRE_TARGET = 0.95
#: the scheme benchmark's goal for GST over the busiest cable (its md's "goal <= 1.10")
GST_GOAL = 1.10


#: what TCP/IP and Ethernet headers add to a busy cable at MTU 1500 (1514 wire bytes per 1448 of
#: payload): the floor of GST over the busiest cable
HEADER_FLOOR = 1 / header_factor(DEFAULT_MTU)
#: the BCT benchmark's target band for measured / BCT_max
BCT_TARGET = (0.95, 1.10)
#: the replay benchmark's goal: the runs' headlines within 5% of each other
REPLAY_GOAL = 0.05
#: grey of what did not pass the fidelity verdict
GREY = "#b0b0b0"


class MissingData(ValueError):
    """The json lacks what the figure needs (the message says what)."""


@dataclass(frozen=True)
class Chart:
    """What one benchmark's json becomes: the figure's finding (its title), the main table and the drawing."""

    what: str
    fields: list[str]
    rows: list[dict[str, Any]]
    draw: Callable[[Any], None]  # draws into a matplotlib Figure
    size: tuple[float, float] = (11.0, 5.0)


@dataclass
class Drawn:
    """One benchmark's figure and table as drawn: their paths, the files whose bytes changed."""

    stem: str
    png: Path
    csv: Path | None
    changed: list[Path] = field(default_factory=list)
    problem: str = ""  # what the json lacked: the figure says so, no csv


# --- shared helpers -------------------------------------------------------------------------------
def _need(data: dict, *keys: str) -> list[Any]:
    """data[key] for each key, or MissingData naming the first absent or empty one."""
    out = []
    for k in keys:
        v = data.get(k) if isinstance(data, dict) else None
        if v in (None, [], {}):
            raise MissingData(f"no '{k}'")
        out.append(v)
    return out


def _median(xs: Iterable[float | None]) -> float | None:
    vals = [x for x in xs if x is not None]
    return statistics.median(vals) if vals else None


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _round(v: Any) -> Any:
    """A csv cell: floats to 6 significant digits, None empty, lists joined."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, list | tuple):
        return " ".join(str(_round(x)) for x in v)
    return v


def _plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: _round(v) for k, v in r.items()} for r in rows]


def _when(date: str) -> str:
    """'2026-12-01 07:51 UTC' of an ISO date (as given where it does not parse)."""
    try:
        d = datetime.datetime.fromisoformat(date)
    except ValueError:
        return date
    if d.utcoffset() is not None:
        d = d.astimezone(datetime.UTC)
        return d.strftime("%Y-%m-%d %H:%M UTC")
    return d.strftime("%Y-%m-%d %H:%M")


def provenance_line(data: Any) -> str:
    """The run that measured the data: commit (short), date, CPU, from `provenance`, else `meta`."""
    data = data if isinstance(data, dict) else {}
    prov = data.get("provenance") if isinstance(data.get("provenance"), dict) else {}
    meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
    machine = prov.get("machine") if isinstance(prov.get("machine"), dict) else {}
    commit = prov.get("commit") or meta.get("git_commit") or ""
    dirty = prov.get("dirty", meta.get("git_dirty"))
    date = prov.get("date") or meta.get("started") or ""
    cores = machine.get("cores") or meta.get("cpus")
    parts = [
        f"commit {commit[:10]}" + (" + local changes" if dirty else "") if commit else "no commit recorded",
        f"measured {_when(date)}" if date else "no date recorded",
        (machine.get("cpu") or "CPU not recorded") + (f", {cores} cores" if cores else ""),
    ]
    return ", ".join(parts)


def _style(ax: Any) -> None:
    ax.grid(True, alpha=0.3, linewidth=0.6)
    ax.tick_params(labelsize=8)


def _hline(ax: Any, y: float, text: str, **style: Any) -> None:
    """A horizontal line across the axes with its label at the left end, above it."""
    ax.axhline(y, **{"color": "k", "lw": 0.8, "ls": "--", **style})
    ax.annotate(text, (0.005, y), xycoords=("axes fraction", "data"), xytext=(2, 2), textcoords="offset points",
                fontsize=7, va="bottom")  # fmt: skip


def _rate_axis(ax: Any, rates: Iterable[float], label: str) -> None:
    """A log-2 x axis with a tick at every rate measured."""
    ticks = sorted(set(rates))
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks)
    ax.set_xticklabels([f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel(label, fontsize=9)


# --- one function per benchmark -------------------------------------------------------------------
def alltoall(data: dict) -> Chart:
    """Plain TCP's and the engine's all-to-all against their bound, by rate per cable."""
    (rows,) = _need(data, "rows")
    table = []
    for r in rows:
        raw = _median(r["raw_end_s"])
        gst = _median(r.get("engine_gst_s") or [])
        table.append({
            "topology": r["topology"], "mbps": r["mbps"], "hosts": r["hosts"], "flow_bytes": r["flow_bytes"],
            "bound_s": r["bound_s"], "raw_end_median_s": raw, "raw_over_bound": _div(raw, r["bound_s"]),
            "raw_retrans": r.get("raw_retrans"), "raw_timeouts": r.get("raw_timeouts"),
            "raw_dsacks": r.get("raw_dsacks"), "rto_min_ms": r.get("rto_min_ms"),
            "raw_faithful": r.get("raw_faithful"), "engine_gst_median_s": gst,
            "mesh_bound_s": r.get("mesh_bound_s"), "engine_over_mesh_bound": _div(gst, r.get("mesh_bound_s")),
            "engine_faithful": r.get("engine_faithful"),
        })  # fmt: skip
    ceilings = data.get("ceilings") or {}

    def draw(fig: Any) -> None:
        axes = fig.subplots(1, 2, sharey=True)
        sides = (("raw_over_bound", "raw_faithful", "plain TCP: all-to-all end / bound (median of rounds)"),
                 ("engine_over_mesh_bound", "engine_faithful", "scheme engine: mesh GST / its bound"))  # fmt: skip
        topologies = list(dict.fromkeys(t["topology"] for t in table))
        for ax, (key, ok, title) in zip(axes, sides, strict=True):
            for i, topo in enumerate(topologies):
                pts = [t for t in table if t["topology"] == topo and t[key] is not None]
                if not pts:
                    continue
                colour = f"C{i}"
                label = topo.removesuffix(".yaml")
                if len({t["mbps"] for t in pts}) < len(pts):  # one rate, several RTO settings: the largest run
                    for j, t in enumerate(pts):
                        rto = "kernel RTO" if t["rto_min_ms"] is None else f"RTO floor {t['rto_min_ms']:g} ms"
                        ax.scatter([t["mbps"]], [t[key]], marker="D^"[j % 2], s=40, color=colour, zorder=3,
                                   label=f"{label}, {t['hosts']} hosts ({rto})")  # fmt: skip
                    continue
                ax.plot([t["mbps"] for t in pts], [t[key] for t in pts], "-o", color=colour, ms=4, lw=1.2,
                        label=f"{label} ({pts[0]['hosts']} hosts)")  # fmt: skip
                bad = [t for t in pts if t[ok] is False]
                if bad:
                    ax.scatter([t["mbps"] for t in bad], [t[key] for t in bad], s=60, facecolor="none",
                               edgecolor=GREY, zorder=4)  # fmt: skip
            _hline(ax, 1.0, "the bound")
            _rate_axis(ax, [t["mbps"] for t in table], "Mbit/s per cable")
            ax.set_title(title, fontsize=9)
            _style(ax)
        axes[0].set_ylabel("time / bound", fontsize=9)
        axes[1].legend(fontsize=7, loc="upper left")
        kept = [f"{k} {c['mbps']:g}" for k, c in ceilings.items() if isinstance(c, dict) and c.get("mbps")]
        if kept:
            axes[0].set_title(f"{sides[0][2]}\nrelay ceilings kept (Mbit/s per cable): {', '.join(kept)}", fontsize=9)

    return Chart("all-to-all time over its bound, by rate per cable", list(table[0]), _plain(table), draw)


def bct(data: dict) -> Chart:
    """Measured BCT against the model's BCT_min and BCT_max (Eqs. 1-7), per topology and rate."""
    (points,) = _need(data, "points")
    table = []
    for p in points:
        b = p.get("bct_s") or {}
        pred = p.get("predicted") or {}
        table.append({
            "topology": p["topology"], "rate_mbps": p["rate_mbps"], "scale": p.get("scale"),
            "equation": pred.get("equation"), "steps": b.get("n"), "bct_mean_s": b.get("mean"),
            "bct_ci95_s": b.get("ci95"), "bct_min_s": pred.get("bct_min_s"), "bct_max_s": pred.get("bct_max_s"),
            "meas_over_min": p.get("ratio_min"), "meas_over_max": p.get("ratio_max"),
            "within_target": p.get("within_target"), "comm_bound": p.get("comm_bound"),
            "faithful": (p.get("fidelity") or {}).get("faithful"), "error": p.get("error") or "",
        })  # fmt: skip
    if not any(t["bct_mean_s"] is not None and t["bct_max_s"] for t in table):
        raise MissingData("no point with a measured BCT and the model's BCT_max")

    def draw(fig: Any) -> None:
        topologies = list(dict.fromkeys(t["topology"] for t in table))
        axes = fig.subplots(1, len(topologies), sharey=True, squeeze=False)[0]
        for ax, topo in zip(axes, topologies, strict=True):
            pts = sorted((t for t in table if t["topology"] == topo and t["bct_max_s"]), key=lambda t: t["rate_mbps"])
            x = [t["rate_mbps"] for t in pts]
            hi = [t["bct_max_s"] for t in pts]
            band = f"target: {BCT_TARGET[0]:g}-{BCT_TARGET[1]:g} x BCT_max"
            ax.fill_between(x, [h * BCT_TARGET[0] for h in hi], [h * BCT_TARGET[1] for h in hi], color="C2",
                            alpha=0.18, lw=0, label=band)  # fmt: skip
            ax.plot(x, hi, "-", color="C2", lw=1.2, label="BCT_max (model)")
            ax.plot(x, [t["bct_min_s"] for t in pts], "--", color="C0", lw=1.2, label="BCT_min (model)")
            for t in pts:
                if t["bct_mean_s"] is None:
                    continue
                colour = "C3" if t["faithful"] is not False else GREY
                ax.errorbar([t["rate_mbps"]], [t["bct_mean_s"]], yerr=[[t["bct_ci95_s"] or 0]] * 2, fmt="o",
                            color=colour, ms=5, capsize=3, zorder=3)  # fmt: skip
                ratio = f"{t['meas_over_max']:.2f}" if t["meas_over_max"] else ""
                ax.annotate(ratio, (t["rate_mbps"], t["bct_mean_s"]), xytext=(6, 4), textcoords="offset points",
                            fontsize=7)  # fmt: skip
            ax.set_yscale("log")
            _rate_axis(ax, x, "worker rate (Mbit/s)")
            ax.set_xlim(min(x) / 1.2, max(x) * 1.35)
            eq = next((t["equation"] for t in pts if t["equation"]), "")
            ax.set_title(f"{topo} ({eq})" if eq else topo, fontsize=9)
            _style(ax)
        axes[0].set_ylabel("BCT (s), log scale", fontsize=9)
        axes[0].errorbar([], [], yerr=[], fmt="o", color="C3", ms=5, label="measured, mean ± 95% CI (meas/BCT_max)")
        axes[0].legend(fontsize=7, loc="upper right")

    return Chart("measured BCT against the model's BCT_min and BCT_max", list(table[0]), _plain(table), draw)


def cluster(data: dict) -> Chart:
    """One network on one machine and over two servers: TCP against the host cables' rate, and the goal jobs."""
    (rows,) = _need(data, "rows")
    table = [
        {"platform": r["platform"], "mbps": r["mbps"], "tunnelled_cables": r.get("tunnelled"),
         "rtt_ms": r.get("rtt_ms"), "one_flow_mbps": r["one_flow_mbps"],
         "one_flow_share": r["one_flow_mbps"] / r["mbps"], "four_flows_mbps": r["four_flows_mbps"],
         "four_flows_share": r["four_flows_mbps"] / (4 * r["mbps"])}
        for r in rows
    ]  # fmt: skip
    jobs = data.get("goal_jobs") or []

    def draw(fig: Any) -> None:
        axes = fig.subplots(1, 2, width_ratios=[3, 2])
        ax = axes[0]
        rates = sorted({t["mbps"] for t in table})
        platforms = list(dict.fromkeys(t["platform"] for t in table))
        series = [(p, k) for k in ("one_flow_share", "four_flows_share") for p in platforms]
        width = 0.8 / len(series)
        for j, (plat, key) in enumerate(series):
            xs, ys = [], []
            for i, rate in enumerate(rates):
                t = next((t for t in table if t["mbps"] == rate and t["platform"] == plat), None)
                if t is not None:
                    xs.append(i + (j - (len(series) - 1) / 2) * width)
                    ys.append(t[key] * 100)
            flows = "1 flow" if key.startswith("one") else "4 flows"
            ax.bar(xs, ys, width, color=f"C{platforms.index(plat)}", alpha=1.0 if flows == "1 flow" else 0.55,
                   hatch="" if flows == "1 flow" else "//", edgecolor="white", label=f"{plat}, {flows}")  # fmt: skip
            for x, y in zip(xs, ys, strict=True):
                ax.text(x, y - 0.6, f"{y:.1f}", ha="center", va="top", fontsize=6, color="k")
        ax.axhline(100 / HEADER_FLOOR, color="k", lw=0.8, ls=":",
                   label=f"TCP payload's share of the wire at MTU {DEFAULT_MTU}: {1 / HEADER_FLOOR:.1%}")  # fmt: skip
        ax.set_xticks(range(len(rates)))
        ax.set_xticklabels([f"{r:g}" for r in rates])
        ax.set_xlabel("Mbit/s per host cable", fontsize=9)
        ax.set_ylabel("TCP goodput / configured rate (%)", fontsize=9)
        ax.set_ylim(min(80, min(t["four_flows_share"] * 100 for t in table) - 5), 104)
        ax.set_title("rack 0 to rack 1 (iperf3): one machine vs VXLAN over two servers", fontsize=9)
        ax.legend(fontsize=7, loc="upper center", ncol=3)
        _style(ax)
        ax = axes[1]
        if not jobs:
            ax.text(0.5, 0.5, "no goal jobs in the json", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
            return
        names = list(dict.fromkeys(j["job"] for j in jobs))
        for k, plat in enumerate(platforms):
            for i, name in enumerate(names):
                j = next((j for j in jobs if j["job"] == name and j["platform"] == plat), None)
                if j is None:
                    continue
                x = i + (k - (len(platforms) - 1) / 2) * 0.38
                ax.bar([x], [j["mean_s"]], 0.36, yerr=[j.get("ci95_s") or 0], capsize=3,
                       color=f"C{k}" if j.get("faithful") is not False else GREY,
                       label=plat if i == 0 else None)  # fmt: skip
                ax.text(x, j["mean_s"] / 2, f"{j['metric']}\n{j['mean_s']:.2f}", ha="center", fontsize=7, color="w")
        ax.set_xticks(range(len(names)))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_ylabel("mean (s) ± 95% CI", fontsize=9)
        ax.set_title("the goal jobs", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
        _style(ax)

    return Chart("a network over two servers against one machine", list(table[0]), _plain(table), draw)


def dvf(data: dict) -> Chart:
    """DVF's byte cut against raw float32 per model group and run, by side (push, broadcast)."""
    (rows,) = _need(data, "rows")
    table = []
    for r in rows:
        clocks, raw = r["clocks"], r["raw_bytes"]
        if not clocks:
            raise MissingData(f"no clocks in {r['group']} {r['variant']}")
        c0, last = clocks[0], clocks[-1]
        run = r["variant"] + ("" if r["delta"] == "-" else f" ({r['delta']})")
        table.append({
            "group": r["group"], "run": run, "worker_delta": r.get("worker_delta"),
            "server_delta": r.get("server_delta"),
            "mb_per_clock": statistics.mean(c["push_bytes"] + c["bcast_bytes"] for c in clocks) / 1e6,
            "emulated_mb": r.get("emulated_mb"),
            "cut_first": 1 - (c0["push_bytes"] + c0["bcast_bytes"]) / raw,
            "cut_last": 1 - (last["push_bytes"] + last["bcast_bytes"]) / raw,
            "push_cut": 1 - statistics.mean(c["push_bytes"] for c in clocks) / (raw / 2),
            "broadcast_cut": 1 - statistics.mean(c["bcast_bytes"] for c in clocks) / (raw / 2),
            "push_zeros": c0.get("push_zeros"), "broadcast_zeros": c0.get("bcast_zeros"),
            "sums_density": c0.get("bcast_density"), "invariant_error": r.get("invariant_error"),
        })  # fmt: skip

    def draw(fig: Any) -> None:
        groups = list(dict.fromkeys(t["group"] for t in table))
        axes = fig.subplots(1, len(groups), sharey=True, squeeze=False)[0]
        for ax, group in zip(axes, groups, strict=True):
            pts = [t for t in table if t["group"] == group]
            xs = range(len(pts))
            ax.bar([x - 0.2 for x in xs], [t["push_cut"] * 100 for t in pts], 0.4, color="C0", label="push cut")
            ax.bar([x + 0.2 for x in xs], [t["broadcast_cut"] * 100 for t in pts], 0.4, color="C1",
                   label="broadcast cut")  # fmt: skip
            ax.plot(xs, [t["cut_first"] * 100 for t in pts], "k^", ms=5, label="both sides: first clock")
            ax.plot(xs, [t["cut_last"] * 100 for t in pts], "kv", ms=5, mfc="w", label="both sides: last clock")
            ax.axhline(0, color="k", lw=0.6)
            ax.set_xticks(list(xs))
            ax.set_xticklabels([t["run"] for t in pts], rotation=35, ha="right", fontsize=7)
            ax.set_title(group, fontsize=9)
            _style(ax)
        axes[0].set_ylabel("bytes cut against raw float32 (%)", fontsize=9)
        axes[-1].legend(fontsize=7, loc="upper right")

    return Chart(f"DVF's byte cut by side, {data.get('clocks', '?')} clocks", list(table[0]), _plain(table), draw)


def failures(data: dict) -> Chart:
    """Each failure or reconfiguration event: the time to apply it and the BCT it cost, per topology and dark period."""
    (runs,) = _need(data, "runs")
    table = []
    for r in runs:
        for e in r.get("events") or []:
            table.append({
                "topology": r["topology"], "dark_ms": r.get("dark_ms"), "run": r.get("run"),
                "action": e["action"], "target": e["target"], "applied_ms": e.get("took_ms"),
                "recovery_s": e.get("recovery_s"), "back": e.get("recovery_s") is not None,
                "after_ratio": e.get("after_ratio"), "extra_s": e.get("extra_s"),
                "slow_steps": e.get("slow_steps"), "steps_lost": e.get("steps_lost"),
                "run_bct_s": r.get("bct_s"), "run_faithful": r.get("fidelity"),
            })  # fmt: skip
    if not table:
        raise MissingData("no events in any run")

    def draw(fig: Any) -> None:
        topologies = list(dict.fromkeys(t["topology"] for t in table))
        widths = [len({(t["action"], t["target"]) for t in table if t["topology"] == o}) for o in topologies]
        axes = fig.subplots(2, len(topologies), sharey="row", squeeze=False, width_ratios=widths)
        darks = sorted({t["dark_ms"] for t in table if t["dark_ms"] is not None})
        for col, topo in enumerate(topologies):
            pts = [t for t in table if t["topology"] == topo]
            events = list(dict.fromkeys(f"{t['action']} {t['target']}" for t in pts))
            runs_here = list(dict.fromkeys(t["dark_ms"] for t in pts))
            width = 0.8 / len(runs_here)
            for k, dark in enumerate(runs_here):
                colour = _dark_colour(dark, darks)
                for row, key in ((0, "applied_ms"), (1, "extra_s")):
                    ax = axes[row][col]
                    xs, ys, hatches = [], [], []
                    for i, ev in enumerate(events):
                        t = next((t for t in pts if t["dark_ms"] == dark and f"{t['action']} {t['target']}" == ev),
                                 None)  # fmt: skip
                        if t is not None and t[key] is not None:
                            xs.append(i + (k - (len(runs_here) - 1) / 2) * width)
                            ys.append(t[key])
                            hatches.append("" if t["back"] or not t["slow_steps"] else "////")
                    bars = ax.bar(xs, ys, width, color=colour)
                    for b, h in zip(bars, hatches, strict=True):
                        b.set_hatch(h)
                        b.set_edgecolor("white")
            for row in (0, 1):
                ax = axes[row][col]
                ax.set_xticks(range(len(events)))
                ax.set_xticklabels(events if row == 1 else [], rotation=40, ha="right", fontsize=7)
                _style(ax)
            faithful = {t["run_faithful"] for t in pts}
            mark = "" if faithful == {True} else " (NOT all runs faithful)"
            axes[0][col].set_title(f"{topo}{mark}", fontsize=9)
        axes[0][0].set_yscale("log")
        axes[0][0].set_ylabel("time to apply (ms, log)", fontsize=9)
        axes[1][0].set_ylabel("BCT overhead until the next event (s)", fontsize=8)
        from matplotlib.patches import Patch

        runs_all = list(dict.fromkeys(t["dark_ms"] for t in table))
        handles = [Patch(color=_dark_colour(d, darks),
                         label="one run (no dark period)" if d is None else f"dark period {d:g} ms")
                   for d in runs_all]  # fmt: skip
        handles.append(Patch(facecolor="C7", hatch="////", edgecolor="white", label="BCT not back within 10% while "
                             "the change lasts"))  # fmt: skip
        axes[1][0].legend(handles=handles, fontsize=7, loc="upper center", ncol=2)

    return Chart("time to apply each event and the BCT it cost", list(table[0]), _plain(table), draw, (12.0, 6.6))


def _dark_colour(dark: float | None, darks: list[float]) -> str:
    """A dark period's colour; a run without one (FatTree's: no circuits) its own."""
    return f"C{darks.index(dark)}" if dark in darks else "C9"


def _ratio_band(ax: Any) -> None:
    """A ratio panel's ±10% band and its line at 1 (drawn under the points)."""
    ax.axhspan(0.9, 1.1, color="C2", alpha=0.15, lw=0)
    ax.axhline(1.0, color="k", lw=0.7)


def _plain_log_ticks(ax: Any, minor: tuple[int, ...] = (), which: str = "xy") -> None:
    """Log axes labelled "1, 10" (and "2, 5" for `minor` (2, 5)) rather than matplotlib's default,
    which labels minor ticks "2 x 10^0" when an axis spans about a decade, where neighbours overlap."""
    from matplotlib.ticker import FuncFormatter

    def label(v: float, _: object) -> str:
        return f"{v:g}" if v > 0 and round(v / 10 ** math.floor(math.log10(v) + 1e-9)) in minor else ""

    for axis in [a for n, a in (("x", ax.xaxis), ("y", ax.yaxis)) if n in which]:
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(FuncFormatter(label))


def _ratio_axes(ax: Any, xlabel: str, ylabel: str, title: str) -> None:
    """A ratio panel's log time axis, labels, title and legend."""
    ax.set_xscale("log")
    _plain_log_ticks(ax, minor=(2, 5), which="x")
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=9)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    _style(ax)


def _repeat_range(p: dict) -> dict:
    """A merged point's fastest and slowest faithful repeat (benchmarks.flowmodel.merge_repeats;
    None where the point is one run's or had one faithful repeat)."""
    secs = [t for t in p.get("repeats_s") or [] if t is not None]
    return {"repeats": len(secs) or None, "repeats_min_s": min(secs) if len(secs) > 1 else None,
            "repeats_max_s": max(secs) if len(secs) > 1 else None}  # fmt: skip


def flowmodel(data: dict) -> Chart:
    """The SimGrid flow model's simulated time against the emulated one, calibrated and held out."""
    (points,) = _need(data, "points")
    table = [
        {"topology": p["topology"].removesuffix(".yaml") + (f" {p['note']}" if p.get("note") else ""),
         "scheme": p["scheme"], "bytes": p.get("bytes"), "hosts": p.get("hosts"),
         "busiest_cable_s": p.get("expected_s"), "cable_load_gbps": p.get("cable_load_gbps"),
         "emulated_s": p.get("emulated_s"), "maxmin_s": p.get("uncalibrated_s"),
         "calibrated_s": p.get("calibrated_s"), "calibrated_over_emulated": p.get("ratio"),
         "within_5pct": p.get("within_goal"), "held_out_s": p.get("held_out_s"),
         "held_out_over_emulated": p.get("held_out_ratio"), "faithful": p.get("faithful"),
         "network_paced": p.get("network_paced", True), "replaced_factors_s": p.get("prior_s"),
         "replaced_factors_over_emulated": p.get("prior_ratio"), "previous_emulated_s": p.get("previous_emulated_s"),
         "this_over_previous_emulation": p.get("repeat_ratio"), **_repeat_range(p),
         "this_faithful": p.get("this_faithful", p.get("faithful")),
         "replaced_factors_judged": bool(p.get("prior_judged")),
         "why": p.get("why") or p.get("error") or ""}
        for p in points
    ]  # fmt: skip
    usable = [t for t in table if t["emulated_s"] and t["calibrated_s"]]
    if not usable:
        raise MissingData("no point with both an emulated and a calibrated time")
    tf = [t for t in data.get("tf") or [] if t.get("comm_s") and t.get("calibrated_s")]

    def within(ts: list[dict], key: str, band: float = 0.10) -> str:
        rs = [t[key] for t in ts if t[key] is not None]
        return f"{sum(abs(r - 1) <= band for r in rs) / len(rs):.0%} of {len(rs)} within 10%" if rs else "none"

    # the points the report's line judges the replaced factors on (benchmarks.flowmodel.judge_unseen
    # flags them): network-paced, where this emulation (the one the ratio is against) was faithful
    unseen = [t for t in usable if t["replaced_factors_judged"]]
    again = [t for t in usable if t["this_over_previous_emulation"] is not None]

    def draw(fig: Any) -> None:
        axes = fig.subplots(1, 3 if again else 2, width_ratios=[1, 1.25, 1][: 3 if again else 2])
        # fitted on: faithful and network-paced (benchmarks.flowmodel.network_paced); a faithful point
        # the CPU paced is left out of the fit and drawn apart
        good = [t for t in usable if t["faithful"] and t["network_paced"]]
        paced = [t for t in usable if t["faithful"] and not t["network_paced"]]
        bad = [t for t in usable if not t["faithful"]]
        ax = axes[0]
        lo = min(min(t["emulated_s"], t["calibrated_s"]) for t in usable) * 0.8
        hi = max(max(t["emulated_s"], t["calibrated_s"]) for t in usable) * 1.25
        xs = [lo, hi]
        ax.fill_between(xs, [x * 0.9 for x in xs], [x * 1.1 for x in xs], color="C2", alpha=0.15, lw=0, label="±10%")
        ax.plot(xs, xs, "k-", lw=0.7)
        ax.scatter([t["emulated_s"] for t in bad], [t["calibrated_s"] for t in bad], s=12, color=GREY,
                   label=f"not faithful ({len(bad)}): calibrated")  # fmt: skip
        if paced:
            ax.scatter([t["emulated_s"] for t in paced], [t["calibrated_s"] for t in paced], s=16, marker="^",
                       color="C4", label=f"CPU-paced ({len(paced)}): calibrated, not fitted on")  # fmt: skip
        ax.scatter([t["emulated_s"] for t in good], [t["calibrated_s"] for t in good], s=14, color="C0",
                   label=f"fitted on ({len(good)}): calibrated")  # fmt: skip
        held = [t for t in good if t["held_out_s"]]
        ax.scatter([t["emulated_s"] for t in held], [t["held_out_s"] for t in held], s=18, marker="x", color="C3",
                   lw=0.9, label="fitted on: held out (topology left out)")  # fmt: skip
        ranged = [t for t in good if t["repeats_max_s"] and t["repeats_max_s"] > t["repeats_min_s"]]
        if ranged:  # each point the median of its repeats (benchmarks.flowmodel.merge_repeats): their range
            ax.errorbar([t["emulated_s"] for t in ranged], [t["calibrated_s"] for t in ranged], fmt="none",
                        xerr=[[t["emulated_s"] - t["repeats_min_s"] for t in ranged],
                              [t["repeats_max_s"] - t["emulated_s"] for t in ranged]],
                        ecolor="C0", alpha=0.35, lw=0.8,
                        label="fitted on: the repeats' range (median drawn)")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        _plain_log_ticks(ax, minor=(2, 5))
        ax.set_xlabel("emulated GST (s)", fontsize=9)
        ax.set_ylabel("simulated (s)", fontsize=9)
        ax.set_title("simulated against emulated, per point", fontsize=9)
        ax.legend(fontsize=7, loc="upper left")
        _style(ax)
        ax = axes[1]
        _ratio_band(ax)
        for band in (0.95, 1.05):
            ax.axhline(band, color="C2", lw=0.7, ls=":")
        ax.scatter([t["emulated_s"] for t in bad], [t["calibrated_over_emulated"] for t in bad], s=12, color=GREY,
                   label="not faithful: calibrated (not fitted on)")  # fmt: skip
        if paced:
            ax.scatter([t["emulated_s"] for t in paced], [t["calibrated_over_emulated"] for t in paced], s=16,
                       marker="^", color="C4", label="CPU-paced: calibrated (not fitted on)")  # fmt: skip
        ax.scatter([t["emulated_s"] for t in good], [t["calibrated_over_emulated"] for t in good], s=14,
                   color="C0", label=f"calibrated, fitted: {within(good, 'calibrated_over_emulated')}")  # fmt: skip
        ax.scatter([t["emulated_s"] for t in held], [t["held_out_over_emulated"] for t in held], s=18, marker="x",
                   color="C3", lw=0.9, label=f"held out: {within(held, 'held_out_over_emulated')}")  # fmt: skip
        if unseen:  # the factors this run replaced, on points they were never fitted on
            key = "replaced_factors_over_emulated"
            ax.scatter([t["emulated_s"] for t in unseen], [t[key] for t in unseen], s=22, marker="+", color="C5",
                       lw=0.9, label=f"replaced factors, unseen: {within(unseen, key)}")  # fmt: skip
        if tf:
            ax.scatter([t["comm_s"] for t in tf], [t["calibrated_s"] / t["comm_s"] for t in tf], s=70, marker="*",
                       color="C1", edgecolor="k", lw=0.5, zorder=4,
                       label=f"TF PS job, never fitted on ({len(tf)}): simulated / measured")  # fmt: skip
        _ratio_axes(ax, "emulated GST (s)", "simulated / emulated (band ±10%, dotted ±5%)", "the error, per point")
        if again:  # the emulator against its previous run of the same code: the floor of any model's error
            ax = axes[2]
            _ratio_band(ax)
            key = "this_over_previous_emulation"
            ax.scatter([t["previous_emulated_s"] for t in again], [t[key] for t in again], s=14, color="C7",
                       label=f"faithful in both: {within(again, key)}")  # fmt: skip
            title = "the emulator against itself"
            _ratio_axes(ax, "previous emulated GST (s)", "this emulation / the previous one", title)

    cal = data.get("calibration") or {}
    form = f" (form: {cal['form']})" if cal.get("form") else ""
    if data.get("kept"):  # benchmarks.flowmodel.keep_replaced: the replaced factors were written back
        form = f" (written: the replaced factors, form {data['kept']['form']}; the refit drawn: {cal.get('form')})"
    size = (16.0, 5.4) if again else (12.0, 5.4)
    return Chart(f"the flow model against the emulator{form}", list(table[0]), _plain(table), draw, size)


def kills(data: dict) -> Chart:
    """Runs SIGKILLed at random: the clean-up each needed and what it left."""
    (killed,) = _need(data, "kills")
    table = [
        {"kill": i + 1, "kind": k["kind"], "killed_at_s": k.get("delay_s"), "phase": k.get("phase"),
         "job_processes": k.get("job_processes"), "cleared_via": k.get("via"), "clean_up_s": k.get("clean_s"),
         "left": "; ".join(map(str, k.get("left") or [])) or "nothing"}
        for i, k in enumerate(killed)
    ]  # fmt: skip

    def draw(fig: Any) -> None:
        ax = fig.subplots()
        kinds = list(dict.fromkeys(t["kind"] for t in table))
        for t in table:
            dirty = t["left"] != "nothing"
            ax.bar([t["kill"]], [t["clean_up_s"] or 0], 0.75, color="C3" if dirty else f"C{kinds.index(t['kind'])}",
                   hatch="//" if t["cleared_via"] == "clean" else "", edgecolor="white")  # fmt: skip
            note = "left: " + t["left"] if dirty else ("bring-up" if t["phase"] != "job" else "")
            if note:
                ax.text(t["kill"], (t["clean_up_s"] or 0) + 0.05, note, ha="center", va="bottom", fontsize=6,
                        rotation=90)  # fmt: skip
        from matplotlib.patches import Patch

        handles = [Patch(color=f"C{i}", label=k) for i, k in enumerate(kinds)]
        handles += [Patch(facecolor="C7", label="cleared by the next start"),
                    Patch(facecolor="C7", hatch="//", edgecolor="white", label="cleared by `testbed clean`"),
                    Patch(color="C3", label="left something")]  # fmt: skip
        ax.legend(handles=handles, fontsize=7, loc="upper left", ncol=2)
        left = sum(t["left"] == "nothing" for t in table)
        ax.set_title(f"{left} of {len(table)} kills left nothing", fontsize=9)
        ax.set_xticks([t["kill"] for t in table])
        ax.set_xlabel("kill (in order; label: killed in bring-up)", fontsize=9)
        ax.set_ylabel("clean-up (s)", fontsize=9)
        ax.set_ylim(0, max((t["clean_up_s"] or 0) for t in table) * 1.35 + 0.1)
        _style(ax)

    return Chart("what SIGKILLed runs leave, and the clean-up", list(table[0]), _plain(table), draw, (10.0, 4.6))


def network(data: dict) -> Chart:
    """Shaping fidelity: every flow's wire rate against the configured one, by aggregate; and bring-up times."""
    (shaping,) = _need(data, "shaping")
    table = [
        {"cabling": r["cabling"], "datapath": "TSO" if r.get("tso") else "frames", "mtu": r["mtu"],
         "rate_mbps": r["rate_mbps"], "flows": r["flows"], "aggregate_mbps": r["aggregate_mbps"],
         "goodput_mean": r.get("goodput_mean"), "goodput_min": r.get("goodput_min"), "wire_mean": r["wire_mean"],
         "wire_min": r["wire_min"], "ovs_cpu_pct": r.get("ovs_cpu_pct"), "idle_pct": r.get("idle_pct"),
         "retrans_segments": r.get("retrans_segments"), "retrans_share": r.get("retrans_share"),
         "datapath_drops": r.get("datapath_drops"), "datapath_rx_drops": r.get("datapath_rx_drops")}
        for r in shaping
    ]  # fmt: skip
    bringup = [*(data.get("bringup") or []), *([data["stp"]] if data.get("stp") else [])]

    def draw(fig: Any) -> None:
        datapaths = list(dict.fromkeys(t["datapath"] for t in table))
        axes = fig.subplots(1, len(datapaths) + 1, width_ratios=[2] * len(datapaths) + [1.6])
        series = list(dict.fromkeys((t["cabling"], t["mtu"], t["flows"]) for t in table))
        low = min(t["wire_min"] for t in table)
        for ax, dp in zip(axes, datapaths, strict=False):
            for i, (cab, mtu, flows) in enumerate(series):
                pts = sorted((t for t in table if (t["cabling"], t["mtu"], t["flows"], t["datapath"]) ==
                              (cab, mtu, flows, dp)), key=lambda t: t["aggregate_mbps"])  # fmt: skip
                if not pts:
                    continue
                style = "-" if cab == series[0][0] else "--"
                ax.plot([t["aggregate_mbps"] for t in pts], [t["wire_min"] * 100 for t in pts], style,
                        marker="os^"[i % 3], ms=4, lw=1.1, color=f"C{i}",
                        label=f"{cab}, MTU {mtu}, {flows} flow{'s' if flows > 1 else ''}")  # fmt: skip
            _hline(ax, WIRE_TARGET * 100, f"target >= {WIRE_TARGET:.0%}")
            ax.set_xscale("log")
            ax.set_xlabel("aggregate configured rate (Mbit/s)", fontsize=9)
            ax.set_ylim(min(low * 100 - 1, 93), 101)
            ax.set_title(f"shaping, {dp}: slowest flow's wire rate", fontsize=9)
            _style(ax)
        axes[0].set_ylabel("wire rate / configured (%)", fontsize=9)
        axes[0].legend(fontsize=7, loc="lower left")
        ax = axes[-1]
        if not bringup:
            ax.text(0.5, 0.5, "no bring-up in the json", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
            return
        names = [b["topology"].replace(" (standalone STP, no controller)", " (STP)") for b in bringup]
        times = [b.get("file_to_reachable_s") or 0 for b in bringup]
        ax.barh(range(len(bringup)), times, color=["C0" if b.get("prototype") else "C7" for b in bringup])
        ax.set_yticks(range(len(bringup)))
        ax.set_yticklabels(names, fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.axvline(5.0, color="k", lw=0.8, ls="--")
        ax.set_xlabel("file -> all reachable (s, log; target < 5 s: blue)", fontsize=8)
        ax.set_title("bring-up", fontsize=9)
        _style(ax)

    return Chart("shaping fidelity and bring-up", list(table[0]), _plain(table), draw, (15.0, 5.4))


def patchports(data: dict) -> Chart:
    """OVS patch ports against veth cables: the flows' wire rate against the configured one, by aggregate."""
    (rows,) = _need(data, "rows")
    mtu = int((data.get("meta") or {}).get("args", {}).get("mtu") or DEFAULT_MTU)
    factor = header_factor(mtu)  # goodput -> rate on the wire (benchmarks.network)
    order = ("veth", "patch")
    table = [
        {"cabling": r["cabling"], "rate_mbps": r["rate_mbps"], "aggregate_mbps": r["aggregate_mbps"],
         "wire_mean": r["mean"] / factor, "wire_slowest": r["slowest"] / factor, "goodput_mean": r["mean"],
         "goodput_slowest": r["slowest"], "ovs_cpu_pct": r.get("ovs_cpu_pct"), "idle_pct": r.get("idle_pct"),
         "retrans_segments": r.get("retrans_segments"), "datapath_drops": r.get("datapath_drops"),
         "send_errors_logged": r.get("send_errors_logged"), "patch_counted_share": r.get("patch_counted_share")}
        for r in sorted(rows, key=lambda r: (r["aggregate_mbps"], order.index(r["cabling"]) if r["cabling"] in order
                                             else len(order)))
    ]  # fmt: skip

    def draw(fig: Any) -> None:
        axes = fig.subplots(1, 2, width_ratios=[2, 1])
        cablings = list(dict.fromkeys(t["cabling"] for t in table))
        for i, cab in enumerate(cablings):
            pts = [t for t in table if t["cabling"] == cab]
            x = [t["aggregate_mbps"] for t in pts]
            axes[0].plot(x, [t["wire_mean"] * 100 for t in pts], "-o", color=f"C{i}", ms=4, label=f"{cab}: mean flow")
            axes[0].plot(x, [t["wire_slowest"] * 100 for t in pts], "--v", color=f"C{i}", ms=4,
                         label=f"{cab}: slowest flow")  # fmt: skip
            axes[1].plot(x, [t["ovs_cpu_pct"] for t in pts], "-o", color=f"C{i}", ms=4, label=cab)
        _hline(axes[0], WIRE_TARGET * 100, f"target >= {WIRE_TARGET:.0%}")
        axes[0].set_ylim(0, 105)
        axes[0].set_ylabel("wire rate / configured (%)", fontsize=9)
        axes[0].set_title(f"6 TCP flows leaf -> spine -> leaf, MTU {mtu}", fontsize=9)
        axes[0].legend(fontsize=7, loc="lower left")
        axes[1].set_ylim(0, 105)
        axes[1].set_ylabel("ovs-vswitchd CPU (% of a core)", fontsize=9)
        axes[1].set_title("the datapath's load", fontsize=9)
        axes[1].legend(fontsize=7, loc="lower right")
        for ax in axes:
            ax.set_xlabel("aggregate configured rate (Mbit/s)", fontsize=9)
            _style(ax)

    return Chart("OVS patch ports against veth cables", list(table[0]), _plain(table), draw)


def replay(data: dict) -> Chart:
    """Fig. 13 replayed twice: each group's headline per run against the paper's."""
    (groups,) = _need(data, "groups")
    n = max(len(g.get("measured") or []) for g in groups)
    table = []
    for g in groups:
        row: dict[str, Any] = {"group": g["group"], "paper": g.get("paper"), "unit": g.get("unit")}
        for i in range(n):
            row[f"run_{i + 1}"] = (g.get("measured") or [None] * n)[i] if i < len(g.get("measured") or []) else None
        for i in range(n):
            as_run = g.get("as_run") or []
            row[f"as_run_{i + 1}"] = as_run[i] if i < len(as_run) else None
        row["difference"] = g.get("difference")
        row["within_5pct"] = g.get("difference") is not None and g["difference"] <= REPLAY_GOAL
        table.append(row)

    def draw(fig: Any) -> None:
        ax = fig.subplots()
        width = 0.8 / (1 + 2 * n)
        for i, t in enumerate(table):
            bars = [("paper", t["paper"], "C7", "")]
            bars += [(f"run {k + 1}", t[f"run_{k + 1}"], f"C{k}", "") for k in range(n)]
            bars += [(f"run {k + 1}, as run", t[f"as_run_{k + 1}"], f"C{k}", "//") for k in range(n)]
            for j, (label, v, colour, hatch) in enumerate(bars):
                if v is None:
                    continue
                x = i + (j - (len(bars) - 1) / 2) * width
                ax.bar([x], [v], width, color=colour, hatch=hatch, edgecolor="white", alpha=0.6 if hatch else 1,
                       label=label if i == 0 else None)  # fmt: skip
                ax.text(x, v + 0.03, f"{v:.2f}", ha="center", fontsize=7)
            diff = t["difference"]
            within = "within" if t["within_5pct"] else "NOT within"
            verdict = "" if diff is None else f"runs differ by {diff:.1%} ({within} {REPLAY_GOAL:.0%})"
            ax.text(i, max(v for _, v, _, _ in bars if v is not None) * 1.12, verdict, ha="center", fontsize=8)
        ax.set_xticks(range(len(table)))
        ax.set_xticklabels([t["group"] for t in table], fontsize=9)
        ax.set_ylabel(f"PSNet over FatTree r=1 speed-up ({table[0]['unit'] or 'x'})", fontsize=9)
        top = max(v for t in table for k, v in t.items() if k.startswith(("run_", "as_run_", "paper")) and v)
        ax.set_ylim(0, top * 1.3)
        ax.legend(fontsize=7, loc="upper right", ncol=2)
        _style(ax)

    return Chart(f"Fig. 13's headline, replayed {n} times", list(table[0]), _plain(table), draw, (9.0, 4.8))


def scale(data: dict) -> Chart:
    """The flow model's cost by size: wall time and memory per point, per kind and traffic."""
    (points,) = _need(data, "points")
    table = [
        {"kind": p["kind"], "size": p["size"], "hosts": p.get("hosts"), "traffic": p["scheme"],
         "messages": p.get("messages"), "build_s": p.get("build_s"), "routes_s": p.get("routes_s"),
         "simgrid_s": p.get("sim_wall_s"), "whole_point_s": p.get("process_s", p.get("total_s")),
         "model_rss_mb": p.get("model_rss_mb"), "simgrid_rss_mb": p.get("sim_rss_mb"),
         "iteration_s": p.get("iteration_s"), "bound_s": p.get("bound_s"),
         "not_run": p.get("error") or p.get("skipped") or ""}
        for p in points
    ]  # fmt: skip
    if not any(t["whole_point_s"] for t in table):
        raise MissingData("no point with a wall time")

    def draw(fig: Any) -> None:
        axes = fig.subplots(1, 2)
        series = list(dict.fromkeys((t["kind"], t["traffic"]) for t in table))
        kinds = list(dict.fromkeys(t["kind"] for t in table))
        traffics = list(dict.fromkeys(t["traffic"] for t in table))
        for kind, traffic in series:
            pts = sorted((t for t in table if (t["kind"], t["traffic"]) == (kind, traffic) and t["whole_point_s"]),
                         key=lambda t: t["hosts"] or 0)  # fmt: skip
            if not pts:
                continue
            k = traffics.index(traffic)
            style = dict(color=f"C{kinds.index(kind)}", ls="-" if k == 0 else "--", marker="os"[k % 2], ms=4, lw=1.1,
                         label=f"{kind}, {traffic}")  # fmt: skip
            axes[0].plot([t["hosts"] for t in pts], [t["whole_point_s"] for t in pts], **style)
            axes[1].plot([t["hosts"] for t in pts], [max(t["model_rss_mb"] or 0, t["simgrid_rss_mb"] or 0)
                                                     for t in pts], **style)  # fmt: skip
        for ax, label in ((axes[0], "whole point: build, routes, SimGrid (s)"), (axes[1], "max RSS (MB)")):
            ax.set_xscale("log")
            ax.set_yscale("log")
            _plain_log_ticks(ax)
            ax.set_xlabel("hosts", fontsize=9)
            ax.set_ylabel(label, fontsize=9)
            _style(ax)
        axes[0].set_title("wall time per point (one iteration)", fontsize=9)
        axes[1].set_title("memory per point (model or SimGrid, the larger)", fontsize=9)
        axes[0].legend(fontsize=7, loc="upper left")
        reasons: dict[str, list[str]] = {}
        for t in table:
            if t["not_run"]:
                reasons.setdefault(t["not_run"], []).append(f"{t['kind']} {t['size']} {t['traffic']}")
        if reasons:
            text = "\n".join(f"{why}: {', '.join(names)}" for why, names in reasons.items())
            axes[0].text(0.98, 0.02, text, transform=axes[0].transAxes, ha="right", va="bottom", fontsize=7,
                         bbox={"facecolor": "white", "edgecolor": GREY, "alpha": 0.9})  # fmt: skip

    return Chart("the flow model's cost by size", list(table[0]), _plain(table), draw)


def schemes(data: dict) -> Chart:
    """Each scheme's measured GST over the busiest cable's time, per topology: the goal and the headers' floor."""
    (expected,) = _need(data, "expected")
    table = []
    for r in expected:
        gst = r.get("gst") or {}
        table.append({
            "topology": r["topology"].removesuffix(".yaml"), "mtu": r.get("mtu", DEFAULT_MTU), "scheme": r["scheme"],
            "hosts": r.get("hosts"),
            "gradient_bytes": r.get("bytes"), "busiest_cable_s": r["expected_s"], "maxmin_s": r.get("maxmin_s"),
            "gst_mean_s": gst.get("mean"), "gst_ci95_s": gst.get("ci95"), "gst_n": gst.get("n"),
            "gst_over_busiest": r.get("ratio"), "gst_over_maxmin": r.get("over_maxmin"),
            "faithful": r.get("faithful"),
        })  # fmt: skip

    def draw(fig: Any) -> None:
        ax = fig.subplots()
        groups = list(dict.fromkeys((t["topology"], t["mtu"]) for t in table))
        names = list(dict.fromkeys(t["scheme"] for t in table))
        x0, ticks, seen = 0.0, [], set()
        for topo, mtu in groups:
            pts = [t for t in table if (t["topology"], t["mtu"]) == (topo, mtu)]
            xs = [x0 + i for i in range(len(pts))]
            ticks.append(sum(xs) / len(xs))
            floor = 1 / header_factor(mtu)
            ax.plot([xs[0] - 0.5, xs[-1] + 0.5], [floor] * 2, "k:", lw=0.8)
            ax.text(xs[-1] + 0.5, floor - 0.004, f"{floor:.3f}", ha="right", va="top", fontsize=6)
            for x, t in zip(xs, pts, strict=True):
                ok = t["faithful"] is not False
                label = t["scheme"] if t["scheme"] not in seen and ok else None
                seen.add(t["scheme"])
                err = _div(t["gst_ci95_s"], t["busiest_cable_s"]) or 0
                ax.bar([x], [t["gst_over_busiest"] or 0], 0.8, yerr=[err], capsize=2, label=label,
                       color=f"C{names.index(t['scheme'])}" if ok else GREY)  # fmt: skip
                ax.text(x, (t["gst_over_busiest"] or 0) + err + 0.01, f"{t['gst_over_busiest']:.2f}", ha="center",
                        fontsize=6)  # fmt: skip
                ratio = _div(t["maxmin_s"], t["busiest_cable_s"])
                if ratio:
                    ax.plot([x - 0.4, x + 0.4], [ratio] * 2, "k-", lw=1.4)
            x0 = xs[-1] + 2
        ax.axhline(GST_GOAL, color="C3", lw=1, ls="--", label=f"goal <= {GST_GOAL:.2f}")
        ax.plot([], [], "k:", lw=0.8, label="headers' floor at the group's MTU (1514 / 1448 at 1500)")
        ax.plot([], [], "k-", lw=1.4, label="schedule's max-min time / busiest cable")
        ax.set_xticks(ticks)
        ax.set_xticklabels([f"{topo}\nMTU {mtu}" for topo, mtu in groups], fontsize=8)
        ax.set_ylabel("GST / busiest cable's time (95% CI)", fontsize=9)
        top = max((t["gst_over_busiest"] or 0) + (_div(t["gst_ci95_s"], t["busiest_cable_s"]) or 0) for t in table)
        ax.set_ylim(0.9, top + 0.12)
        ax.legend(fontsize=7, loc="upper left", ncol=3)
        _style(ax)

    return Chart("GST over the busiest cable's time, per topology, MTU and scheme", list(table[0]), _plain(table), draw,
                 (15.0, 5.0))  # fmt: skip


#: stem -> the function drawing it (a quick run's stem, <stem>-quick, uses its stem's)
FIGURES: dict[str, Callable[[dict], Chart]] = {
    "alltoall": alltoall,
    "bct": bct,
    "cluster": cluster,
    "dvf": dvf,
    "failures": failures,
    "flowmodel": flowmodel,
    "kills": kills,
    "network": network,
    "patchports": patchports,
    "replay": replay,
    "scale": scale,
    "schemes": schemes,
}


# --- drawing and writing --------------------------------------------------------------------------
def _fingerprint(source: bytes) -> str:
    """What a figure is drawn from: the json's bytes and this module's, hashed."""
    json_hash = hashlib.sha256(source).hexdigest()[:16]
    code_hash = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
    return f"json sha256 {json_hash}, replays/benchfigures.py sha256 {code_hash}"


def _drawn_from(png: Path) -> str | None:
    """The fingerprint a PNG this module wrote records (None: no such PNG, or not one of ours)."""
    if not png.is_file():
        return None
    from PIL import Image

    try:
        with Image.open(png) as im:
            return im.info.get(SOURCE_KEY)
    except (OSError, ValueError):
        return None


def _problem(err: BaseException) -> str:
    if isinstance(err, KeyError):
        return f"no '{err.args[0]}' where the figure needs one"
    return str(err) or type(err).__name__


def _render(stem: str, data: Any, chart: Chart | None, problem: str, source: str) -> tuple[bytes, str]:
    """The PNG's bytes; where drawing fails, a figure saying why (and the problem)."""
    plt = pyplot()
    size = chart.size if chart else (8.0, 3.0)
    fig = plt.figure(figsize=size, layout="constrained")
    what = chart.what if chart else "no figure"
    if chart is not None:
        try:
            chart.draw(fig)
        except (KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError) as err:
            problem = _problem(err)
            plt.close(fig)
            fig = plt.figure(figsize=(8.0, 3.0), layout="constrained")
    if problem:
        fig.text(0.5, 0.5, f"{stem}.json lacks what this figure needs:\n{problem}\n(see {stem}.md)", ha="center",
                 va="center", fontsize=10, wrap=True)  # fmt: skip
    fig.suptitle(f"{stem} benchmark: {what}\n{provenance_line(data)}", fontsize=10)
    return png_bytes(fig, {"Title": f"{stem} benchmark", SOURCE_KEY: source}), problem


def _write_if_changed(path: Path, content: bytes) -> bool:
    """Write `content` whole (temporary name, rename) unless `path` holds those bytes already."""
    if path.is_file() and path.read_bytes() == content:
        return False
    with atomic_path(path) as tmp:
        tmp.write_bytes(content)
    return True


def draw(stem: str, folder: Path = BENCH) -> Drawn | None:
    """`stem`'s figure and csv from folder/<stem>.json, named in its summary; None where nothing is
    drawn (a stem no function knows, or no json)."""
    make = FIGURES.get(stem.removesuffix("-quick"))
    if make is None:
        LOG.info("%s: skipped: no figure function for it in replays/benchfigures.py", stem)
        return None
    source = bench_data_path(folder, stem)
    if not source.is_file():
        LOG.info("%s: skipped: no %s", stem, source)
        return None
    raw = read_data_bytes(source)  # the fingerprint is of the JSON, gzipped or not
    chart, problem, data = None, "", None
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            raise MissingData("not a JSON object")
        chart = make(data)
    except json.JSONDecodeError as err:
        problem = f"not readable JSON ({err})"
    except (MissingData, KeyError, TypeError, ValueError, IndexError, ZeroDivisionError, AttributeError) as err:
        problem = _problem(err)
    png, csv_path = folder / f"{stem}.png", folder / f"{stem}.csv"
    drawn = Drawn(stem, png, csv_path)
    fingerprint = _fingerprint(raw)
    if problem or _drawn_from(png) != fingerprint:  # a figure saying what is missing is cheap: always drawn
        content, problem = _render(stem, data, chart, problem, fingerprint)
        if _write_if_changed(png, content):
            drawn.changed.append(png)
    if problem:
        LOG.warning("%s: %s.json lacks what the figure needs (%s): the figure says so, no csv", stem, stem, problem)
        drawn.problem, drawn.csv = problem, None
        if csv_path.is_file():
            csv_path.unlink()  # a table of other data than the json's
            drawn.changed.append(csv_path)
    elif chart is not None and _write_if_changed(csv_path, csv_text(chart.fields, chart.rows).encode()):
        drawn.changed.append(csv_path)
    if _name_in_summary(folder, stem, drawn):
        drawn.changed.append(folder / f"{stem}{BENCH_SUFFIX}")
    LOG.debug("%s: drawn (%s)", stem, ", ".join(p.name for p in drawn.changed) or "nothing changed")
    return drawn


def _name_in_summary(folder: Path, stem: str, drawn: Drawn) -> bool:
    """Name the png (and the csv) in <stem>.summary.json's files, changing nothing else in it; True
    where the file changed. A summary that is missing, unreadable or not complete is left alone."""
    path = folder / f"{stem}{BENCH_SUFFIX}"
    try:
        summary = read_summary(path)
    except SummaryError as err:
        LOG.warning("%s: summary not updated: %s", stem, err)
        return False
    if summary is None or not summary.complete:
        LOG.warning("%s: summary not updated: %s", stem, "none" if summary is None else "not complete (run it again)")
        return False
    files = summary.files.model_dump()
    files["figures"] = [*files.get("figures", []), *([] if drawn.png.name in files["figures"] else [drawn.png.name])]
    if drawn.csv is not None:
        files[CSV_KEY] = drawn.csv.name
    else:
        files.pop(CSV_KEY, None)
    updated = summary.model_copy(update={"files": Files.model_validate(files)})
    if updated.dump() == summary.dump():
        return False
    write_summary(folder, updated, path.name)
    return True


def draw_all(folder: Path = BENCH, stems: Iterable[str] | None = None) -> list[Drawn]:
    """Every benchmark's figure and csv in `folder` (each with a summary there), or `stems`' only."""
    names = list(stems or (p.name.removesuffix(BENCH_SUFFIX) for p in sorted(folder.glob(f"*{BENCH_SUFFIX}"))))
    out = [d for d in (draw(s, folder) for s in names) if d is not None]
    changed = sum(len(d.changed) for d in out)
    LOG.info("benchmark figures: %d of %d drawn from their json (%d files changed)", len(out), len(names), changed)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m replays.benchfigures", description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("stems", nargs="*", help="benchmarks to draw (default: every one with a summary in the folder)")
    p.add_argument("--folder", default=str(BENCH), help="the benchmarks' results (default: %(default)s)")
    p.add_argument("-v", "--verbose", action="store_true", help="a line per benchmark")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(name)s: %(message)s")
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    logging.getLogger("PIL").setLevel(logging.WARNING)
    folder = Path(args.folder)
    if not folder.is_dir():
        LOG.info("benchmark figures: no folder %s, nothing drawn", folder)
        return 0
    draw_all(folder, args.stems or None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
