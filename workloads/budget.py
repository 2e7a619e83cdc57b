"""The resource budget: does a network and its job fit this machine, before anything is built?

Each kind caps its addresses at load time (topologies/kinds/), but a valid file can still ask for
more than the machine has: `workers: 600` is 600 Mininet hosts and 600 TensorFlow processes of
~650 MB each, which on a 24 GB machine ends in the kernel's OOM killer half-way through a bring-up
rather than in an error. So before Mininet starts (`testbed run`, `topo up`, `topo check`,
`replay`, `matrix`) the demand is set against what this machine has:

- memory (psutil's total, of which `MEMORY_SHARE` may be used: the OS, ovs-vswitchd, the
  controller and the testbed itself keep the rest): TF processes at `TF_PROCESS_MB` each (one per
  PS and worker of a TF PS job), engine processes (scheme jobs: one per host, `ENGINE_PROCESS_MB`
  plus a few copies of the gradient), Mininet hosts (`HOST_MB`) and switches (`SWITCH_MB`);
- cores: processes per core (`TF_PER_CORE` TF processes, `ENGINE_PER_CORE` engine processes);
- the datapath: the job's offered load (`offered_load_mbps`, Mbit/s x hops / 3) against the one
  ovs-vswitchd thread's faithful aggregate as measured on this machine (`testbed doctor`, cached;
  the fixed figure of topologies/spec.py only when nothing was measured), with `RATE_SLACK`.

A refusal is one `BudgetError` line naming the file, the field and the limit. `--no-budget` on the
command line, or `budget: off` in an experiment file, lets a file through for users who know
better (the per-process figures are estimates); address limits cannot be overridden.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

import psutil

from emulation import tso
from emulation.placement import servers_needed
from schemes.registry import DEFAULT as DEFAULT_SCHEME
from schemes.registry import SCHEMES, Need
from topologies import kinds
from topologies.build import build_network
from topologies.model import Network
from topologies.schema import InputError, TopologySpec
from workloads.experiment import ExperimentSpec, JobSpec

LOG = logging.getLogger(__name__)

#: one TF PS or worker task's resident memory (README: ~650 MB; an 8-process job ~6 GB)
TF_PROCESS_MB = 650.0
#: one engine process (`python -m engine.host`: numpy, the schedule), measured at 47 MB resident
#: on 2026-11-26; its gradient buffers come on top (`ENGINE_GRADIENT_COPIES` x the gradient)
ENGINE_PROCESS_MB = 60.0
ENGINE_GRADIENT_COPIES = 3
#: a Mininet host: its bash (3.7 MB resident), mnexec, the namespace and veth pair in the kernel
HOST_MB = 8.0
#: a userspace OVS bridge: its ports, flows and per-port buffers inside ovs-vswitchd (estimate)
SWITCH_MB = 16.0
#: the share of this machine's memory a run may plan to use
MEMORY_SHARE = 0.8
#: TF processes per core: the shipped 8-process jobs run 4 per core here; past this their host
#: time, not the network, is what a run measures
TF_PER_CORE = 16
#: engine processes per core: they mostly wait on sockets
ENGINE_PER_CORE = 256
#: offered load may exceed the datapath's faithful ceiling by this factor before a run is refused:
#: up to it the run is only judged (the fidelity verdict says whether the emulator kept up)
RATE_SLACK = 1.5
#: emulated switch hops that the ceiling was measured over (topologies.spec.FIDELITY_BUDGETS_MBPS)
BUDGET_HOPS = 3
#: host pairs whose paths the offered load's mean hop count is taken over, at most: every pair of
#: a 128-host FatTree (16,002) took 24 s of path search in each budget check; 1,000 evenly spread
#: pairs gave its mean within 0.07% in 1.2 s (a 64-host leaf-spine: 0.01%; `hop_sample`)
HOP_PAIRS = 1000
#: how an override is spelled in refusals
OVERRIDE = "--no-budget or budget: off to override"
OVERRIDE_TOPO = "--no-budget to override"


class BudgetError(InputError):
    """A file that would not fit this machine; the message is the one line shown to the user."""


@dataclass(frozen=True)
class Machine:
    """What this machine offers a run."""

    memory_mb: float
    cores: int
    ceiling_mbps: float
    ceiling_source: str

    @classmethod
    def here(cls, mtu: int = 1500) -> Machine:
        mbps, source = tso.ceiling(mtu)
        return cls(psutil.virtual_memory().total / 2**20, os.cpu_count() or 1, mbps, source)

    @property
    def usable_mb(self) -> float:
        return self.memory_mb * MEMORY_SHARE


@dataclass(frozen=True)
class Demand:
    """What a network and its job would take."""

    hosts: int
    switches: int
    tf_processes: int = 0
    engine_processes: int = 0
    engine_mb_each: float = ENGINE_PROCESS_MB
    offered_mbps: float = 0.0

    @property
    def tf_mb(self) -> float:
        return self.tf_processes * TF_PROCESS_MB

    @property
    def engine_mb(self) -> float:
        return self.engine_processes * self.engine_mb_each

    @property
    def network_mb(self) -> float:
        return self.hosts * HOST_MB + self.switches * SWITCH_MB

    @property
    def memory_mb(self) -> float:
        return self.tf_mb + self.engine_mb + self.network_mb


def _gb(mb: float) -> str:
    return f"{mb / 1024:.0f} GB" if mb >= 10 * 1024 else f"{mb / 1024:.1f} GB"


def problems(d: Demand, m: Machine) -> list[tuple[str, str]]:
    """(what, why) for each limit `d` breaks on `m`; `what` is 'tf', 'engine', 'network' or 'rate'
    (the caller turns it into the field to name). Empty when it fits."""
    out = []
    have = f"this machine has {_gb(m.memory_mb)} ({MEMORY_SHARE:.0%} usable: {_gb(m.usable_mb)})"
    if d.memory_mb > m.usable_mb:
        parts = {"tf": d.tf_mb, "engine": d.engine_mb, "network": d.network_mb}
        what = max(parts, key=parts.__getitem__)
        if what == "tf":
            why = f"{d.tf_processes} TF processes need ~{_gb(d.memory_mb)} (~{TF_PROCESS_MB:g} MB each)"
        elif what == "engine":
            why = f"{d.engine_processes} engine processes need ~{_gb(d.memory_mb)} (~{d.engine_mb_each:.0f} MB each)"
        else:
            why = f"{d.hosts} hosts and {d.switches} switches need ~{_gb(d.memory_mb)}"
        out.append((what, f"{why}; {have}"))
    if d.tf_processes > TF_PER_CORE * m.cores:
        out.append(("tf", f"{d.tf_processes} TF processes on {m.cores} cores (at most {TF_PER_CORE} per core)"))
    if d.engine_processes > ENGINE_PER_CORE * m.cores:
        out.append(
            ("engine", f"{d.engine_processes} engine processes on {m.cores} cores (at most {ENGINE_PER_CORE} per core)")
        )
    if d.offered_mbps > m.ceiling_mbps * RATE_SLACK:
        # a cluster's budget is its servers' ceilings with the same slack: the count it accepts, and
        # the count that keeps every server within its faithful ceiling
        hop_mbps = d.offered_mbps * BUDGET_HOPS
        n = servers_needed(hop_mbps, m.ceiling_mbps * RATE_SLACK, BUDGET_HOPS)
        faithful = servers_needed(hop_mbps, m.ceiling_mbps, BUDGET_HOPS)
        more = f" ({faithful} to keep each within its faithful ceiling)" if faithful > n else ""
        out.append(
            (
                "rate",
                f"offered load {d.offered_mbps:.0f} Mbit/s x-hop/{BUDGET_HOPS} is over {RATE_SLACK:g}x this machine's "
                f"faithful ceiling of {m.ceiling_mbps:.0f} Mbit/s ({m.ceiling_source}): needs {n} servers{more} at "
                f"{d.offered_mbps:,.0f} Mbit/s aggregate (--cluster; testbed topo place FILE --servers {faithful})",
            )
        )
    return out


# ---------------------------------------------------------------- demands


def offered_load_mbps(spec: TopologySpec, scheme: str = DEFAULT_SCHEME, net: Network | None = None) -> float:
    """Rate the job can move at once through the datapath, weighted by switch hops (normalised to
    the 3 hops the budget was measured over). PS jobs: the smaller of what the workers can send and
    what the PSs' cables can take (push and pull alternate, so one direction at a time); worker-
    to-worker schemes (mesh, ring, rat, ...): every worker sending at its rate, over the average
    path between workers (an upper bound: oversubscribed uplinks carry less); HiPS variants: every
    server sending on all its NICs at once (h parallel processes), over the paths within its groups.
    Which of these a scheme is follows from what it needs (schemes.registry: PS hosts, address digits)."""
    from controller.routing import compute_paths, path_nodes
    from controller.tc import initial_circuits

    net = net or build_network(spec)
    workers = sum(min(ln.mbps for ln in net.links_of(w.name)) for w in net.workers())
    digits = net.family.address_digits(net)
    needs = SCHEMES[scheme].needs if scheme in SCHEMES else frozenset()  # an unknown one: the job's check says so
    if Need.DIGITS in needs and digits:  # every server, on all its NICs at once, within its groups
        pairs = [(a, b) for a in digits for b in digits if sum(map(int.__ne__, digits[a], digits[b])) == 1]
        rate = sum(ln.mbps for h in digits for ln in net.links_of(h))
    elif Need.PS_HOSTS in needs:
        pairs = [(w.name, p.name) for w in net.workers() for p in net.pss()]
        rate = min(workers, sum(ln.mbps for p in net.pss() for ln in net.links_of(p.name)))
    else:
        pairs = [(a.name, b.name) for a in net.workers() for b in net.workers() if a.name != b.name]
        rate = workers
    pairs = hop_sample(pairs)
    paths = compute_paths(net, initial_circuits(net), pairs=pairs)
    hops = [sum(not net.nodes[n].is_host for n in path_nodes(net, paths[pr])) for pr in pairs if pr in paths]
    return rate * (sum(hops) / len(hops) if hops else 0) / BUDGET_HOPS


def hop_sample(pairs: list[tuple[str, str]], n: int | None = None) -> list[tuple[str, str]]:
    """At most `n` (`HOP_PAIRS`) of `pairs`, evenly spaced through the list (which runs source by source, so
    every source and every distance is in it): the budget needs their mean hop count, not every
    pair's path, and finding paths costs ~1 ms a pair."""
    n = n or HOP_PAIRS
    if len(pairs) <= n:
        return pairs
    return [pairs[i * len(pairs) // n] for i in range(n)]


def network_demand(net: Network) -> Demand:
    """A network with no job (`topo up`, `topo check`): its hosts and switches."""
    return Demand(hosts=len(net.hosts()), switches=len(net.switches()))


def job_demand(net: Network, spec: TopologySpec, jobs: list[JobSpec], compress: float = 1.0) -> Demand:
    """A network with its jobs: TF processes (one per PS and worker of each TF PS job; a standby
    starts only when a PS fails, in its place), or one engine process per host of a scheme job
    (per NIC with HiPS's parallel processes), and the offered load of the first job's scheme.
    The offered load is what a run would push, so a large network with few hosts in the job is
    judged by the job's scheme, not its size."""
    tf = engine = 0
    engine_mb = ENGINE_PROCESS_MB
    for j in jobs:
        if j.engine:
            needs = SCHEMES[j.scheme].needs if j.scheme in SCHEMES else frozenset()
            digits = net.family.address_digits(net) if Need.DIGITS in needs else {}
            if digits:
                per = max((len(d) for d in digits.values()), default=1) if j.hips_parallel else 1
                engine += len(digits) * per
            else:
                engine += len(net.workers()) + (len(net.pss()) if Need.PS_HOSTS in needs else 0)
            grad_mb = j.paper_bytes / (spec.scale * compress) / 2**20
            engine_mb = max(engine_mb, ENGINE_PROCESS_MB + ENGINE_GRADIENT_COPIES * grad_mb)
        else:
            tf += len(j.workers if j.workers is not None else net.workers())
            tf += len(j.ps if j.ps is not None else net.pss())
    base = network_demand(net)
    offered = offered_load_mbps(spec, jobs[0].scheme, net) if jobs else 0.0
    return Demand(base.hosts, base.switches, tf, engine, engine_mb, offered)


# ---------------------------------------------------------------- checks with one-line refusals


def _field(spec: TopologySpec, what: str, exp_field: str | None) -> str:
    """The field a refusal names: the one that sets the count or rate that broke the limit."""
    if what == "rate":
        return exp_field or "scale"
    if what in ("tf", "engine"):
        if exp_field:
            return exp_field
        return "workers" if "workers" in spec.model_fields_set else kinds.get(spec.kind).size_fields
    return kinds.get(spec.kind).size_fields


def _fix(what: str, d: Demand, m: Machine, spec: TopologySpec) -> str:
    """A concrete fix for the rate; the counts' fix is fewer hosts, which the field already says."""
    if what == "rate":
        return f"; set scale >= {spec.scale * d.offered_mbps / m.ceiling_mbps:.3g}"
    return ""


def check_topology(spec: TopologySpec, source: str, net: Network | None = None, machine: Machine | None = None) -> None:
    """Refuse (BudgetError) a network whose hosts and switches do not fit this machine."""
    m = machine or Machine.here(spec.mtu)
    net = net or build_network(spec, source)
    d = network_demand(net)
    for what, why in problems(d, m):
        raise BudgetError(f"{source}: {_field(spec, what, None)}: {why} ({OVERRIDE_TOPO})")
    LOG.debug("%s: within the budget: %s on %s", source, d, m)


def check_job(
    spec: TopologySpec,
    topo_source: str,
    jobs: list[JobSpec],
    compress: float = 1.0,
    exp_source: str | None = None,
    machine: Machine | None = None,
    net: Network | None = None,
    override: str = OVERRIDE,
) -> Demand:
    """Refuse (BudgetError) a network with its jobs that would not fit this machine. The file named
    is the one holding the field to change: the topology for its size and scale, the experiment
    where a job names its own hosts."""
    m = machine or Machine.here(spec.mtu)
    net = net or build_network(spec, topo_source)
    d = job_demand(net, spec, jobs, compress)
    named = next((f"job.{k}" for j in jobs for k in ("workers", "ps") if getattr(j, k) is not None), None)
    for what, why in problems(d, m):
        exp_field = named if what in ("tf", "engine") and named else None
        where = exp_source if exp_field and exp_source else topo_source
        fix = _fix(what, d, m, spec)
        raise BudgetError(f"{where}: {_field(spec, what, exp_field)}: {why}{fix} ({override})")
    LOG.debug("%s: within the budget: %s on %s", exp_source or topo_source, d, m)
    return d


def check_experiment(exp: ExperimentSpec, topo: TopologySpec, exp_source: str | Path, topo_source: str | Path) -> None:
    """`check_job` for an experiment file, unless the file says `budget: off`."""
    if not exp.budget:
        LOG.warning("%s: budget: off: the resource budget is not checked", exp_source)
        return
    check_job(topo, str(topo_source), exp.all_jobs, exp.compress, str(exp_source))


__all__ = [
    "BUDGET_HOPS",
    "BudgetError",
    "Demand",
    "Machine",
    "check_experiment",
    "check_job",
    "check_topology",
    "job_demand",
    "network_demand",
    "offered_load_mbps",
    "problems",
]
