"""The flow model's time for one compiled schedule on its own network.

Exact max-min (SimGrid's CM02) over the schedule's messages, each gated on the ones it depends
on: what a perfect transport takes for this schedule. It is the engine's fair reference beside
the busiest cable's bytes over its rate (schemes.count), which no schedule with dependencies
reaches: halving-doubling's later steps wait on its earlier ones, RAT's trees on their
aggregators. `bench_schemes` prints the measured GST over both; `bench_flowmodel` fits its
factors on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from schemes.schedule import Schedule
    from topologies.model import Network


def schedule_time_s(net: Network, sched: Schedule, config: dict[str, str] | None = None) -> float:
    """Seconds one synchronisation of `sched` takes in the flow model on `net` at its emulated
    rates (`config`: SimGrid's settings; default exact max-min, uncalibrated)."""
    from models.flow.demands import from_schedule
    from models.flow.links import platform
    from models.flow.routes import flow_routes
    from models.flow.simgrid import BASE_CONFIG, simulate

    traffic = from_schedule(sched)
    routes = flow_routes(net, traffic.pairs())
    return simulate(platform(net, routes, False), traffic, dict(config or BASE_CONFIG)).iteration_s
