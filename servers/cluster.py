"""Real servers as the hosts of a job (hardware mode): a tfjob.hosts.Hosts over SSH.

One SSH connection per server of the inventory that plays a topology host; each task is one
`python -m tfjob.psjob` started in the server's checkout through a pty (servers.ssh.
SSHProcess), listening on its data-plane address and port (servers.inventory.place). Leaving
the context ends every task it started (Ctrl-C, then hang-up) and closes the connections, so
nothing stays running on the servers, also after the user's Ctrl-C.
"""

from __future__ import annotations

import logging
import shlex
import subprocess
import time
from pathlib import Path
from typing import Any

import paramiko

from servers.hostload import HostLoad, Server
from servers.inventory import Inventory, InventoryHost, Placement
from servers.ssh import Endpoint, SSHError, SSHProcess, connect, run_text
from tfjob.hosts import HostProcess

LOG = logging.getLogger(__name__)


def checkout_expr(checkout: str) -> str:
    """The checkout path as a shell word: quoted, with a leading ~/ left to the remote shell."""
    if checkout == "~":
        return '"$HOME"'
    if checkout.startswith("~/"):
        return '"$HOME"/' + shlex.quote(checkout[2:])
    return shlex.quote(checkout)


class HardwareCluster:
    """The inventory's servers, connected; starts tasks as topology hosts (see tfjob.hosts)."""

    #: tasks started on servers by this process (any cluster): the CLI's Ctrl-C line says they
    #: were stopped only where there were some
    tasks_started = 0

    def __init__(self, inv: Inventory, placements: dict[str, Placement], accept_new_host_key: bool = False) -> None:
        self.inv = inv
        self.placements = placements
        self.accept_new_host_key = accept_new_host_key
        self.clients: dict[str, paramiko.SSHClient] = {}
        self.checkouts: dict[str, str] = {}  # server -> absolute checkout path there
        self.procs: list[SSHProcess] = []
        self.events: list[dict] = []
        self._server_of: dict[int, str] = {}  # id(task) -> the server it runs on

    @property
    def servers(self) -> list[InventoryHost]:
        """The servers that play a topology host, in inventory order."""
        used = {p.server.name for p in self.placements.values()}
        return [h for h in self.inv.hosts if h.name in used]

    def __enter__(self) -> HardwareCluster:
        try:
            for h in self.servers:
                self.clients[h.name] = client = connect(self._endpoint(h))
                self.checkouts[h.name] = self._check_checkout(h, client)
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _endpoint(self, h: InventoryHost) -> Endpoint:
        return Endpoint(
            host=h.ssh.host,
            port=h.ssh.port,
            user=h.ssh.user,
            key=h.ssh.key,
            known_hosts=self.inv.known_hosts,
            accept_new_host_key=self.accept_new_host_key,
            ssh_config=Path("/dev/null"),  # the inventory says everything: no ~/.ssh/config aliases
        ).resolved()

    def _check_checkout(self, h: InventoryHost, client: paramiko.SSHClient) -> str:
        """The checkout's absolute path on `h`; SSHError when it is missing or not set up."""
        where = checkout_expr(self.inv.checkout)
        try:
            return run_text(client, f"cd {where} && test -x .venv/bin/python && test -d workloads && pwd").strip()
        except SSHError:
            raise SSHError(
                f"{h.name} ({h.ssh.host}): no set-up psnet-testbed checkout at {self.inv.checkout} (the inventory's "
                f"checkout); clone it there and run testbed remote {h.ssh.host} setup"
            ) from None

    # --- tfjob.hosts.Hosts -----------------------------------------------------------------
    def popen(self, host: str, argv: list[str]) -> HostProcess:
        """`argv` (python -m tfjob.psjob ...) in the server's checkout, with its venv's python."""
        server = self.placements[host].server
        remote = [".venv/bin/python", *argv[1:]]
        command = f"cd {shlex.quote(self.checkouts[server.name])} && exec {shlex.join(remote)}"
        proc = SSHProcess(self.clients[server.name], command, f"{host} on {server.name}")
        self.procs.append(proc)
        HardwareCluster.tasks_started += 1
        self._server_of[id(proc)] = server.name
        LOG.debug("%s: started on %s (remote pid %s)", host, server.name, proc.pid)
        return proc

    def address(self, host: str) -> str:
        return self.placements[host].address

    def log(self, event: str, **fields: Any) -> None:
        self.events.append({"t": time.time(), "event": event, **fields})

    def state(self, proc: HostProcess) -> str:
        """The remote process's state line from its /proc, or why it is unknown."""
        name = self._server_of.get(id(proc))
        client = self.clients.get(name) if name else None
        if proc.pid is None or client is None:
            return "running (remote pid unknown)"
        try:
            text = run_text(client, f"grep State: /proc/{int(proc.pid)}/status")
        except SSHError:
            return f"remote pid {proc.pid} on {name}: gone"
        return f"remote pid {proc.pid} on {name}: {text.split(':', 1)[-1].strip()}"

    def fail(self, host: str) -> None:
        """fail_ps on hardware: the caller kills the PS's process; the server itself stays up."""
        self.log("fail", host=host, server=self.placements[host].server.name)

    # --- the run's other needs -----------------------------------------------------------------
    def checkpoint_dir(self, chief: str, run: str, job: str) -> str:
        """Where a job's checkpoints go: results/RUN/checkpoints/JOB in the chief's server's checkout."""
        return f"{self.checkouts[self.placements[chief].server.name]}/results/{run}/checkpoints/{job}"

    def remove_tree(self, path: str) -> None:
        """rm -rf `path` on every server (a checkpoint folder: built from checked names)."""
        for client in self.clients.values():
            run_text(client, f"rm -rf {shlex.quote(path)}")

    def load(self) -> HostLoad:
        """A sampler of every server's data-plane NIC and CPU (servers.hostload)."""
        plays = {h.name: [t for t, p in self.placements.items() if p.server.name == h.name] for h in self.servers}
        return HostLoad([Server(h.name, self.clients[h.name], str(h.data), plays[h.name]) for h in self.servers])

    def close(self) -> None:
        """End every task still running (Ctrl-C, then hang-up), then close the connections."""
        for p in self.procs:
            try:
                p.kill()
            except (OSError, paramiko.SSHException) as err:
                LOG.warning("%s: could not stop: %s", p.label, err)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:  # closing the connection below hangs it up anyway
                LOG.warning("%s: did not report its end", p.label)
        for c in self.clients.values():
            c.close()
        self.clients.clear()
