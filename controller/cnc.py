"""The CNC as an os-ken app: proactive routes on every switch that is not an ECS."""

from __future__ import annotations

from controller.programmer import Programmer
from topologies.model import Role


class CNCApp(Programmer):
    """Central routing: proactive (src, dst) rules on ToRs, SuperNode, agg, core, BCube switches."""

    ROLES = frozenset({Role.TOR, Role.SUPERNODE, Role.AGG, Role.CORE, Role.BSWITCH})
