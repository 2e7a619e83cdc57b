"""The paper's analytic batch completion time (BCT) model (PSNet, Section 4.1, Eqs. 1-7).

Notation is the paper's Table 1; every name carries its unit:
- S = `model_bytes` (bytes), BS = `batch_size` (samples), W = `workers`, P = `ps`,
- P_w = `p_w` (samples/s of ONE worker), P_s = `p_s` (bytes/s of ONE parameter server),
- B_w = `worker_mbps`, B_s = `ps_mbps` (Mbit/s; B_s = K x B_w in PSNet), R = `tors`,
- latency = `latency_s` (seconds, of one link).

The equations are pure functions, so a figure script can sweep B_w or K without a network.
`predict` reads a built `Network` and picks the equation the way the paper's scenarios do, from
the facts its kind states (`Kind.bct`: which scenario, which cables carry B_w and B_s): one PSNet
module (Eq. 5), two PSNet modules (Eq. 6), FatTree (Eq. 7, with C taken from the routes the CNC
really installs). The paper gives no model for BCube (its kind states none), so `predict` refuses it.

Scale: the testbed divides every link rate and the model bytes by `spec.scale` together, so
S / B, and with it T_push and T_pull, is the same in paper units and in emulated units. `predict`
therefore takes `model_bytes` on the same footing as the rates it reads (see its `scaled` flag).
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from controller.routing import compute_paths, link_loads
from controller.tc import initial_circuits
from topologies.model import BctFacts, BctScenario, Link, LinkKind, Network, Node

log = logging.getLogger(__name__)

#: bytes per second carried by 1 Mbit/s (the paper's rates are decimal megabits)
BYTES_PER_S_PER_MBPS = 1e6 / 8

#: Eq. 5: worker -> ToR -> PS, the ECS being transparent
ONE_MODULE_HOPS = 2


def _rate_bytes_per_s(mbps: float) -> float:
    return mbps * BYTES_PER_S_PER_MBPS


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not value > 0:
            raise ValueError(f"{name} must be > 0, got {value}")


def _share(total: float, flows: float) -> float:
    """Per-flow share of `total`; with no flows the term does not constrain (infinite)."""
    return total / flows if flows > 0 else math.inf


# --- Eqs. 3 and 4: computation at the workers and the parameter servers ----------------------
def t_compute_s(batch_size: int, workers: int, p_w: float) -> float:
    """Eq. 3, T_compute = BS / (W x P_w), in seconds.

    `batch_size` is BS, the job's batch in samples, split evenly over the W workers; `p_w` is P_w,
    the samples per second ONE worker processes (forward and backward pass). If the testbed's
    batch size is per worker (the paper's CPU runs use BS = 1), pass batch_size x W.
    """
    _positive(batch_size=batch_size, workers=workers, p_w=p_w)
    return batch_size / (workers * p_w)


def t_ps_update_s(workers: int, model_bytes: float, ps: int, p_s: float) -> float:
    """Eq. 4, T_ps_update = W x S / (P x P_s), in seconds.

    Each PS holds S/P bytes of the model and consumes one gradient shard from each of the W
    workers; `p_s` is P_s, the gradient bytes per second ONE parameter server applies.
    """
    _positive(workers=workers, model_bytes=model_bytes, ps=ps, p_s=p_s)
    return workers * model_bytes / (ps * p_s)


# --- Eqs. 5, 6, 7: communication (T_pull = T_push) -------------------------------------------
def t_push_one_module_s(
    model_bytes: float,
    ps: int,
    workers: int,
    tors: int,
    ps_mbps: float,
    worker_mbps: float,
    latency_s: float = 0.0,
    busiest_tor_workers: int | None = None,
) -> float:
    """Eq. 5 (one PSNet module), T_pull = T_push = (S/P) / min(R B_s / W, B_w / P) + 2 latency.

    A PS's R NICs (R x B_s) are shared by all W workers, a worker's one link by the P PSs. Eq. 5
    assumes the TC's equal spread (W/R workers per ToR, so each PS NIC carries W/R flows). For
    another deployment pass `busiest_tor_workers` = max_t W_t: the PS NIC on that ToR carries
    W_t flows, and R B_s / W becomes B_s / max_t W_t (the same number when balanced).
    """
    _positive(model_bytes=model_bytes, ps=ps, workers=workers, tors=tors, ps_mbps=ps_mbps, worker_mbps=worker_mbps)
    nic_share = ps_mbps / busiest_tor_workers if busiest_tor_workers else tors * ps_mbps / workers
    rate_mbps = min(nic_share, worker_mbps / ps)
    return (model_bytes / ps) / _rate_bytes_per_s(rate_mbps) + ONE_MODULE_HOPS * latency_s


def t_push_two_modules_s(
    model_bytes: float,
    ps: int,
    workers: int,
    ps_module1: int,
    workers_module1: int,
    tors: int,
    ps_mbps: float,
    worker_mbps: float,
    alpha: int,
    latency_s: float = 0.0,
    paper_literal: bool = True,
) -> float:
    """Eq. 6 (two PSNet modules), T_pull = T_push in seconds.

    (S/P) / min(R B_s / W, B_w / P, R B_s / (W1 (P - 1)), R B_s / ((W - W1) P1)) + alpha latency,
    with P1 of the P PSs (`ps_module1`) and W1 of the W workers (`workers_module1`) in module 1,
    the inter-module bandwidth R x B_s as the paper assumes, and alpha the longest worker-PS path
    in links. The paper prints (P - 1) where its own derivation (W1 workers of module 1 talking to
    the P - P1 PSs of module 2) gives (P - P1); the two agree when P1 = 1. `paper_literal=False`
    uses (P - P1). A term with no flows (W1 = 0, say) does not constrain.
    """
    _positive(model_bytes=model_bytes, ps=ps, workers=workers, tors=tors, ps_mbps=ps_mbps, worker_mbps=worker_mbps)
    if not (0 <= ps_module1 <= ps and 0 <= workers_module1 <= workers):
        raise ValueError(
            f"need 0 <= P1 <= P and 0 <= W1 <= W, got P1={ps_module1} P={ps} W1={workers_module1} W={workers}"
        )
    rate_mbps = min(
        two_modules_terms_mbps(
            ps, workers, ps_module1, workers_module1, tors, ps_mbps, worker_mbps, paper_literal
        ).values()
    )
    return (model_bytes / ps) / _rate_bytes_per_s(rate_mbps) + alpha * latency_s


def two_modules_terms_mbps(
    ps: int,
    workers: int,
    ps_module1: int,
    workers_module1: int,
    tors: int,
    ps_mbps: float,
    worker_mbps: float,
    paper_literal: bool = True,
) -> dict[str, float]:
    """Eq. 6's four per-flow rates (Mbit/s) by what limits them, so a report can name the binding
    one: a PS's R NICs shared by all W workers, a worker's link by its P PSs, and the R x B_s
    between the modules shared by the flows crossing each way (infinite where none cross)."""
    remote_ps = ps - 1 if paper_literal else ps - ps_module1
    return {
        "PS NICs R B_s / W": tors * ps_mbps / workers,
        "worker link B_w / P": worker_mbps / ps,
        "modules 1->2 R B_s / (W1 (P - 1))": _share(tors * ps_mbps, workers_module1 * remote_ps),
        "modules 2->1 R B_s / ((W - W1) P1)": _share(tors * ps_mbps, (workers - workers_module1) * ps_module1),
    }


def t_push_fattree_s(
    model_bytes: float,
    ps: int,
    workers: int,
    ps_mbps: float,
    worker_mbps: float,
    oversubscription: float,
    c: int,
    beta: int,
    latency_s: float = 0.0,
) -> float:
    """Eq. 7 (FatTree, oversubscription r at the ToR layer), T_pull = T_push in seconds.

    (S/P) / min(B_s / W, B_w / P, B_a / C) + beta latency, with B_a = B_c = B_w / r, C the largest
    number of concurrent worker-PS flows on one aggregation or core link (0: no flow leaves a ToR,
    the term does not constrain) and beta the longest worker-PS path in links.
    """
    _positive(
        model_bytes=model_bytes,
        ps=ps,
        workers=workers,
        ps_mbps=ps_mbps,
        worker_mbps=worker_mbps,
        oversubscription=oversubscription,
    )
    agg_mbps = worker_mbps / oversubscription
    rate_mbps = min(ps_mbps / workers, worker_mbps / ps, _share(agg_mbps, c))
    return (model_bytes / ps) / _rate_bytes_per_s(rate_mbps) + beta * latency_s


# --- Eqs. 1 and 2: the bounds -------------------------------------------------------------
def bct_max_s(
    t_pull_s: float, t_compute_s: float, t_push_s: float, t_ps_update_s: float, t_sync_s: float = 0.0
) -> float:
    """Eq. 1, no overlap at all: BCT_max = T_pull + T_compute + T_push + T_ps_update + T_sync."""
    return t_pull_s + t_compute_s + t_push_s + t_ps_update_s + t_sync_s


def bct_min_s(
    t_pull_s: float, t_compute_s: float, t_push_s: float, t_ps_update_s: float, t_sync_s: float = 0.0
) -> float:
    """Eq. 2, full overlap: BCT_min = max(T_compute + T_ps_update + T_sync, T_pull, T_push)."""
    return max(t_compute_s + t_ps_update_s + t_sync_s, t_pull_s, t_push_s)


# --- from a built network -----------------------------------------------------------------
@dataclass(frozen=True)
class Prediction:
    """Every term of one BCT prediction, in seconds, and what it was computed from.

    `flow_mbps` is the per-flow rate of the equation's min(...); `hops` is 2 (Eq. 5), alpha
    (Eq. 6) or beta (Eq. 7); `c` is Eq. 7's C (None otherwise). `scaled` says whether rates were
    the emulated ones (Link.mbps) or the paper's (Link.paper_mbps).
    """

    equation: str
    workers: int
    ps: int
    model_bytes: float
    flow_mbps: float
    hops: int
    c: int | None
    scaled: bool
    t_compute_s: float
    t_ps_update_s: float
    t_push_s: float
    t_pull_s: float
    t_sync_s: float
    bct_min_s: float
    bct_max_s: float

    @property
    def t_comm_s(self) -> float:
        """T_push + T_pull: the communication time Figs. 6-7 plot."""
        return self.t_push_s + self.t_pull_s


def _host_mbps(net: Network, host: Node, kind: LinkKind, scaled: bool) -> float:
    """Rate of a host's cable of `kind` (all of a PSNet PS's NICs run at B_s)."""
    links = [ln for ln in net.links_of(host.name) if ln.kind is kind]
    if not links:
        raise ValueError(f"{host.name} has no {kind} link")
    return min(_link_mbps(ln, scaled) for ln in links)


def _link_mbps(link: Link, scaled: bool) -> float:
    return link.mbps if scaled else link.paper_mbps


def _job(
    net: Network, workers: Sequence[Node] | None = None, pss: Sequence[Node] | None = None
) -> tuple[list[Node], list[Node]]:
    """The job's workers and PSs: the ones given, else every worker and PS of the topology."""
    workers = list(workers) if workers is not None else net.workers()
    pss = list(pss) if pss is not None else net.pss()
    if not workers or not pss:
        raise ValueError(f"{net.name}: the BCT model needs at least one worker and one PS")
    return workers, pss


def _longest_path_links(net: Network, paths: dict, pairs: list[tuple[str, str]]) -> int:
    """alpha / beta: the most links on a routed worker-PS path (ECS circuits count as one link)."""
    return max(len(paths[p]) - 1 for p in pairs if p in paths)


def _fattree_c(net: Network, facts: BctFacts, paths: dict, workers: list[Node], pss: list[Node]) -> int:
    """Eq. 7's C: the most worker-PS flows on one directed link of the kind's shared links
    (FatTree: ToR-agg and agg-core, B_a = B_c).

    Push (worker -> PS) and pull (PS -> worker) use opposite directions of full-duplex cables, so
    they do not share; the paper's T_push = T_pull is one number, so the worse direction is used.
    """
    c = 0
    for pairs in (
        [(w.name, p.name) for w in workers for p in pss],
        [(p.name, w.name) for w in workers for p in pss],
    ):
        loads = link_loads(net, paths, pairs)
        shared = [n for (node, port), n in loads.items() if net.link_at(node, port).kind in facts.shared_links]
        c = max(c, *shared) if shared else c
    return c


def _check_routed(net: Network, paths: dict, pairs: list[tuple[str, str]]) -> None:
    missing = [p for p in pairs if p not in paths]
    if missing:
        raise ValueError(f"{net.name}: no route for {len(missing)} worker-PS pairs, e.g. {missing[0]}")


def job_modules(net: Network, workers: Sequence[Node], pss: Sequence[Node]) -> tuple[int, int, int]:
    """(PSNet modules the job spans, P1, W1): module 1 is the lower-numbered one, P1 and W1 its
    PSs and workers (Eq. 6's inputs)."""
    modules = sorted({n.module for n in (*workers, *pss)})
    first = modules[0] if modules else None
    return len(modules), sum(n.module == first for n in pss), sum(n.module == first for n in workers)


def t_wire_s(
    net: Network,
    workers: Sequence[Node],
    pss: Sequence[Node],
    model_bytes: float,
    ps_mbps: float,
    worker_mbps: float,
    hops: Callable[[], int],
    c: Callable[[], int],
    latency_s: float = 0.0,
    paper_literal: bool = True,
    busiest_tor_workers: int | None = None,
) -> tuple[str, float, int, int | None]:
    """(equation, T_push = T_pull, hops, C) of the job by the paper's scenario for `net`'s kind:
    Eq. 5 (one PSNet module), Eq. 6 (two) or Eq. 7 (FatTree). The one place that picks the
    equation: `predict` (every pair routed by the CNC) and bct_scale (the flow model's routes, up
    to ~1k hosts) differ only in how they count the path links (`hops`, alpha / beta) and Eq. 7's
    `c`, which are called only where the equation needs them. `busiest_tor_workers`: see Eq. 5."""
    facts = net.family.bct
    if facts is None:
        raise ValueError(f"the paper gives no communication model for {net.family.title}")
    w, p = len(workers), len(pss)
    if facts.scenario == BctScenario.MODULES:
        modules, p1, w1 = job_modules(net, workers, pss)
        if modules == 1:
            equation = "Eq. 5 (busiest ToR)" if busiest_tor_workers else "Eq. 5"
            t = t_push_one_module_s(
                model_bytes, p, w, net.spec.tors, ps_mbps, worker_mbps, latency_s, busiest_tor_workers
            )
            return equation, t, ONE_MODULE_HOPS, None
        if modules == 2:
            alpha = hops()
            t = t_push_two_modules_s(
                model_bytes, p, w, p1, w1, net.spec.tors, ps_mbps, worker_mbps, alpha, latency_s, paper_literal
            )
            return ("Eq. 6" if paper_literal else "Eq. 6 (P - P1)"), t, alpha, None
        raise ValueError(
            f"{net.name}: the job spans {modules} PSNet modules; the paper models one (Eq. 5) or two (Eq. 6)"
        )
    if facts.scenario == BctScenario.FATTREE:
        beta, flows = hops(), c()
        t = t_push_fattree_s(model_bytes, p, w, ps_mbps, worker_mbps, net.spec.oversubscription, flows, beta, latency_s)
        return "Eq. 7", t, beta, flows
    raise ValueError(f"{net.name}: no BCT model for scenario {facts.scenario!r}")


def two_modules_terms_of(
    net: Network, scaled: bool = True, workers: Sequence[Node] | None = None, pss: Sequence[Node] | None = None
) -> dict[str, float]:
    """Eq. 6's four per-flow rates (Mbit/s) for the job on `workers` and `pss` (default: all of
    the PSNet's) over two modules (module 1 = the lower-numbered one), read from the network as
    `predict` reads it."""
    facts = net.family.bct
    workers, pss = _job(net, workers, pss)
    modules, p1, w1 = job_modules(net, workers, pss)
    if facts is None or facts.scenario != BctScenario.MODULES or modules != 2:
        raise ValueError(f"{net.name}: Eq. 6 needs a PSNet job over exactly two modules")
    return two_modules_terms_mbps(
        len(pss),
        len(workers),
        p1,
        w1,
        net.spec.tors,
        _host_mbps(net, pss[0], facts.ps_link, scaled),
        _host_mbps(net, workers[0], facts.worker_link, scaled),
    )


def predict(
    net: Network,
    model_bytes: float,
    batch_size: int,
    p_w: float,
    p_s: float,
    latency_s: float = 0.0,
    t_sync_s: float = 0.0,
    scaled: bool = True,
    paper_literal: bool = True,
    workers: Sequence[Node] | None = None,
    pss: Sequence[Node] | None = None,
) -> Prediction:
    """BCT bounds of the job placed on `net`, by the paper's equation: the job on `workers` and
    `pss` (default: every worker and PS of the topology), alone on the network. A job on two
    modules of a larger PSNet (H = 4, the rest idle or relaying) is Eq. 6's case too.

    `scaled=True` (default) reads the emulated rates (Link.mbps) and expects `model_bytes` to be
    what the emulated job sends (paper S / spec.scale): the seconds are then the emulation's.
    `scaled=False` reads the paper-equivalent rates with the paper's S. T_push and T_pull are equal
    in both, since the testbed scales bytes and rates together; T_ps_update follows the bytes
    given, so pass the P_s of the bytes actually applied. `p_w` in samples/s per worker, `p_s` in
    bytes/s per PS, `latency_s` per link (e.g. spec.delay_ms / 1000), `paper_literal` see Eq. 6.
    Raises ValueError for BCube (no model in the paper) and PSNet jobs over more than two modules.
    """
    facts = net.family.bct
    if facts is None:
        raise ValueError(f"the paper gives no BCT model for {net.family.title}")
    workers, pss = _job(net, workers, pss)
    w, p = len(workers), len(pss)
    spec = net.spec
    circuits = initial_circuits(net)
    paths = compute_paths(net, circuits)
    pairs = [(wk.name, ps.name) for wk in workers for ps in pss]
    _check_routed(net, paths, pairs)
    worker_mbps = _host_mbps(net, workers[0], facts.worker_link, scaled)
    ps_mbps = _host_mbps(net, pss[0], facts.ps_link, scaled)
    busiest_tor = None
    if facts.scenario == BctScenario.MODULES:
        mine = {wk.name for wk in workers}
        busiest = max(Counter(ln.b for h, ln in circuits.items() if h in mine).values(), default=0)
        if busiest * spec.tors > w:  # not the TC's equal spread: the busiest ToR's PS NICs limit
            busiest_tor = busiest
        inter = [ln for ln in net.links if ln.kind is facts.inter_module_link]
        if job_modules(net, workers, pss)[0] == 2 and any(_link_mbps(ln, scaled) != ps_mbps for ln in inter):
            log.info("%s: SuperNode links are not at B_s; Eq. 6 assumes R x B_s between modules", net.name)
    equation, t_wire, hops, c = t_wire_s(
        net,
        workers,
        pss,
        model_bytes,
        ps_mbps,
        worker_mbps,
        hops=lambda: _longest_path_links(net, paths, pairs),
        c=lambda: _fattree_c(net, facts, paths, workers, pss),
        paper_literal=paper_literal,
        busiest_tor_workers=busiest_tor,
    )
    t_comp = t_compute_s(batch_size, w, p_w)
    t_upd = t_ps_update_s(w, model_bytes, p, p_s)
    # the equations' own latency term, added here so the per-flow rate can be reported too
    t_push = t_wire + hops * latency_s
    flow_mbps = (model_bytes / p) / t_wire / BYTES_PER_S_PER_MBPS
    return Prediction(
        equation=equation,
        workers=w,
        ps=p,
        model_bytes=model_bytes,
        flow_mbps=flow_mbps,
        hops=hops,
        c=c,
        scaled=scaled,
        t_compute_s=t_comp,
        t_ps_update_s=t_upd,
        t_push_s=t_push,
        t_pull_s=t_push,
        t_sync_s=t_sync_s,
        bct_min_s=bct_min_s(t_push, t_comp, t_push, t_upd, t_sync_s),
        bct_max_s=bct_max_s(t_push, t_comp, t_push, t_upd, t_sync_s),
    )
