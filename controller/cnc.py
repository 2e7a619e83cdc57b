"""The CNC as an os-ken app: proactive routes on every switch that is not an ECS."""

from __future__ import annotations

from controller.programmer import Programmer
from topologies.model import Role


class CNCApp(Programmer):
    """Central routing: proactive rules on ToRs, SuperNode, agg, core, BCube switches, Torus wires."""

    ROLES = frozenset({Role.TOR, Role.SUPERNODE, Role.AGG, Role.CORE, Role.BSWITCH, Role.WIRE})
