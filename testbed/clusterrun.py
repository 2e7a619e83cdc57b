"""`testbed run EXP --cluster FILE`: what the CLI sets up before the run pipeline runs as it
always does (runs.runner), with its network over the cluster file's servers.

The budget is the cluster's: each server is taken to be like this machine (N times its memory, its
cores and its datapath's faithful ceiling; `cluster_machine`), since the cluster file says
nothing of the servers' size. The runs inside `cluster_run` open a ClusterTestbed
(emulation.net.testbeds). TF tasks start as their own interpreters in their hosts (the fork
server, tfjob.forkserver, forks into a host's namespaces on this machine only), each importing
TensorFlow itself: ~20 s more per task at the start of a run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from emulation.cluster_inventory import ClusterInventory, load_cluster
from emulation.cluster_net import ClusterTestbed
from emulation.net import testbeds
from tfjob.forkserver import ENV_SWITCH
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
    if budget and exp.budget:
        machine = cluster_machine(Machine.here(topo.mtu), len(inv.servers))
        check_job(topo, str(topo_path), exp.all_jobs, exp.compress, experiment, machine)
    with cluster_testbeds(inv):
        yield


@contextmanager
def cluster_testbeds(cluster: str | ClusterInventory) -> Iterator[None]:
    """Every run inside opens its network over the cluster file's servers (`cluster`: the file, or
    it loaded), its TF tasks started in their hosts there (module doc). `replay` and `matrix
    --cluster` use this alone: their points' budget is one machine's, so they run with the budget off."""
    inv = load_cluster(cluster) if isinstance(cluster, str) else cluster
    before = os.environ.get(ENV_SWITCH)
    os.environ[ENV_SWITCH] = "0"  # TF tasks as their own interpreters, started in their hosts (module doc)
    try:
        with testbeds(lambda net: ClusterTestbed(net, inv)):
            yield
    finally:
        if before is None:
            os.environ.pop(ENV_SWITCH, None)
        else:
            os.environ[ENV_SWITCH] = before


__all__ = ["cluster_machine", "cluster_run", "cluster_testbeds"]
