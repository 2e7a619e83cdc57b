"""`python -m benchmarks.network`: measure the emulated network against its targets.

Three figures, each printed with its target beside the measured value (nothing is asserted):

1. Bring-up: topology file -> every intended pair pings, for every shipped topology file, and the
   teardown after it; beside it, the same FatTree prototype as plain Mininet bridges in
   standalone mode with STP and no controller (the classic way to avoid loops), timed until its
   worker<->PS pairs ping.
2. ECS reconfiguration on the PSNet prototype (benchmarks/reconfig.py): a worker sends a paced
   UDP stream to a PS; the PS records which NIC each datagram arrives on; the worker's circuit is
   moved to another ToR. Measured: request -> first datagram on the PS NIC of the new ToR, the
   gap between the last datagram on the old NIC and the first on the new one, and the datagrams
   lost in between.
3. Shaping fidelity: iperf3 goodput / configured rate for 1 and 6 TCP flows, each flow with its
   own bottleneck at the worker rate, with ovs-vswitchd's CPU and the machine's idle time; with
   userspace TSO (emulation.tso: GSO packets cross the datapath whole) and without (PSNET_TSO=0).

Results go to OUT/network.json (everything, raw arrivals under OUT/raw/) and OUT/network.md.
Every emulation takes the testbed's emulator lock (set PSNET_LOCK_WAIT_S to queue behind other
runs); time spent waiting for the lock is measured and left out of the bring-up figures.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml

from benchmarks.common import (
    TOP,
    begin,
    bench_parser,
    depends_on,
    fmt,
    lock_wait_s,
    md_table,
    median,
    meta,
    write_results,
)
from benchmarks.reconfig import (
    RECONFIG_OTHER_TOR,
    RECONFIG_PS,
    RECONFIG_TARGET_MS,
    RECONFIG_TOPOLOGY,
    RECONFIG_WORKER,
    SEND_GAP_S,
    reconfig_figure,
)
from emulation import datapath, measure
from emulation.bringup import RegisteredNet, make_mininet
from emulation.hostcmd import run_all
from emulation.net import Testbed
from emulation.sampler import Sample, Sampler
from emulation.shaping import offload_cmd
from emulation.wire import header_factor, mss_bytes
from replays import staleness
from topologies.build import load_network
from topologies.model import Network
from topologies.schema import fidelity_budget_mbps
from topologies.spec import DEFAULT_MTU

LOG = logging.getLogger(__name__)

PROTOTYPES = ("psnet-testbed", "fattree-testbed")  # the paper's two testbeds (Section 5)
BRINGUP_TARGET_S = 5.0
FIDELITY_TARGET = 0.95
#: the shaping figure's ECS-ToR cablings: OVS patch ports (topology field `patch_cables`, the
#: default), and every cable a shaped veth pair (before)
CABLINGS = ("patch", "veth")
#: the shaping figure's two MTUs: the default, and jumbo frames (topology field `mtu`)
SHAPING_MTUS = (DEFAULT_MTU, 9000)
#: worker rates added with userspace TSO: 6 flows at 1,500 and 1,800 Mbit/s
TSO_RATES = [250.0, 300.0]
STP_CAP_S = 120.0
REACH_CAP_S = 60.0

CPU_PERIOD_S = 0.5  # sampling period of ovs-vswitchd's CPU and the machine's idle time

SHAPING_BASE = "psnet-testbed"


# --- helpers shared by the figures -------------------------------------------------------------
@dataclass
class BareNet:
    """The two things `measure.reachable` needs (model, host) for a network built without Testbed."""

    model: Network
    mn: object

    def host(self, name: str):
        return self.mn.get(name)


def wait_reachable(tb, pairs: list[tuple[str, str]], cap_s: float, ping_wait_s: float = 1.0) -> float | None:
    """Seconds until every pair has pinged once (pairs that pinged are not retried), None at cap."""
    t0 = time.monotonic()
    left = list(pairs)
    while left:
        res = measure.reachable(tb, left, wait_s=ping_wait_s)
        left = [p for p in left if not res.get(p, False)]
        if left and time.monotonic() - t0 > cap_s:
            LOG.warning("%d pairs still unreachable after %.0f s, e.g. %s", len(left), cap_s, left[:3])
            return None
    return time.monotonic() - t0


# --- 1. bring-up -------------------------------------------------------------------------------
def bringup_once(path: Path) -> dict:
    """File -> Testbed started -> every intended pair pinged; then the teardown (seconds)."""
    t0 = time.monotonic()
    tb = Testbed(path)
    row: dict = {"topology": path.stem}
    try:
        tb.start()
        t_started = time.monotonic()
        pairs = tb.model.intended_pairs()
        reach_s = wait_reachable(tb, pairs, REACH_CAP_S)
        t_reached = time.monotonic()
        lock_s = tb.timings["lock_wait_s"]  # queueing behind another run is not bring-up
        row |= {
            "hosts": len(tb.model.hosts()),
            "switches": len(tb.model.switches()),
            "pairs": len(pairs),
            "lock_wait_s": lock_s,
            "start_s": t_started - t0 - lock_s,
            "testbed_bring_up_s": tb.timings["bring_up_s"],
            "reach_s": reach_s,
            "file_to_reachable_s": (t_reached - t0 - lock_s) if reach_s is not None else None,
        }
    finally:
        t1 = time.monotonic()
        tb.stop()
        row["teardown_s"] = time.monotonic() - t1
    return row


def bringup_figure(files: list[Path], reps: int) -> list[dict]:
    """Median over `reps` bring-ups of each file (every rep kept under `runs`)."""
    out = []
    for path in files:
        runs = []
        for i in range(reps):
            LOG.info("bring-up %s (%d/%d)", path.stem, i + 1, reps)
            runs.append(bringup_once(path))
        keys = ("start_s", "testbed_bring_up_s", "reach_s", "file_to_reachable_s", "teardown_s")
        summary = {k: median([r.get(k) for r in runs]) for k in keys}
        first = runs[0]
        out.append(
            {
                "topology": path.stem,
                "hosts": first.get("hosts"),
                "switches": first.get("switches"),
                "pairs": first.get("pairs"),
                "reps": reps,
                "prototype": path.stem in PROTOTYPES,
                **summary,
                "runs": runs,
            }
        )
    return out


def stp_bringup(path: Path, cap_s: float = STP_CAP_S) -> dict:
    """The FatTree as plain Mininet: userspace OVS, standalone + STP, no controller.

    Times file -> worker<->PS pairs ping. The run comes up registered like a Testbed run
    (emulation.bringup: lock, run folder, host PIDs, tagged bridges), so `testbed clean` can
    remove it if this process dies.
    """
    model = load_network(path)
    run = RegisteredNet(model, f"{path} (bench STP)")
    row: dict = {"topology": f"{path.stem} (standalone STP, no controller)"}
    try:
        run.open(lock_wait_s())
        row["lock_wait_s"] = run.lock_wait_s
        t0 = time.monotonic()
        mn = run.build(make_mininet(model, failMode="standalone", stp=True))
        for h in model.hosts():
            cmds = []
            for ln in model.links_of(h.name):
                intf = ln.intf(h.name)
                cmds += [
                    ["ip", "link", "set", intf, "address", model.mac(h.name, ln.port_of(h.name))],
                    ["ip", "addr", "flush", "dev", intf],
                    ["ip", "addr", "add", f"{h.ip}/8", "dev", intf],
                    offload_cmd(intf),
                ]
            run_all(mn.get(h.name), cmds)
        run.start()
        t_started = time.monotonic()
        pairs = model.intended_pairs()
        reach_s = wait_reachable(BareNet(model, mn), pairs, cap_s, ping_wait_s=0.5)
        t_reached = time.monotonic()
        row |= {
            "hosts": len(model.hosts()),
            "switches": len(model.switches()),
            "pairs": len(pairs),
            "start_s": t_started - t0,
            "reach_s": reach_s,
            "file_to_reachable_s": (t_reached - t0) if reach_s is not None else None,
            "capped_at_s": cap_s,
        }
    finally:
        t1 = time.monotonic()
        try:
            run.stop_mininet()
        finally:
            row["teardown_s"] = time.monotonic() - t1
            run.close()
    return row


# --- 3. shaping fidelity -----------------------------------------------------------------------
def shaping_topology(mbps: float, folder: Path, mtu: int = DEFAULT_MTU, cabling: str = "patch") -> Path:
    """The PSNet prototype file with every rate scaled so that workers run at `mbps` (scale 1);
    `cabling` patch: its ECS-ToR slots as OVS patch ports (the default), veth: every cable a veth."""
    data = yaml.safe_load((TOP / "topologies" / f"{SHAPING_BASE}.yaml").read_text())
    data |= {"name": f"{SHAPING_BASE}-{mbps:g}mbps-mtu{mtu}-{cabling}", "worker_mbps": mbps, "scale": 1, "mtu": mtu,
             "patch_cables": cabling == "patch"}  # fmt: skip
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def flow_pairs(flows: int) -> list[tuple[str, str]]:
    """1 flow: w1_1_1 -> ps1_1; 6 flows: w1_t_1 -> ps1_1 and w1_t_2 -> ps1_2 for ToR t = 1..3."""
    if flows == 1:
        return [("w1_1_1", "ps1_1")]
    if flows == 6:
        return [(f"w1_{t}_{i}", f"ps1_{i}") for t in (1, 2, 3) for i in (1, 2)]
    raise ValueError(f"flows: 1 or 6, got {flows}")


def flow_problems(
    net: Network, paths: dict, circuits: dict[str, str], pairs: list[tuple[str, str]], mbps: float
) -> list[str]:
    """Why the pairs would not each have their own bottleneck at `mbps` (empty if they do), on
    the controller's current `paths` and `circuits` (worker -> ToR)."""
    problems = []
    nics: Counter = Counter()
    for w, ps in pairs:
        b = measure.path_bottleneck_mbps(net, paths, w, ps)
        if abs(b - mbps) > 1e-6:
            problems.append(f"{w}->{ps}: bottleneck {b:g} Mbit/s, not {mbps:g}")
        nics[(ps, circuits[w])] += 1
    problems += [f"{ps}'s NIC on {tor} carries {n} flows" for (ps, tor), n in nics.items() if n > 1]
    return problems


def cpu_means(samples: list[Sample], skip_s: float) -> tuple[float | None, float | None]:
    """Mean ovs-vswitchd CPU (% of one core) and machine idle (%) over the windows after the
    first `skip_s` seconds (iperf's warm-up); None where nothing was measured."""
    keep = samples[int(skip_s / CPU_PERIOD_S) :] or samples
    ovs = [w.ovs_cpu * 100 for w in keep if w.ovs_cpu is not None]
    idle = [w.idle * 100 for w in keep]
    return (statistics.mean(ovs) if ovs else None), (statistics.mean(idle) if idle else None)


def shaping_figure(
    rates_mbps: list[float],
    flow_counts: list[int],
    seconds: float,
    mtu: int = DEFAULT_MTU,
    cabling: str = "patch",
    tso: bool = True,
) -> list[dict]:
    """One row per (rate, flow count): achieved / configured, goodput and wire, with CPU. `tso`:
    with userspace TSO where this machine's daemon has it (the row says whether it ran with it)."""
    return _shaping_rows(rates_mbps, flow_counts, seconds, mtu, cabling, tso)


def _shaping_rows(
    rates_mbps: list[float], flow_counts: list[int], seconds: float, mtu: int, cabling: str, tso: bool
) -> list[dict]:
    out = []
    with tempfile.TemporaryDirectory(prefix="psnet-bench-") as tmp:
        for mbps in rates_mbps:
            path = shaping_topology(mbps, Path(tmp), mtu, cabling)
            with Testbed(path, tso=tso) as tb:
                for flows in flow_counts:
                    pairs = flow_pairs(flows)
                    problems = flow_problems(tb.model, tb.current_paths(), tb.circuits(), pairs, mbps)
                    for p in problems:
                        LOG.warning("shaping %g Mbit/s x %d: %s", mbps, flows, p)
                    LOG.info("shaping %g Mbit/s x %d flows, MTU %d, %g s", mbps, flows, mtu, seconds)
                    senders = sorted({s for s, _ in pairs})
                    bridges = [s.name for s in tb.model.switches()]
                    counters0 = datapath.Snapshot.take(bridges)
                    retrans0 = measure.tcp_retrans(tb, senders)
                    sampler = Sampler(CPU_PERIOD_S).start()
                    try:
                        rates = measure.iperf(tb, pairs, seconds)
                    finally:
                        ovs_cpu, idle = cpu_means(sampler.stop(), skip_s=1.5)  # server start + iperf's 1 s omit
                    # losses inside ovs-vswitchd (exact) and what TCP resent for all losses
                    drops = datapath.compare(counters0, datapath.Snapshot.take(bridges))
                    retrans = measure.tcp_retrans(tb, senders) - retrans0
                    sent = sum(r.achieved_mbps for r in rates) * 1e6 / 8 * seconds  # goodput bytes
                    ratios = [r.achieved_mbps / mbps for r in rates]
                    out.append(
                        {
                            "mtu": mtu,
                            "cabling": cabling,
                            "tso": tb.tso,
                            "rate_mbps": mbps,
                            "flows": flows,
                            "aggregate_mbps": mbps * flows,
                            "seconds": seconds,
                            "goodput_mean": statistics.mean(ratios),
                            "goodput_min": min(ratios),
                            "wire_mean": statistics.mean(ratios) / header_factor(mtu),
                            "wire_min": min(ratios) / header_factor(mtu),
                            "ovs_cpu_pct": ovs_cpu,
                            "idle_pct": idle,
                            "retrans_segments": retrans,
                            "retrans_share": retrans * mss_bytes(mtu) / sent if sent else None,
                            "datapath_drops": drops.silent,
                            "datapath_rx_drops": drops.received_dropped,
                            "ovs_send_buffer": getattr(datapath.send_socket(), "sndbuf", None),
                            "pair_problems": problems,
                            "flows_detail": [asdict(r) for r in rates],
                        }
                    )
    return out


# --- tables ------------------------------------------------------------------------------------
def format_tables(res: dict) -> str:
    """The three figures as markdown tables, target beside measured."""
    parts = []
    if res.get("bringup") or res.get("stp"):
        rows = []
        for r in res.get("bringup", []):
            target = f"< {BRINGUP_TARGET_S:g} s" if r["prototype"] else "-"
            rows.append(
                [
                    r["topology"],
                    f"{r['hosts']}/{r['switches']}",
                    str(r["pairs"]),
                    str(r["reps"]),
                    fmt(r["start_s"]),
                    fmt(r["reach_s"]),
                    fmt(r["file_to_reachable_s"], none="not reached"),
                    target,
                    fmt(r["teardown_s"]),
                ]
            )
        if res.get("stp"):
            r = res["stp"]
            reached = fmt(r.get("file_to_reachable_s"), none=f"not within {r.get('capped_at_s', STP_CAP_S):g} s")
            rows.append(
                [
                    r["topology"],
                    f"{r.get('hosts', '-')}/{r.get('switches', '-')}",
                    str(r.get("pairs", "-")),
                    "1",
                    fmt(r.get("start_s")),
                    fmt(r.get("reach_s")),
                    reached,
                    "(comparison)",
                    fmt(r.get("teardown_s")),
                ]
            )
        head = [
            "topology",
            "hosts/switches",
            "pairs",
            "reps",
            "start (s)",
            "ping all (s)",
            "file -> all reachable (s)",
            "target",
            "teardown (s)",
        ]
        parts.append("### 1. Bring-up (median over reps)\n\n" + md_table(head, rows))
    if res.get("reconfig"):
        rows = [
            [
                fmt(r["dark_ms"], "g"),
                str(r["reps"]),
                f"{fmt(r['first_new_ms'], '.1f')} (max {fmt(r['first_new_ms_max'], '.1f')})",
                f"< {RECONFIG_TARGET_MS:g}",
                fmt(r["gap_ms"], ".1f"),
                f"{fmt(r['lost'], 'g')} (max {fmt(r['lost_max'], 'g')})",
                fmt(r["call_ms"], ".1f"),
                fmt(r["controller_ms"], ".1f"),
            ]
            for r in res["reconfig"]
        ]
        head = [
            "dark (ms)",
            "reps",
            "request -> first on new NIC (ms)",
            "target (ms)",
            "old -> new NIC gap (ms)",
            f"lost (1 per {SEND_GAP_S * 1000:g} ms)",
            "reconfigure() call (ms)",
            "controller (ms)",
        ]
        title = (
            f"### 2. ECS reconfiguration ({RECONFIG_TOPOLOGY}, {RECONFIG_WORKER} -> {RECONFIG_PS}, "
            f"circuit t1_1 <-> {RECONFIG_OTHER_TOR}; medians)"
        )
        parts.append(title + "\n\n" + md_table(head, rows))
    if res.get("shaping"):
        rows = []
        for r in res["shaping"]:
            mtu = row_mtu(r)
            budget = fidelity_budget_mbps(mtu, tso=row_tso(r))
            within = r["aggregate_mbps"] <= budget
            rows.append(
                [
                    row_cabling(r),
                    "TSO" if r.get("tso") else "frames",
                    str(mtu),
                    fmt(r["rate_mbps"], "g"),
                    str(r["flows"]),
                    fmt(r["aggregate_mbps"], "g"),
                    f"{r['goodput_mean']:.1%} / {r['goodput_min']:.1%}",
                    f"{r['wire_mean']:.1%} / {r['wire_min']:.1%}",
                    f"{header_factor(mtu):.4f}",
                    f">= {FIDELITY_TARGET:.0%}" if within else f"- (> {budget:g})",
                    fmt(r["ovs_cpu_pct"], ".0f"),
                    fmt(r["idle_pct"], ".0f"),
                    f"{r['retrans_segments']} ({r['retrans_share']:.2%})"
                    if r.get("retrans_share") is not None
                    else "-",
                    f"{r.get('datapath_drops', '-')} / {r.get('datapath_rx_drops', '-')}",
                ]
            )
        head = [
            "ECS-ToR cables",
            "datapath",
            "MTU",
            "worker rate (Mbit/s)",
            "flows",
            "aggregate (Mbit/s)",
            "goodput/configured mean / min",
            "wire (goodput/factor) mean / min",
            "factor (payload/frame)",
            "target (wire)",
            "ovs-vswitchd CPU (% of a core)",
            "machine idle (%)",
            "TCP retransmissions (share of bytes)",
            "ovs-vswitchd drops send / receive",
        ]
        parts.append(
            "### 3. Shaping fidelity (iperf3 TCP, each flow its own bottleneck)\n\n"
            + md_table(head, rows)
            + "\n\n"
            + ceiling_sentence(res["shaping"])
        )
    return "\n\n".join(parts) + "\n"


def row_cabling(row: dict) -> str:
    """A shaping row's ECS-ToR cabling (rows written before patch cables ran on veths)."""
    return row.get("cabling", "veth")


def row_tso(row: dict) -> bool:
    """Whether a shaping row ran with userspace TSO (rows written before it ran without)."""
    return bool(row.get("tso", False))


def row_mtu(row: dict) -> int:
    """A shaping row's MTU (rows written before the MTU column ran at the default)."""
    return row.get("mtu", DEFAULT_MTU)


def ceiling(
    rows: list[dict],
    target: float = FIDELITY_TARGET,
    mtu: int = DEFAULT_MTU,
    cabling: str | None = None,
    tso: bool | None = None,
) -> float | None:
    """The highest aggregate (Mbit/s) at which the wire rate held `target` of the configured one at
    `mtu`, mean and min over the flows, with every lower aggregate holding it too (None: not even
    the lowest). A higher aggregate that holds after a lower one failed does not count: the ceiling
    is where fidelity can be relied on, not where it happened once. `cabling`, `tso`: only their rows."""
    best = None
    rows = [r for r in rows if row_mtu(r) == mtu and cabling in (None, row_cabling(r)) and tso in (None, row_tso(r))]
    for r in sorted(rows, key=lambda r: (r["aggregate_mbps"], r["flows"])):
        if min(r["wire_mean"], r["wire_min"]) < target:
            break
        best = r["aggregate_mbps"]
    return best


def ceiling_sentence(rows: list[dict]) -> str:
    """One line per MTU and cabling measured: the ceiling beside the schema's budget for that MTU."""
    lines = []
    for tso, cabling, mtu in sorted({(row_tso(r), row_cabling(r), row_mtu(r)) for r in rows}):
        top, budget = ceiling(rows, mtu=mtu, cabling=cabling, tso=tso), fidelity_budget_mbps(mtu, tso=tso)
        label = f"MTU {mtu}, ECS-ToR cables {cabling}, {'userspace TSO' if tso else 'frames (no TSO)'}"
        if top is None:
            lines.append(
                f"- {label}: wire rate below {FIDELITY_TARGET:.0%} of the configured rate already at the lowest "
                f"aggregate (the schema's budget is {budget:g} Mbit/s)."
            )
            continue
        mine = [r for r in rows if row_mtu(r) == mtu and row_cabling(r) == cabling and row_tso(r) == tso]
        measured = max(r["aggregate_mbps"] for r in mine)
        top_note = " (the highest measured)" if top == measured else ""
        lines.append(
            f"- {label}: highest aggregate at which every flow's wire rate held >= {FIDELITY_TARGET:.0%} of the "
            f"configured rate (and at every lower one measured): **{top:g} Mbit/s**{top_note} (the schema's "
            f"budget is {budget:g} Mbit/s)."
        )
    return "\n".join(lines)


# --- entry point -------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = bench_parser("bench_network", __doc__, "reduced run (< 2 min): prototypes only, no STP, fewer reps")
    p.add_argument("--only", choices=["bringup", "reconfig", "shaping"], action="append", help="run only these figures")
    p.add_argument("--no-stp", action="store_true", help="skip the standalone-STP FatTree comparison")
    p.add_argument(
        "--tso",
        choices=["on", "off"],
        action="append",
        help="the shaping figure's datapath: on (userspace TSO, where ovs-vswitchd has it) and/or off "
        "(full: both; quick: on)",
    )
    p.add_argument(
        "--cabling",
        choices=CABLINGS,
        action="append",
        help="the shaping figure's ECS-ToR cables: patch (OVS patch ports, the default) and/or veth "
        "(full: both; quick: patch)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir = begin(args)
    figures = set(args.only or ["bringup", "reconfig", "shaping"])
    if args.quick:
        files = [TOP / "topologies" / f"{n}.yaml" for n in PROTOTYPES]
        bringup_reps, reconfig_reps, rates, iperf_s = 1, 3, [25.0, 100.0], 3.0
        jumbo_rates = [200.0]
    else:
        files = sorted((TOP / "topologies").glob("*.yaml"))
        bringup_reps, reconfig_reps, rates, iperf_s = 3, 6, [10.0, 25.0, 50.0, 100.0, 150.0, 200.0], 8.0
        jumbo_rates = [100.0, 200.0, 300.0]  # 6 flows: 600 ... 1,800 Mbit/s (the uplinks, 3 x B_w, stay <= 1,000)
    res: dict = {"meta": meta(args)}
    t0 = time.monotonic()
    if "bringup" in figures:
        res["bringup"] = bringup_figure(files, bringup_reps)
        if not (args.quick or args.no_stp):
            LOG.info("standalone STP FatTree (up to %g s)", STP_CAP_S)
            res["stp"] = stp_bringup(TOP / "topologies" / "fattree-testbed.yaml")
    if "reconfig" in figures:
        res["reconfig"] = reconfig_figure([0.0, 1.0, 10.0], reconfig_reps, out_dir / "raw")
    if "shaping" in figures:
        res["shaping"] = []
        modes = [m == "on" for m in args.tso or (["on"] if args.quick else ["on", "off"])]
        for tso in modes:
            for cabling in args.cabling or (CABLINGS[:1] if args.quick else CABLINGS):
                more = TSO_RATES if tso and not args.quick else []
                res["shaping"] += shaping_figure(rates + more, [1, 6], iperf_s, SHAPING_MTUS[0], cabling, tso)
                res["shaping"] += shaping_figure(jumbo_rates, [6], iperf_s, SHAPING_MTUS[1], cabling, tso)
    res["meta"]["wall_s"] = time.monotonic() - t0
    write_results(
        out_dir,
        "network",
        "Network benchmark",
        res,
        format_tables(res),
        args.quick,
        depends_on("network", staleness.TOPOLOGY_FILES),
    )  # it runs every topology file
    return 0


if __name__ == "__main__":
    sys.exit(main())
