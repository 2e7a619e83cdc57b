"""This machine's datapath ceiling: the aggregate one ovs-vswitchd thread carries faithfully.

The fixed budget of topologies/spec.py (900 Mbit/s at MTU 1500) came from a faster machine; a
fresh 2-core VM of the kind the testbed runs on held >= 95% only to 600 Mbit/s. So `testbed
doctor` measures this machine once and caches the figure (topologies.spec.record_ceiling, beside
the host-time and calibration caches in ~/.cache/psnet-testbed/): one for the datapath of frames
and, where runs use it, one for the datapath with userspace TSO (emulation.tso), which carries
more (1,050-1,200 against 1,800 Mbit/s here). The sweep's scale, the matrix's check and the
resource budget (workloads.budget) plan with the figure of the datapath runs get
(emulation.tso.ceiling), and say which figure they used.

The measurement is a short version of `scripts/bench_network.sh --only shaping`: the PSNet
prototype (6 flows through ECS and ToR, each its own bottleneck) brought up once, behind the
emulator lock like every emulation; its links are reshaped in place to each step's rate and six
iperf3 TCP flows run for a few seconds. The ceiling is the highest aggregate whose wire rate held
`TARGET` of the configured one, every lower step holding too (as benchmarks.network.ceiling).
"""

from __future__ import annotations

import logging
import os
import statistics
import time
from pathlib import Path

from emulation import measure, tso
from emulation.net import Testbed
from emulation.wire import header_factor
from topologies.build import build_network
from topologies.schema import parse_spec, read_yaml
from topologies.spec import DEFAULT_MTU, record_ceiling

LOG = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parent.parent
#: the network measured: the PSNet prototype, as the shaping benchmark
BASE = REPO / "topologies" / "psnet-testbed.yaml"
#: six flows, w1_t_1 -> ps1_1 and w1_t_2 -> ps1_2 for ToR t = 1..3: each its own NIC and bottleneck
PAIRS = [(f"w1_{t}_{i}", f"ps1_{i}") for t in (1, 2, 3) for i in (1, 2)]
#: aggregates tried, lowest first (Mbit/s over the 6 flows); stops at the first that fails
STEPS_MBPS = (300.0, 450.0, 600.0, 750.0, 900.0, 1050.0, 1200.0)
#: the steps of the datapath with userspace TSO (emulation.tso), which held 1,800 Mbit/s at 0.999
#: here; from 600, where frames hold on every machine measured, to save the probe's time
TSO_STEPS_MBPS = (600.0, 900.0, 1200.0, 1500.0, 1800.0)
#: seconds of each iperf3 sample (after its 1-s omitted start)
SAMPLE_S = 3.0
#: wire rate over configured rate that counts as faithful (benchmarks.network.FIDELITY_TARGET)
TARGET = 0.95


#: 1-minute load average per core above which the machine is too busy to measure: other work on
#: the two cores would be measured as the datapath's ceiling, and the figure would stick (cached)
BUSY_LOAD_PER_CORE = 1.0


class NotMeasured(RuntimeError):
    """The ceiling could not be measured faithfully now (a busy machine); nothing was cached."""


def measure_ceiling(steps: tuple[float, ...] = STEPS_MBPS, seconds: float = SAMPLE_S, queue: bool = True) -> dict:
    """Measure and cache this machine's ceiling at the default MTU, of the datapath of frames and,
    when runs may use it, of the one with userspace TSO; returns what was recorded (the TSO one's
    under "with_tso").
    Takes the emulator lock: PSNET_LOCK_WAIT_S queues behind another run when `queue`, else it
    raises TestbedError at once (`testbed doctor`'s automatic first measurement must
    not hang a check for the length of someone else's sweep)."""
    saved = os.environ.get("PSNET_LOCK_WAIT_S")
    if not queue:
        os.environ["PSNET_LOCK_WAIT_S"] = "0"
    try:
        got = _measure(steps, seconds, False)
        if tso.enabled():  # runs use it: its own figure (emulation.tso.ceiling)
            got["with_tso"] = _measure(TSO_STEPS_MBPS, seconds, True)
        return got
    finally:
        if not queue:
            if saved is None:
                os.environ.pop("PSNET_LOCK_WAIT_S", None)
            else:
                os.environ["PSNET_LOCK_WAIT_S"] = saved


def _measure(steps: tuple[float, ...], seconds: float, with_tso: bool) -> dict:
    data = read_yaml(BASE)
    first = steps[0] / len(PAIRS)
    spec = parse_spec({**data, "name": "ceiling-probe", "worker_mbps": first, "scale": 1}, str(BASE))  # type: ignore[dict-item]
    net = build_network(spec, str(BASE))
    rows: list[dict] = []
    best = None
    with Testbed(net, tso=with_tso) as tb:
        _refuse_if_busy()  # checked once the emulator is ours: queueing for it means others were busy
        t0 = time.monotonic()  # after the lock and the bring-up: the probe's own length
        for agg in steps:
            per_flow = agg / len(PAIRS)
            for a, b, paper in {(ln.a, ln.b, ln.paper_mbps) for ln in net.veth_links()}:  # each at its ratio to B_w
                tb.set_rate(a, b, paper * per_flow / first)
            for _ in range(2):  # a low sample once more: the host, not the datapath, may have stalled
                row = _sample(tb, agg, per_flow, seconds)
                rows.append(row)
                if min(row["wire_mean"], row["wire_min"]) >= TARGET:
                    break
            if min(row["wire_mean"], row["wire_min"]) < TARGET:
                break
            best = agg
        probe_s = time.monotonic() - t0
        timings = dict(tb.timings)
    if best is None:  # not even the lowest step: a busy machine, most likely; caching it would stick
        raise NotMeasured(
            f"not even {steps[0]:g} Mbit/s held {TARGET:.0%} (wire {rows[-1]['wire_min']:.0%}); nothing cached: "
            "measure again on an idle machine (testbed doctor --measure)"
        )
    detail = {
        "measured": time.strftime("%Y-%m-%d"),
        "target": TARGET,
        "sample_s": seconds,
        "probe_s": round(probe_s, 1),
        "bring_up_s": round(timings.get("bring_up_s", 0.0), 1),
        "lock_wait_s": round(timings.get("lock_wait_s", 0.0), 1),
        "load_before": round(os.getloadavg()[0], 2),
        "tso": tb.tso,  # the datapath measured: with userspace TSO or without
        # every step held: the ceiling is at least the top step, not where fidelity ends
        "at_least": best == steps[-1],
        "steps": rows,
    }
    path = record_ceiling(best, detail)
    LOG.info("datapath ceiling %g Mbit/s at MTU %d, cached in %s", best, DEFAULT_MTU, path)
    return {"mbps": best, **detail}


def _refuse_if_busy() -> None:
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    if load > BUSY_LOAD_PER_CORE * cores:
        raise NotMeasured(
            f"this machine is busy (load {load:.1f} on {cores} cores); nothing cached: measure on an idle machine "
            "(testbed doctor --measure)"
        )


def _sample(tb: Testbed, agg: float, per_flow: float, seconds: float) -> dict:
    """One iperf3 sample of the six flows at `per_flow` Mbit/s each: wire over configured rate."""
    rates = measure.iperf(tb, PAIRS, seconds)
    wire = [r.achieved_mbps / per_flow / header_factor(DEFAULT_MTU) for r in rates]
    row = {"aggregate_mbps": agg, "wire_mean": statistics.mean(wire), "wire_min": min(wire)}
    LOG.info("ceiling probe %g Mbit/s: wire mean %.3f, min %.3f", agg, row["wire_mean"], row["wire_min"])
    return row
