"""`python -m benchmarks.cluster`: what a cut cable costs when one network runs over two servers
(`--cluster`, docs/cluster.md), against the same network on one machine.

Two "servers" are made on this machine (servers/local.py: namespaces, each with its own sshd and
its own Open vSwitch). The 2-rack leaf-spine (4 hosts a rack) is brought up at each rate on one
machine (`Testbed`) and over the two servers (`ClusterTestbed`), where the placement tunnels the
rack-to-rack traffic (a VXLAN device pair per cut cable). Between rack 0 and rack 1, per platform
and rate: the idle round trip (median of 20 pings), one TCP flow (iperf3, 3 s) against its host
cable's rate, and four at once (each host of rack 0 to one of rack 1) against four cables' worth.
Both platforms share this machine's 2 cores, so what the tunnel costs here is its latency and its
kernel work, not a second machine's gain; the two servers do run two ovs-vswitchd threads where one
machine runs one.

Then the issue's goal runs, through the run pipeline on one machine and with `--cluster` over the
two servers: a ring all-reduce over the 16 hosts of FatTree(4) (ResNet50's gradient at scale
`JOB_SCALE`, calibrated compute 0), and a TF PS job on PSNet with two modules (`TF_EXPERIMENT`,
a module per server; the one-module prototype cannot be split), `JOB_ITERATIONS` measured
iterations each: GST or BCT mean with its 95% CI and the fidelity verdict of each (over two
servers, judged from each server's counters). Nothing is
asserted: the figures are printed and written.
"""

from __future__ import annotations

import json
import logging
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from benchmarks.common import TOP, begin, bench_parser, depends_on, fmt, md_table, meta, write_results

LOG = logging.getLogger(__name__)

TOPOLOGY = "leafspine-2rack.yaml"
RATES = (50.0, 100.0, 200.0)  # emulated Mbit/s per host cable (the uplinks: 4x, up to 800)
QUICK_RATES = (50.0,)
SECONDS = 3
JOB_TOPOLOGY = "fattree-k4.yaml"
JOB_ITERATIONS = 5
#: the ring's scale (10 Mbit/s a host cable, the model's bytes alike): at the file's 25 Mbit/s the
#: 16 engine processes and the datapath left this machine no idle CPU (judged not faithful)
JOB_SCALE = 100


#: the TF goal run: the PSNet prototype cannot be split (its ECS patch cables are never cut), so
#: PSNet with two modules, a module per server
TF_EXPERIMENT = "psnet-2modules-resnet50.yaml"


@dataclass
class JobRow:
    job: str
    platform: str
    metric: str  # GST (a scheme job) or BCT (a TF PS job)
    mean_s: float
    ci95_s: float
    n: int
    faithful: bool
    reason: str


@dataclass
class Row:
    platform: str  # "one machine" | "two servers"
    mbps: float  # per host cable
    rtt_ms: float  # median idle round trip, rack 0 -> rack 1
    one_flow_mbps: float
    four_flows_mbps: float  # their sum
    tunnelled: int  # cables cut between the servers (0 on one machine)

    @property
    def one_share(self) -> float:
        return self.one_flow_mbps / self.mbps

    @property
    def four_share(self) -> float:
        return self.four_flows_mbps / (4 * self.mbps)


def _net(mbps: float):
    """The topology with its scale set so a host cable runs at `mbps`, checked as a file would be
    (the emulator's per-cable ceiling included: the rack uplinks carry four hosts' worth)."""
    from topologies.build import build_network
    from topologies.schema import load_spec, parse_spec

    path = TOP / "topologies" / TOPOLOGY
    spec = load_spec(path)
    return build_network(parse_spec({**spec.model_dump(), "scale": spec.worker_mbps / mbps}, str(path)))


def _iperf(tb, pairs: list[tuple[str, str]], seconds: int) -> list[float]:
    """Mbit/s each (src, dst) TCP flow delivered, all started together (iperf3 in the hosts)."""
    for _, dst in pairs:
        tb.host(dst).cmd(f"iperf3 -s -1 -D -B {tb.model.nodes[dst].ip}")
    time.sleep(0.3)
    outs = []
    for i, (src, dst) in enumerate(pairs):
        out = f"/tmp/psnet-bench-cluster-{tb.run_id}-{i}.json"
        tb.host(src).cmd(f"iperf3 -c {tb.model.nodes[dst].ip} -t {seconds} -O 1 -J > {out} 2>&1 &")
        outs.append((src, out))
    time.sleep(seconds + 2.5)
    got = []
    for src, out in outs:
        text = tb.host(src).cmd(f"cat {out}; rm -f {out}")
        try:
            got.append(json.loads(text[text.index("{") :])["end"]["sum_received"]["bits_per_second"] / 1e6)
        except (ValueError, KeyError) as err:
            LOG.warning("%s: no iperf3 result (%s): %s", src, err, text[-200:])
            got.append(0.0)
    return got


def measure(tb, platform: str, mbps: float, seconds: int) -> Row:
    racks = [sorted(h.name for h in tb.model.hosts() if h.name.startswith(f"h{r}_")) for r in (0, 1)]
    a, b = racks[0][0], racks[1][0]
    ping = tb.host(a).cmd(f"ping -c 20 -i 0.05 {tb.model.nodes[b].ip}")
    rtts = [float(x.split("time=")[1].split()[0]) for x in ping.splitlines() if "time=" in x]
    one = _iperf(tb, [(a, b)], seconds)[0]
    four = sum(_iperf(tb, list(zip(racks[0], racks[1], strict=True)), seconds))
    cut = len(tb.placement.cut) if hasattr(tb, "placement") else 0
    row = Row(platform, mbps, statistics.median(rtts) if rtts else float("nan"), one, four, cut)
    LOG.info("%s", row)
    return row


def goal_jobs(iterations: int) -> dict[str, str]:
    """The issue's goal runs as experiment files (module doc): job name -> its text."""
    return {
        "ring, FatTree(4)": (
            f"topology: {TOP / 'topologies' / JOB_TOPOLOGY}\nscale: {JOB_SCALE}\njob:\n  model: resnet50\n"
            f"  scheme: ring\n  compute: calibrated\n  compute_s: 0\n  iterations: {iterations}\n  warmup: 1\n"
            "  check: true\n"
        ),
        "TF PS, PSNet 2 modules": (TOP / "workloads" / "experiments" / TF_EXPERIMENT)
        .read_text()
        .replace("../../topologies/", f"{TOP / 'topologies'}/")
        .replace("iterations: 5", f"iterations: {iterations}"),
    }


def goal_job(tmp: Path, job: str, text: str, platform: str) -> JobRow:
    """One goal run through the run pipeline, on whatever testbed the runs open
    (emulation.net.testbeds): the ring's GST or the TF job's BCT."""
    from runs.runner import run_experiment

    exp = tmp / f"{len(list(tmp.glob('job-*.yaml')))}.yaml"
    exp = exp.with_name(f"job-{exp.name}")
    exp.write_text(text)
    s = run_experiment(exp, tmp / "results", progress=False).summary
    stat, metric = (s.gst_s, "GST") if s.scheme else (s.bct_s, "BCT")
    assert stat is not None and stat.mean is not None, f"{job}, {platform}: no {metric} measured"
    row = JobRow(job, platform, metric, stat.mean, stat.ci95 or float("nan"), stat.n, bool(s.faithful),
                 s.fidelity_reason)  # fmt: skip
    LOG.info("%s", row)
    return row


def job_table(rows: list[JobRow]) -> str:
    head = ["job", "platform", "measured", "mean (s)", "95% CI", "n", "verdict"]
    body = [
        [r.job, r.platform, r.metric, fmt(r.mean_s, ".3f"), f"±{r.ci95_s:.3f}", str(r.n),
         ("faithful" if r.faithful else "NOT faithful: " + r.reason[:120])]
        for r in rows
    ]  # fmt: skip
    return md_table(head, body)


def table(rows: list[Row]) -> str:
    head = ["platform", "Mbit/s per host", "tunnelled cables", "RTT (ms)", "1 flow", "4 flows"]
    body = [
        [r.platform, fmt(r.mbps, "g"), str(r.tunnelled), fmt(r.rtt_ms, ".3f"),
         f"{r.one_flow_mbps:.1f} ({r.one_share:.0%})", f"{r.four_flows_mbps:.1f} ({r.four_share:.0%})"]
        for r in rows
    ]  # fmt: skip
    return md_table(head, body)


def main(argv: list[str] | None = None) -> int:
    from emulation.cluster_inventory import load_cluster
    from emulation.cluster_net import ClusterTestbed
    from emulation.net import Testbed
    from servers.local import OvsServers
    from testbed.clusterrun import cluster_testbeds

    p = bench_parser("bench_cluster", __doc__, f"{' '.join(map(str, QUICK_RATES))} Mbit/s only (~1 min)")
    p.add_argument(
        "--rates", type=float, nargs="+", help=f"Mbit/s per host cable (default {' '.join(map(str, RATES))})"
    )
    args = p.parse_args(argv)
    out_dir = begin(args)
    m = meta(args)
    t0 = time.monotonic()
    rates = args.rates or (QUICK_RATES if args.quick else RATES)
    rows: list[Row] = []
    jobs: list[JobRow] = []
    iterations = 2 if args.quick else JOB_ITERATIONS
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        servers = OvsServers(Path(tmp))
        try:
            servers.start()
            inv_file = servers.cluster_file(Path(tmp) / "cluster.yaml")
            inv = load_cluster(inv_file)
            for mbps in rates:
                net = _net(mbps)
                with Testbed(net) as tb:
                    rows.append(measure(tb, "one machine", mbps, SECONDS))
                with ClusterTestbed(net, inv) as tb:
                    rows.append(measure(tb, "two servers", mbps, SECONDS))
            for job, text in goal_jobs(iterations).items():
                jobs.append(goal_job(Path(tmp), job, text, "one machine"))
                with cluster_testbeds(str(inv_file)):
                    jobs.append(goal_job(Path(tmp), job, text, "two servers"))
        finally:
            servers.stop()
    m["wall_s"] = time.monotonic() - t0
    res = {"meta": m, "topology": TOPOLOGY, "rows": [asdict(r) for r in rows], "goal_jobs": [asdict(j) for j in jobs]}
    text = (
        f"The 2-rack leaf-spine ({TOPOLOGY}) on one machine and over two servers made on this machine "
        "(servers/local.py), rack 0 to rack 1: idle round trip, one TCP flow and four at once (iperf3, "
        f"{SECONDS} s) against their host cables' rate. Over two servers the rack-to-rack traffic crosses "
        "VXLAN tunnels; both platforms share this machine's 2 cores.\n\n" + table(rows) + "\n\n"
        f"The goal runs, through the run pipeline on one machine and with `--cluster` over the two servers "
        f"({iterations} measured iterations each): a ring all-reduce over the 16 hosts of FatTree(4) ({JOB_TOPOLOGY} "
        f"at scale {JOB_SCALE}: ResNet50's gradient, {1000 / JOB_SCALE:g} Mbit/s a host cable, calibrated compute "
        f"0), and the TF PS job of {TF_EXPERIMENT} (ResNet50, real compute; the PSNet prototype cannot be split: "
        "its ECS patch cables are never cut):\n\n" + job_table(jobs)
    )
    stem = "cluster-quick" if args.quick else "cluster"
    write_results(out_dir, stem, "One network over two servers: what a tunnel costs", res, text, args.quick,
                  depends_on("cluster", "servers/local.py"))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
