"""`testbed run EXP --cluster FILE`: what the CLI sets up before the run pipeline runs as it
always does (runs.runner), with its network over the cluster file's servers.

The budget is the cluster's: each server is taken to be like this machine (N times its memory, its
cores and its datapath's faithful ceiling; `cluster_machine`), since the cluster file says
nothing of the servers' size. The runs inside `cluster_run` open a ClusterTestbed
(emulation.net.testbeds). A TF PS job is refused in one line: its tasks do not start on a remote
server yet (the scheme engine's processes do).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from emulation.cluster_inventory import load_cluster
from emulation.cluster_net import ClusterTestbed
from emulation.net import testbeds
from topologies.schema import InputError
from workloads.budget import Machine, check_job
from workloads.experiment import load_experiment


def cluster_machine(m: Machine, servers: int) -> Machine:
    """`servers` servers, each taken to be like `m` (module doc)."""
    return Machine(
        m.memory_mb * servers,
        m.cores * servers,
        m.ceiling_mbps * servers,
        f"{servers} servers, each taken as this machine: {m.ceiling_source}",
    )


@contextmanager
def cluster_run(experiment: str, cluster_file: str, budget: bool = True) -> Iterator[None]:
    """Check the experiment against the cluster (unless `budget` is off, or the file says so),
    then run what runs inside over its servers."""
    inv = load_cluster(cluster_file)
    exp, topo, topo_path = load_experiment(experiment)
    if not exp.main.engine:
        raise InputError(
            f"{experiment}: job.scheme: {exp.main.scheme} is a TF PS job, which --cluster does not run yet; "
            "give a scheme the engine runs (ring, rat, ps, ...) or run it without --cluster"
        )
    if budget and exp.budget:
        machine = cluster_machine(Machine.here(topo.mtu), len(inv.servers))
        check_job(topo, str(topo_path), exp.all_jobs, exp.compress, experiment, machine)
    with testbeds(lambda net: ClusterTestbed(net, inv)):
        yield


__all__ = ["cluster_machine", "cluster_run"]
