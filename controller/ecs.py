"""The ECS and its CCC as an os-ken app: circuits are port-to-port rules on the ECS bridge."""

from __future__ import annotations

import time

from controller.programmer import Programmer
from topologies.model import Role


class ECSApp(Programmer):
    """The ECS and its CCC: circuits as port-to-port rules, with an optional dark period."""

    ROLES = frozenset({Role.ECS})

    def switch_circuit(self, ecs: str, dark_ms: float) -> None:
        """Program a changed circuit map on one ECS: tear down, stay dark, then set up."""
        with self.fabric.lock:
            want = self.fabric.desired.get(ecs, set())
            have = self.fabric.installed.get(ecs, set())
            keep = have & want
            if keep == want == have:
                return  # the circuits did not change (e.g. moved to the ToR it is on): nothing goes dark
            self.fabric.desired[ecs] = keep
        self.sync(ecs)  # old circuits gone: the worker is dark from here
        if dark_ms > 0:
            time.sleep(dark_ms / 1000.0)
        with self.fabric.lock:
            self.fabric.desired[ecs] = want
        self.sync(ecs)
