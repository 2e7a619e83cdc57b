"""`python -m benchmarks.patchports`: would OVS patch ports raise the emulator's ceiling? (issue 32)

The emulator's ceiling is one ovs-vswitchd thread: every packet costs it a receive and a send per
bridge it crosses, since each cable between two bridges is a veth pair the datapath sends into
and receives from again. An OVS patch port joins two bridges inside the datapath instead: with
the userspace datapath a packet then crosses all its bridges in one lookup, with one receive and
one send. What a patch port cannot carry is a qdisc, so a patch cable cannot be shaped: it fits
only cables the topology model shows can never be a bottleneck.

This probe measures the gain before the platform takes it: one network, two cablings.
- the network: a leaf-spine of 2 leaves x 6 hosts and 2 spines, no oversubscription (each uplink
  carries three hosts' rate); 6 TCP flows (iperf3), leaf 0's host i to leaf 1's host i, through
  spine 1 for even i, spine 2 for odd i (static rules on destination MAC, no controller), so every
  flow has its own bottleneck at the host rate and crosses three bridges.
- `veth`: every cable a veth pair shaped at both ends (HTB, the testbed's own commands), as the
  testbed cables a network today: 3 receives and 3 sends per packet.
- `patch`: the four leaf-spine cables as patch ports (unshaped; they carry at most their rate by
  construction), the host cables as before: 1 receive and 1 send per packet.
Per aggregate rate (6 x the host rate): goodput / configured rate (mean and slowest flow) and on
the wire, ovs-vswitchd's CPU, TCP retransmissions and the datapath's silent drops; and, for the
patch cabling, whether OVS's own counters on the patch ports account for the bytes (the monitor
would read them there instead of from a kernel interface).

Why a network of its own and not the testbed's Testbed: the testbed cables every link as a veth
(emulation.bringup's MnLink) with the controller's routes; this probe changes only the cabling, so
it builds the model's network through emulation.bringup (lock, run folder, tagged bridges:
`testbed clean` removes it if the probe dies) with Mininet's own patch-port link (OVSLink) on the
leaf-spine cables and static rules in place of the controller. Nothing is asserted: the figures
are printed beside the 95% target.
"""

from __future__ import annotations

import logging
import statistics
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml
from mininet.link import OVSLink

from benchmarks.common import begin, bench_parser, depends_on, fmt, lock_wait_s, md_table, meta, write_results
from benchmarks.network import CPU_PERIOD_S, FIDELITY_TARGET, BareNet, cpu_means, wait_reachable
from controller.routing import compute_paths
from emulation import datapath, measure
from emulation.bringup import RegisteredNet, make_mininet
from emulation.hostcmd import run_all
from emulation.sampler import Sampler
from emulation.shaping import htb_cmds, mtu_cmd, offload_cmd, rx_napi_cmds, tc_batch
from emulation.wire import header_factor
from topologies.build import load_network
from topologies.model import Network
from topologies.spec import DEFAULT_MTU

LOG = logging.getLogger(__name__)

CABLINGS = ("veth", "patch")
HOSTS_PER_LEAF = 6
#: OVS adds a datapath flow's packets to its ports' statistics when a revalidator next pulls them
#: (about once a second): read the patch ports' counters this long after the traffic stopped (a
#: read right at the end missed 31% of 3 s at 1,200 Mbit/s)
COUNTER_SETTLE_S = 2.0
SPINES = 2


@dataclass
class Row:
    """One (cabling, host rate) measurement."""

    cabling: str
    rate_mbps: float
    aggregate_mbps: float
    seconds: float
    goodput: list[float]  # per flow, achieved / configured
    ovs_cpu_pct: float | None
    idle_pct: float | None
    retrans_segments: int
    datapath_drops: int
    send_errors_logged: int
    #: patch cabling: bytes OVS counted as sent on the patch ports, halved (each frame crosses two
    #: patch cables), over the bytes the hosts' interfaces sent: 1.0 when OVS's counters account for
    #: every frame
    patch_counted_share: float | None = None

    @property
    def mean(self) -> float:
        return statistics.mean(self.goodput)

    @property
    def slowest(self) -> float:
        return min(self.goodput)


def model_file(mbps: float, folder: Path, mtu: int = DEFAULT_MTU) -> Path:
    """The probe's leaf-spine (2 leaves x 6 hosts, 2 spines, 1:1) with hosts at `mbps`, scale 1."""
    data = {
        "name": f"patchports-{mbps:g}mbps",
        "kind": "leafspine",
        "spines": SPINES,
        "leaves": 2,
        "hosts_per_leaf": HOSTS_PER_LEAF,
        "oversubscription": 1,
        "worker_mbps": mbps,
        "scale": 1,
        "mtu": mtu,
    }
    path = folder / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def flows(model: Network) -> list[tuple[str, str, str]]:
    """(source, destination, spine): leaf 0's i-th host to leaf 1's i-th, spines alternating."""
    by_leaf: dict[str, list[str]] = {}
    for h in model.hosts():
        by_leaf.setdefault(model.links_of(h.name)[0].other(h.name), []).append(h.name)
    (_, left), (_, right) = sorted(by_leaf.items())
    spines = sorted({s.name for s in model.switches()} - set(by_leaf))
    return [(a, b, spines[i % len(spines)]) for i, (a, b) in enumerate(zip(left, right, strict=True))]


@dataclass
class ProbeNet(BareNet):
    """What emulation.measure's iperf and ping need of a network built without Testbed: the model,
    the hosts and the paths (the model's own routes: only the bottleneck is read from them)."""

    def current_paths(self) -> dict:
        return compute_paths(self.model, {})


def switch_cables(model: Network) -> list:
    switches = {s.name for s in model.switches()}
    return [ln for ln in model.links if ln.a in switches and ln.b in switches]


def ofport(intf: str) -> int:
    out = subprocess.run(["ovs-vsctl", "get", "Interface", intf, "ofport"], capture_output=True, text=True, check=True)
    return int(out.stdout.strip())


def rules(model: Network, pairs: list[tuple[str, str, str]]) -> dict[str, list[str]]:
    """Per bridge, ovs-ofctl flows on destination MAC: a host's leaf sends to the host, the other
    leaf to the pair's spine, a spine to the host's leaf; ARP is static (no broadcast)."""
    out: dict[str, list[str]] = {}
    for src, dst, spine in pairs:
        for host, peer in ((dst, src), (src, dst)):
            hl = model.links_of(host)[0]
            leaf, mac = hl.other(host), model.mac(host, hl.port_of(host))
            other_leaf = model.links_of(peer)[0].other(peer)
            out.setdefault(leaf, []).append(f"dl_dst={mac},actions=output:{ofport(hl.intf(leaf))}")
            up = model.links_between(other_leaf, spine)[0]
            out.setdefault(other_leaf, []).append(f"dl_dst={mac},actions=output:{ofport(up.intf(other_leaf))}")
            down = model.links_between(spine, leaf)[0]
            out.setdefault(spine, []).append(f"dl_dst={mac},actions=output:{ofport(down.intf(spine))}")
    return out


def set_up_hosts(model: Network, mn, pairs: list[tuple[str, str, str]], mtu: int) -> None:
    """Addresses, MACs, offloads off (GRO and a NAPI thread on the receiving end, as the testbed
    does), static ARP for each flow's two ends."""
    peers = {a: b for a, b, _ in pairs} | {b: a for a, b, _ in pairs}
    for h in model.hosts():
        ln = model.links_of(h.name)[0]
        intf, peer = ln.intf(h.name), peers[h.name]
        pl = model.links_of(peer)[0]
        peer_mac = model.mac(peer, pl.port_of(peer))
        run_all(
            mn.get(h.name),
            [
                ["ip", "link", "set", intf, "address", model.mac(h.name, ln.port_of(h.name))],
                mtu_cmd(intf, mtu),
                ["ip", "addr", "flush", "dev", intf],
                ["ip", "addr", "add", f"{h.ip}/8", "dev", intf],
                offload_cmd(intf),
                ["ip", "neigh", "replace", model.nodes[peer].ip, "lladdr", peer_mac, "dev", intf],
                *rx_napi_cmds([intf]),
            ],
        )


def shape(model: Network, mn, cabling: str, mbps: float, mtu: int) -> None:
    """HTB on both ends of every veth cable at its rate scaled to host rate `mbps` (the uplinks at
    three hosts' rate); patch cables carry no qdisc."""
    root: list[list[str]] = []
    host_mbps = model.links_of(model.hosts()[0].name)[0].mbps  # the rate the model was built at
    unshaped = switch_cables(model) if cabling == "patch" else []
    for ln in model.links:
        if ln in unshaped:
            continue
        rate = mbps * ln.mbps / host_mbps
        for end in (ln.a, ln.b):
            cmds = htb_cmds(ln.intf(end), rate, mtu=mtu)  # a fresh tree: pfifo cannot be changed in place
            if model.nodes[end].is_host:
                mn.get(end).cmd(f"tc qdisc del dev {ln.intf(end)} root 2>/dev/null")
                run_all(mn.get(end), cmds)
            else:
                subprocess.run(["tc", "qdisc", "del", "dev", ln.intf(end), "root"], capture_output=True, check=False)
                root += cmds
    with tempfile.NamedTemporaryFile("w", suffix=".tc") as f:
        f.write(tc_batch(root))
        f.flush()
        subprocess.run(["tc", "-batch", f.name], check=True, capture_output=True)


def patch_tx_bytes(model: Network) -> int:
    """Bytes OVS counted as sent on the patch ports (both ends of each switch-to-switch cable)."""
    total = 0
    for ln in switch_cables(model):
        for end in (ln.a, ln.b):
            out = subprocess.run(["ovs-vsctl", "get", "Interface", ln.intf(end), "statistics:tx_bytes"],
                                 capture_output=True, text=True, check=True)  # fmt: skip
            total += int(out.stdout.strip().strip('"'))
    return total


def tx_bytes(mn, model: Network) -> int:
    """Bytes every host's interface sent (the flows' data and their acknowledgements)."""
    total = 0
    for h in model.hosts():
        intf = model.links_of(h.name)[0].intf(h.name)
        total += int(mn.get(h.name).cmd(f"cat /sys/class/net/{intf}/statistics/tx_bytes").strip())
    return total


def measure_cabling(cabling: str, rates: list[float], seconds: float, mtu: int = DEFAULT_MTU) -> list[Row]:
    """One network per cabling, reshaped for each host rate; 6 concurrent flows per rate."""
    out: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="psnet-patch-") as tmp:
        model = load_network(model_file(max(rates), Path(tmp), mtu))
        pairs = flows(model)
        run = RegisteredNet(model, f"benchmarks.patchports ({cabling})")
        try:
            run.open(lock_wait_s())
            mn = make_mininet(model, failMode="secure", protocols="OpenFlow13")
            if cabling == "patch":
                switches = {s.name for s in model.switches()}
                for a, b, info in mn.topo.links(sort=True, withInfo=True):
                    if a in switches and b in switches:
                        info["cls"] = OVSLink
            mn = run.build(mn)
            run.start()
            root_intfs = [ln.intf(e) for ln in model.links for e in (ln.a, ln.b) if not model.nodes[e].is_host]
            for intf in root_intfs:
                if Path(f"/sys/class/net/{intf}").exists():  # patch ports have no kernel interface
                    for cmd in (offload_cmd(intf), mtu_cmd(intf, mtu)):
                        subprocess.run(cmd, check=True, capture_output=True)
            set_up_hosts(model, mn, pairs, mtu)
            for br, flows_ in rules(model, pairs).items():
                subprocess.run(["ovs-ofctl", "-O", "OpenFlow13", "add-flows", br, "-"], input="\n".join(flows_),
                               text=True, check=True, capture_output=True)  # fmt: skip
            net = ProbeNet(model, mn)
            ends = [(a, b) for a, b, _ in pairs]
            if wait_reachable(net, ends, cap_s=30) is None:
                raise RuntimeError(f"{cabling}: the flows' hosts do not reach each other")
            bridges = [s.name for s in model.switches()]
            senders = [a for a, _ in ends]
            for mbps in rates:
                shape(model, mn, cabling, mbps, mtu)
                LOG.info("%s cabling: 6 flows at %g Mbit/s (%g aggregate), %g s", cabling, mbps, 6 * mbps, seconds)
                time.sleep(COUNTER_SETTLE_S)
                d0, r0 = datapath.Snapshot.take(bridges), measure.tcp_retrans(net, senders)
                p0, b0 = (patch_tx_bytes(model) if cabling == "patch" else 0), tx_bytes(mn, model)
                sampler = Sampler(CPU_PERIOD_S).start()
                try:
                    rates_ = measure.iperf(net, ends, seconds)
                finally:
                    ovs_cpu, idle = cpu_means(sampler.stop(), skip_s=1.5)
                drops = datapath.compare(d0, datapath.Snapshot.take(bridges))
                counted = None
                time.sleep(COUNTER_SETTLE_S)
                if cabling == "patch":  # every frame a host sends crosses two patch cables (up, down)
                    sent = tx_bytes(mn, model) - b0
                    counted = (patch_tx_bytes(model) - p0) / 2 / sent if sent else None
                out.append(
                    Row(
                        cabling,
                        mbps,
                        6 * mbps,
                        seconds,
                        [r.achieved_mbps / mbps for r in rates_],
                        ovs_cpu,
                        idle,
                        measure.tcp_retrans(net, senders) - r0,
                        drops.silent,
                        sum(drops.send_errors.values()),
                        counted,
                    )
                )
        finally:
            run.close()
    return out


def table(rows: list[Row], mtu: int = DEFAULT_MTU) -> str:
    """Both cablings side by side per aggregate rate, on the wire (goodput over the frame factor)."""
    head = [
        "cabling",
        "host rate (Mbit/s)",
        "aggregate (Mbit/s)",
        "wire/configured mean / slowest",
        "target",
        "ovs-vswitchd CPU (% of a core)",
        "machine idle (%)",
        "TCP retransmitted segments",
        "datapath drops (silent / send errors logged)",
        "patch counters / host bytes",
    ]
    f = header_factor(mtu)
    body = [
        [
            r.cabling,
            fmt(r.rate_mbps, "g"),
            fmt(r.aggregate_mbps, "g"),
            f"{r.mean / f:.1%} / {r.slowest / f:.1%}",
            f">= {FIDELITY_TARGET:.0%}",
            fmt(r.ovs_cpu_pct, ".0f"),
            fmt(r.idle_pct, ".0f"),
            str(r.retrans_segments),
            f"{r.datapath_drops} / {r.send_errors_logged}",
            fmt(r.patch_counted_share, ".4f"),
        ]
        for r in sorted(rows, key=lambda r: (r.aggregate_mbps, CABLINGS.index(r.cabling)))
    ]
    return md_table(head, body)


def main(argv: list[str] | None = None) -> int:
    p = bench_parser("bench_patchports", __doc__, "two aggregate rates (600, 1,200 Mbit/s), 3 s flows (~1 min)")
    p.add_argument("--seconds", type=float, default=8.0, help="iperf3 time per row (default 8)")
    args = p.parse_args(argv)
    out_dir = begin(args)
    m = meta(args)
    t0 = time.monotonic()
    rates = [100.0, 200.0] if args.quick else [100.0, 150.0, 200.0, 250.0, 300.0]  # x 6 flows
    seconds = 3.0 if args.quick else args.seconds
    rows = [r for cabling in CABLINGS for r in measure_cabling(cabling, rates, seconds)]
    m["wall_s"] = time.monotonic() - t0
    res = {"meta": m, "rows": [asdict(r) | {"mean": r.mean, "slowest": r.slowest} for r in rows]}
    text = (
        f"6 TCP flows (iperf3, {seconds:g} s each), each its own bottleneck at the host rate, across "
        f"leaf -> spine -> leaf ({HOSTS_PER_LEAF} hosts per leaf, {SPINES} spines, 1:1), MTU {DEFAULT_MTU}. "
        "`veth`: every cable a veth shaped at both ends (the testbed today); `patch`: the leaf-spine "
        "cables as OVS patch ports, unshaped. Wire = goodput / (payload per frame); the last column: "
        "bytes OVS counted on the patch ports (halved: two per frame) over the bytes the hosts sent.\n\n"
        + table(rows)
        + "\n"
    )
    stem = "patchports-quick" if args.quick else "patchports"
    depends = depends_on("patchports", "benchmarks/network.py")  # its helpers (BareNet, cpu_means...)
    write_results(out_dir, stem, "OVS patch ports against veth cables", res, text, args.quick, depends)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
