"""Apply an experiment's timeline to a running testbed and its jobs, and record what happened.

The injector is polled by the runner's event loop: an `at_s` event is due `at_s` seconds after
t0 (the start of the first job's first measured step), an `at_step` event once that job's chief
has finished global step `at_step`. Each action goes through the same calls a user would make
(`Testbed.set_link/set_node/set_rate/reconfigure`), so the controller's reactions (the TC
re-circuiting PSNet workers through the ECS dark period, the CNC rerouting FatTree flows over
other equal-cost paths) are the ones under test. A failed PS is the job's business: its job
restarts on a standby PS from its last checkpoint, or the run ends saying it cannot.

At every event the injector reads the TCP retransmission counters of every host, so each event
is charged with the data the network dropped in its window (beyond the rate of drops seen
before the first event: a full queue drops some anyway).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from controller.channel_client import ChannelError
from controller.tc import slots
from emulation.measure import tcp_retrans
from emulation.net import Testbed
from emulation.wire import mss_bytes
from runs.recovery import Applied
from topologies.model import Network, Role
from workloads.errors import Unrecoverable
from workloads.timeline import RandomFailures, TimelineError, TimelineEvent, expand

LOG = logging.getLogger(__name__)


def candidates(net: Network, rf: RandomFailures) -> dict[str, list]:
    """What random failures may pick from: cables as (a, b) pairs and switch names, by default
    the ones whose loss leaves every worker a path to its PSs, as the topology's kind lists them
    (`Kind.failure_links`, `Kind.failure_switches`)."""
    kinds = rf.kinds or net.family.failure_candidates
    links = sorted({tuple(sorted((ln.a, ln.b))) for ln in net.links if ln.kind in kinds})
    switches = [n.name for n in net.switches() if n.role.value in kinds]
    return {"links": links, "switches": switches}


def plan_timeline(net: Network, events: list[TimelineEvent], rf: RandomFailures | None, source: str) -> list:
    """The concrete events of a run (random rounds drawn), checked against the topology before
    anything is built; a one-line TimelineError names what is wrong."""
    try:
        planned = expand(events, rf, candidates(net, rf) if rf else {})
    except ValueError as err:
        raise TimelineError(f"{source}: {err}") from None
    check_timeline(net, events, source)
    return planned


def check_timeline(net: Network, events: list[TimelineEvent], source: str) -> None:
    """Every event names elements of this topology; a one-line TimelineError otherwise."""
    for i, e in enumerate(events):
        where = f"{source}: timeline[{i}]"
        if e.link and not net.links_between(*e.link):
            raise TimelineError(f"{where}.link: no cable between {e.link[0]} and {e.link[1]}; see `testbed topo show`")
        if e.action == "set_rate" and any(net.is_patch(ln) for ln in net.links_between(*e.link)):  # type: ignore[misc]
            raise TimelineError(
                f"{where}.link: {e.link[0]}-{e.link[1]} is an OVS patch cable (the topology's patch_cables: true): "  # type: ignore[index]
                "it has no qdisc to shape and never limits a flow; set the rate of the worker's cable, or "
                "patch_cables: false in the topology file"
            )
        if e.node and e.node not in net.nodes:
            raise TimelineError(f"{where}.node: no node {e.node}; see `testbed topo show`")
        if e.action in ("fail_switch", "repair_switch") and net.nodes[e.node].is_host:  # type: ignore[index]
            raise TimelineError(f"{where}.node: {e.node} is a host; fail_switch takes a switch (fail_ps a PS)")
        if e.action == "fail_ps" and net.nodes[e.node].role != Role.PS:  # type: ignore[index]
            raise TimelineError(f"{where}.node: {e.node} is not a PS; fail_ps takes one of the job's PSs")
        if e.action == "reconfigure":
            if not net.family.has_ecs:
                raise TimelineError(f"{where}: reconfigure moves ECS circuits; only a PSNet topology has them")
            if e.worker not in net.nodes or net.nodes[e.worker].role != Role.WORKER:
                raise TimelineError(f"{where}.worker: {e.worker} is not a worker of the topology")
            if e.tor not in net.nodes or not slots(net, e.tor):  # type: ignore[arg-type]
                raise TimelineError(f"{where}.tor: {e.tor} is not a ToR of the topology")


@dataclass
class Injector:
    """Applies due events; `applied` and `retrans` are what the report reads."""

    tb: Testbed
    events: list[TimelineEvent]
    hosts: list[str]  # where TCP retransmissions are counted: every host that may carry a job
    fail_ps: Callable[[str], str]  # the runner's PS failover: returns a detail line or raises Unrecoverable
    t0: float | None = None
    main_step: int = 0
    applied: list[Applied] = field(default_factory=list)
    retrans: list[int] = field(default_factory=list)  # counter at each applied event, then at the end
    retrans_t0: int = 0
    _done: set[int] = field(default_factory=set)  # indices of events applied

    def start(self, t0: float) -> None:
        """t0 is here: `at_s` counts from now; the retransmission counter's baseline is taken."""
        self.t0 = t0
        self.retrans_t0 = tcp_retrans(self.tb, self.hosts)

    def pending(self) -> list[TimelineEvent]:
        """Events not applied (yet; after the run: the job ended before they were due)."""
        return [e for i, e in enumerate(self.events) if i not in self._done]

    def wait_s(self) -> float:
        """How long the event loop may block before the next `at_s` event is due."""
        times = [e.at_s for e in self.pending() if e.at_s is not None]
        if not times or self.t0 is None:
            return 1.0
        return max(0.0, self.t0 + min(times) - time.time())

    def poll(self) -> None:
        """Apply every event that is due now, in timeline order."""
        if self.t0 is None:
            return
        for i, e in enumerate(self.events):
            if i in self._done:
                continue
            due = (e.at_s is not None and time.time() >= self.t0 + e.at_s) or (
                e.at_step is not None and self.main_step >= e.at_step
            )
            if due:
                self._done.add(i)
                self.apply(e)

    def apply(self, e: TimelineEvent) -> Applied:
        self.retrans.append(tcp_retrans(self.tb, self.hosts))
        t = time.time()
        start = time.perf_counter()
        try:
            detail = self._do(e)
        except (ChannelError, ValueError) as err:  # e.g. the TC has no free port on that ToR
            raise Unrecoverable(f"timeline event {e.action} {e.target()} was refused: {err}") from None
        took = (time.perf_counter() - start) * 1000
        a = Applied(t, e.action, e.target(), round(took, 2), detail)
        self.applied.append(a)
        LOG.info("t0%+.2f s: %s %s (%.1f ms) %s", t - (self.t0 or t), e.action, a.target, took, detail)
        return a

    def _do(self, e: TimelineEvent) -> str:
        tb = self.tb
        tb.log("timeline", action=e.action, target=e.target())
        if e.action in ("link_down", "link_up"):
            reply = tb.set_link(*e.link, up=e.action == "link_up", dark_ms=e.dark_ms)  # type: ignore[misc]
            return _reaction(reply)
        if e.action in ("fail_switch", "repair_switch"):
            reply = tb.set_node(e.node, up=e.action == "repair_switch", dark_ms=e.dark_ms)  # type: ignore[arg-type]
            return _reaction(reply)
        if e.action == "set_rate":
            return f"{tb.set_rate(*e.link, e.mbps):.4g} Mbit/s emulated"  # type: ignore[misc]
        if e.action == "reconfigure":
            reply = tb.reconfigure(e.worker, e.tor, dark_ms=e.dark_ms)  # type: ignore[arg-type]
            return _reaction(reply) + f"; controller {reply['ms']:.1f} ms"
        return self.fail_ps(e.node)  # type: ignore[arg-type]

    def finish(self) -> None:
        self.retrans.append(tcp_retrans(self.tb, self.hosts))

    def dropped(self) -> list[dict]:
        """Per applied event: TCP segments retransmitted until the next event (or the end), the
        count expected at the rate seen before the first event (full queues drop some anyway),
        and the bytes dropped because of the event: the excess over that, x the MSS at the topology's MTU."""
        out: list[dict] = []
        if len(self.retrans) < 2 or self.t0 is None:
            return out
        quiet_s = max(self.applied[0].t - self.t0, 1e-3)
        rate = (self.retrans[0] - self.retrans_t0) / quiet_s
        ends = [a.t for a in self.applied[1:]] + [time.time()]
        for i, a in enumerate(self.applied):
            segs = self.retrans[i + 1] - self.retrans[i]
            expected = round(rate * (ends[i] - a.t))
            excess = max(0, segs - expected) * mss_bytes(self.tb.model.spec.mtu)
            out.append({"retrans_segs": segs, "expected_segs": expected, "dropped_bytes": excess})
        return out


def _reaction(reply: dict) -> str:
    """One line of what the controller did: re-circuited ECSs and the deployment after it."""
    parts = []
    if reply.get("recircuited"):
        dep = "; ".join(f"module {m}: worker({','.join(map(str, d))})" for m, d in reply["deployment"].items())
        parts.append(f"re-circuited {','.join(reply['recircuited'])} -> {dep}")
    else:
        parts.append("rerouted")
    return " ".join(parts)
