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
import subprocess
import time
from functools import partial
from pathlib import Path

from mininet.link import Link as MnLink
from mininet.log import MininetLogger, setLogLevel
from mininet.net import Mininet
from mininet.node import OVSSwitch

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


def make_mininet(model: Network, **switch_opts: object) -> Mininet:
    """An unbuilt Mininet of the model on userspace OVS (no kernel module here), plain veths
    (shaping is ours), addresses and MACs left to the testbed (they come from the model)."""
    setLogLevel("warning")
    return Mininet(
        topo=ModelTopo(model),
        switch=partial(OVSSwitch, datapath="user", **switch_opts),
        controller=None,
        link=MnLink,
        autoSetMacs=False,
        autoStaticArp=False,
        build=False,
        waitConnected=False,
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
        taken = sorted(set(registry.existing_bridges()) & {n.name for n in self.model.switches()})
        if taken:
            raise TestbedError(
                f"bridge {taken[0]} already exists: another testbed is up, or a crashed run left it; "
                "stop it or run `testbed clean`"
            )
        self.run_id, self.run_dir = registry.new_run()
        self.record(owner_pid=os.getpid(), topology=self.source)

    def record(self, **state: object) -> None:
        """Add what this run created to its run folder (for `testbed clean`)."""
        registry.save(self.run_dir, **state)

    def build(self, mn: Mininet) -> Mininet:
        """Build `mn` (host shells, veths, switch objects) and record its shells and root interfaces."""
        self.mn = mn
        mn.build()
        self.record(
            host_pids=[h.pid for h in mn.hosts] + [s.pid for s in mn.switches],
            root_intfs=[i.name for s in mn.switches for i in s.intfList() if i.name != "lo"],
        )
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
        if self._lock is not None:
            registry.release_emulator(self._lock)
            self._lock = None
