"""A Testbed whose network runs over several servers (`--cluster`): the same life cycle as
emulation.net's, with Mininet's cluster edition underneath (emulation.cluster).

    with ClusterTestbed("topologies/fattree-k4.yaml", load_cluster("cluster.yaml")) as tb:
        tb.host("h0_0_0").cmd("ping -c1 10.3.1.2")

What differs from one machine: the model is partitioned over the servers first
(emulation.placement, by the traffic of `pair_weight` when given); the controller stays here,
reached through each server's reverse tunnel; root-namespace commands on a switch's ports run on
its server; batch files are fed to `tc`/`ip` over SSH, since the servers share no filesystem; the
run folder records the servers, and every exit path deletes the run's bridges and tunnels there.
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Mapping
from pathlib import Path

from mininet.net import Mininet

from emulation import registry
from emulation.bringup import ProbedController, RegisteredNet, TestbedError
from emulation.cluster import Cluster, make_cluster_mininet
from emulation.cluster_inventory import ClusterInventory
from emulation.cluster_monitor import ClusterMonitor
from emulation.flows import PERIOD_S, DpFlow, FlowSampler, Stream, parse_dump, parse_ss
from emulation.net import Testbed
from emulation.placement import Placement, cable_traffic, place
from emulation.relaying import RelayLoad
from topologies.model import Network

LOG = logging.getLogger(__name__)


class ClusterNet(RegisteredNet):
    """RegisteredNet whose bridges and host shells live on the servers: nothing of them is
    recorded as a local process or interface (a server's PIDs mean nothing here); the run folder
    records the servers, and the bridges are tagged and deleted on them."""

    def __init__(self, model: Network, source: str, inv: ClusterInventory) -> None:
        super().__init__(model, source)
        self.inv = inv
        self.cluster: Cluster | None = None

    def open(self, lock_wait_s: float) -> None:
        super().open(lock_wait_s)
        nodes = self.model.nodes
        switch_ends = {ln.intf(e) for ln in self.model.veth_links() for e in (ln.a, ln.b) if not nodes[e].is_host}
        self.record(root_intfs=[], cluster=[s.name for s in self.inv.servers], cluster_intfs=sorted(switch_ends))
        self.cluster = Cluster(self.inv, self.run_dir, self.run_id)

    def build(self, mn: Mininet) -> Mininet:
        self.mn = mn
        mn.build()
        return mn

    def start(self) -> None:
        assert self.mn is not None, "build() first"
        self.mn.start()
        for sw in self.mn.switches:
            sw.cmd(f"ovs-vsctl set bridge {sw.name} external-ids:{registry.TAG}={self.run_id}")

    def stop_mininet(self) -> None:
        if self.mn is None:
            return
        super().stop_mininet()  # Mininet's own stop; its local bridge sweep finds none
        if self.cluster is not None:
            state = registry.load(self.run_dir)
            left = self.cluster.clean_servers(state.get("cluster_intfs", []), state.get("bridges", []))
            if left:
                LOG.info("removed on the servers what Mininet's stop left: %s", ", ".join(left))

    def close(self) -> None:
        """Stop Mininet (its clean-up on the servers needs the logins), close the logins, then
        what RegisteredNet.close does here (the run folder holds the master connections' sockets)."""
        try:
            self.stop_mininet()
        finally:
            if self.cluster is not None:
                self.cluster.close()
                self.cluster = None
                self.record(cluster=[])  # cleaned: the registry's sweep has nothing to log in for
            super().close()


class ClusterFlowSampler(FlowSampler):
    """emulation.flows' sampler over several servers: each read is one SSH command per server.

    The sockets: `ss` in each of the server's host namespaces (`nsenter` on the host shell's PID
    there, which the cluster edition reads from the remote shell). The flows: the server's own
    datapath dump. The dumps are merged into one: a connection is followed across a cut cable
    because its two VXLAN ends bear the model's interface names, as a veth's would, so the flow
    that matches it on the far server is found by the port it entered by there."""

    cluster: Cluster
    servers: list[str]
    pids_on: dict[str, list[int]]

    @classmethod
    def of(cls, tb, period_s: float = PERIOD_S) -> ClusterFlowSampler:
        sampler = super().of(tb, period_s)
        sampler.cluster, sampler.servers = tb.cluster, list(tb.placement.servers)
        sampler.pids_on = {}
        for host, pid in sampler.pids.items():
            sampler.pids_on.setdefault(tb.server_of(host), []).append(pid)
        return sampler

    def _sockets(self) -> dict[Stream, int]:
        out: dict[Stream, int] = {}
        for server, pids in sorted(self.pids_on.items()):
            line = f"for p in {' '.join(map(str, pids))}; do nsenter -t $p -n ss -tinHO state connected; done"
            out.update(parse_ss(self.cluster.run(server, line, check=False).stdout))
        return out

    def _dump(self) -> list[DpFlow]:
        dump = "ovs-appctl dpctl/dump-flows --names"
        return parse_dump("".join(self.cluster.run(s, dump, check=False).stdout for s in self.servers))


class ClusterTestbed(Testbed):
    """A running emulation of one topology over the cluster file's servers (module doc)."""

    def __init__(
        self,
        topology: str | Path | Network,
        inv: ClusterInventory,
        pair_weight: Mapping[tuple[str, str], float] | None = None,
        placement: Placement | None = None,
        ready_timeout_s: float = 60.0,
    ) -> None:
        super().__init__(topology, ready_timeout_s=ready_timeout_s)
        self.inv = inv
        self.run = ClusterNet(self.model, self.source, inv)
        names = [s.name for s in inv.servers]
        self.placement = placement or place(self.model, names, cable_traffic(self.model, pair_weight))
        LOG.info("placement: %s", self.placement.text())

    @property
    def cluster(self) -> Cluster:
        assert self.run.cluster is not None, "testbed is not running"
        return self.run.cluster

    def _make_mininet(self) -> Mininet:
        self.cluster.check(self.model.spec.mtu)
        self.cluster.open_controller_tunnels(self.of_port)
        mn = make_cluster_mininet(self.model, self.placement, self.cluster, protocols="OpenFlow13", failMode="secure")
        # Mininet's own addController: the cluster edition's would move it off loopback
        Mininet.addController(mn, ProbedController("c0", ip="127.0.0.1", port=self.of_port))
        return mn

    def _use_tso(self) -> bool:
        """Off: each server's ovs-vswitchd has its own setting, and the tunnels are not measured with it."""
        return False

    def server_of(self, node: str) -> str:
        return self.placement.server_of[node]

    def _root_shell(self, switch: str):
        assert self.mn
        server = self.server_of(switch)
        return next(sw for sw in self.mn.switches if self.server_of(sw.name) == server)

    def _batch(self, node, tool: str, text: str) -> None:
        """Fed over SSH on the node's server (inside a host's namespace through mnexec -a)."""
        (self.run_dir / f"{tool}-{node.name}.batch").write_text(text)
        argv = [tool, "-batch", "-"]
        if node.inNamespace:
            argv = ["mnexec", "-a", str(node.pid), *argv]
        r = self.cluster.run(node.server, shlex.join(argv), stdin=text, check=False)
        if r.returncode != 0:
            raise TestbedError(f"{node.name} on {node.server}: {tool} -batch failed: {(r.stderr or r.stdout)[-300:]}")

    def monitor(self, relay: RelayLoad | None = None) -> ClusterMonitor:
        """The run's fidelity monitor over every server (emulation.cluster_monitor)."""
        return ClusterMonitor(self, relay=relay)

    def flow_sampler(self) -> ClusterFlowSampler:
        """C on the busiest shared link, from every server's sockets and datapath (ClusterFlowSampler)."""
        return ClusterFlowSampler.of(self)

    def _room_for_queues(self) -> None:
        """Each server's ovs-vswitchd takes the send buffer its own set-up gave it (scripts/setup.sh
        sets the default every new socket gets); it is not enlarged from here."""
        LOG.debug("send buffers: left to each server's set-up")


__all__ = ["ClusterFlowSampler", "ClusterNet", "ClusterTestbed"]
