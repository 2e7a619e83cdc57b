"""A synchronisation scheme as data: per host, an ordered list of chunk steps.

One description serves three consumers (docs/schemes.md): the engine that moves
real bytes between emulated hosts, the counters here that say without running anything how many
bytes cross each pair, link and region and how long the dependency chain is, and a flow-level
model that replays the same schedule at scale.

Semantics (what the engine and `execute` both implement):
- Every participating host holds a buffer of the whole flat gradient (`n_elems` float32). A
  worker starts with its own gradient, a dedicated server (a PS that is not a worker) with zeros.
- `send(c, to)` puts the current value of chunk `c` on the wire to `to` (never blocks).
- `reduce(c, frm)` waits for chunk `c` from `frm` and adds it into the buffer; `copy(c, frm)` waits
  and overwrites it.
- Only the order of one host's steps *on the same chunk* is binding (a send of a chunk waits for
  every earlier receive into that chunk); steps on different chunks may run concurrently, and
  messages of one (sender, receiver, chunk) arrive in send order. This is what lets n RAT trees or
  P PS shards proceed in parallel from one list per host.
- At the end every worker holds the sum of the W workers' gradients.

No library ships this: MPI, gloo and TF have fixed collective algorithms and none ships RAT or
HiPS schedules, which is why the schedule is the project's own small data type.
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np

#: bytes of one gradient element (float32)
ELEM_BYTES = 4


class Op(StrEnum):
    SEND = "send"
    REDUCE = "reduce"
    COPY = "copy"


@dataclass(frozen=True)
class Chunk:
    """A contiguous piece of the flat gradient: elements [offset, offset + length)."""

    index: int
    offset: int
    length: int

    @property
    def nbytes(self) -> int:
        return self.length * ELEM_BYTES


@dataclass(frozen=True)
class Step:
    op: Op
    chunk: int
    peer: str


class ScheduleError(ValueError):
    """A schedule that cannot run: a receive nothing sends, a chunk out of range, a deadlock."""


@dataclass
class Schedule:
    """What each host does in one synchronisation, in order."""

    scheme: str
    workers: tuple[str, ...]
    chunks: tuple[Chunk, ...]
    steps: dict[str, list[Step]] = field(default_factory=dict)
    #: hosts that take part without contributing a gradient (dedicated PSs)
    servers: tuple[str, ...] = ()

    @property
    def hosts(self) -> tuple[str, ...]:
        return self.workers + self.servers

    @property
    def n_elems(self) -> int:
        return sum(c.length for c in self.chunks)

    def send(self, src: str, chunk: int, dst: str) -> None:
        self.steps.setdefault(src, []).append(Step(Op.SEND, chunk, dst))

    def recv(self, dst: str, chunk: int, src: str, op: Op) -> None:
        self.steps.setdefault(dst, []).append(Step(op, chunk, src))

    def transfer(self, src: str, dst: str, chunk: int, op: Op) -> None:
        """One message: `src` sends chunk, `dst` reduces or copies it (appended to both lists)."""
        self.send(src, chunk, dst)
        self.recv(dst, chunk, src, op)


def host_part(schedule: Schedule, host: str) -> dict:
    """What one host's engine needs of a schedule, as JSON values: the hosts, the chunks and this
    host's own steps. The engine process runs from this (engine.processes writes it into each
    host's config), so it never compiles a scheme by name: any registered scheme runs, a test's
    toy one included, and a scheme may hand out a different schedule for a later run."""
    return {
        "scheme": schedule.scheme,
        "host": host,
        "workers": list(schedule.workers),
        "servers": list(schedule.servers),
        "chunks": [[c.offset, c.length] for c in schedule.chunks],
        "steps": [[s.op.value, s.chunk, s.peer] for s in schedule.steps.get(host, [])],
    }


def from_host_part(part: Mapping) -> Schedule:
    """The schedule `host_part` wrote, holding that one host's steps."""
    chunks = tuple(Chunk(i, int(a), int(n)) for i, (a, n) in enumerate(part["chunks"]))
    sched = Schedule(part["scheme"], tuple(part["workers"]), chunks, servers=tuple(part["servers"]))
    sched.steps[part["host"]] = [Step(Op(op), int(c), peer) for op, c, peer in part["steps"]]
    return sched


def split(n_elems: int, parts: int) -> tuple[Chunk, ...]:
    """`parts` contiguous chunks whose lengths differ by at most one element (numpy's array_split)."""
    if parts < 1 or n_elems < parts:
        raise ScheduleError(f"cannot split {n_elems} elements into {parts} chunks")
    bounds = np.linspace(0, n_elems, parts + 1).round().astype(int)
    return tuple(Chunk(i, int(a), int(b - a)) for i, (a, b) in enumerate(itertools.pairwise(bounds)))


def segmented(schedule: Schedule, segment_bytes: int | None) -> Schedule:
    """The same schedule with every chunk cut into segments of at most `segment_bytes`, each
    segment walking its chunk's steps as a chunk of its own: pipelining as data.

    Steps on different chunks run concurrently (the semantics above), so a relay forwards segment
    k while segment k + 1 is still arriving, and a ring's next step starts on a step's first
    segment instead of its last: the store-and-forward delay of each hop shrinks from a chunk to a
    segment (NCCL and PLink's library pipeline 16-64 KB pieces the same way). Bytes per pair, link
    and region and the dependency chain are unchanged; only the message count grows. None or 0
    (or a chunk no larger than a segment) leaves a chunk whole.

    The order matters where segments wait behind one another on one connection (a pair's bytes go
    in order): each host's steps are listed segment round first (every chunk's first segment,
    then every chunk's second, ...) and, within a round, the chunks with the longest chain of
    messages still ahead of them first (`remaining_chain`), each chunk's own steps in their
    order. Chunk by chunk, a relay or a RAT aggregator would forward one tree's segments at a time
    over one uplink while the others idled; round by round every tree, and every uplink, is fed
    at once, and the segments that travel farthest leave first. The flow model, which sends a
    pair's messages one at a time in this order, put RAT on the 2:1 leaf-spine at 1.07x its busiest
    cable (chunk by chunk: 1.26x) and halving-doubling at 1.02-1.13x (1.15-1.26x) with 64 KB.
    """
    if not segment_bytes:
        return schedule
    per = max(1, int(segment_bytes) // ELEM_BYTES)
    pieces: list[tuple[int, ...]] = []  # old chunk -> its new chunk indices
    chunks: list[Chunk] = []
    for c in schedule.chunks:
        parts = split(c.length, -(-c.length // per)) if c.length > per else (Chunk(0, 0, c.length),)
        pieces.append(tuple(range(len(chunks), len(chunks) + len(parts))))
        chunks += [Chunk(len(chunks) + i, c.offset + p.offset, p.length) for i, p in enumerate(parts)]
    if len(chunks) == len(schedule.chunks):
        return schedule
    ahead = remaining_chain(schedule)
    steps = {}
    for h, ss in schedule.steps.items():
        keyed = [
            (j, -ahead[(h, s.chunk)], n, Step(s.op, k, s.peer))
            for n, s in enumerate(ss)
            for j, k in enumerate(pieces[s.chunk])
        ]
        steps[h] = [x[-1] for x in sorted(keyed, key=lambda x: x[:3])]
    return Schedule(schedule.scheme, schedule.workers, tuple(chunks), steps, schedule.servers)


def remaining_chain(schedule: Schedule) -> dict[tuple[str, int], int]:
    """(host, chunk) -> the longest chain of dependent messages from the host's first step on the
    chunk to the end: 2(W-1) for a ring's first send, 1 for a mesh owner's last copy. The
    backward twin of `chain_length`: the run order reversed, a receive hands the chain still ahead
    of its host back to the send that fed it (a pair's k-th send meets its k-th receive)."""
    order = list(_runner(schedule))
    ahead: dict[tuple[str, int], int] = Counter()
    wire: dict[tuple[str, str, int], deque[int]] = defaultdict(deque)
    for host, s in reversed(order):
        if s.op == Op.SEND:
            ahead[(host, s.chunk)] = max(ahead[(host, s.chunk)], 1 + wire[(host, s.peer, s.chunk)].popleft())
        else:
            wire[(s.peer, host, s.chunk)].append(ahead[(host, s.chunk)])
    return ahead


def _runner(schedule: Schedule):
    """Yield (host, step) in an order that respects the semantics, or raise on a deadlock.

    Each host's steps are queued per chunk; a step runs when it is first in its chunk's queue and
    (for a receive) a matching message is on the wire.
    """
    queues: dict[str, dict[int, deque[Step]]] = {}
    for host, steps in schedule.steps.items():
        if host not in schedule.hosts:
            raise ScheduleError(f"{schedule.scheme}: host {host} has steps but takes no part")
        per: dict[int, deque[Step]] = defaultdict(deque)
        for s in steps:
            if not 0 <= s.chunk < len(schedule.chunks):
                raise ScheduleError(f"{schedule.scheme}: {host} names chunk {s.chunk} of {len(schedule.chunks)}")
            if s.peer not in schedule.hosts or s.peer == host:
                raise ScheduleError(f"{schedule.scheme}: {host} exchanges with {s.peer!r}")
            per[s.chunk].append(s)
        queues[host] = per
    wire: dict[tuple[str, str, int], int] = Counter()
    pending = sum(len(q) for per in queues.values() for q in per.values())
    while pending:
        progressed = False
        for host, per in queues.items():
            for chunk, q in per.items():
                while q:
                    s = q[0]
                    if s.op == Op.SEND:
                        wire[(host, s.peer, chunk)] += 1
                    elif wire[(s.peer, host, chunk)]:
                        wire[(s.peer, host, chunk)] -= 1
                    else:
                        break
                    q.popleft()
                    pending -= 1
                    progressed = True
                    yield host, s
        if not progressed:
            stuck = sorted(
                f"{h}: {q[0].op} chunk {c} from {q[0].peer}" for h, per in queues.items() for c, q in per.items() if q
            )
            raise ScheduleError(f"{schedule.scheme}: deadlock, waiting: {'; '.join(stuck[:5])}")
    left = {k: v for k, v in wire.items() if v}
    if left:
        raise ScheduleError(f"{schedule.scheme}: messages nobody receives: {left}")


def execute(schedule: Schedule, grads: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run the schedule in memory on real arrays; returns every host's final buffer.

    The reference the engine is checked against: the same steps, the same sums, no network.
    """
    n = schedule.n_elems
    buf = {h: np.array(grads[h], dtype=np.float32, copy=True) for h in schedule.workers}
    buf.update({h: np.zeros(n, dtype=np.float32) for h in schedule.servers})
    for h, b in buf.items():
        if b.shape != (n,):
            raise ScheduleError(f"{schedule.scheme}: gradient of {h} has shape {b.shape}, schedule expects ({n},)")
    wire: dict[tuple[str, str, int], deque[np.ndarray]] = defaultdict(deque)
    for host, s in _runner(schedule):
        c = schedule.chunks[s.chunk]
        sl = slice(c.offset, c.offset + c.length)
        if s.op == Op.SEND:
            wire[(host, s.peer, s.chunk)].append(buf[host][sl].copy())
        elif s.op == Op.REDUCE:
            buf[host][sl] += wire[(s.peer, host, s.chunk)].popleft()
        else:
            buf[host][sl] = wire[(s.peer, host, s.chunk)].popleft()
    return buf


def pair_bytes(schedule: Schedule) -> Counter[tuple[str, str]]:
    """Payload bytes each (sender, receiver) pair carries in one synchronisation."""
    out: Counter[tuple[str, str]] = Counter()
    for host, steps in schedule.steps.items():
        for s in steps:
            if s.op == Op.SEND:
                out[(host, s.peer)] += schedule.chunks[s.chunk].nbytes
    return out


def host_bytes(schedule: Schedule) -> dict[str, tuple[int, int]]:
    """(sent, received) payload bytes per host."""
    sent: Counter[str] = Counter()
    recv: Counter[str] = Counter()
    for (a, b), n in pair_bytes(schedule).items():
        sent[a] += n
        recv[b] += n
    return {h: (sent[h], recv[h]) for h in schedule.hosts}


def chain_length(schedule: Schedule) -> int:
    """The longest chain of messages that depend on one another (RAT's Table 1 column).

    A message's depth is one more than the depth its chunk had at the sender when it was sent; a
    receive raises the chunk's depth at the receiver. PS gives 2, ring 2(W-1), RAT 2(l+1).
    """
    depth: dict[tuple[str, int], int] = Counter()
    wire: dict[tuple[str, str, int], deque[int]] = defaultdict(deque)
    longest = 0
    for host, s in _runner(schedule):
        key = (host, s.chunk)
        if s.op == Op.SEND:
            wire[(host, s.peer, s.chunk)].append(depth[key] + 1)
        else:
            depth[key] = max(depth[key], wire[(s.peer, host, s.chunk)].popleft())
            longest = max(longest, depth[key])
    return longest


def cross_region_bytes(schedule: Schedule, regions: Mapping[str, Sequence[str]]) -> list[int]:
    """Bytes between hosts in different regions, per level (0 = rack, 1 = pod, ...).

    `regions[host]` lists the host's region at each level, lowest first. On a tree-shaped network
    every such byte crosses that level's oversubscribed uplinks, which is what RAT minimises.
    """
    levels = max((len(v) for v in regions.values()), default=0)
    out = [0] * levels
    for (a, b), n in pair_bytes(schedule).items():
        for lvl in range(levels):
            if regions[a][lvl] != regions[b][lvl]:
                out[lvl] += n
    return out
