"""Base of the apps that program switches: keep each switch at the fabric's desired flows.

The ECS app programs only ECS bridges, with port-to-port rules (a circuit: no L2 learning, no
IP); the CNC app programs every other switch with proactive rules from `controller.routing`.
Nothing floods: a packet no rule matches is dropped (no table-miss entry), and hosts have static
neighbour entries, so ARP never needs to leave a host. (os-ken loads one app class per module,
hence one module per app.)
"""

from __future__ import annotations

import threading

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3

from controller import ofctl
from controller.fabric import Fabric
from topologies.model import Role


class Programmer(app_manager.OSKenApp):
    """Keeps the switches of some roles programmed with the fabric's desired flows."""

    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]
    _CONTEXTS = {"fabric": Fabric}
    ROLES: frozenset[Role] = frozenset()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fabric: Fabric = kwargs["fabric"]
        self.barriers: dict[int, tuple[str, threading.Event]] = {}
        self.my_roles = self.roles()
        for role in self.my_roles:
            self.fabric.programmers[role] = self

    @classmethod
    def roles(cls) -> frozenset[Role]:
        """The switch roles this app programs, read when it starts (a plugin kind's roles exist by then)."""
        return cls.ROLES

    def mine(self, name: str) -> bool:
        return self.fabric.net.nodes[name].role in self.my_roles

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def _switch_features(self, ev):
        dp = ev.msg.datapath
        name = self.fabric.by_dpid.get(dp.id)
        if name is None:
            self.logger.warning("unknown switch dpid %016x connected; ignored", dp.id)
            return
        if not self.mine(name):
            return
        with self.fabric.lock:
            self.fabric.datapaths[name] = dp
            self.fabric.synced.discard(name)
            ofctl.clear(dp)
            self.fabric.installed[name] = set()
        self.sync(name, wait=False)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def _barrier_reply(self, ev):
        entry = self.barriers.pop(ev.msg.xid, None)
        if entry:
            name, done = entry
            self.fabric.synced.add(name)
            done.set()

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def _port_status(self, ev):
        msg = ev.msg
        name = self.fabric.by_dpid.get(msg.datapath.id)
        if name and self.mine(name):
            up = not (msg.desc.state & msg.datapath.ofproto.OFPPS_LINK_DOWN)
            self.fabric.log("port", switch=name, port=msg.desc.port_no, up=up)

    def sync(self, name: str, wait: bool = True, timeout: float = 10.0) -> bool:
        """Bring switch `name` to the desired flows by difference; optionally wait for the barrier."""
        with self.fabric.lock:
            dp = self.fabric.datapaths.get(name)
            if dp is None:
                return False
            new = set(self.fabric.desired.get(name, set()))
            done = threading.Event()
            xid = ofctl.program(dp, self.fabric.installed.get(name, set()), new)
            self.barriers[xid] = (name, done)
            self.fabric.installed[name] = new
        return done.wait(timeout) if wait else True

    def sync_all(self) -> int:
        """Sync every switch of this app's roles whose flows differ; returns how many changed."""
        changed = [
            n
            for n in self.fabric.datapaths
            if self.mine(n) and self.fabric.installed.get(n) != self.fabric.desired.get(n, set())
        ]
        for n in changed:
            self.sync(n)
        return len(changed)
