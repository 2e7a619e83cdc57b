"""A schedule's bytes on the topology's cables, through the routes the controller installs.

Gives each scheme's expectation without running it: the busiest directed cable's bytes divided
by its rate is the synchronisation time a perfectly pipelined run cannot beat (the benchmark sets
measured sync time beside it). Paths come from the controller's own routing code, so the counted
cables are the ones the emulator's packets cross.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from controller.routing import PAIR_HASHED, compute_paths, path_links, taken_path
from controller.tc import initial_circuits
from schemes.schedule import Schedule, pair_bytes
from topologies.model import Link, Network


@dataclass(frozen=True)
class LinkLoad:
    """Payload bytes one synchronisation puts on one cable in one direction."""

    link: Link
    src: str  # the end the bytes leave from
    nbytes: int

    def seconds(self, paper: bool = False) -> float:
        """Time to carry them at the cable's rate (emulated rate, or the paper's with paper=True)."""
        mbps = self.link.paper_mbps if paper else self.link.mbps
        return self.nbytes * 8 / (mbps * 1e6)


def _relay_closed_paths(net: Network, pairs: list[tuple[str, str]]) -> dict:
    """Paths of the pairs, and of every (relay, dst) a relaying server forwards by (its own route:
    `taken_path` follows it), so multi-hop pairs on BCube and Torus can be counted.

    Under `routing: balanced` a pair's least-loaded choice depends on every pair routed before
    it, and the emulator routes all pairs (intended first): routing only the schedule's pairs
    gave other paths than the packets take (BCube(4,1) before its routing was fixed: a
    host-order ring's bound half the one its packets met). So there every pair is routed, as
    the emulator does; hashed choices are per pair, and only the pairs needed are routed."""
    circuits = initial_circuits(net)
    if net.spec.routing not in PAIR_HASHED:
        return compute_paths(net, circuits)
    paths: dict = {}
    want = pairs
    while want:
        paths.update(compute_paths(net, circuits, pairs=want))
        relayed = {(h.node, dst) for (_, dst), p in paths.items() for h in p[1:-1] if net.nodes[h.node].is_host}
        want = sorted(relayed - set(paths))
    return paths


def link_loads(net: Network, schedule: Schedule) -> list[LinkLoad]:
    """Bytes per directed cable, busiest (by time at its rate) first."""
    pairs = pair_bytes(schedule)
    paths = _relay_closed_paths(net, list(pairs))
    missing = [p for p in pairs if p not in paths]
    if missing:
        raise ValueError(f"{net.name}: no route for {missing[:3]} (is every scheme host in the topology?)")
    per: Counter[tuple[str, int, str]] = Counter()
    links: dict[tuple[str, int, str], Link] = {}
    for (src, dst), n in pairs.items():
        node = src
        for ln in path_links(net, taken_path(net, paths, src, dst)):
            key = (*ln.key[:2], node) if node == ln.a else (*ln.key[2:], node)
            per[key] += n
            links[key] = ln
            node = ln.other(node)
    loads = [LinkLoad(links[k], k[2], n) for k, n in per.items()]
    return sorted(loads, key=lambda x: x.seconds(), reverse=True)


def busiest_s(loads: list[LinkLoad], paper: bool = False) -> float:
    """The busiest cable's bytes over its rate (`link_loads`, busiest first): the schedule's lower
    bound on this network."""
    return loads[0].seconds(paper) if loads else 0.0


def cable_load_gbps(net: Network, loads: list[LinkLoad]) -> float:
    """Gbit/s the schedule puts on the veth cables together while its busiest cable is busy
    (`link_loads`): every directed veth cable's bytes over the busiest one's time at its rate (a
    patch cable costs the datapath no pass). The quantity the flow model's load term multiplies
    (models.flow.simgrid.cable_load_gbps, there from a platform)."""
    bound = busiest_s(loads)
    veth = sum(ld.nbytes for ld in loads if not net.is_patch(ld.link))
    return veth * 8 / bound / 1e9 if bound > 0 else 0.0


def expected_sync_s(net: Network, schedule: Schedule, paper: bool = False) -> float:
    """The busiest cable's bytes over its rate: the schedule's lower bound on this network."""
    return busiest_s(link_loads(net, schedule), paper)
