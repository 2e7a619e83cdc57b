"""Relaying servers' ceiling: up to which rate per cable this machine carries an all-to-all over
servers that relay (BCube, Torus) as a network would, measured, per kind.

`scripts/bench_alltoall.sh` sends a plain-TCP all-to-all (no engine) at several rates with the
bytes scaled like the rate, so a network's time is the same at every rate and only the emulator's
load changes. On the switched leaf-spine the all-to-all ends at 1.07-1.08x its busiest cable's
bound at every rate; where servers relay it ends later the higher the rate (Torus-3x3: 1.02x at
3.125 Mbit/s per cable, 2.67x at 25), while ovs-vswitchd stays below a core, the machine is idle
63% at p5 and no packet is lost (docs/measurements.md, "An all-to-all: the network's share and the
engine's"). The fidelity verdict's other signs (a starved machine, datapath drops) miss it, so the
benchmark's figures are kept here, per machine (beside the datapath ceiling's cache), and a run
whose job relays through servers at a rate above the kind's ceiling is judged not faithful.

The ceiling of a kind: its time at the lowest rate measured is the network's (a real network's
time does not depend on the scale; BCube's 1.27x at 3.125 and at 6.25 is TCP's and the topology's,
not the load's), and the ceiling is the highest rate up to which every rate stayed within
`TOLERANCE` of it. Rates above the highest measured are not judged when none failed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from topologies.files import write_json_atomic
from topologies.model import Network
from topologies.spec import cache_dir, machine_key, read_cache

#: a rate whose all-to-all took more than this times the lowest rate's is the emulator's
TOLERANCE = 1.10


def cache_file() -> Path:
    """The relay ceilings' cache, in topologies.spec.cache_dir() beside the datapath ceiling's."""
    return cache_dir() / "relay-ceiling.json"


@dataclass(frozen=True)
class Ceiling:
    """A kind's measured ceiling: `mbps` held, `failed_mbps` the lowest rate that did not (None:
    none failed, so no rate is judged), with its time over the lowest rate's."""

    kind: str
    mbps: float
    failed_mbps: float | None
    failed_ratio: float | None
    measured: str
    topology: str

    def over(self, cable_mbps: float) -> bool:
        """Is a run at `cable_mbps` per cable above what held?"""
        return self.failed_mbps is not None and cable_mbps > self.mbps * (1 + 1e-9)

    def reason(self, cable_mbps: float) -> str:
        return (
            f"servers relay its traffic at {cable_mbps:g} Mbit/s per cable, above the {self.mbps:g} up to which "
            f"this machine carried a plain-TCP all-to-all on a {self.kind} ({self.topology}) within "
            f"{TOLERANCE - 1:.0%} of its lowest rate's time (at {self.failed_mbps:g} Mbit/s: "
            f"{self.failed_ratio:.2f}x; scripts/bench_alltoall.sh, {self.measured}): the emulator set the pace; "
            f"raise scale so cables run at {self.mbps:g} Mbit/s or less"
        )


def ceiling_of(kind: str, ratios: dict[float, float], measured: str = "?", topology: str = "?") -> Ceiling:
    """The ceiling from {Mbit/s per cable: the all-to-all's end over its bound} (module doc)."""
    rates = sorted(ratios)
    base = ratios[rates[0]]
    held = rates[0]
    for r in rates[1:]:
        if ratios[r] > base * TOLERANCE:
            return Ceiling(kind, held, r, ratios[r] / base, measured, topology)
        held = r
    return Ceiling(kind, held, None, None, measured, topology)


def record(kind: str, topology: str, ratios: dict[float, float], measured: str, path: Path | None = None) -> Ceiling:
    """Keep this machine's figures for `kind` (rates measured now replace the same rates before) and
    return the kind's ceiling over all of them."""
    p = path or cache_file()
    data = read_cache(p)
    mine = data.get(machine_key()) if isinstance(data.get(machine_key()), dict) else {}
    entry = mine.get(kind) if isinstance(mine.get(kind), dict) else {}
    old = entry.get("ratios", {}) if entry.get("topology") == topology else {}
    merged = {float(k): float(v) for k, v in old.items()} | {float(k): float(v) for k, v in ratios.items()}
    mine[kind] = {"topology": topology, "measured": measured, "ratios": {f"{k:g}": v for k, v in merged.items()}}
    data[machine_key()] = mine
    p.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(p, data, indent=2, sort_keys=True)
    return ceiling_of(kind, merged, measured, topology)


def measured(kind: str, path: Path | None = None) -> Ceiling | None:
    """This machine's ceiling for `kind`, or None when the benchmark never ran it here."""
    mine = read_cache(path or cache_file()).get(machine_key())
    entry = mine.get(kind) if isinstance(mine, dict) else None
    try:
        ratios = {float(k): float(v) for k, v in entry["ratios"].items()}  # type: ignore[index]
        return ceiling_of(kind, ratios, str(entry.get("measured", "?")), str(entry.get("topology", "?")))  # type: ignore[union-attr]
    except (TypeError, KeyError, ValueError, AttributeError, IndexError):
        return None  # a hand-edited or damaged entry (no ratios, say): not measured here


@dataclass(frozen=True)
class RelayLoad:
    """A run's relaying, for its verdict: the kind, the fastest cable of a relaying server, and the
    kind's measured ceiling (None: not measured on this machine)."""

    kind: str
    cable_mbps: float
    ceiling: Ceiling | None

    @property
    def over(self) -> bool:
        return self.ceiling is not None and self.ceiling.over(self.cable_mbps)

    @property
    def text(self) -> str:
        if self.ceiling is None:
            return (
                f"servers relay at {self.cable_mbps:g} Mbit/s per cable, a rate not judged on this machine "
                f"(scripts/bench_alltoall.sh measures the {self.kind}'s)"
            )
        if self.over:
            return self.ceiling.reason(self.cable_mbps)
        return f"servers relay at {self.cable_mbps:g} Mbit/s per cable, within the {self.kind}'s measured ceiling"


def relay_load(net: Network, pairs: Iterable[tuple[str, str]], path: Path | None = None) -> RelayLoad | None:
    """The RelayLoad of a job exchanging between `pairs` (either direction) on `net`: None unless
    some pair's route crosses a server between its ends (the kind's own routes: Torus's dimension
    order, BCube's digit order). HiPS's stages pair neighbours only and relay nothing."""
    if not any(n.relay for n in net.nodes.values()):
        return None
    relays = set()
    for a, b in pairs:
        crossed = net.family.relay_hosts(net, a, b) or ()
        relays.update(crossed[1:-1])
    rates = [ln.mbps for h in sorted(relays) for ln in net.links_of(h)]
    return RelayLoad(net.spec.kind, max(rates), measured(net.spec.kind, path)) if rates else None


__all__ = ["TOLERANCE", "Ceiling", "RelayLoad", "cache_file", "ceiling_of", "measured", "record", "relay_load"]
