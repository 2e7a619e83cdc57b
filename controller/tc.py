"""Topology controller (TC): the circuit map of each module's ECS.

A circuit joins one worker port of the ECS to one ToR-facing port, 1:1 (Section 3.1). The TC
spreads workers equally over the ToRs (the paper's goal for a circuit configuration), or takes
the deployment worker(i,j,k) written in the topology file. Pure functions: the os-ken ECS app
programs what these return, and tests check them without a switch.
"""

from __future__ import annotations

from topologies.kinds.psnet import PSNetSpec
from topologies.model import Link, LinkKind, Network, Role

#: worker name -> the ECS-ToR link (a "slot" of a ToR) its circuit uses
Circuits = dict[str, Link]


class CircuitError(ValueError):
    """A circuit request that the ECS cannot carry out (no free port, unknown worker or ToR)."""


def slots(net: Network, tor: str) -> list[Link]:
    """ECS-facing links of a ToR, in port order."""
    return sorted((ln for ln in net.links_of(tor) if ln.kind is LinkKind.ECS_TOR), key=lambda ln: ln.port_of(tor))


def worker_link(net: Network, worker: str) -> Link:
    """The cable between a worker and its module's ECS."""
    (ln,) = [ln for ln in net.links_of(worker) if ln.kind is LinkKind.WORKER_ECS]
    return ln


def module_tors(net: Network, module: int) -> list[str]:
    return [n.name for n in net.by_role(Role.TOR) if n.module == module]


def initial_circuits(net: Network) -> Circuits:
    """The circuit map at start: the file's deployment per module, else balanced over the ToRs.

    Workers stay on their home ToR (the one their address names) where the deployment allows,
    so the fewest circuits differ from the default layout.
    """
    if not net.family.has_ecs:
        return {}
    spec: PSNetSpec = net.spec  # type: ignore[assignment]
    circuits: Circuits = {}
    for m, dep in enumerate(spec.deployments(), start=1):
        tors = module_tors(net, m)
        workers = [w for w in net.workers() if w.module == m]
        if dep is None:  # balanced: as equal as W allows, which is what home ToRs already are
            counts = [sum(1 for w in workers if w.index == i + 1) for i in range(len(tors))]
        else:
            counts = list(dep)
        placed: dict[int, list[str]] = {i: [] for i in range(len(tors))}
        spill = []
        for w in workers:
            i = w.index - 1
            (placed[i] if len(placed[i]) < counts[i] else spill).append(w.name)
        for i in range(len(tors)):
            while len(placed[i]) < counts[i]:
                placed[i].append(spill.pop(0))
        for i, names in placed.items():
            free = slots(net, tors[i])
            for name in names:
                circuits[name] = free.pop(0)
    return circuits


def recircuit(net: Network, circuits: Circuits, worker: str, tor: str, down: frozenset = frozenset()) -> Circuits:
    """A new circuit map with `worker` moved to the first free, working slot of `tor`."""
    if worker not in circuits:
        raise CircuitError(f"{worker} is not a worker on an ECS; workers: {', '.join(sorted(circuits))}")
    if tor not in net.nodes or net.nodes[tor].role != Role.TOR:
        raise CircuitError(f"{tor} is not a ToR; ToRs: {', '.join(n.name for n in net.by_role(Role.TOR))}")
    if net.nodes[tor].module != net.nodes[worker].module:
        raise CircuitError(f"{tor} is not in {worker}'s module: an ECS only reaches its own ToRs")
    used = {ln.key for w, ln in circuits.items() if w != worker}
    for ln in slots(net, tor):
        if ln.key not in used and ln.key not in down:
            return {**circuits, worker: ln}
    raise CircuitError(f"{tor} has no free working ECS-facing port for {worker}")


def deployment(net: Network, circuits: Circuits) -> dict[int, list[int]]:
    """worker(i,j,k) per module, as the paper writes deployments (PSNet only)."""
    out: dict[int, list[int]] = {}
    if not net.family.has_ecs:
        return out
    for m in sorted({n.module for n in net.by_role(Role.TOR)}):
        tors = module_tors(net, m)
        out[m] = [sum(1 for ln in circuits.values() if ln.b == t) for t in tors]
    return out


def tor_works(net: Network, tor: str, down: frozenset) -> bool:
    """A ToR a worker can be circuited to: its cables to every live PS of its module are up (a PS
    whose every cable is down has failed and does not count)."""
    for ln in net.links_of(tor):
        if ln.kind is not LinkKind.PS_TOR or ln.key not in down:
            continue
        ps = ln.other(tor)
        if any(other.key not in down for other in net.links_of(ps)):
            return False
    return any(ln.key not in down for ln in slots(net, tor))


def repair(net: Network, circuits: Circuits, down: frozenset, home: Circuits) -> Circuits:
    """The TC's reaction to failed or repaired cables (Section 3.4: the ECS re-circuits a worker
    whose ToR, ECS-ToR cable or ToR-PS cable failed to another ToR of its module).

    Workers whose circuit is broken move, one by one, to the working ToR holding the fewest
    workers. Workers away from their `home` circuit (the last one chosen on purpose: the file's
    deployment or a `reconfigure`) go back to it once it works again. A worker whose own cable
    to the ECS is down cannot be helped and keeps its circuit; with no working ToR left, the CNC
    routes what it can.
    """
    out = dict(circuits)
    used = {ln.key for ln in out.values()}
    for w, slot in sorted(out.items()):
        want = home.get(w)
        if want is None or slot.key == want.key or want.key in down or want.key in used:
            continue
        if tor_works(net, want.b, down):
            used.discard(slot.key)
            used.add(want.key)
            out[w] = want
    for w, slot in sorted(out.items()):
        if worker_link(net, w).key in down:
            continue
        if slot.key not in down and tor_works(net, slot.b, down):
            continue
        tors = [t for t in module_tors(net, net.nodes[w].module) if t != slot.b and tor_works(net, t, down)]
        tors.sort(key=lambda t: (sum(1 for ln in out.values() if ln.b == t), t))
        for t in tors:
            free = [ln for ln in slots(net, t) if ln.key not in used and ln.key not in down]
            if free:
                used.discard(slot.key)
                used.add(free[0].key)
                out[w] = free[0]
                break
    return out
