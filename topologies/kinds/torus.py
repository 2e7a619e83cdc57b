"""Torus (CamCube; HiPS's n-ary h-dimensional torus): its spec, node identity, builder and facts.

n^h servers, each with 2h NICs, cabled directly in a ring of n per dimension: server a is joined
to the server whose digit a_d is one higher (mod n) by one cable per dimension d. There are no
switches in the paper's torus; here each ring cable is emulated as a two-port OVS bridge (a
"wire", role `torus-wire`) between the two NICs, because shaping on both ends, the per-port drop
accounting, link failures and path checks of this testbed all act on switch ports. A wire holds
two rules (each MAC out of its port), as a BCube switch does (`l2_by_next_server`): it adds one
userspace-OVS pass per hop, as every BCube hop has, and no bandwidth or path choice.

Names and addresses: server `s{a_(h-1)}_..._{a_0}` (its base-n digits, HiPS's address) at
10.1.x.y from its index + 1; wire `w{d}_{digits of its lower end}` at 10.(2+d).x.y from that
server's index. Server ports: 2d+1 is the NIC toward digit a_d + 1 in dimension d, 2d+2 toward
a_d - 1; a wire's port 1 faces its lower end, port 2 the upper. Servers relay (IP forwarding) along
dimension-order routes: the lowest differing digit is corrected first, each one the short way
round its ring (+ on a tie).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Self

from pydantic import Field, model_validator

from topologies.model import Kind, LinkKind, Network, Node, NodeId, Role, dpid_for, dpid_parts, ip_octets, mac_for
from topologies.spec import SpecBase

#: node names must fit in 9 characters (`name-ethNN` <= 15): `w{d}_` + h digits fit for h <= 3
#: at <= 256 servers (h = 3 means n <= 6)
MAX_DIMS = 3
MAX_SERVERS = 256


# --- spec (the `kind: torus` file) -------------------------------------------------------------
class TorusSpec(SpecBase):
    """n-ary h-dimensional torus: n^h servers with 2h NICs in rings of n per dimension; relaying."""

    kind: Literal["torus"]
    n: int = Field(ge=3, description="servers per ring (ring size; 2 would double every cable)")
    h: int = Field(ge=1, le=MAX_DIMS, description="dimensions (servers have 2h NICs)")
    ps: int = Field(default=0, ge=0, description="P: the first P servers are PSs (HiPS needs none)")
    workers: int | None = Field(default=None, ge=1, description="W (default: all other servers)")

    @model_validator(mode="after")
    def _shape(self) -> TorusSpec:
        servers = self.n**self.h
        if servers > MAX_SERVERS:
            raise ValueError(f"n, h: a {self.n}-ary {self.h}-D torus has {servers} servers; keep <= {MAX_SERVERS}")
        if self.ps >= servers:
            raise ValueError(f"ps: {self.ps} PSs leave no worker among the {servers} servers; use fewer")
        if self.ps + (self.workers or 0) > servers:
            raise ValueError(f"workers: {self.ps} PSs + {self.workers} workers exceed the {servers} servers")
        return self


# --- node identity -----------------------------------------------------------------------------
def digits(index: int, n: int, h: int) -> tuple[int, ...]:
    """Base-n digits (a_(h-1), ..., a_0) of a server index."""
    out = []
    for _ in range(h):
        out.append(index % n)
        index //= n
    return tuple(reversed(out))


def undigits(ds: tuple[int, ...], n: int) -> int:
    """The index of base-n digits (most significant first): the inverse of `digits`."""
    return sum(d * n**i for i, d in enumerate(reversed(ds)))


def step(index: int, dim: int, delta: int, n: int, h: int) -> int:
    """The server `delta` places along dimension `dim`'s ring from server `index`."""
    ds = list(digits(index, n, h))
    pos = h - 1 - dim  # a_dim sits at this position of (a_(h-1)..a_0)
    ds[pos] = (ds[pos] + delta) % n
    return undigits(tuple(ds), n)


@dataclass(frozen=True)
class TorusId(NodeId):
    """A torus server (its index) or wire (its dimension and its lower end's index); n and h are
    carried because the names spell indices in base n."""

    server: bool
    index: int
    dim: int
    n: int
    h: int

    @classmethod
    def of_server(cls, index: int, spec: SpecBase) -> Self:
        return cls(True, index, 0, spec.n, spec.h).checked()  # type: ignore[attr-defined]

    @classmethod
    def of_wire(cls, dim: int, index: int, spec: SpecBase) -> Self:
        return cls(False, index, dim, spec.n, spec.h).checked()  # type: ignore[attr-defined]

    @property
    def digits(self) -> tuple[int, ...]:
        return digits(self.index, self.n, self.h)

    @property
    def name(self) -> str:
        spelled = "_".join(map(str, self.digits))
        return f"s{spelled}" if self.server else f"w{self.dim}_{spelled}"

    @property
    def ip(self) -> str:
        if self.server:
            return f"10.1.{(self.index + 1) >> 8}.{(self.index + 1) & 255}"
        return f"10.{2 + self.dim}.{self.index >> 8}.{self.index & 255}"

    @property
    def is_host(self) -> bool:
        return self.server

    @property
    def dpid(self) -> int | None:
        return None if self.server else dpid_for(Role.WIRE, self.dim, self.index >> 8, self.index & 255)

    def mac(self, port: int = 1) -> str | None:
        """Each NIC has its own MAC: the NIC on port p is `02:p:ip`."""
        return mac_for(self.ip, port) if self.server else None

    def has_nic(self, nic: int) -> bool:
        return 1 <= nic <= 2 * self.h

    @classmethod
    def from_name(cls, name: str, spec: SpecBase) -> Self:
        n, h = spec.n, spec.h  # type: ignore[attr-defined]
        head, *rest = name.split("_")
        letter, first = head[:1], head[1:]
        if letter not in ("s", "w") or not all(x.isdigit() for x in (first, *rest)):
            raise ValueError(f"{name}: Torus names are s{{a_h-1}}_..._{{a_0}} or w{{dim}}_{{digits}}")
        server = letter == "s"
        ds = tuple(int(x) for x in ((first, *rest) if server else rest))
        if len(ds) != h or any(d >= n for d in ds):
            raise ValueError(f"{name}: a {n}-ary {h}-D torus name has {h} digits below {n}")
        if server:
            return cls.of_server(undigits(ds, n), spec)
        return cls.of_wire(int(first), undigits(ds, n), spec)

    @classmethod
    def from_ip(cls, ip: str, spec: SpecBase) -> Self:
        net, a, b, c = ip_octets(ip)
        if net != 10 or a < 1:
            raise ValueError(f"{ip}: Torus addresses are 10.1.x.y (servers) or 10.(2+dim).x.y (wires)")
        if a == 1:
            return cls.of_server(((b << 8) | c) - 1, spec)
        return cls.of_wire(a - 2, (b << 8) | c, spec)

    @classmethod
    def from_dpid(cls, dpid: int, spec: SpecBase) -> Self:
        role, dim, hi, lo = dpid_parts(dpid)
        if role != Role.WIRE:
            raise ValueError(f"DPID {dpid:#x}: a {role} is no Torus wire")
        return cls.of_wire(dim, (hi << 8) | lo, spec)

    def checked(self) -> Self:
        """This id if the n-ary h-D torus has such a node."""
        if not (0 <= self.index < self.n**self.h and 0 <= self.dim < self.h):
            what = "server" if self.server else f"wire of dimension {self.dim}"
            raise ValueError(f"{what} {self.index} is not a node of the {self.n}-ary {self.h}-D torus")
        return self


# --- builder -----------------------------------------------------------------------------------
def build_torus(spec: TorusSpec) -> Network:
    """Nodes and links of the torus; the first P servers are PSs, the next W workers."""
    net = Network(spec, TORUS)
    n, h = spec.n, spec.h
    total = n**h
    workers = spec.workers if spec.workers is not None else total - spec.ps
    servers = [TorusId.of_server(i, spec) for i in range(total)]
    for s in servers:
        role = Role.PS if s.index < spec.ps else Role.WORKER if s.index < spec.ps + workers else Role.IDLE
        net.add_node(Node(s.name, role, s.ip, None, 0, s.index, relay=True))
    for dim in range(h):
        for i in range(total):
            w = TorusId.of_wire(dim, i, spec)
            net.add_node(Node(w.name, Role.WIRE, w.ip, w.dpid, dim, i))
    for dim in range(h):  # every server's ports 2d+1 (toward +1), then 2d+2 (toward -1)
        for s in servers:
            ln = net.add_link(s.name, TorusId.of_wire(dim, s.index, spec).name, spec.worker_mbps, LinkKind.SERVER_WIRE)
            net.set_mac(s.name, ln.port_a, s.mac(ln.port_a))  # type: ignore[arg-type]
        for s in servers:
            lower = TorusId.of_wire(dim, step(s.index, dim, -1, n, h), spec)
            ln = net.add_link(lower.name, s.name, spec.worker_mbps, LinkKind.SERVER_WIRE)
            net.set_mac(s.name, ln.port_b, s.mac(ln.port_b))  # type: ignore[arg-type]
    return net


def dimension_order(src: int, dst: int, n: int, h: int) -> list[int]:
    """Server indices from `src` to `dst` (both included): digit a_0 corrected first, then a_1...,
    each the short way round its ring (+ on a tie, so every relay's own route continues the path)."""
    path = [src]
    want = digits(dst, n, h)
    for dim in range(h):
        cur = digits(path[-1], n, h)[h - 1 - dim]
        ahead = (want[h - 1 - dim] - cur) % n
        delta, hops = (1, ahead) if ahead <= n - ahead else (-1, n - ahead)
        for _ in range(hops):
            path.append(step(path[-1], dim, delta, n, h))
    return path


# --- the kind ----------------------------------------------------------------------------------
class TorusKind(Kind):
    """Torus: servers relay between their 2h NICs along dimension-order routes; wires are cables."""

    all_pairs_intended = True
    name = "torus"
    title = "Torus"
    spec_class = TorusSpec
    size_fields = "n, h"
    node_id = TorusId
    l2_by_next_server = True  # a wire forwards by the MAC of the server NIC on each port
    rings_both_ways = True  # a digit's group is a ring of cables: + and - NICs carry one ring each
    bct = None  # the paper gives no BCT model for a torus
    failure_links = (LinkKind.SERVER_WIRE,)  # a server has 2h cables and relays: one may go
    failure_switches = (Role.WIRE,)  # a wire down is its ring cable cut
    layers = {Role.WIRE: 1, Role.WORKER: 3, Role.PS: 3, Role.STANDBY: 3, Role.IDLE: 3}

    def build(self, spec: SpecBase) -> Network:
        return build_torus(spec)  # type: ignore[arg-type]

    def intended_pairs(self, net: Network) -> list[tuple[str, str]]:
        """Every server with every other: all of them relay, so all must reach each other."""
        names = [h.name for h in net.hosts()]
        return [(a, b) for a in names for b in names if a != b]

    def relay_hosts(self, net: Network, src: str, dst: str) -> tuple[str, ...] | None:
        """Dimension order: the servers crossed correcting a_0 first, then a_1, ..."""
        spec = net.spec
        a, b = TorusId.from_name(src, spec), TorusId.from_name(dst, spec)
        return tuple(TorusId.of_server(i, spec).name for i in dimension_order(a.index, b.index, a.n, a.h))

    def address_digits(self, net: Network) -> dict[str, tuple[int, ...]]:
        """HiPS's server address: the base-n digits the name spells."""
        return {s.name: TorusId.from_name(s.name, net.spec).digits for s in net.hosts()}


TORUS = TorusKind()
