"""`testbed topo check`: build, route, then prove it with measurements, as a table of verdicts.

Each row is one claim about the emulated network, the value the model expects, the value
measured inside the emulation, and PASS/FAIL: intended pairs reachable, paths (and so hop
counts) as the model and the paper say, a PSNet PS serving each worker through the NIC on the
worker's current ToR, full-MTU packets crossing a worker->PS path unfragmented, and shaping of a
sample worker->PS flow within 90-100% of configured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from controller.routing import next_hops
from controller.tc import initial_circuits
from emulation import measure
from emulation.net import Testbed

SHAPING_RANGE = (0.90, 1.0)


@dataclass(frozen=True)
class Row:
    check: str
    subject: str
    expected: str
    measured: str
    ok: bool | None  # None: information, not a verdict


def sample_pairs(tb: Testbed, limit: int = 6) -> list[tuple[str, str]]:
    """One intended pair per source (module, ToR or index), up to `limit`."""
    out, seen = [], set()
    for s, d in tb.model.intended_pairs():
        key = (tb.model.nodes[s].module, tb.model.nodes[s].index)
        if key not in seen:
            seen.add(key)
            out.append((s, d))
    return out[:limit]


def check_reachability(tb: Testbed) -> Row:
    pairs = tb.model.intended_pairs()
    res = measure.reachable(tb, pairs)
    bad = [f"{s}->{d}" for (s, d), ok in res.items() if not ok]
    return Row(
        "reachability",
        f"{len(pairs)} intended pairs",
        f"{len(pairs)}/{len(pairs)}",
        f"{len(pairs) - len(bad)}/{len(pairs)}" + (f" (fail: {', '.join(bad[:3])})" if bad else ""),
        not bad,
    )


def check_paths(tb: Testbed, pairs: list[tuple[str, str]]) -> list[Row]:
    """Switches that really forwarded a probe equal the model's path (so the hop count is right)."""
    rows = []
    for s, d in pairs:
        want = measure.model_switches(tb, s, d)
        got = measure.measured_switches(tb, s, d)
        expected = f"{len(want)} hops: {'-'.join(want)}"
        fixed = tb.model.family.paper_path(tb.model, s, d)
        if fixed:  # the paper fixes this pair's hops (a PSNet worker reaches its PS via ECS+ToR)
            expected = f"{fixed[0]} ({fixed[1]}): {'-'.join(want)}"
            ok = got == set(want) and len(want) == fixed[0]
        elif tb.model.spec.routing == "ecmp":  # the switches hash the probe: any shortest path will do
            dag = next_hops(tb.model, initial_circuits(tb.model), (), [(s, d)]).get((s, d), {})
            ok = len(got) == len(want) and got <= set(dag)
        else:
            ok = got == set(want)
        rows.append(Row("path", f"{s}->{d}", expected, f"{len(got)} hops: {'-'.join(sorted(got))}", ok))
    return rows


def check_ps_nics(tb: Testbed, packets: int = 200) -> list[Row]:
    """PSNet: each worker's packets arrive at the PS on the NIC of the worker's current ToR."""
    if not tb.model.family.has_ecs:  # no circuits, so no "current ToR" to check against
        return []
    rows = []
    circuits = tb.circuits()
    for ps in tb.model.pss():
        for w in (n for n in tb.model.workers() if n.module == ps.module):
            tor = circuits[w.name]
            want = next(ln.intf(ps.name) for ln in tb.model.links_between(ps.name, tor))
            for _attempt in range(3):  # a busy 2-core box can drop a probe: retry before judging
                before = measure.nic_bytes(tb, ps.name)
                measure.udp_probe(tb, w.name, ps.name, packets)
                after = measure.nic_bytes(tb, ps.name)
                grew = {i: after[i][0] - before[i][0] for i in after}
                busiest = max(grew, key=grew.get)
                # the claim is which NIC: most of what arrived, and at least half the probe
                ok = busiest == want and grew[busiest] >= packets * 43 // 2
                if ok:
                    break
            measured = f"{busiest} (+{grew[busiest]} B)"
            rows.append(Row("PS NIC", f"{w.name}->{ps.name}", f"{want} (on {tor})", measured, ok))
    return rows


def check_shaping(tb: Testbed, seconds: float = 3.0) -> list[Row]:
    """One TCP flow on a worker->PS (or server) pair: achieved goodput / configured rate (once
    more if it fell short: measure.rates_measured_twice_if_slow)."""
    src, dst = tb.model.intended_pairs()[0]
    lo, hi = SHAPING_RANGE
    configured = measure.bottleneck_mbps(tb, src, dst)
    samples = measure.rates_measured_twice_if_slow(tb, [(src, dst)], seconds, lo * configured)
    (last,), _ = samples[-1]
    return [
        Row(
            "shaping",
            f"{src}->{dst}",
            f"{lo:.0%}-{hi:.0%} of {configured:g} Mbit/s",
            measure.describe_samples(samples),
            lo <= last.ratio <= hi,
        )
    ]


def check_mtu(tb: Testbed, count: int = 2) -> Row:
    """Packets of the topology's full MTU, not to be fragmented, cross a worker->PS path: every
    interface on it (host ends, switch ends, relaying servers) took the `mtu` of the file."""
    src, dst = tb.model.intended_pairs()[0]
    mtu = tb.model.spec.mtu
    ip = tb.model.nodes[dst].ip
    out = tb.host(src).cmd(f"ping -c {count} -i 0.2 -W 2 -M do -s {mtu - 28} {ip}")  # 20 IP + 8 ICMP bytes
    got = re.search(r"(\d+) received", out)
    received = int(got.group(1)) if got else 0
    return Row("MTU", f"{src}->{dst}", f"{count}/{count} {mtu}-byte packets, unfragmented", f"{received}/{count}",
               received == count)  # fmt: skip


def run_checks(tb: Testbed, iperf_s: float = 3.0) -> list[Row]:
    """All checks of `topo check` on a running testbed."""
    rows = [Row("bring-up", tb.model.name, "< 5 s (prototypes)", f"{tb.timings['bring_up_s']:.2f} s", None)]
    rows.append(check_reachability(tb))
    rows += check_paths(tb, sample_pairs(tb))
    rows += check_ps_nics(tb)
    rows.append(check_mtu(tb))
    if iperf_s > 0:
        rows += check_shaping(tb, iperf_s)
    return rows


def format_rows(rows: list[Row]) -> str:
    """A plain fixed-width table (readable in a terminal and in CI logs)."""
    head = ("check", "subject", "expected", "measured", "verdict")
    body = [
        (r.check, r.subject, r.expected, r.measured, {True: "PASS", False: "FAIL", None: "info"}[r.ok]) for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=False)]
    lines = ["  ".join(str(x).ljust(w) for x, w in zip(row, widths, strict=True)) for row in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
