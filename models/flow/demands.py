"""One iteration's traffic as messages: the TF PS job in two phases, or a scheme's schedule as a DAG
(each scheme's registry entry says which: schemes.registry FlowTraffic).

A `Traffic` is plain data (picklable, it crosses into the simulation subprocess): messages
(sender, receiver, bytes), each with a gate it waits for, and the phase barriers.

Schedule semantics are schemes/schedule.py's: per host and chunk the steps run in order, a send
never blocks but waits for every earlier receive into its chunk at that host, and the k-th send
of chunk c from a to b is the k-th receive of c at b from a. A gate is therefore (host, chunk,
n): open once the first n receives of that chunk at that host have arrived. Messages of one
(sender, receiver) pair go one after another, as the engine's one connection per pair (and TF's
one connection per worker-PS pair) carries them.
"""

from __future__ import annotations

from collections import defaultdict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.tc import Circuits
from schemes.registry import DEFAULT as DEFAULT_SCHEME
from schemes.registry import FlowTraffic, gather
from schemes.registry import get as get_scheme
from schemes.schedule import ELEM_BYTES, Op, Schedule
from topologies.model import Network

#: the scheme a job runs by default: TF's parameter-server job (tfjob/psjob.py)
TF_PS = DEFAULT_SCHEME


@dataclass
class Traffic:
    """Messages of one iteration. `gate[i]` is None (free once its phase starts) or the
    (host, chunk, n) it waits for; `recv_slot[i]` is the (receiver, chunk, index) it fills."""

    name: str
    src: list[str] = field(default_factory=list)
    dst: list[str] = field(default_factory=list)
    nbytes: list[float] = field(default_factory=list)
    phase: list[int] = field(default_factory=list)
    gate: list[tuple[str, int, int] | None] = field(default_factory=list)
    recv_slot: list[tuple[str, int, int] | None] = field(default_factory=list)
    phases: list[str] = field(default_factory=lambda: ["all"])
    #: RAT's paused senders: per host, the windows (start, end), in seconds from the iteration's
    #: start, in which it sends nothing (a message it has in flight stops, one that becomes ready
    #: waits for the window's end); engine.pauses draws them as the emulated runs do
    pauses: dict[str, list[tuple[float, float]]] = field(default_factory=dict)

    def add(self, src: str, dst: str, nbytes: float, phase: int = 0) -> int:
        self.src.append(src)
        self.dst.append(dst)
        self.nbytes.append(float(nbytes))
        self.phase.append(phase)
        self.gate.append(None)
        self.recv_slot.append(None)
        return len(self.src) - 1

    def __len__(self) -> int:
        return len(self.src)

    def pairs(self) -> set[tuple[str, str]]:
        return set(zip(self.src, self.dst, strict=True))

    def fan_in(self) -> int:
        """The most distinct senders one receiver takes messages from (ring 1, a PS's W): the
        calibration's flow-count term (models.flow.simgrid.FAN_IN_FACTOR)."""
        senders: dict[str, set[str]] = defaultdict(set)
        for a, b in zip(self.src, self.dst, strict=True):
            senders[b].add(a)
        return max((len(s) for s in senders.values()), default=1)

    def hosts(self) -> list[str]:
        return sorted(set(self.src) | set(self.dst))


def tf_ps(workers: Sequence[str], pss: Sequence[str], model_bytes: float, name: str = TF_PS) -> Traffic:
    """The TF PS job: every worker pushes S/P to every PS, then (a barrier) every PS sends it back.

    The paper's T_push then T_pull (Eqs. 1, 5-7); TF's real split is by whole variables
    (README, Known limits), the equations' and this model's is S/P."""
    t = Traffic(name, phases=["push", "pull"])
    share = model_bytes / len(pss)
    for w in workers:
        for p in pss:
            t.add(w, p, share, 0)
    for w in workers:
        for p in pss:
            t.add(p, w, share, 1)
    return t


def from_schedule(schedule: Schedule) -> Traffic:
    """A scheme's schedule as gated messages (see the module docstring for the rules)."""
    t = Traffic(schedule.scheme)
    received: dict[tuple[str, int], int] = defaultdict(int)  # (host, chunk) -> receives so far
    sends: dict[tuple[str, str, int], deque[int]] = defaultdict(deque)
    recvs: dict[tuple[str, str, int], deque[int]] = defaultdict(deque)
    for host, steps in schedule.steps.items():
        for s in steps:
            if s.op == Op.SEND:
                i = t.add(host, s.peer, schedule.chunks[s.chunk].nbytes)
                n = received[(host, s.chunk)]
                t.gate[i] = (host, s.chunk, n) if n else None
                sends[(host, s.peer, s.chunk)].append(i)
            else:
                recvs[(s.peer, host, s.chunk)].append(received[(host, s.chunk)])
                received[(host, s.chunk)] += 1
    for key, ids in sends.items():
        slots = recvs.get(key, deque())
        if len(slots) != len(ids):
            raise ValueError(f"{schedule.scheme}: {len(ids)} sends of {key} but {len(slots)} receives")
        for i, r in zip(ids, slots, strict=True):
            t.recv_slot[i] = (key[1], key[2], r)
    return t


def scheme_traffic(
    net: Network,
    circuits: Circuits,
    scheme: str,
    workers: Sequence[str],
    pss: Sequence[str],
    model_bytes: float,
    region_of: Mapping[str, Sequence[str]] | None = None,
    **options: Any,
) -> Traffic:
    """The traffic of `scheme` (a name of schemes.registry) for this job's hosts: TF's push and
    pull phases, or the scheme's schedule compiled from the network's inputs (regions, address
    digits, rings both ways: schemes.registry.gather) as the emulator's runs compile it, with the
    job's `options` (hips_stages, hips_parallel)."""
    spec = get_scheme(scheme)
    if spec.flow is FlowTraffic.PS_PHASES:
        return tf_ps(workers, pss, model_bytes, spec.name)
    n_elems = max(len(workers), round(model_bytes / ELEM_BYTES))
    return from_schedule(spec.compile(gather(net, spec, n_elems, workers, pss, region_of, **options)))
