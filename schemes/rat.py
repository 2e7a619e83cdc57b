"""RAT: resilient allreduce trees (RAT paper, ZTE Tech. J. 2020, §3).

One aggregator per oversubscribed region and level; n trees, one rooted at every worker, each
carrying 1/n of the gradient. The paper does not say which node of a region aggregates for a
tree; here (docs/schemes.md) the root aggregates every region that contains it, and elsewhere the
duty rotates: the region member at index (t mod region size) aggregates for tree t. Then every
worker sends the same bytes, and only one copy of each chunk crosses each region boundary in each
direction (minimal cross-region traffic); the chain is 2(l + 1) messages for l levels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from schemes.flat import _check
from schemes.schedule import Op, Schedule, ScheduleError, split


def rat(
    workers: Sequence[str], n_elems: int, regions: Mapping[str, Sequence[str]], trees: int | None = None
) -> Schedule:
    """RAT over `regions[worker]` = the worker's region per oversubscribed level, lowest first.

    `trees` defaults to one per worker (the paper's simulation); tree t is rooted at worker
    t mod W. With no levels (a non-blocking network) RAT is W trees of depth one: mesh.
    """
    ws = _check(workers)
    levels = {len(regions.get(w, ())) for w in ws}
    if len(levels) != 1:
        raise ScheduleError(f"rat: every worker needs a region per level; got levels {sorted(levels)}")
    (n_levels,) = levels
    n_trees = trees or len(ws)
    sched = Schedule("rat", ws, split(n_elems, n_trees))
    for t in range(n_trees):
        root = ws[t % len(ws)]
        up: list[list[tuple[str, str]]] = []  # per level: (child, aggregator) messages
        reps = list(ws)
        for lvl in range(n_levels):
            groups: dict[str, list[str]] = {}
            for r in reps:
                groups.setdefault(regions[r][lvl], []).append(r)
            edges = []
            aggs = []
            for members in groups.values():
                agg = root if root in members else members[t % len(members)]
                edges += [(m, agg) for m in members if m != agg]
                aggs.append(agg)
            up.append(edges)
            reps = aggs
        up.append([(r, root) for r in reps if r != root])
        for edges in up:
            for child, agg in edges:
                sched.transfer(child, agg, t, Op.REDUCE)
        for edges in reversed(up):
            for child, agg in edges:
                sched.transfer(agg, child, t, Op.COPY)
    return sched
