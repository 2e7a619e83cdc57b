"""The controller's shared state (an os-ken context): model, circuit map, failed links, switches.

The ECS app and the CNC app both hold this object (os-ken `_CONTEXTS`), so there is one circuit
map and one set of failed links in the controller. It keeps, per switch, the flows that are
installed, and programs only the difference when the desired set changes (a reconfiguration
touches a few rules, not the whole fabric). Every change is logged with a timestamp so the
paper's control sequence (TC -> CCC -> ECS -> CNC -> start) can be read back.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

from os_ken import cfg

from controller.routing import Flow, Group, LinkKey, compute_paths, switch_flows
from controller.tc import Circuits, deployment, initial_circuits, recircuit, repair, worker_link
from topologies.build import load_network
from topologies.model import Network, Role

LOG = logging.getLogger(__name__)

cfg.CONF.register_cli_opts(
    [
        cfg.StrOpt("topology", help="topology YAML file (the shared model)"),
        cfg.IntOpt("channel-port", default=0, help="loopback TCP port of the control channel"),
        cfg.StrOpt("event-log", default="", help="JSONL file of timestamped control events"),
        cfg.MultiStrOpt("kind-plugin", default=[], help="module:Class of a kind not shipped (topologies.kinds)"),
    ]
)


class Fabric:
    """Model + circuits + failed links, and the flows each connected switch holds."""

    def __init__(self, net: Network | None = None, event_log: str | None = None) -> None:
        self.net = net or load_network(cfg.CONF.topology)
        self.lock = threading.RLock()
        self.circuits: Circuits = initial_circuits(self.net)
        self.home: Circuits = dict(self.circuits)  # circuits chosen on purpose; failures move away from them
        self.down: set[LinkKey] = set()
        self.datapaths: dict[str, object] = {}  # switch name -> os-ken Datapath
        self.installed: dict[str, set[Flow | Group]] = {}
        self.synced: set[str] = set()
        self.by_dpid = {n.dpid: n.name for n in self.net.switches()}
        self.events: list[dict] = []
        path = event_log if event_log is not None else cfg.CONF.event_log
        self._log_file = Path(path) if path else None
        self.programmers: dict[Role, object] = {}  # role of switch -> app that programs it
        self.desired: dict[str, set[Flow | Group]] = {}
        self.recompute()

    # --- events -----------------------------------------------------------------------------
    def log(self, event: str, **fields: object) -> dict:
        """Record a timestamped control event (also appended to the JSONL event log)."""
        rec = {"t": time.time(), "event": event, **fields}
        with self.lock:
            self.events.append(rec)
            if self._log_file:
                with self._log_file.open("a") as f:
                    f.write(json.dumps(rec) + "\n")
        LOG.info("%s %s", event, fields)
        return rec

    # --- desired state ----------------------------------------------------------------------
    def recompute(self) -> dict[str, set[Flow | Group]]:
        """Desired flows of every switch from the current circuits and failed links."""
        with self.lock:
            paths = compute_paths(self.net, self.circuits, self.down)
            self.desired = switch_flows(self.net, self.circuits, paths, self.down)
            return self.desired

    def reconfigure(self, worker: str, tor: str) -> Circuits:
        """TC step: the circuit map with `worker` moved to `tor` (not yet programmed)."""
        with self.lock:
            self.circuits = recircuit(self.net, self.circuits, worker, tor, frozenset(self.down))
            self.home[worker] = self.circuits[worker]
            return self.circuits

    def repair(self) -> list[str]:
        """TC step after a failure or repair: re-circuit the workers it broke (or heals); returns
        the ECSs whose circuits changed (not yet programmed)."""
        with self.lock:
            new = repair(self.net, self.circuits, frozenset(self.down), self.home)
            moved = [w for w in new if new[w].key != self.circuits[w].key]
            self.circuits = new
            return sorted({worker_link(self.net, w).b for w in moved})

    def set_link(self, a: str, b: str, up: bool) -> list[LinkKey]:
        """Mark every cable between a and b failed or repaired; returns the links touched."""
        keys = [ln.key for ln in self.net.links_between(a, b)]
        if not keys:
            raise ValueError(f"no link between {a} and {b}")
        return self._mark(keys, up)

    def set_node(self, name: str, up: bool) -> list[LinkKey]:
        """Fail or repair a whole node (switch or host): every cable of it."""
        if name not in self.net.nodes:
            raise ValueError(f"no node {name}")
        return self._mark([ln.key for ln in self.net.links_of(name)], up)

    def _mark(self, keys: list[LinkKey], up: bool) -> list[LinkKey]:
        with self.lock:
            if up:
                self.down.difference_update(keys)
            else:
                self.down.update(keys)
        return keys

    def state(self) -> dict:
        """JSON-able view of the circuit map and failed links (read by the testbed and users)."""
        with self.lock:
            return {
                "circuits": {w: ln.b for w, ln in sorted(self.circuits.items())},
                "circuit_links": {w: list(ln.key) for w, ln in sorted(self.circuits.items())},
                "deployment": {str(m): d for m, d in deployment(self.net, self.circuits).items()},
                "down": sorted(list(k) for k in self.down),
            }

    def status(self) -> dict:
        with self.lock:
            names = set(self.by_dpid.values())
            return {
                "ready": self.synced >= names,
                "switches": len(names),
                "connected": len(self.datapaths),
                "synced": len(self.synced & names),
                "missing": sorted(names - self.synced),
            }
