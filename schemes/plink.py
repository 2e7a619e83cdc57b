"""PLink's 2LHA: two-level hierarchical aggregation (PLink, MLSys 2020, §3.2 and §4.2-4.3).

The hosts are split into groups (ProbeEmbed's, workloads/plink.py, or the true racks, or Balanced
Random); the gradient into chunks. For every chunk one member of each group is its local master
(LM) and one of those LMs its global master (GM). Per chunk: members send it to their LM (within
the group), the LMs send their group's sum to the GM (across groups), and the result goes back
the same way. Every chunk crosses each group boundary once each way, so cross-group bytes are
2(C - 1)S for C groups (the paper's Table 1), and the chain is 4 messages long.

Who masters what (the paper's Quicktune approximation): each group is GM for a share of the
chunks proportional to its weight (its aggregate bandwidth out of the group where `bandwidth` is
given, else its size), and within a group the LM duties go to members in proportion to their
bandwidth (else evenly), the group's GM chunks counted among them; shares are apportioned by
largest remainders, so they sum exactly. Hand-written: the apportionment is a few lines and no
library ships PLink's assignment.

Finetune (§4.3) then moves duties by blame, between iterations: `blame` scores each host from what
it sends, the rates and RTTs measured (B = beta l^ + gamma t^), and `finetune` moves a GM (else an
LM) duty from the highest-blame host to the lowest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from schemes.flat import _check
from schemes.schedule import Op, Schedule, ScheduleError, split


def apportion(total: int, weights: Sequence[float]) -> list[int]:
    """`total` whole units split in proportion to `weights` by largest remainders (Hamilton's
    method); ties go to the earlier weight. Sums to `total` exactly."""
    if total < 0 or not weights or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise ScheduleError(f"cannot apportion {total} over weights {list(weights)}")
    quotas = [total * w / sum(weights) for w in weights]
    out = [math.floor(q) for q in quotas]
    order = sorted(range(len(weights)), key=lambda i: (-(quotas[i] - out[i]), i))
    for i in order[: total - sum(out)]:
        out[i] += 1
    return out


def interleaved(items: Sequence[str], counts: Sequence[int]) -> list[str]:
    """Each item `counts` times, spread evenly: item i's k-th copy at position (k + 1/2) / counts[i]
    (A, B, A, B rather than A, A, B, B), so any prefix holds shares close to the counts'."""
    slots = [((k + 0.5) / n, i) for i, n in enumerate(counts) for k in range(n)]
    return [items[i] for _, i in sorted(slots)]


def masters(
    workers: Sequence[str], groups: Mapping[str, str], chunks: int, bandwidth: Mapping[str, float] | None = None
) -> list[tuple[str, dict[str, str]]]:
    """Per chunk, (its GM, {group: its LM}) as the module docstring assigns them."""
    members: dict[str, list[str]] = {}
    for w in workers:
        members.setdefault(groups[w], []).append(w)
    names = list(members)
    bw = bandwidth or {}

    def weight(g: str) -> float:
        return sum(bw.get(m, 1.0) for m in members[g]) if bandwidth else float(len(members[g]))

    gm_counts = apportion(chunks, [weight(g) for g in names])
    gm_group = [g for g, n in zip(names, gm_counts, strict=True) for _ in range(n)]  # chunk -> GM's group
    lm: dict[str, list[str]] = {}
    for g in names:  # each member's LM duties, GM chunks first, members interleaved so GMs spread too
        counts = apportion(chunks, [bw.get(m, 1.0) for m in members[g]])
        duty = interleaved(members[g], counts)
        mine = [c for c in range(chunks) if gm_group[c] == g] + [c for c in range(chunks) if gm_group[c] != g]
        lm[g] = [""] * chunks
        for c, m in zip(mine, duty, strict=True):
            lm[g][c] = m
    return [(lm[gm_group[c]][c], {g: lm[g][c] for g in names}) for c in range(chunks)]


def two_level(
    workers: Sequence[str],
    n_elems: int,
    groups: Mapping[str, str],
    chunks: int | None = None,
    bandwidth: Mapping[str, float] | None = None,
    assignment: Sequence[tuple[str, Mapping[str, str]]] | None = None,
) -> Schedule:
    """2LHA over `groups[worker]` (any labels); `chunks` defaults to one per worker (each host then
    masters about one chunk); `bandwidth` (host -> rate) weights the masters' shares (Quicktune);
    `assignment` (per chunk: GM, {group: LM}, e.g. after `finetune`) overrides them."""
    ws = _check(workers)
    missing = [w for w in ws if w not in groups]
    if missing:
        raise ScheduleError(f"plink: no group for {missing}")
    n_chunks = len(assignment) if assignment else chunks or len(ws)
    sched = Schedule("plink", ws, split(n_elems, n_chunks))
    for c, (gm, lms) in enumerate(assignment or masters(ws, groups, n_chunks, bandwidth)):
        local = [(w, lms[groups[w]]) for w in ws if w != lms[groups[w]]]  # member -> its LM
        across = [(m, gm) for m in lms.values() if m != gm]  # LM -> GM
        for member, m in local:
            sched.transfer(member, m, c, Op.REDUCE)
        for m, g in across:
            sched.transfer(m, g, c, Op.REDUCE)
        for m, g in across:
            sched.transfer(g, m, c, Op.COPY)
        for member, m in local:
            sched.transfer(m, member, c, Op.COPY)
    return sched


# --- Autotune's Finetune (§4.3): blame, and masters moved off the bottleneck ----------------------

Assignment = list[tuple[str, dict[str, str]]]


def host_seconds(
    data: Mapping[tuple[str, str], float], rtt_s: Mapping[tuple[str, str], float], bw: Mapping[tuple[str, str], float]
) -> dict[str, float]:
    """The paper's t(i) = max_j RTT(i, j) + sum_j D(i, j) / sum_j BW(i, j): how long host i takes
    to send its share (`data` bytes and `bw` bytes/s per directed pair, `rtt_s` seconds)."""
    hosts = {a for a, _ in data} | {a for a, _ in bw}
    out = {}
    for i in hosts:
        sent = sum(v for (a, _), v in data.items() if a == i)
        rate = sum(v for (a, _), v in bw.items() if a == i)
        rtt = max((v for (a, _), v in rtt_s.items() if a == i), default=0.0)
        out[i] = rtt + (sent / rate if rate else math.inf)
    return out


def blame(
    data: Mapping[tuple[str, str], float],
    rtt_s: Mapping[tuple[str, str], float],
    bw: Mapping[tuple[str, str], float],
    beta: float = 1.0,
    gamma: float = 1.0,
) -> dict[str, float]:
    """B(i) = beta l^(i) + gamma t^(i): the load sent, scaled to [0, 1] between the least and most
    loaded hosts, plus the time to send it over the slowest host's (the paper gives no beta,
    gamma: 1 and 1 here)."""
    t = host_seconds(data, rtt_s, bw)
    load = {i: sum(v for (a, _), v in data.items() if a == i) for i in t}
    lo, hi, tmax = min(load.values()), max(load.values()), max(t.values())
    return {i: beta * ((load[i] - lo) / (hi - lo) if hi > lo else 0.0) + gamma * t[i] / tmax for i in t}


def finetune(
    assignment: Assignment, groups: Mapping[str, str], scores: Mapping[str, float], moves: int = 1
) -> Assignment:
    """Move `moves` master duties from the highest-blame host to the lowest-blame one: a GM duty
    where it has one (the GM role goes to the receiver, which becomes its group's LM for that
    chunk), else an LM duty, to the lowest-blame member of its own group (an LM must stay in its
    group). The paper doubles `moves` while the same host stays the bottleneck (the caller's loop)."""
    out = [(gm, dict(lms)) for gm, lms in assignment]
    worst = max(scores, key=lambda h: (scores[h], h))
    best = min(scores, key=lambda h: (scores[h], h))
    for _ in range(moves):
        gm_chunks = [c for c, (gm, _) in enumerate(out) if gm == worst]
        if gm_chunks:
            c = gm_chunks[-1]
            _, lms = out[c]
            lms[groups[best]] = best
            out[c] = (best, lms)
            continue
        mates = [h for h in scores if groups[h] == groups[worst] and h != worst]
        lm_chunks = [c for c, (_, lms) in enumerate(out) if lms[groups[worst]] == worst]
        if not mates or not lm_chunks:
            break
        c = lm_chunks[-1]
        mate = min(mates, key=lambda h: (scores[h], h))
        gm, lms = out[c]
        lms[groups[worst]] = mate
        out[c] = (mate if gm == worst else gm, lms)
    return out
