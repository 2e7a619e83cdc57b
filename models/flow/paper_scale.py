"""One PS job on a built network, on the flow model, at the paper's rates and bytes.

What a model-only figure (replays/modelfig.py: the PSNet paper's Figs. 6 and 7) puts beside the
analytic Eqs. 5-7 at each point. It is `testbed simulate`'s path (routes.flow_routes,
links.platform, simgrid.simulate) without an experiment file: the figure builds its topology
spec itself through topologies.build, so the network is the emulator's own model, at sizes the
emulator cannot hold. The routes are returned too, so the analytic side (models.bct_scale)
reads Eq. 7's C and the hop counts from the very paths the flow model loaded.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from models.flow.demands import Traffic, tf_ps
from models.flow.links import busiest_cable, platform
from models.flow.routes import Routes, flow_routes
from models.flow.simgrid import sim_config, simulate
from topologies.model import Network

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobRoutes:
    """The job on `net`: every worker and PS (the whole topology's, as the paper's model assumes),
    the TF PS traffic (push S/P to each PS, then pull it back) and the cables each pair crosses."""

    workers: list[str]
    pss: list[str]
    traffic: Traffic
    routes: Routes


@dataclass(frozen=True)
class FlowPoint:
    """One simulated iteration, in seconds of the paper's units (paper rates, the paper's S)."""

    push_s: float
    pull_s: float
    busiest_s: float  # the busiest directed cable's bytes over its rate, summed over phases
    busiest_cable: str
    messages: int
    wall_s: float  # routes + SimGrid, this point's cost
    config: str  # which SimGrid settings (CM02 uncalibrated, or the calibration file)

    @property
    def t_comm_s(self) -> float:
        """T_push + T_pull as the flow model gives them: what Figs. 6-7 plot."""
        return self.push_s + self.pull_s


def job_routes(net: Network, model_bytes: float) -> JobRoutes:
    """Route the job's worker-PS pairs through the controller's circuits and paths."""
    workers = [n.name for n in net.workers()]
    pss = [n.name for n in net.pss()]
    if not workers or not pss:
        raise ValueError(f"{net.name}: a PS job needs at least one worker and one PS")
    traffic = tf_ps(workers, pss, model_bytes)
    return JobRoutes(workers, pss, traffic, flow_routes(net, traffic.pairs()))


def rebind(job: JobRoutes, net: Network) -> JobRoutes:
    """The same routes on another build of the same shape (e.g. another oversubscription r):
    each cable replaced by `net`'s cable of the same key, so its rate is `net`'s. Routing
    depends on the cabling and the strategy, never on rates (least-loaded counts flows), so a
    figure routes a FatTree once for all its r: at W = 384 that routing is minutes."""
    by_key = {ln.key: ln for ln in net.links}
    cables = {pair: [(by_key[ln.key], frm) for ln, frm in hops] for pair, hops in job.routes.cables.items()}
    return JobRoutes(job.workers, job.pss, job.traffic, Routes(cables, job.routes.exact, 0.0))


def simulate_ps_job(net: Network, job: JobRoutes) -> FlowPoint:
    """One iteration of the job on SimGrid (a spawned process), at the paper's link rates."""
    t0 = time.perf_counter()
    cfg, note = sim_config(calibrated=False)  # the paper's network, not this emulator
    result = simulate(platform(net, job.routes, paper=True), job.traffic, cfg)
    bound, cable = busiest_cable(job.traffic, job.routes, paper=True)
    push, pull = result.phase_s
    wall = time.perf_counter() - t0 + job.routes.seconds
    LOG.debug("%s: W=%d P=%d flow model %.4f s in %.1f s", net.name, len(job.workers), len(job.pss), push + pull, wall)
    return FlowPoint(push, pull, bound, cable, result.messages, wall, note)
