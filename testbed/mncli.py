"""Mininet's CLI with the testbed's control channel: read and change circuits, fail links.

mininet> circuits                 worker -> ToR map and deployment worker(i,j,k)
mininet> ecs w1_1_1 t1_3 [DARK_MS] re-circuit a worker (TC -> CCC -> ECS -> CNC)
mininet> fail t1_1 ps1_1          take the cables between two nodes down and reroute
mininet> repair t1_1 ps1_1        bring them back
mininet> failnode t1_2            a whole switch (or host) down: the TC re-circuits its workers
mininet> repairnode t1_2          bring it back
mininet> rate w1_1_1 ecs1 500     set the cables' rate (paper-equivalent Mbit/s; the scale divides it)
"""

from __future__ import annotations

from mininet.cli import CLI

from controller.channel_client import ChannelError


class TestbedCLI(CLI):
    """Mininet CLI plus commands that go through the testbed (so host routes follow too)."""

    __test__ = False

    def __init__(self, mininet, testbed, **kwargs) -> None:
        self.testbed = testbed
        super().__init__(mininet, **kwargs)

    def _try(self, fn, *args) -> None:
        try:
            fn(*args)
        except (ChannelError, ValueError, TypeError) as err:
            print(f"*** {err}")

    def do_circuits(self, _line: str) -> None:
        """Show the ECS circuit map: circuits"""
        st = self.testbed.state()
        for w, tor in st["circuits"].items():
            print(f"{w:10s} -> {tor}")
        for m, dep in st["deployment"].items():
            print(f"module {m}: worker({','.join(map(str, dep))})")

    def do_ecs(self, line: str) -> None:
        """Re-circuit a worker: ecs WORKER TOR [DARK_MS]"""
        parts = line.split()
        if len(parts) not in (2, 3):
            print("usage: ecs WORKER TOR [DARK_MS]")
            return

        def go() -> None:
            dark = float(parts[2]) if len(parts) == 3 else None
            reply = self.testbed.reconfigure(parts[0], parts[1], dark)
            print(f"{parts[0]} -> {parts[1]} in {reply['ms']:.1f} ms; deployment {reply['deployment']}")

        self._try(go)

    def _link(self, line: str, up: bool) -> None:
        parts = line.split()
        if len(parts) != 2:
            print(f"usage: {'repair' if up else 'fail'} NODE1 NODE2")
            return
        self._try(lambda: print(f"rerouted in {self.testbed.set_link(parts[0], parts[1], up)['ms']:.1f} ms"))

    def do_fail(self, line: str) -> None:
        """Take the cables between two nodes down and reroute: fail NODE1 NODE2"""
        self._link(line, up=False)

    def do_repair(self, line: str) -> None:
        """Bring the cables between two nodes back: repair NODE1 NODE2"""
        self._link(line, up=True)

    def _node(self, line: str, up: bool) -> None:
        parts = line.split()
        if len(parts) != 1:
            print(f"usage: {'repairnode' if up else 'failnode'} NODE")
            return

        def go() -> None:
            reply = self.testbed.set_node(parts[0], up)
            print(f"{parts[0]} {'up' if up else 'down'} in {reply['ms']:.1f} ms; deployment {reply['deployment']}")

        self._try(go)

    def do_failnode(self, line: str) -> None:
        """Take every cable of a switch or host down; the TC re-circuits, the CNC reroutes: failnode NODE"""
        self._node(line, up=False)

    def do_repairnode(self, line: str) -> None:
        """Bring every cable of a switch or host back: repairnode NODE"""
        self._node(line, up=True)

    def do_rate(self, line: str) -> None:
        """Set the rate of the cables between two nodes (paper-equivalent Mbit/s): rate NODE1 NODE2 MBPS"""
        parts = line.split()
        if len(parts) != 3:
            print("usage: rate NODE1 NODE2 MBPS")
            return
        self._try(lambda: print(f"emulated at {self.testbed.set_rate(parts[0], parts[1], float(parts[2])):g} Mbit/s"))
