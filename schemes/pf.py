"""Parameter Flow's update-centric synchronisation (UCC-BSP) with TSB, as a schedule.

Workers push their update's shard p to server p (as the PS scheme does); server p sums the W
shards and, instead of every worker pulling it, broadcasts the sum down an overlay tree of workers
(TSB: the tree workloads/pf.tsb_tree solves from the paper's P3): the server sends to the root's
children, and every worker that receives the sum passes it on to its own children. All P servers
use the same tree (the paper's representative root). With the engine's segments a relay forwards a
segment while the next arrives: the paper's streaming broadcast. A server then sends T (its
children) copies of its shard instead of W, and the workers carry the rest.

DVF's filtered, variable-size updates and SSP are not in this schedule (a schedule's messages have
sizes known before the run); they come with the engine's run-time message sizes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from schemes.flat import _check
from schemes.schedule import Op, Schedule, ScheduleError, split

#: the tree's root: the servers, as in workloads.pf.ROOT
ROOT = "<servers>"


def push_broadcast(workers: Sequence[str], n_elems: int, servers: Sequence[str], parent: Mapping[str, str]) -> Schedule:
    """UCC-BSP over `parent` (worker -> its parent worker, or ROOT for the servers' children)."""
    ws = _check(workers, least=1)
    ss = tuple(servers)
    if not ss or set(ss) & set(ws):
        raise ScheduleError(f"pf: servers {list(ss)} must be hosts that are not workers")
    if set(parent) != set(ws) or any(p != ROOT and p not in ws for p in parent.values()):
        raise ScheduleError("pf: the tree must give every worker one parent: a worker or the servers' root")
    children: dict[str, list[str]] = {}
    for w in ws:
        children.setdefault(parent[w], []).append(w)
    order = _top_down(children)
    if len(order) != len(ws):
        raise ScheduleError("pf: the tree has a cycle: some worker never hangs from the servers' root")
    sched = Schedule("pf", ws, split(n_elems, len(ss)), servers=ss)
    for p, srv in enumerate(ss):
        for w in ws:
            sched.transfer(w, srv, p, Op.REDUCE)
    for p, srv in enumerate(ss):
        for child in children.get(ROOT, []):
            sched.transfer(srv, child, p, Op.COPY)
        for node in order:
            for child in children.get(node, []):
                sched.transfer(node, child, p, Op.COPY)
    return sched


def _top_down(children: Mapping[str, Sequence[str]]) -> list[str]:
    """The workers from the root's children down, parents before their children."""
    out: list[str] = []
    level = list(children.get(ROOT, []))
    while level:
        out += level
        level = [c for n in level for c in children.get(n, [])]
    return out
