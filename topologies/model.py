"""The one topology model shared by the Mininet builder, the controller and the BCT model.

A `Network` is data: nodes with roles and addresses, links with port numbers on both ends and
their rates. Builders (psnet.py, fattree.py, bcube.py) only add nodes and links; port numbers are
decided here, once, when a link is added, and the Mininet Topo and the controller both read them
back (ripl's bug was computing ports twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from ipaddress import IPv4Address

import networkx as nx

from topologies.schema import TopologySpec


class Role(StrEnum):
    """What a node is; switches and hosts are told apart by role, never by name."""

    WORKER = "worker"
    PS = "ps"
    IDLE = "idle"  # a host that takes no part in the job (FatTree hosts beyond W + P)
    STANDBY = "standby-ps"  # cabled as a PS, idle until it replaces a failed one
    ECS = "ecs"
    TOR = "tor"
    SUPERNODE = "supernode"
    AGG = "agg"
    CORE = "core"
    BSWITCH = "bcube-switch"


HOST_ROLES = frozenset({Role.WORKER, Role.PS, Role.IDLE, Role.STANDBY})

#: One byte per switch role in the DPID, so DPIDs of different roles never collide.
_DPID_ROLE = {Role.ECS: 1, Role.TOR: 2, Role.SUPERNODE: 3, Role.AGG: 4, Role.CORE: 5, Role.BSWITCH: 6}


def dpid_for(role: Role, *nums: int) -> int:
    """DPID packing the switch role and up to three small identifiers (module/pod, index...)."""
    a, b, c = (list(nums) + [0, 0, 0])[:3]
    return (_DPID_ROLE[role] << 32) | (a << 16) | (b << 8) | c


def mac_for(ip: str, nic: int = 0) -> str:
    """Locally administered MAC `02:nic:ip`: unique per (address, NIC), readable in dumps."""
    octets = IPv4Address(ip).packed
    return ":".join(f"{x:02x}" for x in (0x02, nic, *octets))


@dataclass(frozen=True)
class Node:
    """A host or switch. `ip` of a switch is the paper's switch address (informational only)."""

    name: str
    role: Role
    ip: str
    dpid: int | None = None
    module: int = 0  # PSNet module / FatTree pod / BCube level (switches)
    index: int = 0  # PSNet ToR swid or home ToR of a worker; FatTree ToR number
    relay: bool = False  # BCube servers forward packets between their NICs

    @property
    def is_host(self) -> bool:
        return self.role in HOST_ROLES


@dataclass(frozen=True)
class Link:
    """A cable: ports on both ends (decided once) and its rate, paper-equivalent and emulated."""

    a: str
    port_a: int
    b: str
    port_b: int
    paper_mbps: float
    mbps: float
    kind: str

    @property
    def key(self) -> tuple[str, int, str, int]:
        return (self.a, self.port_a, self.b, self.port_b)

    def port_of(self, node: str) -> int:
        """Port number of `node` on this link."""
        if node == self.a:
            return self.port_a
        if node == self.b:
            return self.port_b
        raise KeyError(f"{node} is not on link {self.key}")

    def other(self, node: str) -> str:
        """The node at the other end."""
        return self.b if node == self.a else self.a

    def intf(self, node: str) -> str:
        """Linux interface name of `node`'s end (Mininet names interfaces `node-ethPORT`)."""
        return f"{node}-eth{self.port_of(node)}"


@dataclass
class Network:
    """A built topology: nodes, links with ports, and the per-NIC MACs of hosts."""

    spec: TopologySpec
    nodes: dict[str, Node] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    macs: dict[tuple[str, int], str] = field(default_factory=dict)  # (host, port) -> MAC
    _next_port: dict[str, int] = field(default_factory=dict)
    _by_port: dict[tuple[str, int], Link] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def name(self) -> str:
        return self.spec.name

    def add_node(self, node: Node) -> Node:
        """Add a node; names must be unique and short enough for `name-ethNN` (15 chars)."""
        if node.name in self.nodes:
            raise ValueError(f"duplicate node name {node.name}")
        if len(node.name) > 9:
            raise ValueError(f"node name {node.name} is longer than 9 characters")
        self.nodes[node.name] = node
        self._next_port[node.name] = 1
        return node

    def add_link(self, a: str, b: str, paper_mbps: float, kind: str) -> Link:
        """Add a link, numbering ports on both ends in insertion order (1, 2, ...)."""
        pa, pb = self._next_port[a], self._next_port[b]
        self._next_port[a], self._next_port[b] = pa + 1, pb + 1
        link = Link(a, pa, b, pb, paper_mbps, self.spec.emulated(paper_mbps), kind)
        self.links.append(link)
        self._by_port[(a, pa)] = link
        self._by_port[(b, pb)] = link
        return link

    def set_mac(self, host: str, port: int, mac: str) -> None:
        self.macs[(host, port)] = mac

    # --- queries -------------------------------------------------------------------------
    def link_at(self, node: str, port: int) -> Link:
        """The link plugged into `node`'s `port`."""
        return self._by_port[(node, port)]

    def links_of(self, node: str) -> list[Link]:
        return [ln for ln in self.links if node in (ln.a, ln.b)]

    def links_between(self, a: str, b: str) -> list[Link]:
        return [ln for ln in self.links if {ln.a, ln.b} == {a, b}]

    def by_role(self, *roles: Role) -> list[Node]:
        """Nodes of the given roles in insertion order (which is the paper's order)."""
        return [n for n in self.nodes.values() if n.role in roles]

    def hosts(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.is_host]

    def switches(self) -> list[Node]:
        return [n for n in self.nodes.values() if not n.is_host]

    def workers(self) -> list[Node]:
        return self.by_role(Role.WORKER)

    def pss(self) -> list[Node]:
        return self.by_role(Role.PS)

    def standbys(self) -> list[Node]:
        """Standby PSs (topology field standby_ps), in the order they take over."""
        return self.by_role(Role.STANDBY)

    def mac(self, host: str, port: int = 1) -> str:
        return self.macs[(host, port)]

    def intended_pairs(self) -> list[tuple[str, str]]:
        """Pairs that must reach each other: worker<->PS (PSNet, FatTree), all servers (BCube)."""
        if self.kind == "bcube":
            names = [h.name for h in self.hosts()]
            return [(a, b) for a in names for b in names if a != b]
        pairs = []
        for w in self.workers():
            for p in self.pss():
                pairs += [(w.name, p.name), (p.name, w.name)]
        return pairs

    def graph(self) -> nx.MultiGraph:
        """The physical graph (one edge per cable, keyed by the link's port tuple)."""
        g = nx.MultiGraph()
        for n in self.nodes.values():
            g.add_node(n.name, role=n.role.value)
        for ln in self.links:
            g.add_edge(ln.a, ln.b, key=ln.key, link=ln)
        return g
