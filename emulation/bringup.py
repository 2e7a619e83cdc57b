"""A Mininet of the model that `testbed clean` can always find: registered before it is built.

Every emulation on this machine, the Testbed and the benchmark's plain standalone-STP FatTree
alike, comes up through `RegisteredNet`: it takes the emulator lock (one emulation at a time),
refuses to build over bridges that already exist, opens a run folder (emulation.registry) that
records the owner, the host shells and root-namespace interfaces as soon as they exist, and tags
the bridges with the run id. If the process dies, the run folder says what it created.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import time
from functools import partial
from pathlib import Path

from mininet.link import Link as MnLink
from mininet.log import MininetLogger, setLogLevel, warn
from mininet.net import Mininet
from mininet.node import OVSSwitch, RemoteController

from emulation import registry
from topologies.mininet_topo import ModelTopo
from topologies.model import Network


def _plain_loggers() -> None:
    """Undo mininet.log's `setLoggerClass(MininetLogger)`: it makes every logger created after it
    (ours included) a Mininet logger at level 25 with its own handler, hiding INFO and doubling
    warnings. Loggers made since are turned back into plain ones."""
    logging.setLoggerClass(logging.Logger)
    for name, lg in list(logging.Logger.manager.loggerDict.items()):
        if isinstance(lg, MininetLogger) and not name.startswith("mininet"):
            lg.__class__ = logging.Logger
            lg.handlers.clear()
            lg.setLevel(logging.NOTSET)
            lg.propagate = True


_plain_loggers()
LOG = logging.getLogger(__name__)


class TestbedError(RuntimeError):
    """The network could not be brought up; the message is one line saying why and what to do."""


#: seconds the controller check waits for a TCP connect on loopback
CONTROLLER_CONNECT_TIMEOUT_S = 2.0


class ProbedController(RemoteController):
    """Mininet's RemoteController with a reachability check that cannot fail on the controller's bytes.

    Mininet checks a remote controller by running `echo A | telnet -e A IP PORT` in a shell and
    decoding what telnet prints as UTF-8. An OpenFlow controller speaks first: os-ken sends its
    HELLO at once, whose xid is random, so usually not UTF-8. When telnet prints the HELLO before
    it reads its escape character (under load), Mininet's decoder raises UnicodeDecodeError and
    the bring-up fails. Here the check is a plain TCP connect that never reads a byte.
    """

    def isListening(self, ip: str, port: int) -> bool:
        try:
            with socket.create_connection((ip, port), timeout=CONTROLLER_CONNECT_TIMEOUT_S):
                return True
        except OSError:
            warn(f"Unable to contact the remote controller at {ip}:{port}\n")  # Mininet's own warning
            return False


def make_mininet(
    model: Network,
    *,
    mininet: type[Mininet] = Mininet,
    topo: ModelTopo | None = None,
    nodes: tuple[type, type, type] | None = None,
    extra: dict[str, object] | None = None,
    **switch_opts: object,
) -> Mininet:
    """An unbuilt Mininet of the model on userspace OVS (no kernel module here), plain veths
    (shaping is ours), addresses and MACs left to the testbed (they come from the model).

    The cluster edition (emulation.cluster) makes its MininetCluster here too: its class, its
    placed topology, its (host, switch, link) classes and its own arguments (`extra`)."""
    setLogLevel("warning")
    host, switch, link = nodes if nodes is not None else (None, OVSSwitch, MnLink)
    return mininet(
        topo=topo if topo is not None else ModelTopo(model),
        **({"host": host} if host is not None else {}),
        switch=partial(switch, datapath="user", **switch_opts),
        controller=None,
        link=link,
        autoSetMacs=False,
        autoStaticArp=False,
        build=False,
        waitConnected=False,
        **(extra or {}),
    )


class RegisteredNet:
    """One emulation's claim on the machine: lock, run folder, built Mininet, tagged bridges.

    open() -> record(...) for anything started beside it (the controller) -> build(mn) ->
    start() -> ... -> stop_mininet() -> close(). close() is safe after a partial open and twice.
    """

    def __init__(self, model: Network, source: str) -> None:
        self.model = model
        self.source = source
        self.mn: Mininet | None = None
        self.run_id = ""
        self.run_dir = Path()
        self.lock_wait_s = 0.0
        self.locked_at = 0.0  # time.monotonic() when the lock was taken: bring-ups are timed from it
        self._lock: int | None = None

    def open(self, lock_wait_s: float) -> None:
        """Take the emulator lock (queueing up to lock_wait_s), check that none of the model's
        bridges exists, open the run folder."""
        t0 = time.monotonic()
        try:
            self._lock = registry.acquire_emulator(lock_wait_s)
        except registry.Busy as err:
            raise TestbedError(str(err)) from None
        self.locked_at = time.monotonic()
        self.lock_wait_s = self.locked_at - t0
        self._take_switch_names()
        self.run_id, self.run_dir = registry.new_run()
        # recorded before anything is built, so a kill at any point leaves a run that can be cleaned
        self.record(
            owner_pid=os.getpid(),
            topology=self.source,
            bridges=sorted(n.name for n in self.model.switches()),
            root_intfs=sorted({ln.intf(end) for ln in self.model.veth_links() for end in (ln.a, ln.b)}),
        )
        os.environ[registry.RUN_ENV] = self.run_id  # inherited by the controller and every host shell
        cgroup = registry.load(self.run_dir).get("cgroup")
        if cgroup:  # for the processes that join it rather than being forked into it (the fork server's tasks)
            os.environ[registry.CGROUP_ENV] = cgroup

    def _take_switch_names(self) -> None:
        """Clear what dead runs left (this process holds the emulator lock, so no other run is
        starting), then refuse only if a bridge of the model is still there: a live testbed's,
        or one no run of this testbed made."""
        removed = registry.clean()
        if removed:
            LOG.info("removed what a dead testbed run left behind: %s", registry.summary(removed))
        taken = sorted(set(registry.existing_bridges()) & {n.name for n in self.model.switches()})
        if taken:
            owner = registry.bridge_owner(taken[0])
            raise TestbedError(
                f"bridge {taken[0]} belongs to {owner}, which is still running; stop it first"
                if owner
                else f"bridge {taken[0]} already exists and no testbed run made it (Mininet's mn?); "
                f"delete it (ovs-vsctl del-br {taken[0]}) or stop what made it"
            )

    def record(self, **state: object) -> None:
        """Add what this run created to its run folder (for `testbed clean`)."""
        registry.save(self.run_dir, **state)

    def build(self, mn: Mininet) -> Mininet:
        """Build `mn` (host shells, veths, switch objects) and record its shells and root interfaces."""
        self.mn = mn
        mn.build()
        registry.track(self.run_dir, host_pids=[h.pid for h in mn.hosts] + [s.pid for s in mn.switches])
        return mn

    def start(self) -> None:
        """Start the switches (OVS creates the bridges here) and tag every bridge with the run id,
        so `testbed clean` removes only this testbed's bridges."""
        assert self.mn is not None, "build() first"
        self.mn.start()
        for sw in self.mn.switches:
            subprocess.run(
                ["ovs-vsctl", "set", "bridge", sw.name, f"external-ids:{registry.TAG}={self.run_id}"],
                check=True,
                capture_output=True,
            )

    def stop_mininet(self) -> None:
        """Stop Mininet, then delete whatever of the model's bridges it could not remove."""
        if self.mn is None:
            return
        for node in self.mn.hosts + self.mn.switches:
            # a Ctrl-C/SIGTERM inside node.cmd() leaves the shell marked busy, and Mininet's
            # stop() would then fail on its first command (ip link del) before any bridge
            node.waiting = False
        try:
            self.mn.stop()
        except Exception as err:  # keep tearing down the rest
            LOG.warning("mininet stop: %r", err)
        self.mn = None
        # open() refused to start if any of them existed, so these are ours
        registry.delete_bridges({n.name for n in self.model.switches()})

    def close(self) -> None:
        """Stop Mininet if it is up, remove what the run folder records, release the lock."""
        self.stop_mininet()
        if self.run_dir != Path() and self.run_dir.exists():
            registry.save(self.run_dir, owner_pid=0)
            registry.clean_run(self.run_dir)
        os.environ.pop(registry.RUN_ENV, None)
        os.environ.pop(registry.CGROUP_ENV, None)
        if self._lock is not None:
            registry.release_emulator(self._lock)
            self._lock = None
