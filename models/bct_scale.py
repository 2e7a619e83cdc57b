"""The paper's communication time (Eqs. 5-7, T_push + T_pull) for a built network of any size.

`bct_model.predict` routes every host pair with `controller.routing.compute_paths` to find
Eq. 7's C and the hop counts: exact, but an hour at a thousand hosts. The model-only figures
(Figs. 6-7 at up to ~1k hosts) take the paths from the flow model's router instead
(models.flow.routes: per destination, tested pair for pair against compute_paths), the
same routes the flow-model point loads, so the analytic and the simulated points rest on one
set of paths. The equations themselves are bct_model's; this module only reads their inputs
off the network (which scenario the kind states, B_w, B_s, C, alpha or beta).

Paper rates (`Link.paper_mbps`) and the paper's S throughout: Section 4.2's units.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from models import bct_model
from models.flow.routes import IndexedNetwork, Routes
from topologies.model import LinkKind, Network

#: a worker's circuit crosses the ECS as two cables (worker-ecs, ecs-tor) but is one link to
#: the equations (the ECS is transparent, Section 3.1): the second cable is not counted as a hop
TRANSPARENT = frozenset({LinkKind.ECS_TOR})


@dataclass(frozen=True)
class Analytic:
    """One point of the analytic model: which equation, T_push (= T_pull), and its inputs."""

    equation: str
    t_push_s: float
    hops: int  # 2 (Eq. 5), alpha (Eq. 6) or beta (Eq. 7)
    c: int | None  # Eq. 7's C; None for PSNet
    workers: int
    ps: int

    @property
    def t_comm_s(self) -> float:
        """T_push + T_pull, what Figs. 6-7 plot."""
        return 2 * self.t_push_s


def _rate(inet: IndexedNetwork, host: str, kind: LinkKind) -> float:
    rates = [ln.paper_mbps for ln in inet.links_of(host) if ln.kind is kind]
    if not rates:
        raise ValueError(f"{host} has no {kind} link")
    return min(rates)


def _hops(routes: Routes) -> int:
    """alpha / beta: the most links on a worker-PS route, the ECS circuit counting as one."""
    return max(sum(ln.kind not in TRANSPARENT for ln, _ in cables) for cables in routes.cables.values())


def shared_link_c(routes: Routes, shared: frozenset[LinkKind], workers: list[str], pss: list[str]) -> int:
    """Eq. 7's C: the most worker-PS flows on one directed cable of the `shared` kinds.

    Push and pull run on opposite directions of full-duplex cables; the paper's T_push = T_pull
    is one number, so the worse direction counts (as bct_model's every-pair version does)."""
    c = 0
    for pairs in ([(w, p) for w in workers for p in pss], [(p, w) for w in workers for p in pss]):
        load: Counter = Counter()
        for pair in pairs:
            for ln, frm in routes.cables[pair]:
                if ln.kind in shared:
                    load[(ln.key, frm)] += 1
        c = max(c, max(load.values(), default=0))
    return c


def analytic_comm(
    net: Network, routes: Routes, model_bytes: float, workers: list[str], pss: list[str], paper_literal: bool = True
) -> Analytic:
    """Eq. 5 (one PSNet module), Eq. 6 (two) or Eq. 7 (FatTree) for the job on `net`, with the
    per-link latency of the spec (`delay_ms`). `paper_literal`: Eq. 6 as printed, (P - 1), or as
    derived, (P - P1) (bct_model.t_push_two_modules_s)."""
    facts = net.family.bct
    if facts is None:
        raise ValueError(f"the paper gives no communication model for {net.family.title}")
    inet = IndexedNetwork.of(net)
    equation, t, hops, c = bct_model.t_wire_s(
        net,
        [net.nodes[h] for h in workers],
        [net.nodes[h] for h in pss],
        model_bytes,
        _rate(inet, pss[0], facts.ps_link),
        _rate(inet, workers[0], facts.worker_link),
        hops=lambda: _hops(routes),
        c=lambda: shared_link_c(routes, facts.shared_links, workers, pss),
        latency_s=net.spec.delay_ms / 1000,
        paper_literal=paper_literal,
    )
    if not math.isfinite(t):
        raise ValueError(f"{net.name}: the model gives no finite time (no constraining term)")
    return Analytic(equation, t, hops, c, len(workers), len(pss))
