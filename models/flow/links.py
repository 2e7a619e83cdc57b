"""The flow model's cables: the SimGrid platform of the cables a traffic crosses, and the
busiest-cable bound (bytes over rate) that every simulation is set beside.

Shared by `testbed simulate` (runs.simulate) and the paper-scale sweeps of the model figures
(models.flow.paper_scale), which build their networks without an experiment file.
"""

from __future__ import annotations

from collections import Counter

from models.flow.demands import Traffic
from models.flow.routes import Routes
from models.flow.simgrid import Platform
from topologies.model import Network

BYTES_PER_MBIT = 1e6 / 8


def platform(net: Network, routes: Routes, paper: bool) -> Platform:
    """One split-duplex SimGrid link per cable the traffic crosses, at the file's rate (the
    emulator's patch cables marked: they count in no datapath load)."""
    latency = net.spec.delay_ms / 1000
    index: dict[tuple, int] = {}
    links: list[tuple[str, float, float]] = []
    out: dict[tuple[str, str], list[tuple[int, bool]]] = {}
    patch: set[int] = set()
    for pair, cables in routes.cables.items():
        hops = []
        for ln, frm in cables:
            if ln.key not in index:
                index[ln.key] = len(links)
                if net.is_patch(ln):
                    patch.add(len(links))
                mbps = ln.paper_mbps if paper else ln.mbps
                links.append((f"{ln.a}:{ln.port_a}-{ln.b}:{ln.port_b}", mbps * BYTES_PER_MBIT, latency))
            hops.append((index[ln.key], frm == ln.a))
        out[pair] = hops
    return Platform(links, out, net.spec.mtu, frozenset(patch))


def busiest_cable(traffic: Traffic, routes: Routes, paper: bool) -> tuple[float, str]:
    """Lower bound: per phase, the busiest directed cable's bytes over its rate (summed over
    phases), and that cable. Exact where one bottleneck carries equal flows throughout."""
    total, name = 0.0, ""
    for ph in range(len(traffic.phases)):
        load: Counter = Counter()
        rate: dict = {}
        for i in range(len(traffic)):
            if traffic.phase[i] != ph:
                continue
            for ln, frm in routes.cables[(traffic.src[i], traffic.dst[i])]:
                key = (ln.key, frm)
                load[key] += traffic.nbytes[i]
                rate[key] = (ln.paper_mbps if paper else ln.mbps) * BYTES_PER_MBIT
        if load:
            key = max(load, key=lambda k: load[k] / rate[k])
            total += load[key] / rate[key]
            name = f"{key[1]}->{key[0][2] if key[0][0] == key[1] else key[0][0]}"
    return total, name
