"""BCube(n, k): its spec, node identity, builder and facts, in one place.

n^(k+1) servers with k+1 NICs, n^k n-port switches per level. Server `s` + its base-n digits
a_k..a_0 joined by `_` (address 10.1.x.y from its index + 1), its NIC of level l (port l+1) wired
to switch `b{l}_{digits without a_l}` at port a_l + 1. Servers relay packets between their NICs
as BCube does; switches only ever see directly attached servers and forward by their MACs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Self

from pydantic import Field, ValidationInfo, model_validator

from topologies.model import Kind, LinkKind, Network, Node, NodeId, Role, dpid_for, dpid_parts, ip_octets, mac_for
from topologies.spec import SpecBase, emulating

# --- spec (the `kind: bcube` file) ------------------------------------------------------------
#: servers are 10.1.x.y with x.y = index + 1 (two octets), switches 10.(2 + level).x.y
MAX_SERVERS = 65534
MAX_LEVEL = 253


class BCubeSpec(SpecBase):
    """BCube(n, k): n^(k+1) servers with k+1 NICs, n-port switches on k+1 levels; servers relay."""

    kind: Literal["bcube"]
    n: int = Field(ge=2, description="switch ports")
    k: int = Field(ge=0, description="levels - 1 (servers have k+1 NICs)")
    ps: int = Field(default=1, ge=1, description="P: the first P servers are PSs")
    workers: int | None = Field(default=None, ge=1, description="W (default: all other servers)")

    @model_validator(mode="after")
    def _shape(self, info: ValidationInfo) -> BCubeSpec:
        if self.k > MAX_LEVEL or self.n > MAX_SERVERS:  # before n ** (k + 1): a huge power takes long
            raise ValueError(
                f"n, k: BCube({self.n},{self.k}) overflows its addresses; keep k <= {MAX_LEVEL}, "
                f"n ** (k + 1) <= {MAX_SERVERS}"
            )
        servers = self.n ** (self.k + 1)
        if servers > MAX_SERVERS:  # every use: the flow model builds the same addresses
            raise ValueError(
                f"n, k: BCube({self.n},{self.k}) has {servers} servers, past its addresses (10.1.x.y); "
                f"keep n ** (k + 1) <= {MAX_SERVERS}"
            )
        if servers > 256 and emulating(info):  # the emulator's cap; the flow model has none
            raise ValueError(f"n, k: BCube({self.n},{self.k}) has {servers} servers; keep <= 256")
        if self.ps >= servers:
            raise ValueError(f"ps: {self.ps} PSs leave no worker among the {servers} servers; use fewer")
        if self.ps + (self.workers or 0) > servers:
            raise ValueError(f"workers: {self.ps} PSs + {self.workers} workers exceed the {servers} servers")
        return self


# --- node identity -----------------------------------------------------------------------------
def digits(index: int, n: int, k: int) -> tuple[int, ...]:
    """Base-n digits (a_k, ..., a_0) of a server index."""
    out = []
    for _ in range(k + 1):
        out.append(index % n)
        index //= n
    return tuple(reversed(out))


def undigits(ds: tuple[int, ...], n: int) -> int:
    """The index of base-n digits (most significant first): the inverse of `digits`."""
    return sum(d * n**i for i, d in enumerate(reversed(ds)))


@dataclass(frozen=True)
class BCubeId(NodeId):
    """A BCube server (its index) or switch (its level and index among the level's n^k); n and k
    are carried because the names spell the index in base n."""

    server: bool
    index: int
    level: int
    n: int
    k: int

    @classmethod
    def of_server(cls, index: int, spec: SpecBase) -> Self:
        return cls(True, index, 0, spec.n, spec.k).checked()  # type: ignore[attr-defined]

    @classmethod
    def of_switch(cls, level: int, index: int, spec: SpecBase) -> Self:
        return cls(False, index, level, spec.n, spec.k).checked()  # type: ignore[attr-defined]

    @property
    def name(self) -> str:
        if self.server:
            return "s" + "_".join(map(str, digits(self.index, self.n, self.k)))
        rest = digits(self.index, self.n, self.k - 1) if self.k else ()
        return f"b{self.level}" + "".join(f"_{d}" for d in rest)

    @property
    def ip(self) -> str:
        if self.server:
            return f"10.1.{(self.index + 1) >> 8}.{(self.index + 1) & 255}"
        return f"10.{2 + self.level}.{self.index >> 8}.{self.index & 255}"

    @property
    def is_host(self) -> bool:
        return self.server

    @property
    def dpid(self) -> int | None:
        return None if self.server else dpid_for(Role.BSWITCH, self.level, self.index >> 8, self.index & 255)

    def mac(self, port: int = 1) -> str | None:
        """Each NIC has its own MAC: NIC l (port l+1) is `02:{l+1}:ip`."""
        return mac_for(self.ip, port) if self.server else None

    def has_nic(self, nic: int) -> bool:
        return 1 <= nic <= self.k + 1

    @classmethod
    def from_name(cls, name: str, spec: SpecBase) -> Self:
        n, k = spec.n, spec.k  # type: ignore[attr-defined]
        head, *rest = name.split("_")
        letter, first = head[:1], head[1:]
        if letter not in ("s", "b") or not all(x.isdigit() for x in (first, *rest)):
            raise ValueError(f"{name}: BCube names are s{{a_k}}_..._{{a_0}} or b{{level}}_{{digits}}")
        server = letter == "s"
        ds = tuple(int(x) for x in ((first, *rest) if server else rest))
        want = k + 1 if server else k
        if len(ds) != want or any(d >= n for d in ds):
            what = "server" if server else "switch"
            raise ValueError(f"{name}: a BCube({n},{k}) {what} name has {want} digits below {n}")
        if server:
            return cls.of_server(undigits(ds, n), spec)
        return cls.of_switch(int(first), undigits(ds, n), spec)

    @classmethod
    def from_ip(cls, ip: str, spec: SpecBase) -> Self:
        net, a, b, c = ip_octets(ip)
        if net != 10 or a < 1:
            raise ValueError(f"{ip}: BCube addresses are 10.1.x.y (servers) or 10.(2+level).x.y (switches)")
        if a == 1:
            return cls.of_server(((b << 8) | c) - 1, spec)
        return cls.of_switch(a - 2, (b << 8) | c, spec)

    @classmethod
    def from_dpid(cls, dpid: int, spec: SpecBase) -> Self:
        role, level, hi, lo = dpid_parts(dpid)
        if role != Role.BSWITCH:
            raise ValueError(f"DPID {dpid:#x}: a {role} is no BCube switch")
        return cls.of_switch(level, (hi << 8) | lo, spec)

    def checked(self) -> Self:
        """This id if BCube(n, k) has such a node."""
        ok = 0 <= self.index < self.n ** (self.k + (1 if self.server else 0)) and 0 <= self.level <= self.k
        if not ok:
            raise ValueError(
                f"{'server' if self.server else 'switch'} {self.index} (level {self.level}) "
                f"is not a node of BCube({self.n},{self.k})"
            )
        return self


# --- builder -----------------------------------------------------------------------------------
def build_bcube(spec: BCubeSpec) -> Network:
    """Nodes and links of BCube(n, k); the first P servers are PSs, the next W workers."""
    net = Network(spec, BCUBE)
    n, k = spec.n, spec.k
    total = n ** (k + 1)
    workers = spec.workers if spec.workers is not None else total - spec.ps
    servers = [BCubeId.of_server(idx, spec) for idx in range(total)]
    for s in servers:
        role = Role.PS if s.index < spec.ps else Role.WORKER if s.index < spec.ps + workers else Role.IDLE
        net.add_node(Node(s.name, role, s.ip, None, 0, s.index, relay=True))
    for level in range(k + 1):
        for sw_idx in range(n**k):
            b = BCubeId.of_switch(level, sw_idx, spec)
            net.add_node(Node(b.name, Role.BSWITCH, b.ip, b.dpid, level, sw_idx))
    for level in range(k + 1):  # NIC l of every server is its port l+1
        for s in servers:
            a = digits(s.index, n, k)
            pos = k - level  # a_level sits at this position of (a_k..a_0)
            sw = BCubeId.of_switch(level, undigits(a[:pos] + a[pos + 1 :], n), spec)
            ln = net.add_link(s.name, sw.name, spec.worker_mbps, LinkKind.SERVER_SWITCH)
            net.set_mac(s.name, ln.port_a, s.mac(level + 1))  # type: ignore[arg-type]
    return net


# --- the kind ----------------------------------------------------------------------------------
class BCubeKind(Kind):
    """BCube: servers relay between their k+1 NICs; switches forward by the next server's MAC."""

    all_pairs_intended = True
    name = "bcube"
    title = "BCube"
    spec_class = BCubeSpec
    size_fields = "n, k"
    node_id = BCubeId
    l2_by_next_server = True
    bct = None  # the paper gives no BCT model for BCube
    failure_links = (LinkKind.SERVER_SWITCH,)  # a server has k+1 cables and relays: one may go
    failure_switches = (Role.BSWITCH,)
    layers = {Role.BSWITCH: 1, Role.WORKER: 4, Role.PS: 4, Role.STANDBY: 4, Role.IDLE: 4}

    def build(self, spec: SpecBase) -> Network:
        return build_bcube(spec)  # type: ignore[arg-type]

    def intended_pairs(self, net: Network) -> list[tuple[str, str]]:
        """Every server with every other: all of them relay, so all must reach each other."""
        names = [h.name for h in net.hosts()]
        return [(a, b) for a in names for b in names if a != b]

    def grown(self, hosts: int, ps: int) -> tuple[str, dict[str, Any]] | None:
        """BCube(n, 1) with n = 10, 32, 100 (100, 1024, 10000 servers; beyond the emulator's cap)."""
        n = {100: 10, 1000: 32, 10000: 100}.get(hosts)
        return None if n is None else ("bcube-4-1.yaml", {"n": n, "k": 1, "ps": ps, "routing": "hashed"})

    def relay_hosts(self, net: Network, src: str, dst: str) -> tuple[str, ...] | None:
        """BCube's own single-path routing (BCubeRouting in the BCube paper, with the permutation
        [k, ..., 0]): one digit corrected per hop, the highest level's first.

        Why fixed rather than any shortest path: every relay then forwards in the digit order its
        own traffic uses, so the NIC a relay forwards on is never the one its own next hop leaves
        by when both correct different digits. The least-loaded choice over all pairs broke that:
        it put two hops of a host-order ring on one NIC of BCube(4,1) (s1_3's level-0 cable),
        doubling the ring's busiest cable against HiPS Table 3's RS."""
        n, k = net.spec.n, net.spec.k  # type: ignore[attr-defined]
        cur = list(digits(BCubeId.from_name(src, net.spec).index, n, k))
        want = digits(BCubeId.from_name(dst, net.spec).index, n, k)
        path = [src]
        for pos in range(k + 1):  # digits run a_k .. a_0: the highest level first
            if cur[pos] != want[pos]:
                cur[pos] = want[pos]
                path.append(BCubeId.of_server(undigits(tuple(cur), n), net.spec).name)
        return tuple(path)

    def address_digits(self, net: Network) -> dict[str, tuple[int, ...]]:
        """HiPS's server address: the base-n digits (a_k..a_0) the name spells."""
        n, k = net.spec.n, net.spec.k  # type: ignore[attr-defined]
        return {s.name: digits(s.index, n, k) for s in net.hosts()}


BCUBE = BCubeKind()
