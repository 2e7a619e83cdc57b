"""PLink's Autotune (the paper's §4.3) for a running `plink` job with `autotune: true`: the central
daemon that re-plans who masters what between iterations, from what the hosts measured.

Each engine host writes, per iteration, the plan it ran and per peer what TCP measured over the
synchronisation (engine.host: bytes acknowledged, rate while busy, RTT). This daemon follows those
rows (called from the run's tick, as the timeline is) and:

- **triggers** when `CONFIRM` (2) iterations in a row move the GST more than `TRIGGER` (20%, the
  paper's example) from the steady reference (the run's second iteration, warm-up or not: the first
  opens the connections; then a slow average):
  a host's rate changed (a `set_rate` in the timeline) or the traffic did; two, so that one slow
  iteration (the emulator has a few, about twice the GST) does not re-plan, and so that Quicktune
  reads an iteration measured wholly after the change;
- **Quicktune**: new masters from the newest measured bandwidth of every pair (each pair's last
  measurement; pairs no plan has used yet keep their probe, where the job probed):
  schemes.plink.quicktune's weights, schemes.plink.masters' apportionment;
- **Finetune**: once a plan has run `JUDGE` (2) iterations (judged by the shorter GST of the two:
  a slow iteration is noise, a fast one is not), the blame of every host (schemes.plink.blame:
  B = beta l^ + gamma t^ from the bytes the plan has it send, the RTTs and rates measured), and,
  while the highest blame is more than `EPSILON` times the lowest, `moves` master duties from the
  highest-blame host that has one to the lowest (schemes.plink.finetune), doubling `moves` while
  the same host stays the worst (the paper's "exponentially more");
- keeps the best plan seen since the trigger, and returns to it, steady, when a move did not
  shorten the GST by `IMPROVE` (the paper gives no stopping rule; measurements are noisy, so a
  move must pay by 2%).

A plan goes to the hosts through engine.processes.publish_plan; they switch at the next iteration
none has started (engine.host.Plans), so every host runs one plan per iteration and the sums stay
exact. The paper gives no beta, gamma or epsilon: 0.25, 1 and 1.2 here. l^ is scaled to [0, 1]
between the least and the most loaded host, so with beta = gamma a host holding one chunk more
than the others is blamed as much as the slowest host (a first run on the emulator moved duties
between unthrottled hosts that way); beta = 0.25 lets time decide and load break near-ties.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from engine.processes import publish_plan, read_rows
from schemes.plink import Assignment, blame, finetune, masters, quicktune, two_level
from schemes.schedule import pair_bytes, segmented

LOG = logging.getLogger(__name__)
#: a GST this far from the steady reference triggers Quicktune (the paper: "e.g. > 20%")
TRIGGER = 0.2
#: Finetune moves duties while the highest blame exceeds the lowest by this factor (not in the paper)
EPSILON = 1.2
#: a Finetune move is kept only if it shortens the GST by this share (not in the paper)
IMPROVE = 0.02
#: the steady reference follows the GST this fast (an exponential average)
DRIFT = 0.2
#: iterations in a row beyond TRIGGER before Quicktune re-plans
CONFIRM = 2
#: iterations a plan runs before Finetune judges it (by the shortest)
JUDGE = 2
#: the blame's weights (schemes.plink.blame): B = BETA l^ + GAMMA t^
BETA, GAMMA = 0.25, 1.0


@dataclass
class Decision:
    """One re-plan: after which iteration, what, the plan it published, the GST that led to it."""

    iteration: int
    action: str  # quicktune | finetune | revert | steady
    version: int
    gst_s: float
    detail: str = ""


class Autotune:
    """The daemon of one run (see the module docstring); `tick` follows the hosts' rows."""

    def __init__(
        self,
        run_dir: Path,
        workers: Sequence[str],
        groups: Mapping[str, str],
        n_elems: int,
        segment_bytes: int | None,
        assignment: Assignment,
        probe_mbps: Mapping[tuple[str, str], float] | None = None,
    ) -> None:
        self.run_dir = run_dir
        self.workers = list(workers)
        self.groups = dict(groups)
        self.n_elems = n_elems
        self.segment_bytes = segment_bytes
        self.plans: dict[int, Assignment] = {0: [(gm, dict(lms)) for gm, lms in assignment]}
        self.version = 0
        #: each pair's newest rate, bytes/s (probes first, where the job probed)
        self.rate: dict[tuple[str, str], float] = {p: v * 1e6 / 8 for p, v in (probe_mbps or {}).items()}
        self.rtt: dict[tuple[str, str], float] = {}
        self.ref: float | None = None
        self.tuning = False
        self.best: tuple[int, float] | None = None
        self.moves = 1
        self.last_worst: str | None = None
        self.seen: set[int] = set()
        self.off: list[float] = []  # GSTs in a row beyond TRIGGER
        self.judged: list[float] = []  # GSTs of the newest plan while Finetune judges it
        self.decisions: list[Decision] = []
        self.per_iteration: list[dict[str, Any]] = []

    # --- following the hosts ----------------------------------------------------------------
    def tick(self) -> None:
        """Read the hosts' rows and act on every iteration all workers have finished."""
        rows: dict[int, list[dict]] = {}
        for h in self.workers:
            for r in read_rows(self.run_dir / f"{h}.jsonl"):
                if "iteration" in r and r["iteration"] not in self.seen:
                    rows.setdefault(r["iteration"], []).append(r)
        for it in sorted(rows):
            if len(rows[it]) == len(self.workers) and (not self.seen or it == max(self.seen) + 1):
                self.seen.add(it)
                self.step(it, rows[it])

    def step(self, it: int, rows: list[dict]) -> None:
        gst = max(r["sync_s"] for r in rows)
        plan = rows[0].get("plan", 0)
        self._measure(rows)
        duties = self.duties(self.plans.get(plan, self.plans[0]))
        self.per_iteration.append({"iteration": it, "plan": plan, "gst_s": gst, "gm": duties[0], "lm": duties[1]})
        if plan != self.version or it == 0:
            return  # the newest plan has not reached the hosts yet, or the run's first iteration
            # (connections opening, TCP's slow start): nothing to judge
        if not self.tuning:
            self._steady(it, gst)
        else:
            self._finetune(it, gst)

    def _measure(self, rows: list[dict]) -> None:
        for r in rows:
            for peer, (acked, rate, rtt) in (r.get("peers") or {}).items():
                if acked > 0 and rate > 0:
                    self.rate[(r["host"], peer)] = rate
                    self.rtt[(r["host"], peer)] = rtt

    # --- the decisions ----------------------------------------------------------------------
    def _steady(self, it: int, gst: float) -> None:
        if self.ref is None:
            self.ref = gst
            return
        if abs(gst - self.ref) / self.ref <= TRIGGER:
            self.ref = (1 - DRIFT) * self.ref + DRIFT * gst
            self.off = []
            return
        self.off.append(gst)
        if len(self.off) < CONFIRM:
            return
        self.off = []
        host_w, group_w = quicktune(self.groups, {p: v * 8 / 1e6 for p, v in self.rate.items()})
        plan = masters(self.workers, self.groups, len(self.plans[0]), host_w, group_w)
        change = f"GST {gst:.3f} s vs steady {self.ref:.3f} s ({(gst / self.ref - 1) * 100:+.0f}%)"
        self.tuning, self.best, self.moves, self.last_worst = True, None, 1, None
        self._publish(plan, it, "quicktune", gst, change)

    def _finetune(self, it: int, gst: float) -> None:
        self.judged.append(gst)
        if len(self.judged) < JUDGE:
            return
        gst = min(self.judged)
        if self.best is None or gst < self.best[1] * (1 - IMPROVE):
            self.best = (self.version, gst)
        else:
            best_version, best_gst = self.best
            self.tuning, self.ref = False, best_gst
            self._publish(
                self.plans[best_version], it, "revert", gst, f"back to plan {best_version} ({best_gst:.3f} s)"
            )
            return
        current = self.plans[self.version]
        data = {k: float(v) for k, v in pair_bytes(self._schedule(current, segment=False)).items()}
        bw = {p: self.rate.get(p, 0.0) for p in data}
        rtt = {p: self.rtt.get(p, 0.0) for p in data}
        scores = blame(data, rtt, bw, BETA, GAMMA)
        worst = max(scores, key=lambda h: (scores[h], h))
        least = min(scores, key=lambda h: (scores[h], h))
        if scores[worst] <= EPSILON * max(scores[least], 1e-9):
            self.tuning, self.ref = False, gst
            self.decisions.append(Decision(it, "steady", self.version, gst, "blame balanced"))
            return
        self.moves = self.moves * 2 if worst == self.last_worst else 1
        self.last_worst = worst
        # from the highest blame down, the first host with a duty left to give (once the worst has
        # none, duties move among the others by blame, as the paper's Fig. 10 describes)
        for host in sorted(scores, key=lambda h: (-scores[h], h)):
            if host == least:
                continue
            plan = finetune(current, self.groups, {**scores, host: scores[worst] + 1.0}, self.moves)
            if plan != current:
                break
        else:
            self.tuning, self.ref = False, gst
            self.decisions.append(Decision(it, "steady", self.version, gst, "no duty left to move"))
            return
        detail = f"{self.moves} duty(ies) off {host} (blame {scores[host]:.2f}) to {least} ({scores[least]:.2f})"
        self._publish(plan, it, "finetune", gst, detail)

    def _schedule(self, plan: Assignment, segment: bool = True):
        sched = two_level(self.workers, self.n_elems, self.groups, assignment=plan)
        return segmented(sched, self.segment_bytes) if segment else sched

    def _publish(self, plan: Assignment, it: int, action: str, gst: float, detail: str) -> None:
        self.judged = []
        self.version += 1
        self.plans[self.version] = [(gm, dict(lms)) for gm, lms in plan]
        publish_plan(self.run_dir, self.version, self._schedule(plan))
        self.decisions.append(Decision(it, action, self.version, gst, detail))
        LOG.info("autotune after iteration %d: %s -> plan %d; %s", it, action, self.version, detail)

    # --- what the summary keeps -------------------------------------------------------------
    def duties(self, plan: Assignment) -> tuple[dict[str, int], dict[str, int]]:
        """GM and LM chunks per worker under a plan."""
        gm = dict.fromkeys(self.workers, 0)
        lm = dict.fromkeys(self.workers, 0)
        for g, lms in plan:
            gm[g] += 1
            for m in lms.values():
                lm[m] += 1
        return gm, lm

    def record(self) -> dict[str, Any]:
        """summary.json's `autotune` entry."""
        gsts = [p["gst_s"] for p in self.per_iteration]
        return {
            "trigger": TRIGGER,
            "confirm": CONFIRM,
            "judge": JUDGE,
            "epsilon": EPSILON,
            "improve": IMPROVE,
            "beta": BETA,
            "gamma": GAMMA,
            "plans": self.version + 1,
            "decisions": [asdict(d) for d in self.decisions],
            "iterations": self.per_iteration,
            "gst_median_s": statistics.median(gsts) if gsts else None,
        }
