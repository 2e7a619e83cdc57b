"""Leaf-spine (RAT's evaluation network, RAT paper §4.1): its spec, node identity,
builder and facts, in one place.

S spines, L leaves, n hosts per leaf. Every leaf has one uplink to every spine; with host rate B
and oversubscription o:1 each uplink runs at n·B / (o·S), so a leaf's uplinks together carry 1/o
of what its hosts can send. Flows spread over the spines by ECMP hashing per (src, dst) pair
(`routing: hashed`, the default) or least-loaded (`balanced`).

Names and addresses: leaf `l{i}` 10.i.0.1, host `h{i}_{id}` 10.i.1.id (id from 2, as FatTree
numbers hosts), spine `s{j}` 10.250.j.1; i from 0, j from 1. Roles: `workers` gives the workers
under each leaf (its first hosts; default: every host), the next free hosts are the PSs (`ps`,
default none: allreduce schemes need no server), any left over are idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Self

from pydantic import Field, model_validator

from topologies.model import (
    BctFacts,
    BctScenario,
    Kind,
    LinkKind,
    Network,
    Node,
    NodeId,
    Role,
    dpid_for,
    dpid_parts,
    ip_octets,
    mac_for,
    name_numbers,
)
from topologies.spec import SpecBase

#: second octet of the spines' addresses (leaves use 0..L-1, so L stays below it)
SPINE_NET = 250


class LeafSpineSpec(SpecBase):
    """S spines x L leaves, n hosts per leaf, leaf uplinks sized for oversubscription o:1."""

    kind: Literal["leafspine"]
    spines: int = Field(ge=1, le=200, description="S: spine switches")
    leaves: int = Field(ge=1, lt=SPINE_NET, description="L: leaf switches (racks)")
    hosts_per_leaf: int = Field(ge=1, le=200, description="n: hosts under each leaf")
    oversubscription: float = Field(default=1.0, ge=1, description="o: a leaf's uplinks carry n·B_w/o together")
    workers: list[int] | None = Field(default=None, description="workers under each leaf (default: every host)")
    ps: int = Field(default=0, ge=0, description="P: PSs on the free hosts after the workers")
    ps_mbps: float | None = Field(default=None, gt=0, description="B_s: PS link rate (default B_w)")
    standby_ps: int = Field(default=0, ge=0, description="standby PSs: the next free hosts after the PSs")
    routing: Literal["hashed", "balanced"] = Field(
        default="hashed", description="ECMP path choice per (src, dst): hashed or least-loaded"
    )

    @model_validator(mode="after")
    def _shape(self) -> LeafSpineSpec:
        counts = self.worker_counts
        if len(counts) != self.leaves:
            raise ValueError(f"workers: {len(counts)} counts for {self.leaves} leaves; give one count per leaf")
        if any(c < 0 or c > self.hosts_per_leaf for c in counts):
            raise ValueError(
                f"workers: each leaf has {self.hosts_per_leaf} hosts; counts must be 0..{self.hosts_per_leaf}"
            )
        free = self.leaves * self.hosts_per_leaf - sum(counts)
        if self.ps + self.standby_ps > free:
            raise ValueError(
                f"ps: {self.ps} PSs and {self.standby_ps} standbys but only {free} hosts are left after the "
                "workers; place fewer workers (workers: [...]) or add hosts_per_leaf"
            )
        return self

    @property
    def worker_counts(self) -> list[int]:
        return self.workers if self.workers is not None else [self.hosts_per_leaf] * self.leaves

    @property
    def uplink_mbps(self) -> float:
        """Paper-equivalent rate of one leaf-spine cable: n·B_w / (o·S)."""
        return self.hosts_per_leaf * self.worker_mbps / (self.oversubscription * self.spines)


@dataclass(frozen=True)
class LeafSpineId(NodeId):
    """A leaf-spine node: ("h", leaf, id), ("l", leaf) or ("s", spine)."""

    tier: Literal["h", "l", "s"]
    a: int
    b: int = 1

    @property
    def name(self) -> str:
        return {"h": f"h{self.a}_{self.b}", "l": f"l{self.a}", "s": f"s{self.a}"}[self.tier]

    @property
    def ip(self) -> str:
        return {"h": f"10.{self.a}.1.{self.b}", "l": f"10.{self.a}.0.1", "s": f"10.{SPINE_NET}.{self.a}.1"}[self.tier]

    @property
    def is_host(self) -> bool:
        return self.tier == "h"

    @property
    def dpid(self) -> int | None:
        if self.tier == "h":
            return None
        return dpid_for(Role.TOR, self.a) if self.tier == "l" else dpid_for(Role.CORE, self.a)

    @classmethod
    def from_name(cls, name: str, spec: SpecBase) -> Self:
        tier = name[:1]
        if tier not in ("h", "l", "s"):
            raise ValueError(f"{name}: leaf-spine names start with h, l or s")
        nums = name_numbers(name, tier, 2 if tier == "h" else 1)
        return cls(tier, *nums).checked(spec)  # type: ignore[arg-type]

    @classmethod
    def from_ip(cls, ip: str, spec: SpecBase) -> Self:
        net, x, y, z = ip_octets(ip)
        if net != 10:
            raise ValueError(f"{ip}: leaf-spine addresses are 10.x.y.z")
        if x == SPINE_NET:
            return cls("s", y).checked(spec)
        return (cls("l", x) if (y, z) == (0, 1) else cls("h", x, z)).checked(spec)

    @classmethod
    def from_dpid(cls, dpid: int, spec: SpecBase) -> Self:
        role, a, _, _ = dpid_parts(dpid)
        if role == Role.TOR:
            return cls("l", a).checked(spec)
        if role == Role.CORE:
            return cls("s", a).checked(spec)
        raise ValueError(f"DPID {dpid:#x}: a {role} is no leaf-spine switch")

    def checked(self, spec: SpecBase) -> Self:
        s: LeafSpineSpec = spec  # type: ignore[assignment]
        if self.tier == "s":
            ok = 1 <= self.a <= s.spines and self.b == 1
        elif self.tier == "l":
            ok = 0 <= self.a < s.leaves and self.b == 1
        else:
            ok = 0 <= self.a < s.leaves and 2 <= self.b < 2 + s.hosts_per_leaf
        if not ok:
            raise ValueError(f"{self.name} ({self.ip}) is not a node of {s.name or 'this leaf-spine'}")
        return self


def build_leafspine(spec: LeafSpineSpec) -> Network:
    """Hosts under their leaves (worker, then PS, standby, idle), then every leaf to every spine."""
    net = Network(spec, LEAFSPINE)
    ps_left, standby_left = spec.ps, spec.standby_ps
    for i, n_workers in enumerate(spec.worker_counts):
        lid = LeafSpineId("l", i)
        net.add_node(Node(lid.name, Role.TOR, lid.ip, lid.dpid, 0, i + 1))
        for h in range(spec.hosts_per_leaf):
            if h < n_workers:
                role = Role.WORKER
            elif ps_left:
                role, ps_left = Role.PS, ps_left - 1
            elif standby_left:
                role, standby_left = Role.STANDBY, standby_left - 1
            else:
                role = Role.IDLE
            hid = LeafSpineId("h", i, h + 2)
            node = net.add_node(Node(hid.name, role, hid.ip, None, 0, i + 1))
            rate = (spec.ps_mbps or spec.worker_mbps) if role in (Role.PS, Role.STANDBY) else spec.worker_mbps
            ln = net.add_link(node.name, lid.name, rate, LinkKind.HOST_TOR)
            net.set_mac(node.name, ln.port_a, mac_for(node.ip))
    # PSs may sit under any leaf: they still fill hosts in leaf order, after every leaf's workers
    for j in range(1, spec.spines + 1):
        sid = LeafSpineId("s", j)
        net.add_node(Node(sid.name, Role.CORE, sid.ip, sid.dpid, 0, j))
        for i in range(spec.leaves):
            net.add_link(LeafSpineId("l", i).name, sid.name, spec.uplink_mbps, LinkKind.LEAF_SPINE)
    return net


class LeafSpineKind(Kind):
    """Leaf-spine: single-NIC hosts under leaves, ECMP over the spines (RAT's network)."""

    all_pairs_intended = True
    name = "leafspine"
    title = "leaf-spine"
    spec_class = LeafSpineSpec
    size_fields = "leaves, hosts_per_leaf"
    node_id = LeafSpineId
    # with PSs, the FatTree model applies: B_w, B_s on host cables, C flows on the uplinks
    bct = BctFacts(BctScenario.FATTREE, LinkKind.HOST_TOR, LinkKind.HOST_TOR, frozenset({LinkKind.LEAF_SPINE}))
    failure_links = (LinkKind.LEAF_SPINE,)
    failure_switches = (Role.CORE,)
    layers = {Role.CORE: 0, Role.TOR: 2, Role.WORKER: 4, Role.PS: 4, Role.STANDBY: 4, Role.IDLE: 4}

    def build(self, spec: SpecBase) -> Network:
        return build_leafspine(spec)  # type: ignore[arg-type]

    def rate_fields(self, spec: SpecBase) -> dict[str, float]:
        s: LeafSpineSpec = spec  # type: ignore[assignment]
        return {"worker_mbps": s.worker_mbps, "ps_mbps": s.ps_mbps or 0, "uplink (n·B_w/(o·S))": s.uplink_mbps}

    def intended_pairs(self, net: Network) -> list[tuple[str, str]]:
        """Every taking-part host with every other: allreduce schemes exchange between workers."""
        names = [h.name for h in net.hosts() if h.role != Role.IDLE]
        return [(a, b) for a in names for b in names if a != b]

    def paper_path(self, net: Network, src: str, dst: str) -> tuple[int, str] | None:
        same = net.nodes[src].index == net.nodes[dst].index
        return (1, "its leaf") if same else (3, "leaf, spine, leaf")

    def regions(self, net: Network) -> dict[str, tuple[str, ...]]:
        """The rack (leaf) is RAT's one aggregation level when the uplinks are oversubscribed."""
        s: LeafSpineSpec = net.spec  # type: ignore[assignment]
        if s.oversubscription <= 1:
            return {h.name: () for h in net.hosts()}
        return {h.name: (f"l{h.index - 1}",) for h in net.hosts()}


LEAFSPINE = LeafSpineKind()
