"""`python -m benchmarks.alltoall`: an all-to-all on an emulated network, in plain TCP and in the
scheme engine, against the busiest cable's bound (issue 29: whose is the mesh's lost time?).

The engine's mesh on Torus-3x3 took ~1.5-2x its busiest-cable bound. A mesh is an all-to-all (every
host sends each other host 1/N of its gradient; the owners then send the sums back), and this
benchmark splits what the network does from what the engine adds:
- `raw`: plain TCP and no engine. Every host pre-connects one socket to every other, and at one
  instant (the hosts share this machine's clock) sends each peer the bytes of the mesh's reduce
  phase, one thread per peer; each receiver notes when every flow's last byte came. Rounds are
  `--gap` seconds apart (at least 2.5x the bound, so one ends before the next), and TCP starts
  each from its initial window after idle, as an engine iteration does.
- `engine`: the scheme engine runs the whole mesh (reduce, then all-gather: twice the bytes, a bound
  twice as long) with a barrier before every synchronisation, so each starts at one instant too.
  (Its reduce phase alone is not comparable: with segments, the owners send back early segments'
  sums while later ones still come in.)
Gradient bytes fall with the rate (ResNet-50's 97.5 MB over the scale, the testbed's S/B rule), so
the bound is the same at every rate and only the emulator's load changes. Per rate: the
all-to-all's end (the last flow's last byte, from the common start) over its bound (the busiest
cable's bytes over its rate on the controller's routes: schemes.count), the median flow per route
length, the engine's mesh over its bound, TCP retransmissions, and the fidelity verdict of each
part. Nothing is asserted here: the ratios are printed.

Retransmissions are split into what TCP's timers sent (TcpExt TCPTimeouts) and what reached the
receiver twice (TCPDSACKRecv: the sender learnt the first copy had arrived, so it was not lost).
Many of both with no queue drops are spurious timeouts: rates scaled down stretch a full FIFO's
delay by the scale (1.5 MB drains in 3 s at 4 Mbit/s, in 12 ms at 1 Gbit/s) while the kernel's
200-ms RTO floor stays. The testbed raises the hosts' floor to a full FIFO's drain time by default
(emulation.rto: the topology's `rto_min_ms: auto`); `--rto-min-ms` sets it for every row (auto,
kernel or ms) to see what those timeouts cost; relay ceilings are then not kept (they hold for the
testbed's TCP as it runs, with the default floor).

The in-host part is benchmarks/alltoall_host.py: plain blocking sockets and threads, the least a
sender can be; no tool here sends a timed all-to-all from inside network namespaces (iperf3 is one
pair per server, and its control connection costs a second).
"""

from __future__ import annotations

import json
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from benchmarks.common import TOP, begin, bench_parser, depends_on, fmt, md_table, meta, write_results

LOG = logging.getLogger(__name__)

RATES = (3.125, 6.25, 12.5, 25.0)  # emulated Mbit/s per cable (full run)
QUICK_RATES = (3.125, 12.5)
ROUNDS = 4
#: the full run's networks: two server-centric ones (servers relay: Torus, BCube) and two switched
#: ones, the scheme benchmark's leaf-spines (2:1, where the spine is the bound; 1:1, where the
#: hosts' cables are, each shared by 7 flows: what plain TCP loses there is what mesh and RAT lose)
TOPOLOGIES = ("torus-3x3.yaml", "bcube-4-1.yaml", "leafspine-rat.yaml", "leafspine-2rack.yaml")
#: and the scheme benchmark's 64 hosts at its rate (63 flows each way on every host cable), once with
#: the kernel's RTO floor and once with the testbed's default (a full FIFO's drain time: emulation.rto)
LARGEST = ("leafspine-64", 4.0)


@dataclass
class Flow:
    round: int
    src: str
    dst: str
    bytes: int
    end_s: float  # after the round's common start
    links: int  # cables on its route


@dataclass
class Row:
    topology: str
    mbps: float
    hosts: int
    flow_bytes: int  # the largest of the all-to-all's flows
    bound_s: float  # the all-to-all's busiest cable over its rate
    raw_end_s: list[float]  # per round: the last flow's end
    raw_flows: int  # flows that delivered all their bytes (of flows x rounds)
    raw_by_links: dict[str, float]  # median flow end per route length (cables)
    raw_retrans: int
    raw_timeouts: int  # TCP timer expiries (TcpExt TCPTimeouts)
    raw_dsacks: int  # duplicates the receivers reported (TCPDSACKRecv): retransmitted, not lost
    raw_faithful: bool
    raw_fidelity: str
    engine_gst_s: list[float] = field(default_factory=list)
    mesh_bound_s: float = 0.0
    engine_faithful: bool | None = None
    engine_fidelity: str = ""
    rto_min_ms: float | None = None  # every host's RTO floor (emulation.rto.floor_ms); None: the kernel's
    rto_setting: str | float = "auto"  # the topology's rto_min_ms the row ran with

    @property
    def raw_over_bound(self) -> float:
        return statistics.median(self.raw_end_s) / self.bound_s

    @property
    def engine_over_mesh_bound(self) -> float | None:
        return statistics.median(self.engine_gst_s) / self.mesh_bound_s if self.engine_gst_s else None


def reduce_phase(sched):
    """The mesh's reduce phase alone (every worker to every owner): the raw all-to-all's schedule."""
    from schemes.schedule import Op, Schedule

    out = Schedule("alltoall", sched.workers, sched.chunks)
    for host, steps in sched.steps.items():
        for s in steps:
            if s.op == Op.REDUCE:
                out.transfer(s.peer, host, s.chunk, Op.REDUCE)
    return out


def topology_spec(name: str):
    """A file in topologies/, or `leafspine-64`: the scheme benchmark's largest run
    (benchmarks.schemes.LARGEST: 2 spines x 4 leaves x 16 hosts, no oversubscription)."""
    from topologies.schema import load_spec, parse_spec

    if name == LARGEST[0]:
        from benchmarks.schemes import LARGEST as SIZE

        base = load_spec(TOP / "topologies" / "leafspine-rat.yaml").model_dump()
        return parse_spec({**base, **SIZE, "name": name}, "benchmarks.schemes.LARGEST")
    return load_spec(TOP / "topologies" / name)


def route_links(net, src: str, dst: str) -> int:
    import networkx as nx

    return nx.shortest_path_length(nx.Graph(net.graph()), src, dst)


def raw_alltoall(
    tb, net, transfers: dict[tuple[str, str], int], rounds: int, gap_s: float, run_dir: Path
) -> list[Flow]:
    """Every (src, dst) -> bytes of `transfers` as one pre-connected TCP flow, all at once, `rounds`
    times; the flows' ends. A host whose process failed is an error naming it and its log's tail."""
    from emulation.net import clean_env

    run_dir.mkdir(parents=True, exist_ok=True)
    hosts = sorted({h for pair in transfers for h in pair})
    addrs = {h: tb.model.nodes[h].ip for h in hosts}
    t0 = time.time() + 3.0 + 0.05 * len(hosts)  # every host up and connected by then
    procs = {}
    for h in hosts:
        cfg = {
            "name": h,
            "addresses": addrs,
            "sends": {d: b for (s, d), b in transfers.items() if s == h},
            "senders": {s: b for (s, d), b in transfers.items() if d == h},
            "rounds": rounds,
            "gap_s": gap_s,
            "t0": t0,
            "out": str(run_dir / f"{h}.json"),
        }
        (run_dir / f"{h}.cfg.json").write_text(json.dumps(cfg))
        log = (run_dir / f"{h}.log").open("w")
        argv = [sys.executable, "-m", "benchmarks.alltoall_host", str(run_dir / f"{h}.cfg.json")]
        procs[h] = tb.host(h).popen(argv, stdout=log, stderr=subprocess.STDOUT, env=clean_env(), cwd=str(TOP))
    limit = t0 + rounds * gap_s + 30 - time.time()
    for h, p in procs.items():
        try:
            rc = p.wait(timeout=max(1.0, limit))
        except subprocess.TimeoutExpired:
            p.kill()
            rc = -9
        if rc != 0:
            tail = (run_dir / f"{h}.log").read_text().strip().splitlines()[-1:]
            raise RuntimeError(f"all-to-all host {h} exited {rc}: {' '.join(tail) or 'no output'} ({run_dir})")
    links = {pair: route_links(net, *pair) for pair in transfers}
    flows = []
    for h in hosts:
        for k, src, nbytes, end in json.loads((run_dir / f"{h}.json").read_text()):
            flows.append(Flow(k, src, h, nbytes, end, links[(src, h)]))
    return flows


def engine_mesh(tb, net, hosts: list[str], scale: float, iterations: int, run_dir: Path) -> list[float]:
    """The engine's mesh with a barrier: per measured iteration its GST from the common start (the
    earliest host's sync start to the last host's end)."""
    from engine.emulated import run_in_testbed
    from runs.engine_job import prepare
    from workloads.experiment import JobSpec

    job = JobSpec(model="resnet50", scheme="mesh", compute="calibrated", compute_s=0.0, iterations=iterations,
                  warmup=1, barrier=True, workers=hosts)  # fmt: skip
    prep = prepare(job, net, scale, "bench alltoall")
    run = run_in_testbed(tb, prep.cfg, prep.hosts, run_dir, timeout_s=job.deadline_s, schedule=prep.sched)
    return [i["sync_s"] for i in run.iterations()]


def measure_rate(
    topology: str, mbps: float, rounds: int, gap_s: float, tmp: Path, rto_min: str | float = "auto"
) -> Row:
    from emulation import measure, rto
    from emulation.fidelity import Monitor
    from emulation.net import Testbed
    from schemes import compile_scheme
    from schemes.count import expected_sync_s
    from topologies.build import build_network
    from topologies.schema import parse_spec
    from workloads.experiment import PAPER_MODEL_BYTES

    base = topology_spec(topology)
    spec = parse_spec({**base.model_dump(), "scale": base.worker_mbps / mbps, "rto_min_ms": rto_min}, topology)
    net = build_network(spec)
    hosts = [h.name for h in net.hosts()]
    n_elems = int(PAPER_MODEL_BYTES["resnet50"] / spec.scale) // 4
    mesh = compile_scheme("mesh", hosts, n_elems)
    a2a = reduce_phase(mesh)
    transfers = {(s.peer, h): a2a.chunks[s.chunk].nbytes for h, steps in a2a.steps.items() for s in steps}
    bound = expected_sync_s(net, a2a)
    gap_s = max(gap_s, 2.5 * bound + 0.5)  # a round ends before the next starts (the bound: >= 1 x of it)
    with Testbed(net) as tb:
        monitor = Monitor(net).start()
        before = measure.tcp_totals(tb, hosts)
        try:
            flows = raw_alltoall(tb, net, transfers, rounds, gap_s, tmp / f"raw-{mbps:g}")
        finally:
            verdict = monitor.stop()
        retrans, _, timeouts, dsacks = (a - b for a, b in zip(measure.tcp_totals(tb, hosts), before, strict=True))
        monitor = Monitor(net).start()
        try:
            gst = engine_mesh(tb, net, hosts, spec.scale, rounds, tmp / f"engine-{mbps:g}")
        finally:
            e_verdict = monitor.stop()
    ends = [max(f.end_s for f in flows if f.round == k) for k in range(rounds)]
    by_links = {
        str(n): statistics.median(f.end_s for f in flows if f.links == n) for n in sorted({f.links for f in flows})
    }
    row = Row(topology, mbps, len(hosts), max(transfers.values()), bound, ends, len(flows),
              by_links, retrans, timeouts, dsacks, verdict.faithful, verdict.reason, gst,
              expected_sync_s(net, mesh), e_verdict.faithful, e_verdict.reason, rto.floor_ms(net), rto_min)  # fmt: skip
    LOG.info(
        "%s at %g Mbit/s: raw all-to-all %.2fx its bound (%.3f s), the engine's mesh %sx its own",
        topology, mbps, row.raw_over_bound, row.bound_s, fmt(row.engine_over_mesh_bound),
    )  # fmt: skip
    return row


def table(rows: list[Row]) -> str:
    head = [
        "topology",
        "Mbit/s per cable",
        "hosts",
        "flow (KB)",
        "bound (s)",
        "raw TCP: end / bound (median of rounds)",
        "raw: median flow end by route length (cables: s)",
        "raw: TCP retransmits (timeouts, duplicates received)",
        "RTO floor (ms)",
        "raw: verdict",
        "engine: mesh GST / its bound",
        "engine: verdict",
    ]
    body = [
        [
            r.topology,
            fmt(r.mbps, "g"),
            str(r.hosts),
            fmt(r.flow_bytes / 1e3, ".1f"),
            fmt(r.bound_s, ".3f"),
            f"{r.raw_over_bound:.2f} ({', '.join(f'{e:.3f}' for e in r.raw_end_s)} s)",
            ", ".join(f"{k}: {v:.3f}" for k, v in r.raw_by_links.items()),
            f"{r.raw_retrans} ({r.raw_timeouts}, {r.raw_dsacks})",
            fmt(r.rto_min_ms, "g") if r.rto_min_ms is not None else "200 (kernel)",
            "faithful" if r.raw_faithful else f"not faithful: {r.raw_fidelity}",
            fmt(r.engine_over_mesh_bound),
            "faithful" if r.engine_faithful else f"not faithful: {r.engine_fidelity}",
        ]
        for r in rows
    ]
    return md_table(head, body)


def record_ceilings(rows: list[Row], when: str) -> dict[str, dict]:
    """Keep each kind's raw all-to-all ratios in this machine's relay-ceiling cache (the fidelity
    verdict judges relaying runs by them: emulation.relaying) and return each kind's ceiling."""
    from emulation import relaying

    out = {}
    for topology in dict.fromkeys(r.topology for r in rows):
        kind = topology_spec(topology).kind
        c = relaying.record(kind, topology, {r.mbps: r.raw_over_bound for r in rows if r.topology == topology}, when)
        out[kind] = asdict(c)
    return out


def ceiling_text(ceilings: dict[str, dict]) -> str:
    """The ceilings as the report states them."""
    from emulation.relaying import TOLERANCE

    lines = [
        f"Relay ceilings kept for this machine (`testbed doctor` shows them; emulation.relaying): a rate per "
        f"cable holds while its all-to-all stays within {TOLERANCE - 1:.0%} of the lowest rate's "
        "time; a run whose traffic servers relay above the ceiling is judged not faithful.\n"
    ]
    for kind, c in ceilings.items():
        if c["failed_mbps"] is None:
            lines.append(f"- {kind}: held to {c['mbps']:g} Mbit/s per cable, the highest rate tried")
        else:
            lines.append(
                f"- {kind}: {c['mbps']:g} Mbit/s per cable (at {c['failed_mbps']:g}: {c['failed_ratio']:.2f}x the "
                "lowest rate's time)"
            )
    return "\n".join(lines) + "\n"


def rto_setting(p, raw: str) -> str | float:
    """--rto-min-ms as the topology field takes it (topologies.spec.check_rto_min), or p.error;
    a number needs the per-namespace sysctl (emulation.rto)."""
    from emulation.rto import RTO_MIN_SYSCTL, has_rto_floor
    from topologies.spec import check_rto_min

    try:
        number: str | float = float(raw)
    except ValueError:
        number = raw
    try:
        value = check_rto_min(number)
    except ValueError as e:
        p.error(f"--rto-min-ms: {e}")
    if value not in ("auto", "kernel") and not has_rto_floor():
        p.error(f"--rto-min-ms needs {RTO_MIN_SYSCTL} (Linux 6.11+); this kernel has none: use auto or kernel")
    return value


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("bench_alltoall", __doc__, f"{' and '.join(map(str, QUICK_RATES))} Mbit/s, 2 rounds (~1 min)")
    p.add_argument(
        "--topology",
        nargs="+",
        help=f"files in topologies/ or {LARGEST[0]} (default {' '.join(TOPOLOGIES)}; quick: the first)",
    )
    p.add_argument("--rates", type=float, nargs="+", help=f"Mbit/s per cable (default {' '.join(map(str, RATES))})")
    p.add_argument("--rounds", type=int, default=ROUNDS, help=f"all-to-alls per rate, and engine iterations ({ROUNDS})")
    p.add_argument(
        "--rto-min-ms",
        default="auto",
        help="every host's TCP RTO floor: auto (the testbed's default), kernel (200 ms) or ms (see above)",
    )
    p.add_argument(
        "--gap", type=float, default=2.0, help="seconds between raw rounds (default 2; at least 2.5 x the bound + 0.5)"
    )
    args = p.parse_args(argv)
    rto_min = rto_setting(p, args.rto_min_ms)
    out_dir = begin(args)
    m = meta(args)
    t0 = time.monotonic()
    rates = args.rates or (QUICK_RATES if args.quick else RATES)
    rounds = 2 if args.quick else args.rounds
    topologies = args.topology or (TOPOLOGIES[:1] if args.quick else TOPOLOGIES)
    with tempfile.TemporaryDirectory(prefix="alltoall-") as tmp:
        plan = [(t, r, rto_min) for t in topologies for r in rates]
        if not (args.quick or args.topology or args.rates) and rto_min == "auto":
            name, rate = LARGEST
            plan += [(name, rate, "kernel"), (name, rate, "auto")]
        rows = [measure_rate(t, r, rounds, args.gap, Path(tmp), floor) for t, r, floor in plan]
    m["wall_s"] = time.monotonic() - t0
    kept = [r for r in rows if r.rto_setting == "auto" and (r.topology, r.mbps) != LARGEST]  # the testbed's own TCP
    ceilings = record_ceilings(kept, m["started"])
    res = {"meta": m, "rows": [asdict(r) for r in rows], "ceilings": ceilings}
    text = (
        "Every host sends every other its 1/N of a ResNet-50 gradient scaled with the rate (the mesh's "
        "reduce phase) at one instant: in plain TCP (pre-connected sockets, a thread per peer, no engine) "
        "and in the scheme engine's mesh (a barrier before each sync; reduce and all-gather, against its own "
        "bound, twice the all-to-all's). Bound: the busiest cable's bytes over its rate on the "
        "controller's routes, the same at every rate. The full run ends with the scheme benchmark's 64 hosts "
        "(63 flows each way on every 4-Mbit/s host cable), with the kernel's RTO floor and with the testbed's "
        "(a full FIFO's drain time): timeouts with duplicates received are spurious ones.\n\n"
        + table(rows)
        + "\n\n"
        + ceiling_text(ceilings)
    )
    stem = "alltoall-quick" if args.quick else "alltoall"
    write_results(out_dir, stem, "An all-to-all in plain TCP and in the engine", res, text, args.quick,
                  depends_on("alltoall"))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
