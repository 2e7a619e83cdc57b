"""The controller's loopback control channel: the os-ken app that serves it.

The wire format and the client the testbed uses are in controller.channel_client (no os-ken
there). The requests are answered by `ChannelHandler`, a plain object over the shared Fabric, so
that tests can call it without an os-ken app or a socket; `ChannelApp` only serves it on
127.0.0.1.
"""

from __future__ import annotations

import socket
import time

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.lib import hub

from controller.channel_client import HOST, decode, encode, error_reply
from controller.fabric import Fabric
from controller.tc import CircuitError, worker_link
from topologies.model import Role

OPS = ("status", "state", "events", "log", "reconfigure", "link", "node")


class ChannelHandler:
    """Answers control-channel requests: read circuits, reconfigure, fail/repair links and nodes.

    Ops: status, state, events, reconfigure (worker, tor[, dark_ms]), link (a, b, up[, dark_ms]),
    node (name, up[, dark_ms]: a switch or host failing or repaired as a whole), log (event, fields).
    """

    def __init__(self, fabric: Fabric) -> None:
        self.fabric = fabric

    def reply(self, line: str) -> str:
        """One request line in, one reply line out; a refused or malformed request is an error reply."""
        try:
            reply = self.handle(decode(line))
        except (CircuitError, ValueError, KeyError) as err:
            reply = error_reply(err)
        return encode(reply)

    def handle(self, req: dict) -> dict:
        op = req.get("op")
        fab = self.fabric
        if op == "status":
            return {"ok": True, **fab.status()}
        if op == "state":
            return {"ok": True, **fab.state()}
        if op == "events":
            return {"ok": True, "events": list(fab.events)}
        if op == "log":
            return {"ok": True, "event": fab.log(req["event"], **req.get("fields", {}))}
        if op in ("reconfigure", "link", "node"):
            dark_ms = float(req.get("dark_ms", getattr(fab.net.spec, "dark_ms", 0.0)))
            if op == "reconfigure":
                return self.reconfigure(req["worker"], req["tor"], dark_ms)
            if op == "link":
                return self.link(req["a"], req["b"], bool(req["up"]), dark_ms)
            return self.node(req["name"], bool(req["up"]), dark_ms)
        raise ValueError(f"unknown op {op!r}; ops: {', '.join(OPS)}")

    def reconfigure(self, worker: str, tor: str, dark_ms: float) -> dict:
        """The paper's sequence: TC computes, CCC programs the ECS, CNC reroutes the ToRs."""
        fab = self.fabric
        t0 = time.time()
        fab.log("tc", worker=worker, tor=tor)
        with fab.lock:
            fab.reconfigure(worker, tor)
        return self._program([worker_link(fab.net, worker).b], dark_ms, t0)

    def link(self, a: str, b: str, up: bool, dark_ms: float) -> dict:
        """Fail or repair the cables between a and b in the model, then react (see _react)."""
        t0 = time.time()
        keys = self.fabric.set_link(a, b, up)
        self.fabric.log("link", a=a, b=b, up=up, links=len(keys))
        return self._react(dark_ms, t0)

    def node(self, name: str, up: bool, dark_ms: float) -> dict:
        """Fail or repair every cable of a switch or host in the model, then react."""
        t0 = time.time()
        keys = self.fabric.set_node(name, up)
        self.fabric.log("node", name=name, up=up, links=len(keys))
        return self._react(dark_ms, t0)

    def _react(self, dark_ms: float, t0: float) -> dict:
        """After a failure or repair: the TC re-circuits the workers it cuts off or heals
        (PSNet), the ECS goes through its dark period, the CNC reroutes around it."""
        fab = self.fabric
        ecss = fab.repair()
        if ecss:
            fab.log("tc", recircuit=fab.state()["circuits"])
        return self._program(ecss, dark_ms, t0)

    def _program(self, ecss: list[str], dark_ms: float, t0: float) -> dict:
        """Push the fabric's new state: changed ECSs through their dark period, then the routes."""
        fab = self.fabric
        fab.recompute()
        for ecs in ecss:
            fab.log("ccc", ecs=ecs, dark_ms=dark_ms)
            fab.programmers[Role.ECS].switch_circuit(ecs, dark_ms)
            fab.log("ecs", ecs=ecs)
        changed = fab.programmers[Role.ECS].sync_all() + fab.programmers[Role.TOR].sync_all()
        fab.log("cnc", switches=changed)
        return {"ok": True, "ms": (time.time() - t0) * 1000, "recircuited": ecss, **fab.state()}


def serve_connection(sock: socket.socket, handler: ChannelHandler) -> None:
    """Answer one client's request lines until it hangs up; closes the socket."""
    f = sock.makefile("rw")
    try:
        for line in f:
            f.write(handler.reply(line))
            f.flush()
    finally:
        sock.close()


class ChannelApp(app_manager.OSKenApp):
    """Serves the control channel on 127.0.0.1 (port --channel-port) over the shared Fabric."""

    _CONTEXTS = {"fabric": Fabric}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fabric: Fabric = kwargs["fabric"]
        self.handler = ChannelHandler(self.fabric)
        self.port = cfg.CONF.channel_port

    def start(self):
        thread = super().start()
        server = hub.StreamServer((HOST, self.port), lambda sock, _addr: serve_connection(sock, self.handler))
        self.threads.append(hub.spawn(server.serve_forever))
        self.logger.info("control channel on %s:%d", HOST, self.port)
        return thread
