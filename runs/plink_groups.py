"""PLink's groups for one run (the job field `plink_groups`), and the files they leave.

- `probe`: ProbeEmbed (the paper's §4.1) on bandwidth probes: measured over the emulated network
  at the start of the run, before the first iteration (runs.probe: iperf3 in N-1 rounds of
  disjoint pairs), or, for the flow model, the same rounds on the model (models.flow.probes); the
  probes also give Quicktune its pairwise bandwidth (schemes.plink.quicktune).
- `racks`: the ground truth, the workers' racks in the topology model (schemes.plink.racks).
- `random`: the paper's Balanced Random, sqrt(n) groups of sqrt(n) hosts drawn with the job's seed.

`write` puts the probes and groups into a run's results folder: probes.json (every pair's value,
the rounds, the groups, AMI and PAIA against the racks) and probes.png (the pairwise heat map, the
paper's Fig. 2).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from models.flow.probes import probe_bandwidth
from runs.probe import Probes, embed_and_group, heatmap, true_places
from schemes.plink import racks
from schemes.registry import get as get_scheme
from topologies.files import write_json_atomic
from topologies.model import Network
from workloads import plink
from workloads.experiment import JobSpec

LOG = logging.getLogger(__name__)


def mode(job: JobSpec) -> str:
    """The job's grouping: its own field, else the plink scheme's default (a job copied to plink
    from another scheme, as `testbed simulate --scheme plink` does, has none of its own)."""
    return job.plink_groups or str(get_scheme("plink").job_defaults["plink_groups"])


def probe_seconds(job: JobSpec) -> float:
    return job.plink_probe_s or float(get_scheme("plink").job_defaults["plink_probe_s"])


@dataclass
class Grouped:
    """A run's groups: each worker's label, Quicktune's pairwise bandwidth where probes measured
    it, and how the groups score against the racks."""

    mode: str
    clusters: dict[str, str]
    bandwidth_mbps: dict[tuple[str, str], float] | None = None
    ami: float = float("nan")
    paia_raw: float | None = None
    paia_embedded: float | None = None
    probes: Probes | None = None
    probe_s: float = 0.0  # wall seconds the probing took
    where: str = ""  # emulated | flow model
    extra: dict[str, Any] = field(default_factory=dict)

    def options(self) -> dict[str, Any]:
        """What schemes.registry.gather takes from it."""
        return {"clusters": self.clusters, "bandwidth_mbps": self.bandwidth_mbps}

    def record(self) -> dict[str, Any]:
        """summary.json's `plink` entry (probes.json has every pair)."""
        out: dict[str, Any] = {
            "groups_mode": self.mode,
            "groups": _members(self.clusters),
            "ami_vs_racks": self.ami,
        }
        if self.probes is not None:
            vals = list(self.probes.values.values())
            out.update(
                {
                    "probed_on": self.where,
                    "probe_rounds": self.probes.rounds,
                    "probe_wall_s": round(self.probe_s, 2),
                    "probe_mbps_min": min(vals),
                    "probe_mbps_max": max(vals),
                    "paia_raw": self.paia_raw,
                    "paia_embedded": self.paia_embedded,
                }
            )
        return out


def _members(clusters: dict[str, str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for h, g in clusters.items():
        out.setdefault(g, []).append(h)
    return out


def _scored(net: Network, workers: Sequence[str], labels: Sequence[object]) -> float:
    truth = [r for r, _ in true_places(net, workers)]
    return plink.ami(truth, list(labels)) if len(set(truth)) > 1 or len(set(labels)) > 1 else 1.0


def without_probes(job: JobSpec, net: Network, workers: Sequence[str]) -> Grouped:
    """`racks` or `random` (nothing measured); `probe` needs `from_probes`."""
    m = mode(job)
    if m == "racks":
        clusters = racks(net, workers)
    elif m == "random":
        labels = plink.balanced_random(len(workers), seed=job.seed)
        clusters = {w: f"g{int(x)}" for w, x in zip(workers, labels, strict=True)}
    else:
        raise ValueError(f"plink_groups {m} needs probes (from_probes)")
    return Grouped(m, clusters, ami=_scored(net, workers, list(clusters.values())))


def from_probes(p: Probes, net: Network, seed: int, where: str, probe_s: float = 0.0) -> Grouped:
    """ProbeEmbed's groups from bandwidth probes (runs.probe.ALPHA's alpha, elasticity 1.5), with the
    probes as Quicktune's pairwise bandwidth."""
    g = embed_and_group(p, net, seed=seed)
    clusters = {w: f"g{lab}" for w, lab in zip(p.hosts, g.labels, strict=True)}
    return Grouped("probe", clusters, dict(p.values), g.ami, g.paia_raw, g.paia_embedded, p, probe_s, where)


def for_flow_model(job: JobSpec, net: Network, workers: Sequence[str], paper: bool = False) -> Grouped:
    """The job's groups where the flow model runs it: `probe` from probes on the model
    (models.flow.probes), the others as without_probes."""
    if mode(job) != "probe":
        return without_probes(job, net, workers)
    t0 = time.monotonic()
    values, rounds = probe_bandwidth(net, workers, paper)
    p = Probes("bandwidth", list(workers), values, rounds, "Mbit/s")
    return from_probes(p, net, job.seed, "flow model", time.monotonic() - t0)


def write(out: Path, g: Grouped, title: str) -> list[Path]:
    """probes.json and probes.png (where probes were measured) or groups.json, in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    if g.probes is None:
        path = out / "groups.json"
        write_json_atomic(path, g.record(), indent=1)
        return [path]
    p = g.probes
    record = {
        **g.record(),
        "kind": p.kind,
        "unit": p.unit,
        "rounds": p.rounds,
        "hosts": p.hosts,
        "probes": [{"a": a, "b": b, "value": v} for (a, b), v in sorted(p.values.items())],
        "labels": g.clusters,
    }
    path = out / "probes.json"
    write_json_atomic(path, record, indent=1)
    png = heatmap(p, out / "probes.png", f"{title}: pairwise {p.kind} ({p.unit}), {g.where}")
    LOG.info("plink: %s probes, groups %s, AMI vs racks %.2f", g.where, json.dumps(_members(g.clusters)), g.ami)
    return [path, png]
