"""Central routing (CNC): paths for every host pair, and what to install on switches and hosts.

Pure functions of (model, circuit map, failed links), so the os-ken apps, the testbed (which sets
routes inside multi-NIC hosts) and the BCT model all see the same paths.

- The ECS is transparent: a circuit is a logical link worker <-> ToR port.
- Candidates for a pair are all shortest paths, expanded over parallel links (ECMP). Between two
  PSNet modules they are the shortest paths through each of the R edge-disjoint SuperNode paths
  (controller.modules: Section 3.1 spreads a module pair's traffic over all of them; with H >= 4
  only one of them is a shortest path). Hosts never carry transit traffic
  except BCube and Torus servers, which relay; a kind may fix which relays a pair crosses
  (`Kind.relay_hosts`: a Torus's dimension order), and then only those candidates remain.
- Strategy `ecmp` leaves the choice to the switches, as a real ECMP switch makes it: wherever a
  pair has several equal-cost next hops, its rule sends to an ECMP group (`Group`: one bucket
  per next hop), and the switch picks the bucket by a hash of each packet's symmetric 5-tuple,
  so two TCP connections of one host pair may take different paths. On Open vSwitch a group is
  Nicira's `multipath(symmetric_l4, basis, hrw, ...)` into a register and a resubmit to table
  `ECMP_TABLE`, one rule per bucket (controller.ofctl): the hash is computed when a flow is
  translated, so each connection's datapath flow carries its TCP ports and its output port,
  which is how a run measures C (emulation.flows). An OpenFlow select group hashes in the
  datapath instead (dp_hash + recirculation): its datapath flows show a masked hash, not the
  connection. Each switch hashes with its own basis (`ecmp_basis`), as real switches seed their
  hash per box: with one basis, a connection's choice at the edge would fix its choice at the
  aggregation switch too, and half the core paths would never be used. For everything that needs one path
  per pair (host routes, the BCT and flow models, `testbed topo check`'s expected hops),
  `compute_paths` returns the `hashed` choice: one draw of a per-connection hash (a TF job keeps
  one connection per worker-PS pair), so the models' C for `ecmp` is that of `hashed`.
- Strategy `hashed` picks a candidate by a seeded hash of (src, dst) and pins it (static, per pair);
  `balanced` picks the least-loaded candidate, intended (worker<->PS) pairs first (the paper's
  Eq. 7 analysis: C = 6 on the FatTree prototype), and among them those with the fewest
  candidates first: a greedy choice that routed the flexible pairs first filled the cables the
  pinned ones must take (two PSNet modules with W1 = 4 of W = 6: 3 flows on one PS NIC where
  Eq. 6's spreading gives 2).
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

import networkx as nx

from controller.modules import ModuleRouter
from controller.tc import Circuits, worker_link
from topologies.model import Link, Network, Role

#: flow priorities and cookies (named, so dumps can be read and rules deleted by owner)
PRIO_ROUTE = 100
PRIO_CIRCUIT = 100
PRIO_L2 = 50
COOKIE_ROUTE = 0x10
COOKIE_CIRCUIT = 0x20
COOKIE_L2 = 0x30
COOKIE_ECMP = 0x40
#: the table of ECMP buckets: (reg1 = group id, reg0 = bucket) -> output
ECMP_TABLE = 1
#: strategies whose per-pair path is the seeded hash (ecmp: one draw of the switches' hash)
PAIR_HASHED = frozenset({"hashed", "ecmp"})

LinkKey = tuple[str, int, str, int]


@dataclass(frozen=True)
class Hop:
    """One node of a path with the ports it is entered and left by (None at the ends)."""

    node: str
    in_port: int | None
    out_port: int | None


@dataclass(frozen=True)
class Flow:
    """A flow rule as plain data: what an OpenFlow switch must hold, comparable and hashable.
    It outputs to `out_port`, or (ECMP, `out_port` None) hashes into ECMP group `group`."""

    priority: int
    cookie: int
    match: tuple[tuple[str, object], ...]
    out_port: int | None
    group: int | None = None
    table: int = 0


@dataclass(frozen=True)
class Group:
    """An ECMP group: one equal-weight bucket per equal-cost next hop (`ports`); on the switch,
    a hash into a register and one `bucket_flows` rule per bucket."""

    group_id: int
    ports: tuple[int, ...]


def bucket_flows(group: Group) -> list[Flow]:
    """The group's buckets as rules of `ECMP_TABLE`: bucket i (reg0) of this group (reg1) outputs
    to its port. Single-output rules, so per-port packet accounting reads them as any route."""
    return [
        Flow(PRIO_ROUTE, COOKIE_ECMP, (("reg0", i), ("reg1", group.group_id)), port, table=ECMP_TABLE)
        for i, port in enumerate(group.ports)
    ]


def ecmp_basis(dpid: int) -> int:
    """The switch's own 16-bit hash basis (stable per switch, different between switches)."""
    return _hash(f"dpid {dpid}") & 0xFFFF


@dataclass(frozen=True)
class HostRoute:
    """Inside a host: reach `dst_ip` out of `intf`, with `mac` as the static neighbour entry."""

    dst_ip: str
    intf: str
    mac: str


def routing_graph(net: Network, circuits: Circuits, down: Iterable[LinkKey] = ()) -> nx.MultiGraph:
    """Working links as edges (attribute `ports`: node -> port); ECS circuits as worker-ToR edges."""
    dead = set(down)
    g = nx.MultiGraph()
    for n in net.nodes.values():
        if n.role != Role.ECS:
            g.add_node(n.name)
    for ln in net.links:
        if ln.key in dead or net.nodes[ln.a].role == Role.ECS or net.nodes[ln.b].role == Role.ECS:
            continue
        g.add_edge(ln.a, ln.b, key=ln.key, ports={ln.a: ln.port_a, ln.b: ln.port_b}, link=ln)
    for worker, slot in circuits.items():
        wl = worker_link(net, worker)
        if wl.key in dead or slot.key in dead:
            continue
        tor = slot.b
        g.add_edge(worker, tor, key=("circuit", worker), ports={worker: wl.port_a, tor: slot.port_b}, link=slot)
    return g


def _candidates(g: nx.MultiGraph, transit: set[str], src: str, dst: str) -> list[list[Hop]]:
    view = g.subgraph(transit | {src, dst})
    try:
        node_paths = sorted(nx.all_shortest_paths(view, src, dst))
    except (nx.NetworkXNoPath, nx.NodeNotFound):
        return []
    out = []
    for nodes in node_paths:
        choices = [sorted(view[u][v].items(), key=lambda kv: str(kv[0])) for u, v in itertools.pairwise(nodes)]
        for edges in itertools.product(*choices):
            hops = []
            for i, node in enumerate(nodes):
                inp = edges[i - 1][1]["ports"][node] if i > 0 else None
                outp = edges[i][1]["ports"][node] if i < len(edges) else None
                hops.append(Hop(node, inp, outp))
            out.append(hops)
    return out


def pair_candidates(
    net: Network, g: nx.MultiGraph, transit: set[str], src: str, dst: str, modules: ModuleRouter | None = None
) -> list[list[Hop]]:
    """Every candidate path of one pair: the inter-module ones of `modules` for two hosts in
    different PSNet modules, else the shortest paths (narrowed by the kind's fixed relays)."""
    if modules is not None and modules.applies(src, dst):
        return modules.candidates(src, dst, lambda view, s, d: _candidates(view, transit, s, d))
    return kind_fixed(net, _candidates(g, transit, src, dst), src, dst)


def kind_fixed(net: Network, cands: list[list[Hop]], src: str, dst: str) -> list[list[Hop]]:
    """The candidates crossing the hosts the kind's own routing fixes (`Kind.relay_hosts`, e.g.
    a Torus's dimension order); all of them where it fixes none or none matches (a failure)."""
    want = net.family.relay_hosts(net, src, dst)
    if want is None:
        return cands
    fixed = [c for c in cands if tuple(h.node for h in c if net.nodes[h.node].is_host) == want]
    return fixed or cands


def _hash(text: str) -> int:
    """Stable, well-mixed hash (crc32 is affine: seeds of one length shift every pair alike)."""
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _edges(path: list[Hop]) -> list[tuple[str, int]]:
    return [(h.node, h.out_port) for h in path[:-1]]  # directed link = (node, out port)


def compute_paths(
    net: Network, circuits: Circuits, down: Iterable[LinkKey] = (), pairs: Iterable[tuple[str, str]] | None = None
) -> dict[tuple[str, str], list[Hop]]:
    """The chosen path of every (src, dst) host pair that is connected (intended pairs first)."""
    g = routing_graph(net, circuits, down)
    transit = {n.name for n in net.nodes.values() if (not n.is_host or n.relay) and n.role != Role.ECS}
    hosts = [h.name for h in net.hosts()]
    intended = net.intended_pairs()
    wanted = (
        list(pairs)
        if pairs is not None
        else intended + [(a, b) for a in hosts for b in hosts if a != b and (a, b) not in set(intended)]
    )
    strategy = net.spec.routing
    modules = ModuleRouter(net, g, transit)
    options = {pair: pair_candidates(net, g, transit, *pair, modules) for pair in wanted}
    if strategy not in PAIR_HASHED:  # the most constrained pairs first, intended before the rest
        first = set(intended)
        wanted = sorted(wanted, key=lambda pair: (pair not in first, len(options[pair])))
    load: Counter = Counter()
    chosen: dict[tuple[str, str], list[Hop]] = {}
    for src, dst in wanted:
        cands = options[(src, dst)]
        if not cands:
            continue
        if strategy in PAIR_HASHED:
            pick = cands[_hash(f"{src}>{dst}>{net.spec.seed}") % len(cands)]
        else:
            pick = min(cands, key=lambda p: (max(load[e] for e in _edges(p)), sum(load[e] for e in _edges(p))))
        load.update(_edges(pick))
        chosen[(src, dst)] = pick
    return chosen


def _ip(net: Network, name: str) -> str:
    return net.nodes[name].ip


def next_hops(
    net: Network, circuits: Circuits, down: Iterable[LinkKey] = (), pairs: Iterable[tuple[str, str]] | None = None
) -> dict[tuple[str, str], dict[str, tuple[int, ...]]]:
    """Per (src, dst) host pair: every node on one of its shortest paths -> its equal-cost out
    ports (sorted). Following any of them from any such node stays on a shortest path, so a
    switch can choose per packet (ECMP) without loops."""
    g = routing_graph(net, circuits, down)
    transit = {n.name for n in net.nodes.values() if (not n.is_host or n.relay) and n.role != Role.ECS}
    hosts = [h.name for h in net.hosts()]
    wanted = list(pairs) if pairs is not None else [(a, b) for a in hosts for b in hosts if a != b]
    out: dict[tuple[str, str], dict[str, tuple[int, ...]]] = {}
    for src, dst in wanted:
        ports: dict[str, set[int]] = {}
        for cand in _candidates(g, transit, src, dst):
            for hop in cand[:-1]:
                ports.setdefault(hop.node, set()).add(hop.out_port)  # type: ignore[arg-type]
        if ports:
            out[(src, dst)] = {node: tuple(sorted(p)) for node, p in ports.items()}
    return out


def group_id(ports: tuple[int, ...]) -> int:
    """A stable id for the group of these buckets (the same after any recompute, so a reroute
    only adds and removes groups, never renumbers them); nonzero, below 2^31 (fits a register)."""
    return 1 + _hash(f"{ports}") % 0x7FFFFFFE


def _ecmp_rules(net: Network, hops: dict[tuple[str, str], dict[str, tuple[int, ...]]]) -> dict[str, set]:
    """ECMP rules: per pair and switch on its shortest paths, an output or an ECMP-group rule."""
    out: dict[str, set] = {n.name: set() for n in net.switches()}
    for (src, dst), at in hops.items():
        match = (("eth_type", 0x0800), ("ipv4_src", _ip(net, src)), ("ipv4_dst", _ip(net, dst)))
        for node, ports in at.items():
            if node not in out:  # the source host (or a relay: none on kinds with ECMP groups)
                continue
            if len(ports) == 1:
                out[node].add(Flow(PRIO_ROUTE, COOKIE_ROUTE, match, ports[0]))
                continue
            grp = Group(group_id(ports), ports)
            out[node].add(grp)
            out[node].add(Flow(PRIO_ROUTE, COOKIE_ROUTE, match, None, grp.group_id))
    for node, items in out.items():
        groups = [x for x in items if isinstance(x, Group)]
        if len({x.group_id for x in groups}) != len(groups):
            raise ValueError(f"{node}: two ECMP groups share an id; change group_id's hash input")
    return out


def switch_flows(
    net: Network,
    circuits: Circuits,
    paths: dict[tuple[str, str], list[Hop]],
    down: Iterable[LinkKey] = (),
) -> dict[str, set[Flow | Group]]:
    """Every switch's rules: circuits on ECSs, (src, dst) IPv4 routes or BCube L2 rules elsewhere;
    with `ecmp` routing, ECMP groups wherever a pair has several equal-cost next hops (`down`:
    the failed links those groups must leave out)."""
    flows: dict[str, set] = {n.name: set() for n in net.switches()}
    for worker, slot in circuits.items():
        wl = worker_link(net, worker)
        ecs, wp, tp = wl.b, wl.port_b, slot.port_a
        flows[ecs].add(Flow(PRIO_CIRCUIT, COOKIE_CIRCUIT, (("in_port", wp),), tp))
        flows[ecs].add(Flow(PRIO_CIRCUIT, COOKIE_CIRCUIT, (("in_port", tp),), wp))
    if net.family.l2_by_next_server:  # switches forward to the next server's NIC by its MAC
        for ln in net.links:
            host, sw = (ln.a, ln.b) if net.nodes[ln.a].is_host else (ln.b, ln.a)
            mac = net.mac(host, ln.port_of(host))
            flows[sw].add(Flow(PRIO_L2, COOKIE_L2, (("eth_dst", mac),), ln.port_of(sw)))
        return flows
    if net.spec.routing == "ecmp":
        for node, rules in _ecmp_rules(net, next_hops(net, circuits, down, list(paths))).items():
            flows[node] |= rules
        return flows
    for (src, dst), path in paths.items():
        match = (("eth_type", 0x0800), ("ipv4_src", _ip(net, src)), ("ipv4_dst", _ip(net, dst)))
        for hop in path[1:-1]:
            flows[hop.node].add(Flow(PRIO_ROUTE, COOKIE_ROUTE, match, hop.out_port))
    return flows


def host_routes(net: Network, paths: dict[tuple[str, str], list[Hop]]) -> dict[str, list[HostRoute]]:
    """Per host and destination: the interface of the path's first hop and the next host's MAC.

    For a PSNet PS this is the NIC on the worker's current ToR; for a BCube server the NIC toward
    the next relay. Single-NIC hosts get their static neighbours the same way (no ARP at all).
    """
    out: dict[str, list[HostRoute]] = {h.name: [] for h in net.hosts()}
    for (src, dst), path in paths.items():
        nxt = next(i for i, h in enumerate(path) if i > 0 and net.nodes[h.node].is_host)
        nhop = path[nxt]
        out[src].append(HostRoute(_ip(net, dst), f"{src}-eth{path[0].out_port}", net.mac(nhop.node, nhop.in_port)))
    return out


def taken_path(net: Network, paths: dict[tuple[str, str], list[Hop]], src: str, dst: str) -> list[Hop]:
    """The path packets really follow: for BCube, each relay uses its own next hop to `dst`."""
    path = paths[(src, dst)]
    for i, hop in enumerate(path[1:-1], start=1):
        if net.nodes[hop.node].is_host:
            rest = taken_path(net, paths, hop.node, dst)
            return path[:i] + [Hop(hop.node, hop.in_port, rest[0].out_port)] + rest[1:]
    return path


def path_links(net: Network, path: list[Hop]) -> list[Link]:
    """The physical cables of a path, in order: a circuit hop is the worker's cable to the ECS
    and the ECS-ToR cable it is joined to."""
    out = []
    for hop, nxt in itertools.pairwise(path):
        ln = net.link_at(hop.node, hop.out_port)
        out.append(ln)
        if ln.other(hop.node) != nxt.node:  # crossed an ECS circuit
            out.append(net.link_at(nxt.node, nxt.in_port))
    return out


def path_nodes(net: Network, path: list[Hop]) -> list[str]:
    """Every node a packet crosses, ECSs included."""
    nodes = [path[0].node]
    for ln in path_links(net, path):
        nodes.append(ln.other(nodes[-1]))
    return nodes


def link_loads(net: Network, paths: dict[tuple[str, str], list[Hop]], pairs: Iterable[tuple[str, str]]) -> Counter:
    """Concurrent flows per directed link (node, out port) over the given pairs: Eq. 7's C."""
    load: Counter = Counter()
    for pair in pairs:
        if pair in paths:
            load.update(_edges(taken_path(net, paths, *pair)))
    return load
