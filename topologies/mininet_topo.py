"""Mininet `Topo` built from the shared model: the same ports, MACs and DPIDs the controller uses.

Also usable with Mininet's own CLI, run by the venv's interpreter (the model needs its packages);
the userspace datapath must be named, since this kernel has no OVS module:

    .venv/bin/python /usr/bin/mn --custom topologies/mininet_topo.py \\
       --topo model,topologies/psnet-testbed.yaml --switch ovs,datapath=user,protocols=OpenFlow13 \\
       --controller remote

Links are plain veth pairs here; the testbed shapes every interface itself (HTB with an explicit
quantum, see emulation/shaping.py), because Mininet's TCLink sets no quantum and ignores rates
above 1000 Mbit/s silently. Cables that can never be a bottleneck (`Network.is_patch`) are OVS
patch ports (Mininet's OVSLink): one pass less through ovs-vswitchd per packet.
"""

from __future__ import annotations

from mininet.link import OVSLink
from mininet.topo import Topo

from topologies.build import load_network
from topologies.model import Network


class ModelTopo(Topo):
    """A Mininet topology that only transcribes a `Network` (ports decided by the model)."""

    def build(self, net: Network) -> None:
        self.model = net
        for node in net.nodes.values():
            if node.is_host:
                self.addHost(node.name, ip=None)
            else:
                self.addSwitch(node.name, dpid=f"{node.dpid:016x}")
        for ln in net.links:
            if net.is_patch(ln):
                self.addLink(ln.a, ln.b, port1=ln.port_a, port2=ln.port_b, cls=OVSLink)
            else:
                self.addLink(ln.a, ln.b, port1=ln.port_a, port2=ln.port_b)


def topo_from_file(path: str) -> ModelTopo:
    """`mn --topo model,FILE` entry point."""
    return ModelTopo(load_network(path))


topos = {"model": topo_from_file}
