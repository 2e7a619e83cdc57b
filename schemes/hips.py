"""HiPS: hierarchical parameter synchronisation on server-centric networks (HiPS paper, NetAI '18, §3).

Servers have address digits (a_(h-1), ..., a_0) (`Kind.address_digits`: BCube, Torus). Stage i
syncs each server with the servers that differ from it only in digit a_i: one BCube level-i
switch, or one Torus ring, so every message is one hop. The reduce half runs the stages low level
first, each leaving every server with 1/n of what it held, reduced over its group; the gather half
runs them back in reverse (Algorithm 1). Each stage has its own method:

- `ms` (diffuse/collect): the group's set is split in n parts, part r is reduced at the member of
  rank r and copied back from it (mesh within the group);
- `rs` (scatter/gather, Algorithm 2): the same parts passed round the group's ring in n-1 steps
  each way; where the ring is made of cables (`both_ways`, Torus) half the parts go each way,
  one ring per NIC;
- `ps` (push/pull): the whole set is pushed to one member of the group, which pulls it back
  (that member then carries it alone into the next stage).

Named variants: `hrs` (RS in every stage; with h = 1 it is the ring allreduce), `hips-ms` (MS in
every stage), `hips` (any per-stage mix; RS in every stage by default). With `parallel`, h
processes each sync 1/h of the gradient with the level order rotated (process p starts at level
p), so every level's NICs are busy in every stage; without it one process runs levels 0..h-1.

Chunks: each process's share is split into 2N pieces with `both_ways` and an RS stage (N without),
the finest piece any stage hands one member, so the parts of every stage are whole chunks: after
stage l a member holds 1/(n_1...n_l) of the share, which the next RS stage splits in 2 n_(l+1)
parts. (N·2^(rs stages) pieces, as before 2026-11-30, halved every frame on the Torus for
nothing: HiPS's frames there are 2-5 KB at the matrix's size, where the engine's cost per frame,
not per byte, is what it spends.) Each piece
is `pipeline` chunks (PIPELINE, 1 by default), so with more a stage can pass on a part's first
chunk while the rest are still on the wire.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from schemes.flat import _check
from schemes.schedule import Op, Schedule, ScheduleError, split

#: per-stage methods
METHODS = ("ms", "rs", "ps")
#: chunks per finest piece (`pipeline`): 1. Finer chunks let a ring step forward a part's first
#: chunk while the rest is on the wire; measured (README, "Where HiPS's extra 25-40% goes") 2 and 4
#: cut BCube(4,1)'s sync at 5 Mbit/s by ~3% in one run but not in the quick bench on a loaded
#: machine (10 Mbit/s and the Torus slower), so the default stays whole pieces
PIPELINE = 1
#: named variants -> the method of every stage (None: the job's `hips_stages`, RS by default)
VARIANTS: dict[str, str | None] = {"hips": None, "hrs": "rs", "hips-ms": "ms"}


@dataclass(frozen=True)
class Grid:
    """The workers' address grid: each worker's rank per level (digit a_l's position among the
    values of that digit) and the group size n_l of every level."""

    rank: dict[str, tuple[int, ...]]  # rank[w][l]: level l's rank (l = 0 is the last digit)
    sizes: tuple[int, ...]  # sizes[l]: servers per level-l group

    @property
    def levels(self) -> int:
        return len(self.sizes)

    def groups(self, level: int) -> list[list[str]]:
        """The level's groups, each ordered by rank (the ring order), in a stable order."""
        out: dict[tuple[int, ...], list[str]] = {}
        for w, r in self.rank.items():
            out.setdefault(r[:level] + r[level + 1 :], []).append(w)
        return [sorted(g, key=lambda w: self.rank[w][level]) for _, g in sorted(out.items())]

    def level_of(self, a: str, b: str) -> int | None:
        """The level whose group holds both `a` and `b` (they differ in that digit only), else None."""
        diff = [lvl for lvl in range(self.levels) if self.rank[a][lvl] != self.rank[b][lvl]]
        return diff[0] if len(diff) == 1 else None


def grid(workers: Sequence[str], digits: Mapping[str, Sequence[int]]) -> Grid:
    """The grid the workers' digits span; ScheduleError unless they are exactly every address of it."""
    ws = tuple(workers)
    missing = [w for w in ws if w not in digits]
    if missing:
        raise ScheduleError(f"hips: {missing[0]} has no address digits (the topology kind gives none: BCube, Torus do)")
    lengths = {len(digits[w]) for w in ws}
    if len(lengths) != 1:
        raise ScheduleError(f"hips: workers' addresses have different lengths {sorted(lengths)}")
    (h,) = lengths
    values = [sorted({digits[w][h - 1 - lvl] for w in ws}) for lvl in range(h)]
    sizes = tuple(len(v) for v in values)
    if math.prod(sizes) != len(ws) or len({tuple(digits[w]) for w in ws}) != len(ws):
        raise ScheduleError(
            f"hips: the {len(ws)} workers are not a full address grid ({' x '.join(map(str, sizes))}); "
            "use every server of the topology as a worker"
        )
    rank = {w: tuple(values[lvl].index(digits[w][h - 1 - lvl]) for lvl in range(h)) for w in ws}
    return Grid(rank, sizes)


def stage_methods(stages: str | Sequence[str] | None, levels: int, variant: str = "hips") -> tuple[str, ...]:
    """Each level's method: the variant's, else `stages` (one for all, or one per level), else RS."""
    fixed = VARIANTS.get(variant)
    if variant not in VARIANTS:
        raise ScheduleError(f"hips: unknown variant {variant!r}; use one of {', '.join(VARIANTS)}")
    if fixed:
        chosen: Sequence[str] = [fixed] * levels
    elif isinstance(stages, str):
        chosen = [stages] * levels
    else:
        chosen = stages or ["rs"] * levels
    if len(chosen) != levels or any(m not in METHODS for m in chosen):
        raise ScheduleError(
            f"hips: stages {list(chosen)} must be one of {', '.join(METHODS)} per level ({levels} levels)"
        )
    return tuple(chosen)


def _parts(items: list[int], n: int) -> list[list[int]]:
    """`items` in n contiguous parts whose sizes differ by at most one."""
    q, r = divmod(len(items), n)
    out, start = [], 0
    for i in range(n):
        end = start + q + (1 if i < r else 0)
        out.append(items[start:end])
        start = end
    return out


@dataclass
class _Process:
    """One HiPS process: its chunks, its level order, and what each server holds between stages."""

    s: Schedule
    g: Grid
    methods: tuple[str, ...]
    order: list[int]
    chunks: list[int]
    both_ways: bool
    index: int
    #: per completed reduce stage: (method, members, parts, rings or [[root]]), for the gather half
    done: list[tuple[str, list[str], list[list[int]], list[list[str]]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.holds: dict[str, list[int]] = {w: list(self.chunks) for w in self.g.rank}

    def reduce_half(self) -> None:
        for lvl in self.order:
            method = self.methods[lvl]
            for members in self.g.groups(lvl):
                held = self.holds[members[0]]
                if not held:  # a PS stage below left this group nothing to carry
                    continue
                if method == "ps":
                    root = members[self.index % len(members)]
                    for m in members:
                        if m != root:
                            for c in held:
                                self.s.transfer(m, root, c, Op.REDUCE)
                            self.holds[m] = []
                    self.done.append(("ps", members, [held], [[root]]))
                    continue
                rings = [members, members[::-1]] if method == "rs" and self.both_ways else [members]
                parts = _parts(held, len(rings) * len(members))
                per_ring = [parts[i * len(members) : (i + 1) * len(members)] for i in range(len(rings))]
                if method == "ms":
                    (ps,) = per_ring
                    for m in members:
                        for r, owner in enumerate(members):
                            if owner != m:
                                for c in ps[r]:
                                    self.s.transfer(m, owner, c, Op.REDUCE)
                else:
                    n = len(members)
                    for step in range(1, n):
                        for ring, ps in zip(rings, per_ring, strict=True):
                            for i in range(n):
                                for c in ps[(i - step) % n]:
                                    self.s.transfer(ring[i], ring[(i + 1) % n], c, Op.REDUCE)
                new = {m: [] for m in members}
                for ring, ps in zip(rings, per_ring, strict=True):
                    for i, m in enumerate(ring):
                        new[m] += ps[i]
                self.holds.update(new)
                self.done.append((method, members, [p for ps in per_ring for p in ps], rings))

    def gather_half(self) -> None:
        for method, members, parts, rings in reversed(self.done):
            if method == "ps":
                ((root,),) = rings
                for m in members:
                    if m != root:
                        for c in parts[0]:
                            self.s.transfer(root, m, c, Op.COPY)
                continue
            n = len(members)
            per_ring = [parts[i * n : (i + 1) * n] for i in range(len(rings))]
            if method == "ms":
                for r, owner in enumerate(members):
                    for m in members:
                        if m != owner:
                            for c in per_ring[0][r]:
                                self.s.transfer(owner, m, c, Op.COPY)
                continue
            for step in range(1, n):
                for ring, ps in zip(rings, per_ring, strict=True):
                    for i in range(n):
                        for c in ps[(i - step + 1) % n]:
                            self.s.transfer(ring[i], ring[(i + 1) % n], c, Op.COPY)


def hips(
    workers: Sequence[str],
    n_elems: int,
    digits: Mapping[str, Sequence[int]],
    stages: str | Sequence[str] | None = None,
    parallel: bool = True,
    both_ways: bool = False,
    variant: str = "hips",
    pipeline: int = PIPELINE,
) -> Schedule:
    """HiPS over the workers' address digits (every server of the grid must be a worker).

    `stages`: the method of every level (`ms`, `rs`, `ps`), one for all or one per level (level 0
    = the last digit); `parallel`: h processes on 1/h of the gradient each, level order rotated;
    `both_ways`: RS stages run half their parts each way round the ring (Torus: one NIC each);
    `variant`: `hips`, `hrs` or `hips-ms` (the last two fix the stages); `pipeline`: every
    process's finest piece cut into this many chunks, so a stage passes on the first of a part's
    chunks while the rest are still on the wire (same bytes, same messages per part).
    """
    ws = _check(workers)
    g = grid(ws, digits)
    methods = stage_methods(stages, g.levels, variant)
    procs = g.levels if parallel else 1
    if pipeline < 1:
        raise ScheduleError(f"hips: pipeline must be a positive number of chunks per piece, got {pipeline}")
    per_proc = math.prod(g.sizes) * (2 if both_ways and "rs" in methods else 1) * pipeline
    sched = Schedule(variant, ws, split(n_elems, procs * per_proc))
    for p in range(procs):
        order = [(p + j) % g.levels for j in range(g.levels)]
        proc = _Process(sched, g, methods, order, list(range(p * per_proc, (p + 1) * per_proc)), both_ways, p)
        proc.reduce_half()
        proc.gather_half()
    return sched


def by_level(schedule: Schedule, digits: Mapping[str, Sequence[int]]) -> dict[int, Schedule]:
    """The schedule's messages per level (those between servers differing in that digit only), as
    schedules the counters accept: what the stages at each level put on the network."""
    g = grid(schedule.workers, digits)
    out = {lvl: replace(schedule, steps={}) for lvl in range(g.levels)}
    for host, steps in schedule.steps.items():
        for s in steps:
            lvl = g.level_of(host, s.peer)
            if lvl is None:
                raise ScheduleError(f"{schedule.scheme}: {host} exchanges with {s.peer}, not in one group of it")
            out[lvl].steps.setdefault(host, []).append(s)
    return out
