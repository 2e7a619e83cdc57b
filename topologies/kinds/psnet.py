"""PSNet (Section 3.1, addressing 3.2): its spec, node identity, builder and facts, in one place.

A module is an ECS, R ToRs, a SuperNode switch and P multi-NIC PSs; modules are joined by an
R-regular graph of SuperNodes. Names: worker `w{mid}_{swid}_{wid}` (10.mid.swid.wid, swid = its
home ToR), PS `ps{mid}_{psid}` (10.mid.0.psid), ToR `t{mid}_{swid}` (10.mid.swid.0), SuperNode
`sn{mid}` (10.mid.R+1.0), ECS `ecs{mid}` (10.mid.0.0). Workers get home ToRs round-robin, so the
addresses spread equally under the ToRs as the paper's default; the circuits (which ToR a worker
is wired to now) are the TC's business (controller/tc.py).

Every PS NIC carries the same MAC and address: a PS is one server with R ports, and the ToRs route
by IP, so a worker on any ToR reaches the PS through that ToR's NIC without ARP ever asking which.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal, Self

import networkx as nx
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

# --- spec (the `kind: psnet` file) ------------------------------------------------------------
#: every number in a PSNet address (10.mid.swid.wid) is one octet
MAX_OCTET = 255


class PSNetSpec(SpecBase):
    """PSNet (Section 3): H modules, each an ECS, R ToRs, a SuperNode switch and P multi-NIC PSs."""

    kind: Literal["psnet"]
    modules: int = Field(default=1, ge=1, description="H: number of modules (SuperNodes)")
    tors: int = Field(ge=1, description="R: ToR switches per module (and NICs per PS)")
    K: float = Field(default=1.0, gt=0, description="B_s = K x B_w: rate of each PS NIC")
    ps: int = Field(ge=1, description="P: parameter servers per module")
    workers: int | list[int] | list[list[int]] = Field(
        description="workers per module: a count (the TC balances them over the ToRs) or the "
        "deployment worker(i,j,k) per ToR, the same for every module or one list per module"
    )
    ecs_ports: int | None = Field(default=None, ge=1, description="W': worker ports of each ECS")
    tor_downlinks: int | None = Field(default=None, ge=1, description="M_d: ECS-facing ports of each ToR (default: W')")
    uplink_mbps: float | None = Field(default=None, gt=0, description="ToR-SuperNode rate")
    inter_module_mbps: float | None = Field(default=None, gt=0, description="SuperNode links")
    dark_ms: float = Field(default=0.0, ge=0, description="ECS reconfiguration dark period")
    standby_ps: int = Field(default=0, ge=0, description="standby PSs per module, cabled as PSs, idle until a PS fails")

    @model_validator(mode="after")
    def _shape(self) -> PSNetSpec:
        self._check_addresses()
        if 2 < self.modules <= self.tors:
            raise ValueError(
                f"modules: an R-regular graph of H={self.modules} SuperNodes needs H > R={self.tors}"
                f" (or H = 2, joined by R parallel links); use modules 1, 2 or >= {self.tors + 1}"
            )
        if self.modules > 2 and (self.modules * self.tors) % 2:
            raise ValueError(
                f"modules: an R-regular graph needs H x R even (H={self.modules}, R={self.tors})"
                "; change modules or tors"
            )
        if isinstance(self.workers, int) and self.workers < 1:
            raise ValueError(f"workers: a module needs at least one worker, got {self.workers}")
        for m, dep in enumerate(self.deployments(), start=1):
            if dep is None and -(-self.worker_count(m) // self.tors) > self.m_d:
                raise ValueError(
                    f"workers: balancing {self.worker_count(m)} workers over {self.tors} ToRs needs "
                    f"{-(-self.worker_count(m) // self.tors)} ECS-facing ports per ToR but tor_downlinks is "
                    f"{self.m_d}; raise tor_downlinks"
                )
            if dep is not None and len(dep) != self.tors:
                raise ValueError(
                    f"workers: module {m} lists {len(dep)} ToRs but tors is {self.tors}; give "
                    f"one count per ToR, e.g. {[1] * self.tors}"
                )
            if dep is not None and any(c < 0 for c in dep):
                raise ValueError(f"workers: module {m} has a negative count {dep}")
            count = self.worker_count(m)
            if count > self.w_prime:
                raise ValueError(
                    f"workers: module {m} has {count} workers but the ECS has {self.w_prime} "
                    "ports (ecs_ports); raise ecs_ports or place fewer workers"
                )
            if dep is not None and max(dep) > self.m_d:
                raise ValueError(
                    f"workers: module {m} puts {max(dep)} workers on one ToR but a ToR has "
                    f"{self.m_d} ECS-facing ports (tor_downlinks); raise tor_downlinks"
                )
        return self

    def _check_addresses(self) -> None:
        """Every number of 10.mid.swid.wid is one octet: modules, the SuperNode's swid R+1, the
        PSs' psid and the workers' index under their home ToR. Checked first and for every use
        (the flow model builds the same addresses): past it, nodes would get invalid addresses."""
        if self.modules > MAX_OCTET:
            raise ValueError(f"modules: {self.modules} modules overflow 10.mid.x.x; use modules <= {MAX_OCTET}")
        if self.tors > MAX_OCTET - 1:
            raise ValueError(
                f"tors: {self.tors} ToRs overflow 10.mid.swid.0 (the SuperNode takes swid R+1); "
                f"use tors <= {MAX_OCTET - 1}"
            )
        if self.ps + self.standby_ps > MAX_OCTET:
            field = "standby_ps" if self.standby_ps else "ps"
            raise ValueError(
                f"{field}: {self.ps + self.standby_ps} PSs per module overflow 10.mid.0.psid; keep ps + standby_ps "
                f"<= {MAX_OCTET}"
            )
        w = self.workers
        if isinstance(w, int):
            per_tor = -(-w // self.tors)
        else:
            flat = [c for row in w for c in (row if isinstance(row, list) else [row])]
            per_tor = max(flat, default=0)
        if per_tor > MAX_OCTET:
            raise ValueError(
                f"workers: {per_tor} workers under one ToR overflow 10.mid.swid.wid; keep <= {MAX_OCTET} per ToR "
                f"(<= {MAX_OCTET * self.tors} per module with tors: {self.tors})"
            )

    def deployments(self) -> list[list[int] | None]:
        """Per module: the deployment from the file, or None where the TC balances."""
        w = self.workers
        if isinstance(w, int):
            return [None] * self.modules
        if w and isinstance(w[0], list):
            if len(w) != self.modules:
                raise ValueError(
                    f"workers: {len(w)} per-module lists for {self.modules} modules; give one "
                    "list per module or a single list for all"
                )
            return [list(x) for x in w]  # type: ignore[arg-type]
        return [list(w) for _ in range(self.modules)]  # type: ignore[arg-type]

    def worker_count(self, module: int) -> int:
        """W of one module (1-based)."""
        dep = self.deployments()[module - 1]
        return int(self.workers) if dep is None else sum(dep)  # type: ignore[arg-type]

    @property
    def w_prime(self) -> int:
        """W': worker-side ports of each ECS (default: the largest module's worker count)."""
        if self.ecs_ports is not None:
            return self.ecs_ports
        return max(self._raw_count(m) for m in range(1, self.modules + 1))

    @property
    def uplink_paper_mbps(self) -> float:
        """ToR-SuperNode rate: the file's, else R x B_w (a ToR's downlinks never oversubscribe it)."""
        return self.uplink_mbps or self.worker_mbps * self.tors

    @property
    def inter_module_paper_mbps(self) -> float:
        """SuperNode-SuperNode rate: the file's, else the uplink rate."""
        return self.inter_module_mbps or self.uplink_paper_mbps

    @property
    def m_d(self) -> int:
        """M_d: ECS-facing ports of each ToR (default W', so any deployment can be circuited)."""
        return self.tor_downlinks if self.tor_downlinks is not None else self.w_prime

    def _raw_count(self, module: int) -> int:
        w = self.workers
        if isinstance(w, int):
            return w
        if w and isinstance(w[0], list):
            return sum(w[module - 1])  # type: ignore[arg-type]
        return sum(w)  # type: ignore[arg-type]


# --- node identity -----------------------------------------------------------------------------
class Tier(StrEnum):
    """Where a node sits in a module (a PS and a standby PS share a tier: the spec tells them apart)."""

    ECS = "ecs"
    TOR = "tor"
    SUPERNODE = "supernode"
    WORKER = "worker"
    PS = "ps"


#: name prefix, tier and how many numbers follow it (`ps` and `sn` before the one-letter ones)
_NAME_PREFIXES = (
    ("ecs", Tier.ECS, 1),
    ("sn", Tier.SUPERNODE, 1),
    ("ps", Tier.PS, 2),
    ("t", Tier.TOR, 2),
    ("w", Tier.WORKER, 3),
)


@dataclass(frozen=True)
class PSNetId(NodeId):
    """A PSNet node by its numbers: module (mid), ToR (swid; a worker's home ToR; R+1 for the
    SuperNode, whose address sits above the ToRs) and index (a worker's wid, a PS's psid)."""

    tier: Tier
    module: int
    tor: int = 0
    index: int = 0

    @property
    def name(self) -> str:
        m = self.module
        return {
            Tier.ECS: f"ecs{m}",
            Tier.TOR: f"t{m}_{self.tor}",
            Tier.SUPERNODE: f"sn{m}",
            Tier.WORKER: f"w{m}_{self.tor}_{self.index}",
            Tier.PS: f"ps{m}_{self.index}",
        }[self.tier]

    @property
    def ip(self) -> str:
        return f"10.{self.module}.{self.tor}.{self.index}"

    @property
    def is_host(self) -> bool:
        return self.tier in (Tier.WORKER, Tier.PS)

    @property
    def dpid(self) -> int | None:
        if self.tier == Tier.ECS:
            return dpid_for(Role.ECS, self.module)
        if self.tier == Tier.TOR:
            return dpid_for(Role.TOR, self.module, self.tor)
        if self.tier == Tier.SUPERNODE:
            return dpid_for(Role.SUPERNODE, self.module)
        return None

    @classmethod
    def from_name(cls, name: str, spec: SpecBase) -> Self:
        found = next(((p, t, c) for p, t, c in _NAME_PREFIXES if name.startswith(p)), None)
        if found is None:
            raise ValueError(f"{name}: PSNet names start with ecs, sn, ps, t or w")
        prefix, tier, count = found
        nums = name_numbers(name, prefix, count)
        if tier == Tier.PS:
            return cls(tier, nums[0], 0, nums[1]).checked(spec)
        if tier in (Tier.TOR, Tier.WORKER):
            return cls(tier, *nums).checked(spec)
        return cls._switch(tier, nums[0], spec)

    @classmethod
    def from_ip(cls, ip: str, spec: SpecBase) -> Self:
        net, m, s, i = ip_octets(ip)
        if net != 10:
            raise ValueError(f"{ip}: PSNet addresses are 10.mid.swid.wid")
        if s == 0:
            return cls(Tier.ECS, m).checked(spec) if i == 0 else cls(Tier.PS, m, 0, i).checked(spec)
        if i == 0:
            sn = s == _tors(spec) + 1
            return cls._switch(Tier.SUPERNODE, m, spec) if sn else cls(Tier.TOR, m, s).checked(spec)
        return cls(Tier.WORKER, m, s, i).checked(spec)

    @classmethod
    def from_dpid(cls, dpid: int, spec: SpecBase) -> Self:
        role, m, s, _ = dpid_parts(dpid)
        if role == Role.TOR:
            return cls(Tier.TOR, m, s).checked(spec)
        if role in (Role.ECS, Role.SUPERNODE):
            return cls._switch(Tier(role.value), m, spec)
        raise ValueError(f"DPID {dpid:#x}: a {role} is no PSNet switch")

    @classmethod
    def _switch(cls, tier: Tier, module: int, spec: SpecBase) -> Self:
        """The module's ECS or SuperNode (the SuperNode's address uses swid R+1)."""
        return cls(tier, module, _tors(spec) + 1 if tier == Tier.SUPERNODE else 0).checked(spec)

    def checked(self, spec: SpecBase) -> Self:
        """This id if the spec's topology has such a node (module, ToR and index in range)."""
        s: PSNetSpec = spec  # type: ignore[assignment]
        ok = 1 <= self.module <= s.modules
        if self.tier in (Tier.TOR, Tier.WORKER):
            ok = ok and 1 <= self.tor <= s.tors
        if self.tier == Tier.WORKER:
            ok = ok and 1 <= self.index <= -(-s.worker_count(self.module) // s.tors)
        if self.tier == Tier.PS:
            ok = ok and 1 <= self.index <= s.ps + s.standby_ps
        if not ok:
            raise ValueError(f"{self.name} ({self.ip}) is not a node of {s.name or 'this PSNet'}")
        return self


def _tors(spec: SpecBase) -> int:
    return spec.tors  # type: ignore[attr-defined]


# --- builder -----------------------------------------------------------------------------------
def home_tors(workers: int, tors: int) -> list[tuple[int, int]]:
    """(swid, wid) of each worker, 1-based: round-robin over ToRs, as equal as W allows."""
    return sorted(((i % tors) + 1, (i // tors) + 1) for i in range(workers))


def supernode_graph(modules: int, degree: int, seed: int) -> list[tuple[int, int]]:
    """Edges (1-based module ids) of the R-regular inter-module graph; connected, seeded.

    Two modules are joined by R parallel links (the R disjoint paths); more modules form a random
    R-regular graph, redrawn with the next seed until it is connected.
    """
    if modules == 1:
        return []
    if modules == 2:
        return [(1, 2)] * degree
    for attempt in range(100):
        g = nx.random_regular_graph(degree, modules, seed=random.Random(seed + attempt).randrange(2**31))
        if nx.is_connected(g):
            return sorted((a + 1, b + 1) for a, b in g.edges())
    raise ValueError(f"no connected {degree}-regular graph on {modules} modules after 100 seeds")


def _node(i: PSNetId, role: Role, module: int = 0, index: int = 0) -> Node:
    return Node(i.name, role, i.ip, i.dpid, module, index)


def build_psnet(spec: PSNetSpec) -> Network:
    """Nodes and links of a PSNet; ports are numbered in the order links are added here."""
    net = Network(spec, PSNET)
    r = spec.tors
    bw = spec.worker_mbps
    uplink = spec.uplink_paper_mbps
    inter = spec.inter_module_paper_mbps
    for m in range(1, spec.modules + 1):
        ecs = net.add_node(_node(PSNetId(Tier.ECS, m), Role.ECS, m))
        tors = [net.add_node(_node(PSNetId(Tier.TOR, m, s), Role.TOR, m, s)) for s in range(1, r + 1)]
        sn = net.add_node(_node(PSNetId(Tier.SUPERNODE, m, r + 1), Role.SUPERNODE, m, r + 1))
        # ECS ports 1..W' face workers; then M_d ports per ToR face the ToRs (ToR ports 1..M_d).
        workers = []
        for swid, wid in home_tors(spec.worker_count(m), r):
            w = net.add_node(_node(PSNetId(Tier.WORKER, m, swid, wid), Role.WORKER, m, swid))
            ln = net.add_link(w.name, ecs.name, bw, LinkKind.WORKER_ECS)
            net.set_mac(w.name, ln.port_a, mac_for(w.ip))
            workers.append(w)
        for _ in range(spec.w_prime - len(workers)):  # unused ECS worker ports keep numbering fixed
            net._next_port[ecs.name] += 1
        for t in tors:
            for _ in range(spec.m_d):
                net.add_link(ecs.name, t.name, bw, LinkKind.ECS_TOR)
        for t in tors:
            net.add_link(t.name, sn.name, uplink, LinkKind.TOR_SUPERNODE)
        for p in range(1, spec.ps + spec.standby_ps + 1):
            role = Role.PS if p <= spec.ps else Role.STANDBY
            ps = net.add_node(_node(PSNetId(Tier.PS, m, 0, p), role, m, p))
            for t in tors:
                ln = net.add_link(ps.name, t.name, spec.K * bw, LinkKind.PS_TOR)
                net.set_mac(ps.name, ln.port_a, mac_for(ps.ip))
    for a, b in supernode_graph(spec.modules, r, spec.seed):
        net.add_link(
            PSNetId(Tier.SUPERNODE, a, r + 1).name, PSNetId(Tier.SUPERNODE, b, r + 1).name, inter, LinkKind.SUPERNODE
        )
    return net


# --- the kind ----------------------------------------------------------------------------------
class PSNetKind(Kind):
    """PSNet: workers on an ECS (circuits by the TC), multi-NIC PSs, modules behind SuperNodes."""

    name = "psnet"
    title = "PSNet"
    spec_class = PSNetSpec
    size_fields = "modules, tors, workers"
    node_id = PSNetId
    has_ecs = True
    standby_in_module = True
    bct = BctFacts(BctScenario.MODULES, LinkKind.WORKER_ECS, LinkKind.PS_TOR, inter_module_link=LinkKind.SUPERNODE)
    failure_links = (LinkKind.PS_TOR, LinkKind.ECS_TOR, LinkKind.TOR_SUPERNODE, LinkKind.SUPERNODE)
    failure_switches = (Role.TOR, Role.SUPERNODE)
    # a slot carries one worker's circuit, bounded by the worker's own cable at the same rate
    patch_links = (LinkKind.ECS_TOR,)
    # a PS hangs below its ToRs, beside the ECS
    layers = {Role.SUPERNODE: 0, Role.TOR: 2, Role.ECS: 3, Role.PS: 3, Role.STANDBY: 3, Role.WORKER: 4}

    def build(self, spec: SpecBase) -> Network:
        return build_psnet(spec)  # type: ignore[arg-type]

    def rate_fields(self, spec: SpecBase) -> dict[str, float]:
        """The rates the builder really uses, defaults included."""
        s: PSNetSpec = spec  # type: ignore[assignment]
        return {
            "worker_mbps": s.worker_mbps,
            "K": s.K * s.worker_mbps,
            "uplink_mbps": s.uplink_paper_mbps,
            "inter_module_mbps": s.inter_module_paper_mbps,
        }

    layouts = ("psnet-one-module", "psnet-two-modules")

    def layout(self, name: str, job: PaperJob) -> dict[str, Any]:
        """One module, or two splitting W and P evenly (Section 4.2: Figs. 6-7's PSNet)."""
        if name not in self.layouts:
            return super().layout(name, job)
        modules = 1 if name == "psnet-one-module" else 2
        if job.workers % modules or job.ps % modules:
            raise ValueError(f"W={job.workers} and P={job.ps} must split over {modules}")
        shape: dict[str, Any] = {
            "kind": "psnet",
            "modules": modules,
            "tors": job.tors,
            "ps": job.ps // modules,
            "workers": job.workers // modules,
            "K": job.K,
        }
        if modules == 2:  # Section 4.1: "the bandwidth between modules is equal to B_s"
            shape["inter_module_mbps"] = job.K * job.worker_mbps
        return shape

    def grown(self, hosts: int, ps: int) -> tuple[str, dict[str, Any]] | None:
        """5 x 20, 10 x 100, 10 x 1000 hosts (~100, 1k, 10k): one PS per module, 4 ToRs."""
        size = {100: (5, 20), 1000: (10, 100), 10000: (10, 1000)}.get(hosts)
        if size is None:
            return None
        modules, per = size
        w = per - 1
        return "psnet-testbed.yaml", {"modules": modules, "tors": 4, "ps": 1, "workers": w, "tor_downlinks": -(-w // 4)}

    def paper_path(self, net: Network, src: str, dst: str) -> tuple[int, str] | None:
        """Within a module a worker reaches a PS through the ECS and one ToR (Section 3.1)."""
        if net.nodes[src].module == net.nodes[dst].module:
            return 2, "ECS+ToR"
        return None


PSNET = PSNetKind()
