"""FatTree(k) with oversubscription r (Eq. 7) and partial builds (the 4-ToR prototype): its spec,
node identity, builder and facts, in one place.

Addresses follow Al-Fares et al. as ripl does: host 10.pod.edge.id (id from 2), edge/agg switch
10.pod.sw.1, core 10.k.j.i. Names: host `h{pod}_{edge}_{id}`, edge (ToR) `e{pod}_{sw}`, agg
`a{pod}_{sw}`, core `c{j}_{i}`. ToR uplinks and agg-core links run at B_w / r, so B_a = B_c as in
Eq. 7. Roles: `workers` gives worker(i,j,k,h) per ToR (its first hosts); the next free hosts in
order are the PSs; any left over are idle.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, Self

from pydantic import Field, model_validator

from topologies.model import (
    BctFacts,
    BctScenario,
    Kind,
    LinkKind,
    Network,
    Node,
    NodeId,
    PaperJob,
    Role,
    dpid_for,
    dpid_parts,
    ip_octets,
    mac_for,
    name_numbers,
)
from topologies.spec import SpecBase

# --- spec (the `kind: fattree` file) ----------------------------------------------------------
#: the largest even k whose addresses fit: pods 0..k-1 and the cores' 10.k.j.i in one octet
MAX_K = 254


class FatTreeSpec(SpecBase):
    """FatTree(k) with oversubscription r at the ToR layer (Eq. 7: B_a = B_c = B_w / r)."""

    kind: Literal["fattree"]
    k: int = Field(ge=2, description="switch radix (even)")
    pods: int | None = Field(default=None, ge=1, description="pods built (partial build < k)")
    oversubscription: float = Field(default=1.0, ge=1, description="r: uplinks run at B_w / r")
    workers: list[int] = Field(description="deployment worker(i,j,k,h): workers under each ToR")
    ps: int | None = Field(default=None, ge=1, description="P: PSs (default: all other hosts)")
    ps_mbps: float | None = Field(default=None, gt=0, description="B_s: PS link rate (default B_w)")
    standby_ps: int = Field(default=0, ge=0, description="standby PSs: the next free hosts after the PSs")
    routing: Literal["ecmp", "hashed", "balanced"] = Field(
        default="ecmp",
        description="ecmp: switches hash each connection over the equal-cost paths (OVS multipath); "
        "hashed: one seeded path per (src, dst); balanced: least-loaded per (src, dst) (the paper's C)",
    )

    @model_validator(mode="after")
    def _shape(self) -> FatTreeSpec:
        if self.k > MAX_K:  # first: a too-large k fails every later count check with a misleading fix
            raise ValueError(
                f"k: FatTree(k={self.k}) overflows its addresses (pods and core switches are one octet: "
                f"10.pod.sw.id, cores 10.k.j.i); use k <= {MAX_K}"
            )
        if self.k % 2:
            raise ValueError(f"k: FatTree needs an even k, got {self.k}; use {self.k + 1}")
        if self.n_pods > self.k:
            raise ValueError(f"pods: a FatTree(k={self.k}) has at most {self.k} pods")
        tors = self.n_pods * self.k // 2
        if len(self.workers) != tors:
            raise ValueError(
                f"workers: {len(self.workers)} counts for {tors} ToRs ({self.n_pods} pods x "
                f"k/2); give one count per ToR"
            )
        per_tor = self.k // 2
        if any(c < 0 or c > per_tor for c in self.workers):
            raise ValueError(
                f"workers: each ToR has {per_tor} hosts in FatTree(k={self.k}); counts must be "
                f"0..{per_tor}, got {self.workers}"
            )
        free = tors * per_tor - sum(self.workers)
        if free < (self.ps or 1):
            raise ValueError(
                f"ps: {self.ps or 1} PSs but only {free} hosts are left after the workers; "
                "place fewer workers or build more pods"
            )
        if self.standby_ps and free < (self.ps or free) + self.standby_ps:
            raise ValueError(
                f"standby_ps: {self.standby_ps} standby PSs but only {free - (self.ps or free)} hosts are "
                "left after the workers and PSs; set ps, place fewer workers or build more pods"
            )
        return self

    @property
    def n_pods(self) -> int:
        """Pods built: all k by default, fewer for a partial build such as the 4-ToR prototype."""
        return self.pods if self.pods is not None else self.k


# --- node identity -----------------------------------------------------------------------------
class Tier(StrEnum):
    """Where a node sits in the tree."""

    HOST = "host"
    EDGE = "edge"
    AGG = "agg"
    CORE = "core"


_PREFIX = {Tier.HOST: "h", Tier.EDGE: "e", Tier.AGG: "a", Tier.CORE: "c"}
_SWITCH_ROLE = {Tier.EDGE: Role.TOR, Tier.AGG: Role.AGG, Tier.CORE: Role.CORE}


@dataclass(frozen=True)
class FatTreeId(NodeId):
    """A FatTree node as ripl numbers it: (pod, sw, host). Edge and aggregation switches have host
    1, hosts their id from 2; a core switch (j, i) is (k, j, i), so its address is 10.k.j.i."""

    tier: Tier
    pod: int
    sw: int
    host: int = 1

    @property
    def name(self) -> str:
        if self.tier == Tier.HOST:
            return f"h{self.pod}_{self.sw}_{self.host}"
        if self.tier == Tier.CORE:
            return f"c{self.sw}_{self.host}"
        return f"{_PREFIX[self.tier]}{self.pod}_{self.sw}"

    @property
    def ip(self) -> str:
        return f"10.{self.pod}.{self.sw}.{self.host}"

    @property
    def is_host(self) -> bool:
        return self.tier == Tier.HOST

    @property
    def dpid(self) -> int | None:
        if self.tier == Tier.HOST:
            return None
        if self.tier == Tier.CORE:
            return dpid_for(Role.CORE, self.sw, self.host)
        return dpid_for(_SWITCH_ROLE[self.tier], self.pod, self.sw)

    @classmethod
    def from_name(cls, name: str, spec: SpecBase) -> Self:
        tier = next((t for t, p in _PREFIX.items() if name.startswith(p)), None)
        if tier is None:
            raise ValueError(f"{name}: FatTree names start with h, e, a or c")
        nums = name_numbers(name, _PREFIX[tier], 3 if tier == Tier.HOST else 2)
        if tier == Tier.CORE:
            return cls(tier, _k(spec), *nums).checked(spec)
        return cls(tier, *nums).checked(spec)

    @classmethod
    def from_ip(cls, ip: str, spec: SpecBase) -> Self:
        net, pod, sw, host = ip_octets(ip)
        if net != 10:
            raise ValueError(f"{ip}: FatTree addresses are 10.pod.sw.id")
        if pod == _k(spec):
            return cls(Tier.CORE, pod, sw, host).checked(spec)
        if host == 1:
            return cls(Tier.EDGE if sw < _k(spec) // 2 else Tier.AGG, pod, sw).checked(spec)
        return cls(Tier.HOST, pod, sw, host).checked(spec)

    @classmethod
    def from_dpid(cls, dpid: int, spec: SpecBase) -> Self:
        role, a, b, _ = dpid_parts(dpid)
        if role == Role.CORE:
            return cls(Tier.CORE, _k(spec), a, b).checked(spec)
        tier = {Role.TOR: Tier.EDGE, Role.AGG: Tier.AGG}.get(role)
        if tier is None:
            raise ValueError(f"DPID {dpid:#x}: a {role} is no FatTree switch")
        return cls(tier, a, b).checked(spec)

    def checked(self, spec: SpecBase) -> Self:
        """This id if the spec's (possibly partial) tree has such a node."""
        s: FatTreeSpec = spec  # type: ignore[assignment]
        half = s.k // 2
        if self.tier == Tier.CORE:
            ok = self.pod == s.k and 1 <= self.sw <= half and 1 <= self.host <= half
        else:
            ok = 0 <= self.pod < s.n_pods
            if self.tier == Tier.AGG:
                ok = ok and half <= self.sw < s.k and self.host == 1
            else:
                ok = ok and 0 <= self.sw < half
                ok = ok and (2 <= self.host <= half + 1 if self.tier == Tier.HOST else self.host == 1)
        if not ok:
            raise ValueError(f"{self.name} ({self.ip}) is not a node of {s.name or 'this FatTree'}")
        return self


def _k(spec: SpecBase) -> int:
    return spec.k  # type: ignore[attr-defined]


# --- builder -----------------------------------------------------------------------------------
def build_fattree(spec: FatTreeSpec) -> Network:
    """Nodes and links of a (possibly partial) FatTree; ToRs are numbered pod-major from 1."""
    net = Network(spec, FATTREE)
    k, half = spec.k, spec.k // 2
    up = spec.worker_mbps / spec.oversubscription
    ps_left = spec.ps if spec.ps is not None else 10**9
    standby_left = spec.standby_ps
    tor_no = 0
    hosts: list[tuple[FatTreeId, str, int]] = []  # (host, edge, ToR number) in ToR order
    for pod in range(spec.n_pods):
        for e in range(half):
            tor_no += 1
            eid = FatTreeId(Tier.EDGE, pod, e)
            edge = net.add_node(Node(eid.name, Role.TOR, eid.ip, eid.dpid, pod, tor_no))
            for hid in range(2, half + 2):
                hosts.append((FatTreeId(Tier.HOST, pod, e, hid), edge.name, tor_no))
    # roles: worker(i,j,k,h) from the file, then PSs on the free hosts in order
    for hid_, edge, tor in hosts:
        if hid_.host - 2 < spec.workers[tor - 1]:
            role = Role.WORKER
        elif ps_left > 0:
            role, ps_left = Role.PS, ps_left - 1
        elif standby_left > 0:
            role, standby_left = Role.STANDBY, standby_left - 1
        else:
            role = Role.IDLE
        h = net.add_node(Node(hid_.name, role, hid_.ip, None, hid_.pod, tor))
        rate = (spec.ps_mbps or spec.worker_mbps) if role in (Role.PS, Role.STANDBY) else spec.worker_mbps
        ln = net.add_link(h.name, edge, rate, LinkKind.HOST_TOR)
        net.set_mac(h.name, ln.port_a, mac_for(h.ip))
    for pod in range(spec.n_pods):
        aggs = []
        for s in range(half, k):
            aid = FatTreeId(Tier.AGG, pod, s)
            aggs.append(net.add_node(Node(aid.name, Role.AGG, aid.ip, aid.dpid, pod, s)))
        for e in range(half):
            for a in aggs:
                net.add_link(FatTreeId(Tier.EDGE, pod, e).name, a.name, up, LinkKind.TOR_AGG)
    for j in range(1, half + 1):
        for i in range(1, half + 1):
            cid = FatTreeId(Tier.CORE, k, j, i)
            core = net.add_node(Node(cid.name, Role.CORE, cid.ip, cid.dpid))
            for pod in range(spec.n_pods):
                net.add_link(FatTreeId(Tier.AGG, pod, half + j - 1).name, core.name, up, LinkKind.AGG_CORE)
    return net


# --- the kind ----------------------------------------------------------------------------------
class FatTreeKind(Kind):
    """FatTree: single-NIC hosts under ToRs, ECMP over the equal-cost paths (Eq. 7)."""

    name = "fattree"
    title = "FatTree"
    spec_class = FatTreeSpec
    size_fields = "k, pods"
    node_id = FatTreeId
    bct = BctFacts(
        BctScenario.FATTREE,
        LinkKind.HOST_TOR,
        LinkKind.HOST_TOR,
        shared_links=frozenset({LinkKind.TOR_AGG, LinkKind.AGG_CORE}),  # B_a = B_c
    )
    failure_links = (LinkKind.TOR_AGG, LinkKind.AGG_CORE)
    failure_switches = (Role.AGG, Role.CORE)
    layers = {
        Role.CORE: 0,
        Role.AGG: 1,
        Role.TOR: 2,
        Role.WORKER: 4,
        Role.PS: 4,
        Role.STANDBY: 4,
        Role.IDLE: 4,
    }

    def build(self, spec: SpecBase) -> Network:
        return build_fattree(spec)  # type: ignore[arg-type]

    def rate_fields(self, spec: SpecBase) -> dict[str, float]:
        s: FatTreeSpec = spec  # type: ignore[assignment]
        return {"worker_mbps": s.worker_mbps, "ps_mbps": s.ps_mbps or 0}

    layouts = ("fattree-two-pods",)

    def layout(self, name: str, job: PaperJob) -> dict[str, Any]:
        """Two pods of the smallest radix holding W + P hosts, workers filling ToRs in order
        (Section 4.2: Fig. 7's FatTree), the PSs on the next free hosts."""
        if name not in self.layouts:
            return super().layout(name, job)
        k = fattree_k(job.workers + job.ps)
        per_tor = k // 2
        full, rest = divmod(job.workers, per_tor)
        deployment = [per_tor] * full + ([rest] if rest else [])
        deployment += [0] * (k - len(deployment))  # two pods = k ToRs; the PSs take the next free hosts
        return {
            "kind": "fattree",
            "k": k,
            "pods": 2,
            "workers": deployment,
            "ps": job.ps,
            "oversubscription": job.r,
            "routing": "balanced",
        }

    def grown(self, hosts: int, ps: int) -> tuple[str, dict[str, Any]] | None:
        """The prototype at radix 8, 16, 34 (~100, 1k, 10k hosts): every host a worker but the PSs."""
        k = {100: 8, 1000: 16, 10000: 34}.get(hosts)
        if k is None:
            return None
        half = k // 2
        workers = [half] * (k * half - 1) + [half - ps]
        return "fattree-testbed.yaml", {"k": k, "pods": None, "workers": workers, "ps": ps, "routing": "hashed"}

    def regions(self, net: Network) -> dict[str, tuple[str, ...]]:
        """Rack (edge switch) and pod: both tiers run at B_w / r, so both are oversubscribed when r > 1."""
        s: FatTreeSpec = net.spec  # type: ignore[assignment]
        if s.oversubscription <= 1:
            return super().regions(net)
        out = {}
        for h in net.hosts():
            hid = FatTreeId.from_name(h.name, s)
            out[h.name] = (FatTreeId(Tier.EDGE, hid.pod, hid.sw).name, f"pod{hid.pod}")
        return out


def fattree_k(hosts: int) -> int:
    """The smallest even radix whose two pods (2 x k/2 ToRs x k/2 hosts) hold `hosts`."""
    k = 2
    while k * k // 2 < hosts:
        k += 2
    return k


FATTREE = FatTreeKind()
