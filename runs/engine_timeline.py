"""A scheme job's timeline: network events applied while the engine runs, and RAT's paused senders.

The network events (link_down/up, set_rate, fail/repair_switch, reconfigure, random_failures)
go through the same Injector as the TF PS job's, so the controller reacts the same way; t0 and
the step count come from following the first worker's lines (engine.processes.Follower):
at_s counts from the start of the first measured iteration, at_step from iterations completed
(warm-up included). `pause_senders` is not a network event: it is drawn here into per-host pause
windows (engine.pauses) that each host's engine honours from its own t0, so a paused
host's flows stop exactly as RAT's model says while its links stay up. Nor is `shuffle`
(Parameter Flow's shared cluster): when it falls due, its background hosts start their periodic
all-to-all shuffles (runs.background), stopped at the end of the run.

Afterwards the same outputs as a PS job's timeline: timeline.csv (per iteration), events.csv
(what each event cost: stall, slow iterations, recovery), timeline.png, and the summary's
`timeline` entry; each re-draw of paused senders is one event there.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from emulation.net import Testbed
from engine.pauses import pause_plan
from engine.processes import Follower
from runs.background import Shuffles, check_hosts
from runs.inject import Injector, plan_timeline
from runs.recovery import Applied, recovery, steps_from_rows
from runs.timeline_out import plot, write_csv
from topologies.model import Network
from workloads.errors import Unrecoverable
from workloads.experiment import ExperimentSpec
from workloads.timeline import ENGINE_ACTIONS, TimelineError, TimelineEvent

LOG = logging.getLogger(__name__)


class SchemeTimeline:
    """The planned events of one scheme job; `tick` applies them while the job runs."""

    def __init__(
        self,
        net: Network,
        exp: ExperimentSpec,
        hosts: Sequence[str],
        source: str,
        horizon_s: float,
        out_dir: Path | None = None,
    ) -> None:
        self.exp = exp
        self.hosts = list(hosts)
        network = [e for e in exp.timeline if e.action not in ENGINE_ACTIONS]
        self.planned = plan_timeline(net, network, exp.random_failures, source)
        #: the background shuffles (Parameter Flow's shared cluster), each started when due
        self.shuffles: list[Shuffles] = []
        nbytes = 1e6 / (net.spec.scale * exp.compress)  # a paper-equivalent MB, emulated
        for i, e in enumerate(exp.timeline):
            if e.action == "shuffle":
                check_hosts(net, e, self.hosts, f"{source}: timeline[{i}]")
                run_dir = Path(out_dir or ".") / "background" / f"shuffle{i}"
                self.shuffles.append(Shuffles(e, round((e.mb or 0) * nbytes), run_dir))
        self.tb: Testbed | None = None
        #: per host: pause windows in seconds after t0; per re-draw: (t after t0, hosts paused, d)
        self.pauses: dict[str, list[tuple[float, float]]] = {h: [] for h in self.hosts}
        self.rounds: list[tuple[float, list[str], float]] = []
        for i, e in enumerate(exp.timeline):
            if e.action == "pause_senders":
                self._draw(e, f"{source}: timeline[{i}]", horizon_s)
        self.injector: Injector | None = None
        self.follower: Follower | None = None

    def _draw(self, e: TimelineEvent, where: str, horizon_s: float) -> None:
        assert e.at_s is not None and e.k is not None and e.every_s is not None  # the schema's checks
        try:
            plan = pause_plan(self.hosts, e.k, e.every_s, e.seed or 1, e.at_s, e.for_s or horizon_s)
        except ValueError as err:
            raise TimelineError(f"{where}.k: {err}") from None
        for h, windows in plan.items():
            self.pauses[h] += windows
        starts = sorted({a for w in plan.values() for a, _ in w})
        for t in starts:
            self.rounds.append((t, sorted(h for h, w in plan.items() if any(a == t for a, _ in w)), e.every_s))

    @property
    def background_hosts(self) -> list[str]:
        """The hosts the timeline's shuffles run on (none of the job's)."""
        return list(dict.fromkeys(h for sh in self.shuffles for h in sh.event.hosts or []))

    @property
    def active(self) -> bool:
        return bool(self.planned or self.rounds or self.shuffles)

    def per_host(self) -> dict[str, dict[str, Any]]:
        """What each host's config gets: its pause windows (seconds after t0)."""
        return {h: {"pauses": sorted(w)} for h, w in self.pauses.items() if w}

    def attach(self, tb: Testbed, follow: Path, warmup: int) -> None:
        """Start following the first worker's lines and arm the network events on this testbed."""
        self.follower = Follower(follow, warmup)
        self.injector = Injector(tb, self.planned, hosts=self.hosts, fail_ps=_no_failover)
        self.tb = tb

    def tick(self) -> None:
        """Called while the engine runs: set t0 once it is seen, apply the events that are due."""
        if self.injector is None or self.follower is None or not (self.planned or self.shuffles):
            return
        self.follower.poll()
        t0 = self.follower.t0
        for sh in self.shuffles:
            if sh.started is None and t0 is not None and time.time() >= t0 + (sh.event.at_s or 0.0):
                assert self.tb is not None
                sh.start(self.tb, time.time())
        if not self.planned:
            return
        if self.injector.t0 is None and t0 is not None:
            self.injector.start(t0)
        self.injector.main_step = self.follower.step
        self.injector.poll()

    def finish(self) -> None:
        for sh in self.shuffles:
            sh.stop()
        if self.injector is not None and self.injector.applied:
            self.injector.finish()

    def outputs(self, out: Path, worker_rows: list[dict]) -> dict[str, Any]:
        """timeline.csv, events.csv, timeline.png and the per-event metrics (also returned)."""
        rows = [
            {
                "step": r["iteration"] + 1,
                "t_start": r["started"],
                "t_end": r["ended"],
                "bct_s": r["compute_s"] + r["sync_s"] + r["apply_s"],
            }
            for r in worker_rows
        ]
        steps = steps_from_rows(rows, self.exp.name)
        inj = self.injector
        t0 = (inj.t0 if inj and inj.t0 else None) or (self.follower.t0 if self.follower else None)
        t0 = t0 or min((s.t_start for s in steps), default=time.time())
        end = max((s.t_end for s in steps), default=t0)
        applied = list(inj.applied) if inj else []
        dropped = inj.dropped() if inj else []
        pauses = [
            Applied(t0 + t, "pause_senders", f"{','.join(hs)} for {d:g} s") for t, hs, d in self.rounds if t0 + t < end
        ]
        shuffles = [
            Applied(r["start"], "shuffle", f"{r['host']}: {r['sent'] / 1e6:.1f} MB")
            for sh in self.shuffles
            for r in sh.shuffles()
            if r["start"] < end and r["host"] == (sh.event.hosts or [""])[0]  # one event per shuffle
        ]
        # network events and pause draws are costed apart: a draw every d would otherwise end
        # every network event's window after d seconds (shuffles likewise)
        net_metrics = recovery(steps, applied)
        for m, d in zip(net_metrics, dropped or [{}] * len(applied), strict=True):
            m.update(d)
        metrics = sorted(net_metrics + recovery(steps, pauses) + recovery(steps, shuffles), key=lambda m: m["t"])
        write_csv(out, {self.exp.name: steps}, metrics, t0)
        plot(out, {self.exp.name: steps}, metrics, t0, f"{self.exp.name}: iteration time (BCT) per iteration")
        missed = [e.model_dump(exclude_none=True) for e in (inj.pending() if inj else self.planned)]
        if missed:
            LOG.warning("%d timeline event(s) not applied: the job ended first (%s)", len(missed), missed[0])
        ran = {h: [w for w in ws if t0 + w[0] < end] for h, ws in sorted(self.pauses.items())}
        out_ = {"t0": t0, "events": metrics, "not_applied": missed, "pauses": {h: w for h, w in ran.items() if w}}
        if self.shuffles:
            out_["shuffles"] = [sh.summary() for sh in self.shuffles]
        return out_


def _no_failover(host: str) -> str:
    raise Unrecoverable(f"{host}: a scheme job has no standby PS (fail_ps is refused when the file is read)")
