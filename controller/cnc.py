"""The CNC as an os-ken app: proactive routes on every switch whose role the CNC routes (all but the ECS)."""

from __future__ import annotations

from controller.programmer import Programmer
from topologies.model import Role


class CNCApp(Programmer):
    """Central routing: proactive rules on every switch whose role says the CNC routes it (ToRs,
    SuperNode, agg, core, BCube switches, Torus wires, and any role a kind defines so)."""

    @classmethod
    def roles(cls) -> frozenset[Role]:
        return frozenset(r for r in Role if not r.is_host and r.cnc)
