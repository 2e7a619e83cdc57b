"""Synchronisation schemes as schedules (see schedule.py for the semantics).

`compile_scheme(name, ...)` is the one entry point the engine, the counters and the flow model
use; a new scheme is one function here plus its tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from schemes.flat import halving_doubling, mesh, ps, ring
from schemes.hips import PIPELINE, hips
from schemes.hips import VARIANTS as HIPS_VARIANTS
from schemes.rat import rat
from schemes.schedule import Schedule, ScheduleError

#: scheme name -> what it needs beyond (workers, n_elems)
SCHEMES: dict[str, str] = {
    "ps": "servers: dedicated PS hosts (each holds S/P)",
    "mesh": "nothing (colocated PS: worker i serves shard i)",
    "ring": "nothing (worker order is the ring)",
    "halving-doubling": "nothing (any W; non-powers of two fold the extra workers in first)",
    "rat": "regions: each worker's region per oversubscribed level (rack, pod, ...)",
    "hips": "digits: every server's address (BCube, Torus; all servers are workers); stages ms/rs/ps per level",
    "hrs": "digits (as hips): RS in every stage",
    "hips-ms": "digits (as hips): MS in every stage",
}


def compile_scheme(
    name: str,
    workers: Sequence[str],
    n_elems: int,
    servers: Sequence[str] = (),
    regions: Mapping[str, Sequence[str]] | None = None,
    trees: int | None = None,
    digits: Mapping[str, Sequence[int]] | None = None,
    hips_stages: str | Sequence[str] | None = None,
    hips_parallel: bool = True,
    both_ways: bool = False,
    hips_pipeline: int | None = None,
) -> Schedule:
    """The schedule of scheme `name` for these workers and a gradient of `n_elems` float32.

    HiPS variants take the servers' address `digits` (`Kind.address_digits`), the per-level
    methods, whether h processes run in parallel, and whether rings run both ways
    (`Kind.rings_both_ways`)."""
    if name == "ps":
        return ps(workers, n_elems, servers)
    if name == "mesh":
        return mesh(workers, n_elems)
    if name == "ring":
        return ring(workers, n_elems)
    if name == "halving-doubling":
        return halving_doubling(workers, n_elems)
    if name == "rat":
        return rat(workers, n_elems, regions or {w: () for w in workers}, trees)
    if name in HIPS_VARIANTS:
        pipeline = PIPELINE if hips_pipeline is None else hips_pipeline
        return hips(workers, n_elems, digits or {}, hips_stages, hips_parallel, both_ways, name, pipeline)
    raise ScheduleError(f"unknown scheme {name!r}; schemes: {', '.join(SCHEMES)}")


__all__ = ["SCHEMES", "Schedule", "ScheduleError", "compile_scheme"]
