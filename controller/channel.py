"""The controller's loopback control channel (JSON lines over TCP on 127.0.0.1): the os-ken app
that serves it and the client the testbed uses."""

from __future__ import annotations

import json
import socket
import time

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.lib import hub

from controller.fabric import Fabric
from controller.tc import CircuitError, worker_link
from topologies.model import Role


class ChannelError(RuntimeError):
    """The controller did not answer, or refused a request; the message says which."""


class Channel:
    """One connection to the controller's control channel."""

    def __init__(self, port: int, timeout_s: float = 30.0) -> None:
        self.port = port
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._file = None

    def connect(self, wait_s: float = 15.0) -> Channel:
        """Connect, retrying while the controller process starts."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self._sock = socket.create_connection(("127.0.0.1", self.port), timeout=self.timeout_s)
                self._file = self._sock.makefile("rw")
                return self
            except OSError as err:
                if time.monotonic() > deadline:
                    raise ChannelError(f"controller channel 127.0.0.1:{self.port} not answering: {err}") from None
                time.sleep(0.1)

    def request(self, op: str, **fields: object) -> dict:
        """Send one request; return the reply, raise ChannelError if the controller refused it."""
        if self._file is None:
            self.connect()
        try:
            self._file.write(json.dumps({"op": op, **fields}) + "\n")
            self._file.flush()
            line = self._file.readline()
        except OSError as err:
            raise ChannelError(f"controller channel broke during {op}: {err}") from None
        if not line:
            raise ChannelError(f"controller closed the channel during {op} (did it crash?)")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise ChannelError(reply.get("error", f"{op} failed"))
        return reply

    def close(self) -> None:
        if self._sock:
            self._sock.close()
        self._sock = self._file = None


class ChannelApp(app_manager.OSKenApp):
    """Loopback JSON-lines control channel: read circuits, reconfigure, fail/repair links.

    One request per line, one JSON reply per line. Ops: status, state, events, reconfigure
    (worker, tor[, dark_ms]), link (a, b, up[, dark_ms]), node (name, up[, dark_ms]: a switch or
    host failing or repaired as a whole), log (event, fields).
    """

    _CONTEXTS = {"fabric": Fabric}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fabric: Fabric = kwargs["fabric"]
        self.port = cfg.CONF.channel_port

    def start(self):
        thread = super().start()
        server = hub.StreamServer(("127.0.0.1", self.port), self._serve)
        self.threads.append(hub.spawn(server.serve_forever))
        self.logger.info("control channel on 127.0.0.1:%d", self.port)
        return thread

    def _serve(self, sock, _addr):
        f = sock.makefile("rw")
        try:
            for line in f:
                try:
                    reply = self.handle(json.loads(line))
                except (CircuitError, ValueError, KeyError) as err:
                    reply = {"ok": False, "error": str(err)}
                f.write(json.dumps(reply) + "\n")
                f.flush()
        finally:
            sock.close()

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
        raise ValueError(f"unknown op {op!r}; ops: status, state, events, log, reconfigure, link, node")

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
