"""Which TCP connections crossed which links during a run, and C: the most connections carrying
bytes at once on one shared (switch-switch) link, the paper's Eq. 7 quantity, measured.

Why measured: with `routing: ecmp` the switches hash every connection, so the path of each
connection (and the C it produces) is only known once the connection exists. It is read from
two sources the run already has, both without entering the hosts' shells:

- the connections and the payload each direction moved: `ss -tinHO` inside every host's network
  namespace (`nsenter -n` on the host shell's PID); each socket's `bytes_acked` is what it sent;
- the hop each connection takes at each switch: the datapath's flow dump (`ovs-appctl
  dpctl/dump-flows --names`). Every bridge shares the userspace datapath `ovs-netdev`, whose
  flows match on the bridge port a packet entered by, so a connection is followed from its
  source host's first cable, switch by switch (each time the flow that matches its addresses and
  ports on the port it arrived at, and that flow's output), to its destination. Where a switch
  hashes (ECMP through `multipath`, controller.ofctl) its flow carries the connection's TCP
  ports; elsewhere it matches the host pair, which every connection of the pair shares.

A host's own first hop (which NIC) comes from the controller's paths, as its routes do. The
dump holds flows used in the last 10 s (OVS's max-idle), so a connection is followed with one
dump right after a socket sample sees it move; it is followed again only after the controller
reroutes, and its links are the union over those (a reroute adds the new ones).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from controller.routing import Hop, taken_path
from emulation.periodic import Periodic
from topologies.model import Network, Role

LOG = logging.getLogger(__name__)

#: a directed link: (node, out port), as controller.routing counts loads
DirLink = tuple[str, int]
#: a direction of a connection carries bytes when it moved at least this much payload ...
MIN_BYTES = 64 * 1024
#: ... and at least this share of the busiest direction's (gRPC pings and TCP's own control
#: messages are not flows the paper counts)
MIN_SHARE = 0.01
PERIOD_S = 1.0


@dataclass(frozen=True, order=True)
class Stream:
    """One direction of a TCP connection: payload from (src_ip, sport) to (dst_ip, dport)."""

    src_ip: str
    sport: int
    dst_ip: str
    dport: int


# --- parsing ----------------------------------------------------------------------------------
_SOCKET = re.compile(
    r"(?:\[::ffff:)?(\d+\.\d+\.\d+\.\d+)\]?:(\d+)\s+(?:\[::ffff:)?(\d+\.\d+\.\d+\.\d+)\]?:(\d+)\s.*?\bbytes_acked:(\d+)"
)


def parse_ss(text: str) -> dict[Stream, int]:
    """Payload each socket's direction has sent and had acknowledged, from `ss -tinHO` lines."""
    out: dict[Stream, int] = {}
    for line in text.splitlines():
        m = _SOCKET.search(line)
        if m:
            out[Stream(m.group(1), int(m.group(2)), m.group(3), int(m.group(4)))] = int(m.group(5))
    return out


def _number(text: str) -> int:
    if "." in text:
        return int(ipaddress.IPv4Address(text))
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def _fits(spec: str, actual: int) -> bool:
    """`value` or `value/mask` (decimal, hex or dotted quad) against an actual value."""
    value, _, mask = spec.partition("/")
    m = _number(mask) if mask else -1
    return (_number(value) & m) == (actual & m)


def _fields(match: str, name: str) -> dict[str, str] | None:
    m = re.search(rf"(?<![\w]){name}\(([^)]*)\)", match)
    if m is None:
        return None
    return dict(kv.split("=", 1) for kv in m.group(1).split(",") if "=" in kv)


@dataclass(frozen=True)
class DpFlow:
    """One datapath flow: the port it matches packets entering by, its IPv4/TCP match (absent
    fields are wildcarded), the ports it outputs to and how long ago it was last used."""

    in_port: str
    ipv4: tuple[tuple[str, str], ...]
    tcp: tuple[tuple[str, str], ...]
    outputs: tuple[str, ...]
    used_s: float
    non_tcp: bool = False

    def matches(self, s: Stream) -> bool:
        if self.non_tcp:
            return False
        want = {"src": int(ipaddress.IPv4Address(s.src_ip)), "dst": int(ipaddress.IPv4Address(s.dst_ip))}
        for k, v in self.ipv4:
            if k in want and not _fits(v, want[k]):
                return False
            if k == "proto" and not _fits(v, 6):
                return False
        ports = {"src": s.sport, "dst": s.dport}
        return all(_fits(v, ports[k]) for k, v in self.tcp if k in ports)


def _outputs(actions: str) -> tuple[str, ...]:
    """Output ports of a datapath action list (names with --names): the top-level bare words."""
    out, depth, word = [], 0, ""
    for ch in actions + ",":
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            if word and "(" not in word and word != "drop":
                out.append(word.strip())
            word = ""
            continue
        word += ch
    return tuple(out)


def parse_dump(text: str) -> list[DpFlow]:
    """The flows of `ovs-appctl dpctl/dump-flows --names` (every PMD's and the main thread's)."""
    out = []
    for line in text.splitlines():
        match, _, stats = line.partition(", packets:")
        port = re.search(r"in_port\(([^)]*)\)", match)
        acts = re.search(r"actions:(.*)$", stats)
        if not port or not acts:
            continue
        eth_type = re.search(r"eth_type\((0x[0-9a-f]+)", match)
        ipv4, tcp = _fields(match, "ipv4"), _fields(match, "tcp")
        non_tcp = (eth_type is not None and eth_type.group(1) != "0x0800") or any(
            _fields(match, p) is not None for p in ("udp", "icmp", "sctp", "arp", "ipv6")
        )
        used = re.search(r"used:([\d.]+)s", stats)
        out.append(
            DpFlow(
                port.group(1),
                tuple(sorted((ipv4 or {}).items())),
                tuple(sorted((tcp or {}).items())),
                _outputs(acts.group(1)),
                float(used.group(1)) if used else float("inf"),
                non_tcp,
            )
        )
    return out


# --- following a connection -------------------------------------------------------------------
def by_port(flows: Iterable[DpFlow]) -> dict[str, list[DpFlow]]:
    """Flows grouped by the port they match on, most recently used first."""
    out: dict[str, list[DpFlow]] = {}
    for f in sorted(flows, key=lambda f: f.used_s):
        out.setdefault(f.in_port, []).append(f)
    return out


def trace(
    net: Network, paths: Mapping[tuple[str, str], list[Hop]], flows: Mapping[str, list[DpFlow]], s: Stream
) -> tuple[DirLink, ...] | None:
    """The directed links `s` crosses, in order, or None where it cannot be followed (an
    address outside the model, no route, or no datapath flow for it at some switch)."""
    hosts = {n.ip: n.name for n in net.hosts()}
    src, dst = hosts.get(s.src_ip), hosts.get(s.dst_ip)
    if src is None or dst is None or src == dst:
        return None
    intfs = {ln.intf(end): (end, ln.port_of(end)) for ln in net.veth_links() for end in (ln.a, ln.b)}
    links: list[DirLink] = []
    node = src
    while node != dst:
        if net.nodes[node].is_host:  # the source, or a relaying host: its routes follow the controller's paths
            path = paths.get((node, dst))
            if not path or path[0].out_port is None:
                return None
            port = path[0].out_port
        else:  # a switch: the datapath flow that matched the connection where it came in
            hit = next((f for f in flows.get(net.link_at(*links[-1]).intf(node), []) if f.matches(s)), None)
            if hit is None or not hit.outputs or hit.outputs[0] not in intfs:
                return None
            owner, port = intfs[hit.outputs[0]]
            if owner != node:  # the flow crossed a patch cable inside the datapath: one flow for both bridges
                crossed = _patch_port(net, paths.get((src, dst)) or [], node, owner)
                if crossed is None:
                    return None
                links.append((node, crossed))
                node = owner
        links.append((node, port))
        if len(links) > len(net.links):
            return None  # a loop: never on routes from shortest paths
        node = net.link_at(node, port).other(node)
    return tuple(links)


def _patch_port(net: Network, path: list[Hop], node: str, owner: str) -> int | None:
    """`node`'s port on the patch cable to `owner` that the controller's path takes (several
    patch cables may join the two: PSNet's slots of one ToR), else the first such cable."""
    patch = [ln for ln in net.links_of(node) if net.is_patch(ln) and ln.other(node) == owner]
    for h in path:  # the path leaves `node` by the cable, or enters `owner` by it (PSNet's paths skip the ECS)
        for ln in patch:
            if (h.node, h.out_port) == (node, ln.port_of(node)) or (h.node, h.in_port) == (owner, ln.port_of(owner)):
                return ln.port_of(node)
    return min(ln.port_of(node) for ln in patch) if patch else None


# --- C ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Busiest:
    """C on the busiest shared link: how many directions of connections carrying bytes crossed
    it (`link`: "from-to"), of `streams` carrying bytes, `unmapped` of which could not be followed;
    `from_routes`: the same count on the controller's per-pair paths (equal unless switches hash)."""

    c: int
    link: str | None
    streams: int
    unmapped: int
    from_routes: int | None = None
    per_link: dict[str, int] = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {
            "c": self.c,
            "link": self.link,
            "streams": self.streams,
            "unmapped": self.unmapped,
            "from_routes": self.from_routes,
        }


def shared(net: Network, link: DirLink) -> bool:
    """A switch-switch cable, where connections of different hosts meet. An ECS's cables are
    not: a circuit joins one worker to a ToR (the routing's worker-ToR link)."""
    ln = net.link_at(*link)
    return all(not net.nodes[end].is_host and net.nodes[end].role != Role.ECS for end in (ln.a, ln.b))


def link_name(net: Network, link: DirLink) -> str:
    return f"{link[0]}-{net.link_at(*link).other(link[0])}"


def carrying(moved: Mapping[Stream, int], min_bytes: int = MIN_BYTES, min_share: float = MIN_SHARE) -> set[Stream]:
    """The directions that carried bytes: at least `min_bytes` and `min_share` of the busiest."""
    top = max(moved.values(), default=0)
    bar = max(min_bytes, min_share * top)
    return {s for s, b in moved.items() if b >= bar}


def count_c(net: Network, crossed: Mapping[Stream, Iterable[DirLink]], streams: Iterable[Stream]) -> Counter:
    """Per shared directed link, how many of `streams` crossed it."""
    load: Counter = Counter()
    for s in streams:
        load.update(link for link in set(crossed.get(s, ())) if shared(net, link))
    return load


def busiest(
    net: Network,
    crossed: Mapping[Stream, Iterable[DirLink]],
    moved: Mapping[Stream, int],
    paths: Mapping[tuple[str, str], list[Hop]] | None = None,
) -> Busiest:
    """C and its link from each direction's links (`crossed`) and payload (`moved`); ties go to
    the first link by name. With `paths`, also the count their per-pair routes give."""
    streams = carrying(moved)
    load = count_c(net, crossed, streams)
    per_link = {link_name(net, k): n for k, n in load.items()}
    c, link = min(((n, name) for name, n in per_link.items()), key=lambda x: (-x[0], x[1]), default=(0, None))
    from_routes = None
    if paths is not None:
        hosts = {n.ip: n.name for n in net.hosts()}
        routed: dict[Stream, list[DirLink]] = {}
        for s in streams:
            src, dst = hosts.get(s.src_ip), hosts.get(s.dst_ip)
            if src is not None and dst is not None and (src, dst) in paths:
                hops = taken_path(net, dict(paths), src, dst)  # through relays as packets go
                routed[s] = [(h.node, h.out_port) for h in hops[:-1]]  # type: ignore[misc]
        from_routes = max(count_c(net, routed, streams).values(), default=0)
    unmapped = sum(1 for s in streams if not crossed.get(s))
    return Busiest(c, link, len(streams), unmapped, from_routes, per_link)


# --- sampling during a run --------------------------------------------------------------------
def _run(argv: list[str]) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired) as err:
        LOG.warning("%s: %s", argv[0], err)
        return ""


def host_sockets(pid: int) -> dict[Stream, int]:
    """Connected TCP sockets (closing ones too, while they keep their counters) of the network
    namespace of `pid`, with the bytes each has sent and had acknowledged."""
    return parse_ss(_run(["nsenter", "-t", str(pid), "-n", "ss", "-tinHO", "state", "connected"]))


def datapath_flows() -> list[DpFlow]:
    return parse_dump(_run(["ovs-appctl", "dpctl/dump-flows", "--names"]))


class FlowSampler(Periodic):
    """Every `period_s` between start() and stop(): each host's sockets (cheap: the kernel's,
    not ovs-vswitchd's time); a direction that moved and is not followed yet (or all that move,
    after the controller rerouted) is followed through the switches with one flow dump. The
    period is short because a connection's bytes are only readable while it is open: a job's
    last steps close theirs before the run stops the sampler."""

    def __init__(
        self,
        net: Network,
        host_pids: Mapping[str, int],
        paths: Callable[[], Mapping[tuple[str, str], list[Hop]]],
        period_s: float = PERIOD_S,
    ) -> None:
        super().__init__(period_s, name="flow-sampler")
        self.net, self.pids, self.paths_fn = net, dict(host_pids), paths
        self.ips = {n.ip for n in net.hosts()}
        self.history: dict[Stream, list[tuple[float, int]]] = {}
        self.crossed: dict[Stream, set[DirLink]] = {}
        self.paths: Mapping[tuple[str, str], list[Hop]] = {}
        self.t_start = 0.0
        self._lock = threading.Lock()

    @classmethod
    def of(cls, tb, period_s: float = PERIOD_S) -> FlowSampler:
        """A sampler of a running Testbed: its host shells' PIDs, the controller's current paths
        (recomputed only when the controller's circuits or failed links change)."""
        cache: dict[str, Mapping[tuple[str, str], list[Hop]]] = {}

        def paths() -> Mapping[tuple[str, str], list[Hop]]:
            key = repr(tb.state())
            if key not in cache:
                cache.clear()
                cache[key] = tb.current_paths()
            return cache[key]

        return cls(tb.model, {h.name: tb.host(h.name).pid for h in tb.model.hosts()}, paths, period_s)

    def _sockets(self) -> dict[Stream, int]:
        """Every host's sockets (a direction is one host's socket: the hosts' sets are disjoint)."""
        return {s: b for pid in self.pids.values() for s, b in host_sockets(pid).items()}

    def _dump(self) -> list[DpFlow]:
        """The datapath's flows (over several servers: every server's, emulation.cluster_net)."""
        return datapath_flows()

    def first(self) -> None:
        self.tick()

    def tick(self) -> None:
        try:
            with self._lock:
                self._sample_once()
        except Exception as err:  # a lost sample must not end the run it watches
            LOG.warning("flow sample failed: %s", err)

    def _sample_once(self) -> None:
        t = time.time()
        self.t_start = self.t_start or t  # the first sample: the baseline of what already existed
        paths = self.paths_fn()
        rerouted, self.paths = paths is not self.paths, paths
        moved = []
        for s, b in self._sockets().items():
            if s.src_ip not in self.ips or s.dst_ip not in self.ips:
                continue  # loopback and other connections that never cross the network
            seen = self.history.setdefault(s, [])
            if not seen or b != seen[-1][1]:  # only changes: the value at any time is the last before it
                seen.append((t, b))
                moved.append(s)
        todo = [s for s in moved if rerouted or s not in self.crossed]  # follow each once, again after a reroute
        if not todo:
            return
        flows = by_port(self._dump())
        for s in todo:
            links = trace(self.net, self.paths, flows, s)
            if links:
                self.crossed.setdefault(s, set()).update(links)

    def moved(self, since: float | None = None) -> dict[Stream, int]:
        """Payload per direction after `since` (unix time; default: the sampler's start)."""
        t0 = self.t_start if since is None else since
        out = {}
        for s, seen in self.history.items():
            before = [b for t, b in seen if t <= t0]
            out[s] = seen[-1][1] - (before[-1] if before else 0)
        return out

    def stop(self, since: float | None = None) -> Busiest:
        """End sampling (one last sample first); C over the directions that carried bytes after `since`."""
        self.halt(timeout_s=None)
        self.tick()
        with self._lock:
            result = busiest(self.net, self.crossed, self.moved(since), self.paths)
        LOG.info("C on the busiest shared link: %s", result.as_dict())
        return result
