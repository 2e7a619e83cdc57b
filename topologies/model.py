"""The one topology model shared by the Mininet builder, the controller and the BCT model.

A `Network` is data: nodes with roles and addresses, links with port numbers on both ends and
their rates. Builders (topologies/kinds/<kind>.py) only add nodes and links; port numbers are
decided here, once, when a link is added, and the Mininet Topo and the controller both read them
back (ripl's bug was computing ports twice).

`Kind` is what every topology family provides (spec, builder, node identity, intended pairs,
failure candidates, drawing layers, BCT facts, controller capabilities, the model figures' layouts,
the scale benchmark's growth); the families live in topologies/kinds/ and everything outside
topologies/ asks a network's `family` instead of comparing kind names. It is defined here, beside
`Network`, because a network carries its kind. `Role` and `LinkKind` are registered names with
their facts, so a kind module adds its own without touching this file.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from ipaddress import IPv4Address
from typing import Any, ClassVar, Self

import networkx as nx

from topologies.spec import SpecBase


class _Vocabulary(type):
    """Iterating a vocabulary class yields its members in definition order, as an Enum's does."""

    def __iter__(cls) -> Iterator[Any]:
        return iter(list(cls._members.values()))  # type: ignore[attr-defined]

    def __len__(cls) -> int:
        return len(cls._members)  # type: ignore[attr-defined]


class _Word(str, metaclass=_Vocabulary):
    """A registered name: a str (files, tables and CSVs show it as it is) that exists once, so
    `is` and `==` both work as with an Enum member. No Enum (nor a library) serves: an Enum cannot
    grow, and a kind module must add its own roles and cable kinds (`Role.define`, `LinkKind.define`)."""

    __slots__ = ()
    _members: ClassVar[dict[str, Any]]

    def __new__(cls, value: str) -> Self:
        try:
            return cls._members[str(value)]
        except KeyError:
            known = ", ".join(cls._members)
            raise ValueError(f"{value!r} is no {cls.__name__} of this testbed; known: {known}") from None

    @classmethod
    def _add(cls, name: str) -> Self:
        if name in cls._members:
            raise ValueError(f"{cls.__name__} {name!r} is defined twice; pick another name")
        word = str.__new__(cls, name)
        cls._members[name] = word
        return word

    @classmethod
    def _remove(cls, name: str) -> None:
        cls._members.pop(name, None)

    @property
    def value(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.value!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.value,))

    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, memo: dict) -> Self:
        return self


@dataclass(frozen=True)
class RoleFacts:
    """What the rest of the testbed asks of a role: a host or a switch, its colour in `testbed
    topo show`, whether the CNC installs routes on it (every switch but PSNet's circuit-switched
    ECS), and its byte in DPIDs (switches; unique, so DPIDs of different roles never collide)."""

    host: bool
    color: str
    cnc: bool
    dpid_byte: int | None


class Role(_Word):
    """What a node is; switches and hosts are told apart by role, never by name.

    The shared roles are defined below; a kind module defines its own with `Role.define` (a
    new role is drawn in its colour, routed by the CNC and packed in DPIDs by its facts)."""

    _members: ClassVar[dict[str, Role]] = {}
    _facts: ClassVar[dict[str, RoleFacts]] = {}
    _hosts: ClassVar[set[str]] = set()  # the host roles' names (`Node.is_host` is asked often)
    WORKER: ClassVar[Role]
    PS: ClassVar[Role]
    IDLE: ClassVar[Role]  # a host that takes no part in the job (FatTree hosts beyond W + P)
    STANDBY: ClassVar[Role]  # cabled as a PS, idle until it replaces a failed one
    ECS: ClassVar[Role]
    TOR: ClassVar[Role]
    SUPERNODE: ClassVar[Role]
    AGG: ClassVar[Role]
    CORE: ClassVar[Role]
    BSWITCH: ClassVar[Role]
    WIRE: ClassVar[Role]  # Torus: one ring cable, emulated as a two-port bridge (see kinds/torus.py)

    @classmethod
    def define(
        cls, name: str, *, color: str, host: bool = False, cnc: bool | None = None, dpid_byte: int | None = None
    ) -> Role:
        """A new role: a host, or a switch with a DPID byte (1-255, unused) that the CNC routes
        unless `cnc=False` (a switch another app programs, as PSNet's ECS). Defining a role again
        with the same facts returns it (two kinds may share a role); other facts are refused."""
        facts = RoleFacts(host, color, (not host) if cnc is None else cnc, dpid_byte)
        if name in cls._members:
            if cls._facts[name] != facts:
                raise ValueError(f"role {name} is defined already with other facts; pick another name")
            return cls._members[name]
        if host and dpid_byte is not None:
            raise ValueError(f"role {name}: a host has no DPID; give dpid_byte to switches only")
        if not host:
            if dpid_byte is None or not 0 < dpid_byte < 256:
                raise ValueError(f"role {name}: a switch role needs a dpid_byte in 1..255")
            taken = {f.dpid_byte: r for r, f in cls._facts.items()}
            if dpid_byte in taken:
                raise ValueError(f"role {name}: dpid_byte {dpid_byte} is {taken[dpid_byte]}'s; pick a free one")
        role = cls._add(name)
        cls._facts[name] = facts
        if host:
            cls._hosts.add(name)
        return role

    @classmethod
    def undefine(cls, name: str) -> None:
        """Forget a role (a test's toy kind cleaning up after itself)."""
        cls._remove(name)
        cls._facts.pop(name, None)
        cls._hosts.discard(name)

    @classmethod
    def of_dpid_byte(cls, byte: int) -> Role | None:
        return next((cls(r) for r, f in cls._facts.items() if f.dpid_byte == byte), None)

    @property
    def facts(self) -> RoleFacts:
        return self._facts[self]

    @property
    def is_host(self) -> bool:
        return self in self._hosts

    @property
    def color(self) -> str:
        return self.facts.color

    @property
    def cnc(self) -> bool:
        """Whether the CNC installs proactive routes on switches of this role."""
        return self.facts.cnc


Role.WORKER = Role.define("worker", host=True, color="tab:green")
Role.PS = Role.define("ps", host=True, color="tab:red")
Role.IDLE = Role.define("idle", host=True, color="lightgray")
Role.STANDBY = Role.define("standby-ps", host=True, color="pink")
Role.ECS = Role.define("ecs", color="tab:purple", cnc=False, dpid_byte=1)  # the ECS app programs it
Role.TOR = Role.define("tor", color="tab:blue", dpid_byte=2)
Role.SUPERNODE = Role.define("supernode", color="tab:orange", dpid_byte=3)
Role.AGG = Role.define("agg", color="tab:cyan", dpid_byte=4)
Role.CORE = Role.define("core", color="tab:orange", dpid_byte=5)
Role.BSWITCH = Role.define("bcube-switch", color="tab:blue", dpid_byte=6)
Role.WIRE = Role.define("torus-wire", color="tab:gray", dpid_byte=7)

#: the host roles every kind shares (a kind's own host roles are `Role.is_host` too)
HOST_ROLES = frozenset({Role.WORKER, Role.PS, Role.IDLE, Role.STANDBY})


class LinkKind(_Word):
    """What a cable joins; a str like Role, so files, tables and CSVs show the same strings. A
    kind module defines its own with `LinkKind.define`."""

    _members: ClassVar[dict[str, LinkKind]] = {}
    WORKER_ECS: ClassVar[LinkKind]  # PSNet: a worker's cable to its module's ECS
    ECS_TOR: ClassVar[LinkKind]  # PSNet: an ECS port facing a ToR (a circuit "slot")
    TOR_SUPERNODE: ClassVar[LinkKind]  # PSNet: a ToR's uplink
    PS_TOR: ClassVar[LinkKind]  # PSNet: one NIC of a multi-NIC PS
    SUPERNODE: ClassVar[LinkKind]  # PSNet: between two modules' SuperNode switches
    HOST_TOR: ClassVar[LinkKind]  # FatTree: a host's cable to its edge switch
    TOR_AGG: ClassVar[LinkKind]  # FatTree: edge to aggregation
    AGG_CORE: ClassVar[LinkKind]  # FatTree: aggregation to core
    SERVER_SWITCH: ClassVar[LinkKind]  # BCube: one NIC of a server
    SERVER_WIRE: ClassVar[LinkKind]  # Torus: one NIC of a server, to the bridge standing for its ring cable
    LEAF_SPINE: ClassVar[LinkKind]  # leaf-spine: a leaf's uplink to one spine

    @classmethod
    def define(cls, name: str) -> LinkKind:
        """A cable kind of this name (the one defined already, if any: kinds may share one)."""
        return cls._members.get(name) or cls._add(name)

    @classmethod
    def undefine(cls, name: str) -> None:
        cls._remove(name)


LinkKind.WORKER_ECS = LinkKind.define("worker-ecs")
LinkKind.ECS_TOR = LinkKind.define("ecs-tor")
LinkKind.TOR_SUPERNODE = LinkKind.define("tor-supernode")
LinkKind.PS_TOR = LinkKind.define("ps-tor")
LinkKind.SUPERNODE = LinkKind.define("supernode")
LinkKind.HOST_TOR = LinkKind.define("host-tor")
LinkKind.TOR_AGG = LinkKind.define("tor-agg")
LinkKind.AGG_CORE = LinkKind.define("agg-core")
LinkKind.SERVER_SWITCH = LinkKind.define("server-switch")
LinkKind.SERVER_WIRE = LinkKind.define("server-wire")
LinkKind.LEAF_SPINE = LinkKind.define("leaf-spine")


# --- addresses: the packing every kind's node identity uses, and its inverse -----------------
def dpid_for(role: Role, *nums: int) -> int:
    """DPID packing the switch role's byte and up to three small identifiers (module/pod, index...)."""
    a, b, c = (list(nums) + [0, 0, 0])[:3]
    byte = role.facts.dpid_byte
    if byte is None:
        raise ValueError(f"role {role} is a host: hosts have no DPID")
    return (byte << 32) | (a << 16) | (b << 8) | c


def dpid_parts(dpid: int) -> tuple[Role, int, int, int]:
    """The inverse of dpid_for: (role, a, b, c); ValueError for a DPID no builder makes."""
    role = Role.of_dpid_byte(dpid >> 32)
    if role is None or dpid >> 40:
        raise ValueError(f"DPID {dpid:#x} packs no switch role of this testbed")
    return role, (dpid >> 16) & 0xFFFF, (dpid >> 8) & 0xFF, dpid & 0xFF


def mac_for(ip: str, nic: int = 0) -> str:
    """Locally administered MAC `02:nic:ip`: unique per (address, NIC), readable in dumps."""
    octets = IPv4Address(ip).packed
    return ":".join(f"{x:02x}" for x in (0x02, nic, *octets))


def mac_parts(mac: str) -> tuple[str, int]:
    """The inverse of mac_for: (ip, nic); ValueError for a MAC no builder makes."""
    try:
        octets = bytes(int(x, 16) for x in mac.split(":"))
    except ValueError:
        octets = b""
    if len(octets) != 6 or octets[0] != 0x02:
        raise ValueError(f"MAC {mac} is not a testbed host MAC (02:nic:a:b:c:d)")
    return str(IPv4Address(octets[2:])), octets[1]


def ip_octets(ip: str) -> tuple[int, int, int, int]:
    """The four octets of a dotted IPv4 address (ValueError if it is not one)."""
    a, b, c, d = IPv4Address(ip).packed
    return a, b, c, d


def name_numbers(name: str, prefix: str, count: int) -> tuple[int, ...]:
    """The numbers of a node name `{prefix}{n}_{n}...` (ValueError if it does not have `count`)."""
    if not name.startswith(prefix):
        raise ValueError(f"{name}: expected a name starting with {prefix!r}")
    parts = name[len(prefix) :].split("_")
    if len(parts) != count or not all(p.isdigit() for p in parts):
        raise ValueError(f"{name}: expected {prefix}" + "_".join(["N"] * count))
    return tuple(int(p) for p in parts)


@dataclass(frozen=True)
class Node:
    """A host or switch. `ip` of a switch is the paper's switch address (informational only)."""

    name: str
    role: Role
    ip: str
    dpid: int | None = None
    module: int = 0  # PSNet module / FatTree pod / BCube level (switches); `Network.node_id` names it
    index: int = 0  # PSNet ToR swid or home ToR of a worker; FatTree ToR number; BCube server/switch index
    relay: bool = False  # BCube and Torus servers forward packets between their NICs

    @property
    def is_host(self) -> bool:
        return self.role in Role._hosts


@dataclass(frozen=True)
class Link:
    """A cable: ports on both ends (decided once) and its rate, paper-equivalent and emulated."""

    a: str
    port_a: int
    b: str
    port_b: int
    paper_mbps: float
    mbps: float
    kind: LinkKind

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


class NodeId(ABC):
    """A node's identity in one kind: its numbers, and its name, address, MAC and DPID from them.

    Each kind has one frozen dataclass of these (as ripl's NodeID); the builder makes its nodes
    from it, so the conversions both ways live in one place. Parsing takes the spec: some numbers
    (PSNet's R, FatTree's k, BCube's n and k) are the topology's, not the name's or address's.
    """

    @classmethod
    @abstractmethod
    def from_name(cls, name: str, spec: SpecBase) -> Self: ...

    @classmethod
    @abstractmethod
    def from_ip(cls, ip: str, spec: SpecBase) -> Self: ...

    @classmethod
    @abstractmethod
    def from_dpid(cls, dpid: int, spec: SpecBase) -> Self: ...

    @classmethod
    def from_mac(cls, mac: str, spec: SpecBase) -> Self:
        """A host from any of its NICs' MACs (switches have none: they are named by DPID)."""
        ip, nic = mac_parts(mac)
        node = cls.from_ip(ip, spec)
        if not node.is_host or not node.has_nic(nic):
            raise ValueError(f"MAC {mac} is no NIC of {node.name}")
        return node

    @property
    @abstractmethod
    def name(self) -> str: ...

    @property
    @abstractmethod
    def ip(self) -> str: ...

    @property
    @abstractmethod
    def is_host(self) -> bool: ...

    @property
    def dpid(self) -> int | None:
        """A switch's DPID; None for a host."""
        return None

    def mac(self, port: int = 1) -> str | None:
        """The MAC of a host's NIC on `port` (None for a switch); the same on every port by default."""
        return mac_for(self.ip) if self.is_host else None

    def has_nic(self, nic: int) -> bool:
        """Whether a host's MACs carry NIC byte `nic` (0: one MAC on every port, by default)."""
        return nic == 0


class BctScenario(StrEnum):
    """Which of the paper's BCT equations a kind's jobs follow."""

    MODULES = "modules"  # PSNet: Eq. 5 in one module, Eq. 6 across two
    FATTREE = "fattree"  # Eq. 7, C from the installed routes


@dataclass(frozen=True)
class BctFacts:
    """What the BCT model (models/bct_model.py) needs from a kind: which equations apply and
    which cables carry B_w and B_s. Topologies may not import workloads, so the kind states facts
    and the model code keeps the equations."""

    scenario: BctScenario
    worker_link: LinkKind  # the cable whose rate is B_w
    ps_link: LinkKind  # the cable whose rate is B_s (every NIC of a multi-NIC PS)
    shared_links: frozenset[LinkKind] = frozenset()  # Eq. 7's C counts flows on these
    inter_module_link: LinkKind | None = None  # Eq. 6: the cables between two modules


@dataclass(frozen=True)
class PaperJob:
    """A paper-scale PS job for the model-only figures (the PSNet paper's Figs. 6-7): W workers,
    P PSs, and the paper's knobs of the kinds that read them (PSNet's R and K, FatTree's r)."""

    workers: int
    ps: int
    tors: int = 1  # PSNet: R ToRs per module
    K: float = 1.0  # PSNet: B_s = K x B_w
    r: float = 1.0  # FatTree: oversubscription at the ToR layer
    worker_mbps: float = 0.0  # B_w (a layout that derives rates from it)


class Kind(ABC):
    """One topology family: everything that differs between PSNet, FatTree and BCube.

    A kind module (topologies/kinds/<kind>.py) subclasses this once, defines any role or cable
    kind of its own (`Role.define`, `LinkKind.define`: the role's colour, whether the CNC routes
    it and its DPID byte come with it), and registers its instance in topologies/kinds/__init__.py.
    Capabilities are plain attributes so the controller, the workloads and the applications ask
    them instead of comparing kind names.
    """

    name: ClassVar[str]  # the `kind:` value of a file
    title: ClassVar[str]  # as the paper writes it, for messages
    spec_class: ClassVar[type[SpecBase]]
    node_id: ClassVar[type[NodeId]]
    #: workers hang on an ECS whose circuits a TC owns (PSNet): circuits, `reconfigure`, dark_ms
    has_ecs: ClassVar[bool] = False
    #: switches forward by the next server's MAC and servers relay (BCube), not by IP routes
    l2_by_next_server: ClassVar[bool] = False
    #: a failed PS is replaced only by a standby of its own module (PSNet: behind its SuperNode)
    standby_in_module: ClassVar[bool] = False
    #: every host pair must reach each other (BCube's relaying servers, leaf-spine's allreduce),
    #: not only workers and PSs: `intended_pairs` lists all pairs, worker<->PS ones no longer first
    all_pairs_intended: ClassVar[bool] = False
    #: the servers differing in one address digit form a ring of direct cables (Torus), so a ring
    #: schedule among them can run both ways at once on two NICs (on a BCube switch one NIC carries both)
    rings_both_ways: ClassVar[bool] = False
    #: the paper's BCT model for this kind, or None where the paper gives none
    bct: ClassVar[BctFacts | None] = None
    #: the file's fields that set how many hosts and switches are built: the resource budget
    #: (workloads/budget.py) names them when a network would not fit this machine
    size_fields: ClassVar[str] = "workers"
    #: random failures draw from cables of these kinds and switches of these roles: the ones
    #: whose loss leaves every worker a path (never a worker's own cable; but with PSNet R = 1,
    #: as in psnet-1tor, or BCube k = 0 a PS's or server's only cable is among them)
    failure_links: ClassVar[tuple[LinkKind, ...]] = ()
    failure_switches: ClassVar[tuple[Role, ...]] = ()
    #: switch-to-switch cables that can never be a bottleneck (each carries traffic another cable
    #: of the same rate already bounds: PSNet's ECS-ToR slots, one worker's circuit each): built
    #: as OVS patch ports when the file says `patch_cables: true` (Network.is_patch)
    patch_links: ClassVar[tuple[LinkKind, ...]] = ()
    #: drawing layer of each role, top (0) to bottom (`testbed topo show`; colours are the roles')
    layers: ClassVar[Mapping[Role, int]] = {}
    #: the model-only figures' layouts this kind sizes (`layout:` of a series, replays.modelfig)
    layouts: ClassVar[tuple[str, ...]] = ()

    @abstractmethod
    def build(self, spec: SpecBase) -> Network:
        """Nodes and links of the spec's topology (a ValueError becomes a one-line TopologyError)."""

    def intended_pairs(self, net: Network) -> list[tuple[str, str]]:
        """Pairs that must reach each other; by default every worker<->PS pair, both ways."""
        pairs = []
        for w in net.workers():
            for p in net.pss():
                pairs += [(w.name, p.name), (p.name, w.name)]
        return pairs

    def rate_fields(self, spec: SpecBase) -> dict[str, float]:
        """Each rate field (as the file names it) and the paper rate the builder really uses."""
        return {"worker_mbps": spec.worker_mbps}

    def paper_path(self, net: Network, src: str, dst: str) -> tuple[int, str] | None:
        """The switch hops the paper fixes for a pair and what they are, where it fixes them."""
        return None

    def regions(self, net: Network) -> dict[str, tuple[str, ...]]:
        """Each host's oversubscribed region per level, lowest first (RAT's aggregation levels).

        By default none: a non-blocking network has no region worth aggregating in (RAT then
        builds depth-one trees, as the paper's RAT ~ PS on its non-blocking network).
        """
        return {h.name: () for h in net.hosts()}

    def relay_hosts(self, net: Network, src: str, dst: str) -> tuple[str, ...] | None:
        """The hosts a packet from `src` to `dst` crosses (both ends included) where the kind's
        own routing fixes them (Torus: dimension order), or None: any shortest path will do.

        The controller keeps only the candidates that cross exactly these hosts (all of them
        when none does, e.g. after a failure), so relays and their routes stay consistent."""
        return None

    def address_digits(self, net: Network) -> dict[str, tuple[int, ...]]:
        """Each server's address digits (a_{h-1}, ..., a_0) where the kind has them (BCube, Torus:
        HiPS groups the servers that differ in one digit), or {} where it has none."""
        return {}

    def layout(self, name: str, job: PaperJob) -> dict[str, Any]:
        """The topology fields (`kind` included) of layout `name` (one of `layouts`) holding the
        paper-scale job; ValueError where the job does not fit it."""
        raise ValueError(f"{self.name} has no layout {name!r}")

    def grown(self, hosts: int, ps: int) -> tuple[str, dict[str, Any]] | None:
        """A shipped topology file of this kind and the fields that grow it to about `hosts` hosts
        with `ps` PSs (100, 1000 or 10000: benchmarks.scale runs the flow model on them), or None
        where the kind has no such growth."""
        return None

    @property
    def failure_candidates(self) -> tuple[str, ...]:
        """Default `random_failures` kinds: link kinds, then switch roles (as files write them)."""
        return tuple(str(k) for k in self.failure_links) + tuple(str(r) for r in self.failure_switches)

    def __repr__(self) -> str:
        return f"<kind {self.name}>"


@dataclass
class Network:
    """A built topology: nodes, links with ports, and the per-NIC MACs of hosts."""

    spec: SpecBase
    family: Kind  # the kind that built it: ask it, never compare `kind` strings
    nodes: dict[str, Node] = field(default_factory=dict)
    links: list[Link] = field(default_factory=list)
    macs: dict[tuple[str, int], str] = field(default_factory=dict)  # (host, port) -> MAC
    _next_port: dict[str, int] = field(default_factory=dict)
    _by_port: dict[tuple[str, int], Link] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """The kind's name, for display (`psnet`, `fattree`, `bcube`); decisions ask `family`."""
        return self.family.name

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

    def add_link(self, a: str, b: str, paper_mbps: float, kind: LinkKind) -> Link:
        """Add a link, numbering ports on both ends in insertion order (1, 2, ...)."""
        pa, pb = self._next_port[a], self._next_port[b]
        self._next_port[a], self._next_port[b] = pa + 1, pb + 1
        link = Link(a, pa, b, pb, paper_mbps, self.spec.emulated(paper_mbps), LinkKind(kind))
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

    def is_patch(self, ln: Link) -> bool:
        """Is `ln` built as an OVS patch port pair (no qdisc, no kernel interface)? A cable of the
        kind's `patch_links` between two switches, when the file keeps `patch_cables` on."""
        return (
            bool(getattr(self.spec, "patch_cables", False))
            and ln.kind in self.family.patch_links
            and not self.nodes[ln.a].is_host
            and not self.nodes[ln.b].is_host
        )

    def veth_links(self) -> list[Link]:
        """The cables built as veth pairs: each end a kernel interface with its own HTB qdisc."""
        return [ln for ln in self.links if not self.is_patch(ln)]

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
        """Pairs that must reach each other, as the kind defines them (worker<->PS, all servers...)."""
        return self.family.intended_pairs(self)

    def node_id(self, name: str) -> NodeId:
        """The kind's identity of a node: its numbers, and its name, address, MACs and DPID."""
        return self.family.node_id.from_name(name, self.spec)

    def graph(self) -> nx.MultiGraph:
        """The physical graph (one edge per cable, keyed by the link's port tuple)."""
        g = nx.MultiGraph()
        for n in self.nodes.values():
            g.add_node(n.name, role=n.role.value)
        for ln in self.links:
            g.add_edge(ln.a, ln.b, key=ln.key, link=ln)
        return g
