"""PLink's bandwidth probes on the flow model: the rounds the emulated probes run (runs.probe), each
pair of a round sending one probe at once, on SimGrid with the controller's routes.

One simulation holds every round as a phase of its own (a barrier between rounds, as the emulated
rounds run one after the other), each probe `probe_bytes`; a pair's bandwidth is its bytes over
its time from its round's start. Under max-min sharing a probe that shares a cable with others of
its round is slower and one that has its path to itself runs at its path's rate: the locality the
emulated probes see, without their noise. `testbed simulate` groups a `plink_groups: probe` job
from these (runs.plink_groups) where no emulated network exists to probe.
"""

from __future__ import annotations

from collections.abc import Sequence

from models.flow.demands import Traffic
from models.flow.links import BYTES_PER_MBIT, platform
from models.flow.routes import flow_routes
from models.flow.simgrid import sim_config, simulate
from topologies.model import Network
from workloads.plink import probe_rounds

#: one probe's bytes in the model's units: long enough that the rates, not the latency, decide
PROBE_BYTES = 4e6


def probe_bandwidth(
    net: Network, hosts: Sequence[str], paper: bool = False, probe_bytes: float = PROBE_BYTES
) -> tuple[dict[tuple[str, str], float], int]:
    """(Mbit/s per probed pair (a, b), rounds): every pair once, in probe_rounds' rounds."""
    rounds = probe_rounds(list(hosts))
    t = Traffic("plink-probes", phases=[f"round {i + 1}" for i in range(len(rounds))])
    for i, pairs in enumerate(rounds):
        for a, b in pairs:
            t.add(a, b, probe_bytes, i)
    routes = flow_routes(net, t.pairs())
    cfg, _ = sim_config(calibrated=False)  # exact max-min: the probes' rates, not the emulator's quirks
    result = simulate(platform(net, routes, paper), t, cfg)
    starts = [sum(result.phase_s[:i]) for i in range(len(result.phase_s))]
    out = {}
    for i in range(len(t)):
        seconds = result.finish_s[i] - starts[t.phase[i]]
        out[(t.src[i], t.dst[i])] = t.nbytes[i] / max(seconds, 1e-12) / BYTES_PER_MBIT
    return out, len(rounds)
