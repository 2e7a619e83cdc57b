"""Synchronisation schemes as schedules (see schedule.py for the semantics).

Every scheme is an entry of the registry (schemes/registry.py: its needs, how it runs, its
compile, why_not, bound, formula and flow-model traffic); `compile_scheme(name, ...)` compiles
one by name for the counters, the flow model and the tests. A new scheme is its schedule module
plus one registry line plus its tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from schemes.registry import SCHEMES, Need, SchemeInputs, SchemeSpec, gather, get, register, unregister
from schemes.schedule import Schedule, ScheduleError


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
    (`Kind.rings_both_ways`); schemes ignore what they do not need. From a built network,
    `gather` collects these inputs as the runs do."""
    spec = get(name)
    inputs = SchemeInputs(
        tuple(workers), n_elems, tuple(servers), regions or {}, digits or {}, both_ways, trees,
        hips_stages, hips_parallel, hips_pipeline,
    )  # fmt: skip
    return spec.compile(inputs)


__all__ = [
    "SCHEMES",
    "Need",
    "Schedule",
    "ScheduleError",
    "SchemeInputs",
    "SchemeSpec",
    "compile_scheme",
    "gather",
    "get",
    "register",
    "unregister",
]
