"""PLink's 2LHA: two-level hierarchical aggregation (PLink, MLSys 2020, §3.2 and §4.2-4.3).

The hosts are split into groups (ProbeEmbed's, workloads/plink.py, or the true racks, or Balanced
Random); the gradient into chunks. For every chunk one member of each group is its local master
(LM) and one of those LMs its global master (GM). Per chunk: members send it to their LM (within
the group), the LMs send their group's sum to the GM (across groups), and the result goes back
the same way. Every chunk crosses each group boundary once each way, so cross-group bytes are
2(C - 1)S for C groups (the paper's Table 1), and the chain is 4 messages long.

Who masters what (the paper's Quicktune approximation): each group is GM for a share of the
chunks proportional to its weight (its aggregate bandwidth out of the group, sum over m in G and
n not in G of BW(m, n), where pairwise bandwidth was measured: `quicktune`; else its size), and
within a group the LM duties go to members in proportion to their aggregate bandwidth (sum over n
of BW(i, n); else evenly), the group's GM chunks counted among them; shares are apportioned by
largest remainders, so they sum exactly. Hand-written: the apportionment is a few lines and no
library ships PLink's assignment.

Chunks: the paper assigns masters per chunk of 16-64 KB, i.e. thousands of chunks per 100 MB
buffer. Here a schedule has `CHUNKS_PER_HOST` master chunks per worker (8: with one chunk per
host, Quicktune could only give a throttled host all or nothing of a share, and the 8 hosts of the
paper's Fig. 10 would split 7 freed chunks 2-1-1-1-1-1-1), which the job's pipelining
(`segment_kb`, schemes.schedule.segmented) then cuts into segments; so masters change in steps of
1/(8W) of the gradient and the wire carries segments of at most `segment_kb`.

Groups: `racks` is the ground truth the paper's Fig. 8 compares ProbeEmbed against, read from the
topology model (the host's first oversubscribed region where its kind has them, else the switch
its cable reaches); ProbeEmbed's groups and Balanced Random's are computed from probes and seeds
by workloads/plink.py and handed in as `SchemeInputs.clusters`.

Finetune (§4.3) then moves duties by blame, between iterations: `blame` scores each host from what
it sends, the rates and RTTs measured (B = beta l^ + gamma t^), and `finetune` moves a GM (else an
LM) duty from the highest-blame host to the lowest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from schemes.flat import _check
from schemes.schedule import Op, Schedule, ScheduleError, split

if TYPE_CHECKING:
    from topologies.model import Network

#: master chunks per worker (see the module docstring)
CHUNKS_PER_HOST = 8


def racks(net: Network, hosts: Sequence[str]) -> dict[str, str]:
    """Each host's rack in the topology model: its first-level region where the kind has
    oversubscribed regions (Kind.regions: leaf-spine's leaf, FatTree's rack), else the switch its
    first cable reaches (a leaf, an edge switch, PSNet's ECS)."""
    regions = net.family.regions(net)
    out = {}
    for h in hosts:
        level = regions.get(h, ())
        if level:
            out[h] = str(level[0])
            continue
        ln = net.links_of(h)[0]
        out[h] = ln.b if ln.a == h else ln.a
    return out


def chunk_count(workers: int, n_elems: int) -> int:
    """Master chunks of a schedule: CHUNKS_PER_HOST per worker, at most one per element."""
    return max(1, min(CHUNKS_PER_HOST * workers, n_elems))


def quicktune(
    groups: Mapping[str, str], pair_mbps: Mapping[tuple[str, str], float]
) -> tuple[dict[str, float], dict[str, float]]:
    """Quicktune's weights (the paper's §4.3 approximation) from pairwise bandwidth (either
    order of a pair; both given: their mean): per host its aggregate bandwidth, sum over n of
    BW(i, n); per group its aggregate bandwidth out of the group, sum over m in G, n not in G of
    BW(m, n). A pair never measured counts 0."""
    bw: dict[tuple[str, str], float] = {}
    for (a, b), v in pair_mbps.items():
        key = (a, b) if a < b else (b, a)
        bw[key] = (bw[key] + v) / 2 if key in bw else float(v)
    hosts = list(groups)
    host_w = {h: 0.0 for h in hosts}
    group_w = {g: 0.0 for g in groups.values()}
    for (a, b), v in bw.items():
        if a not in groups or b not in groups:
            continue
        host_w[a] += v
        host_w[b] += v
        if groups[a] != groups[b]:
            group_w[groups[a]] += v
            group_w[groups[b]] += v
    return host_w, group_w


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
    workers: Sequence[str],
    groups: Mapping[str, str],
    chunks: int,
    bandwidth: Mapping[str, float] | None = None,
    group_weight: Mapping[str, float] | None = None,
) -> list[tuple[str, dict[str, str]]]:
    """Per chunk, (its GM, {group: its LM}) as the module docstring assigns them: `bandwidth`
    (host -> aggregate rate) weights the LM duties in a group and, unless `group_weight` is given
    (group -> its bandwidth out of the group: `quicktune`), the groups' GM shares by the sum of
    their members'; with neither, shares follow sizes."""
    members: dict[str, list[str]] = {}
    for w in workers:
        members.setdefault(groups[w], []).append(w)
    names = list(members)
    bw = bandwidth or {}

    def weight(g: str) -> float:
        if group_weight is not None and len(names) > 1 and sum(group_weight.get(n, 0.0) for n in names) > 0:
            return group_weight.get(g, 0.0)
        return sum(bw.get(m, 1.0) for m in members[g]) if bandwidth else float(len(members[g]))

    gm_counts = apportion(chunks, [weight(g) for g in names])
    gm_group = interleaved(names, gm_counts)  # chunk -> its GM's group, groups spread over the chunks
    lm: dict[str, list[str]] = {}
    for g in names:  # each member's LM duties, GM chunks first, members interleaved so GMs spread too
        counts = apportion(chunks, [bw.get(m, 1.0) for m in members[g]])
        duty = interleaved(members[g], counts)
        mine = [c for c in range(chunks) if gm_group[c] == g] + [c for c in range(chunks) if gm_group[c] != g]
        lm[g] = [""] * chunks
        for c, m in zip(mine, duty, strict=True):
            lm[g][c] = m
    return [(lm[gm_group[c]][c], {g: lm[g][c] for g in names}) for c in range(chunks)]


def initial_plan(
    workers: Sequence[str],
    groups: Mapping[str, str],
    n_elems: int,
    pair_mbps: Mapping[tuple[str, str], float] | None = None,
) -> list[tuple[str, dict[str, str]]]:
    """The masters a run starts with: `chunk_count` chunks, by group size, or by Quicktune's
    weights where pairwise bandwidth was measured (`pair_mbps`)."""
    host_w = group_w = None
    if pair_mbps:
        host_w, group_w = quicktune(groups, pair_mbps)
    return masters(workers, groups, chunk_count(len(workers), n_elems), host_w, group_w)


def two_level(
    workers: Sequence[str],
    n_elems: int,
    groups: Mapping[str, str],
    chunks: int | None = None,
    bandwidth: Mapping[str, float] | None = None,
    assignment: Sequence[tuple[str, Mapping[str, str]]] | None = None,
    group_weight: Mapping[str, float] | None = None,
) -> Schedule:
    """2LHA over `groups[worker]` (any labels); `chunks` defaults to `chunk_count`; `bandwidth`
    (host -> rate) and `group_weight` weight the masters' shares (Quicktune, `masters`);
    `assignment` (per chunk: GM, {group: LM}, e.g. after `finetune`) overrides them."""
    ws = _check(workers)
    missing = [w for w in ws if w not in groups]
    if missing:
        raise ScheduleError(f"plink: no group for {missing}")
    n_chunks = len(assignment) if assignment else chunks or chunk_count(len(ws), n_elems)
    sched = Schedule("plink", ws, split(n_elems, n_chunks))
    plan = assignment or masters(ws, groups, n_chunks, bandwidth, group_weight)
    for c, (gm, lms) in enumerate(plan):
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
