"""Flat schemes: sharded PS, colocated PS (mesh), ring allreduce, recursive halving-doubling.

Each is a function (workers, gradient elements, options) -> Schedule; the topology does not
change what they send, only where their bytes travel (counted by `schemes.count`).
"""

from __future__ import annotations

from collections.abc import Sequence

from schemes.schedule import Op, Schedule, ScheduleError, split


def _check(workers: Sequence[str], least: int = 2) -> tuple[str, ...]:
    ws = tuple(workers)
    if len(ws) < least or len(set(ws)) != len(ws):
        raise ScheduleError(f"needs at least {least} distinct workers, got {list(ws)}")
    return ws


def ps(workers: Sequence[str], n_elems: int, servers: Sequence[str]) -> Schedule:
    """P sharded parameter servers, each holding exactly S/P (to one element): push, then pull.

    Every worker pushes shard p to server p; a server sums the W shards it receives and sends the
    sum back to every worker. Dedicated servers start from zeros (they hold no gradient).
    """
    ws = _check(workers, least=1)
    ss = tuple(servers)
    if not ss or set(ss) & set(ws) or len(set(ss)) != len(ss):
        raise ScheduleError(f"ps: servers {list(ss)} must be distinct hosts that are not workers")
    sched = Schedule("ps", ws, split(n_elems, len(ss)), servers=ss)
    for p, srv in enumerate(ss):
        for w in ws:
            sched.transfer(w, srv, p, Op.REDUCE)
    for p, srv in enumerate(ss):
        for w in ws:
            sched.transfer(srv, w, p, Op.COPY)
    return sched


def mesh(workers: Sequence[str], n_elems: int) -> Schedule:
    """Colocated PS: worker i also serves shard i (RAT's PS baseline, HiPS's MS within a group)."""
    ws = _check(workers)
    sched = Schedule("mesh", ws, split(n_elems, len(ws)))
    for i, owner in enumerate(ws):
        for w in ws:
            if w != owner:
                sched.transfer(w, owner, i, Op.REDUCE)
    for i, owner in enumerate(ws):
        for w in ws:
            if w != owner:
                sched.transfer(owner, w, i, Op.COPY)
    return sched


def ring(workers: Sequence[str], n_elems: int) -> Schedule:
    """Chunked ring: W-1 reduce-scatter steps, then W-1 all-gather steps, to the next worker.

    Worker i sends chunk (i - s) mod W at reduce-scatter step s and ends it owning the full sum of
    chunk (i + 1) mod W; all-gather then passes the owned sums around. Each worker sends
    2(W-1)/W of the gradient, and each chunk's chain is 2(W-1) messages long.
    """
    ws = _check(workers)
    n = len(ws)
    sched = Schedule("ring", ws, split(n_elems, n))
    for s in range(n - 1):
        for i in range(n):
            sched.transfer(ws[i], ws[(i + 1) % n], (i - s) % n, Op.REDUCE)
    for s in range(n - 1):
        for i in range(n):
            sched.transfer(ws[i], ws[(i + 1) % n], (i + 1 - s) % n, Op.COPY)
    return sched


def halving_doubling(workers: Sequence[str], n_elems: int) -> Schedule:
    """Recursive halving (reduce-scatter) then recursive doubling (all-gather), Rabenseifner style.

    With p = 2^k workers: at distance d = 1, 2, 4, ..., p/2 each worker exchanges half of its
    current range with the worker whose rank differs in bit d, keeping the half its bit selects;
    doubling runs the same exchanges in reverse (d = p/2 ... 1), copying. That is log2(p) steps
    each way. As Open MPI's and MPICH's Rabenseifner, the distance doubles as the vector halves:
    the largest exchange (half the gradient) is between rank neighbours, which share a rack when
    hosts are listed rack by rack, and only the smallest blocks travel the farthest. (Halving at
    the largest distance first put 8 S on a 2 x 4-rack uplink where RAT puts 2 S.)

    Non-powers of two (W = p + r, r < p), as MPICH does it: before halving, each of the first r
    "extra" workers (ranks p..p+r-1) sends its whole gradient to rank (i - p), which reduces it;
    after doubling, that rank copies the whole result back. Two more steps on the chain, and the
    r partner ranks carry one extra gradient each way.
    """
    ws = _check(workers)
    n = len(ws)
    p = 1 << (n.bit_length() - 1)
    sched = Schedule("halving-doubling", ws, split(n_elems, p))
    extra = [(ws[p + j], ws[j]) for j in range(n - p)]
    for src, dst in extra:
        for c in range(p):
            sched.transfer(src, dst, c, Op.REDUCE)
    lo = [0] * p
    hi = [p] * p
    history: list[tuple[int, list[tuple[int, int]]]] = []
    d = 1
    while d < p:
        ranges = [(lo[r], hi[r]) for r in range(p)]
        history.append((d, ranges))
        for r in range(p):
            partner = r ^ d
            mid = (lo[r] + hi[r]) // 2
            keep_upper = bool(r & d)
            give = range(lo[r], mid) if keep_upper else range(mid, hi[r])
            for c in give:
                sched.transfer(ws[r], ws[partner], c, Op.REDUCE)
        for r in range(p):
            mid = (lo[r] + hi[r]) // 2
            if r & d:
                lo[r] = mid
            else:
                hi[r] = mid
        d *= 2
    for d, ranges in reversed(history):
        for r in range(p):
            partner = r ^ d
            own = range(lo[r], hi[r])
            for c in own:
                sched.transfer(ws[r], ws[partner], c, Op.COPY)
        lo = [a for a, _ in ranges]
        hi = [b for _, b in ranges]
    for src, dst in extra:
        for c in range(p):
            sched.transfer(dst, src, c, Op.COPY)
    return sched
