"""One emulation over several servers, with Mininet's cluster edition (`mininet.examples.cluster`).

The cluster edition gives remote hosts and switches (`RemoteHost`, `RemoteOVSSwitch`: a node's
shell is an SSH session on its server) and links between servers; what it leaves open, and this
module adds:

- **Logins.** It runs `ssh user@address` with the user's own SSH settings. Here every session
  goes through one `ssh_config` written for the run (the cluster file's keys, its known_hosts with
  strict checking, batch mode, one multiplexed master connection per server), so a server with a
  wrong host key is refused and a node costs no new TCP connection. The ssh client runs as this
  user (the edition would `sudo -u` it as the remote user, who need not exist here).
- **Tunnels.** Its tunnels are `ssh -w` taps (TCP over TCP, one ssh process per cable) or
  kernel gretap, which this kernel lacks. A cut cable here is a pair of kernel VXLAN devices, one
  on each server (VNI per cable, UDP 4789, no learning: point to point), named as Mininet names
  the cable's interfaces, so the testbed shapes, counts and fails them like any veth end.
- **The controller.** It would move a loopback controller to a public address. Here the
  controller stays on this machine's loopback; each server gets a reverse SSH tunnel from its
  own loopback to it (`ssh -R 127.0.0.1:PORT:127.0.0.1:PORT`), so its switches dial 127.0.0.1.
- **Placement.** Its placers bin nodes by name; here `emulation.placement` partitions the model
  by the job's traffic, and the topology carries each node's server.
"""

from __future__ import annotations

import logging
import shlex
import subprocess
import time
from collections.abc import Iterable
from itertools import groupby
from operator import attrgetter
from pathlib import Path

from mininet.examples.cluster import MininetCluster, RemoteHost, RemoteLink, RemoteOVSSwitch
from mininet.net import Mininet
from mininet.node import OVSSwitch

from emulation.bringup import TestbedError, make_mininet
from emulation.cluster_inventory import ClusterInventory, ClusterServer
from emulation.placement import Placement
from emulation.remote_clean import clean_remote
from topologies.mininet_topo import ModelTopo
from topologies.model import Network

LOG = logging.getLogger(__name__)

VXLAN_PORT = 4789
#: bytes VXLAN adds to a frame on the servers' network (outer IPv4, UDP, VXLAN, inner Ethernet)
VXLAN_OVERHEAD = 50
#: seconds an SSH command may take before the run gives up on its server
SSH_TIMEOUT_S = 60.0


class Cluster:
    """The servers of one run: logins, commands, the controller's tunnels, checks and clean-up."""

    def __init__(self, inv: ClusterInventory, run_dir: Path, run_id: str) -> None:
        self.inv = inv
        self.run_id = run_id
        self.config = run_dir / "ssh_config"
        self.control = run_dir  # master sockets cm-%C beside the run's files: `testbed clean` removes them
        self.config.write_text("".join(self._block(s) for s in inv.servers))
        self.tunnels: list[subprocess.Popen] = []
        self._vni = 0

    def _block(self, s: ClusterServer) -> str:
        """The server's Host entry, by its name: every session names the server, never an address."""
        lines = [
            f"Host {s.name}",
            f"  HostName {s.ssh.host}",
            f"  Port {s.ssh.port}",
            *([f"  User {s.ssh.user}"] if s.ssh.user else []),
            *([f"  IdentityFile {s.ssh.key}", "  IdentitiesOnly yes"] if s.ssh.key else []),
            f"  UserKnownHostsFile {self.inv.known_hosts}",
            "  StrictHostKeyChecking yes",
            "  BatchMode yes",
            "  ControlMaster auto",
            f"  ControlPath {self.control}/cm-%C",
            "  ControlPersist 300",
            "  ServerAliveInterval 5",
            "  ServerAliveCountMax 6",
            "  LogLevel ERROR",
        ]
        return "\n".join(lines) + "\n"

    # --- commands --------------------------------------------------------------------------------
    def ssh_base(self) -> list[str]:
        return ["ssh", "-F", str(self.config)]

    def run(
        self, server: str, command: str | list[str], stdin: str | None = None, check: bool = True, sudo: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a command on `server` in its root namespace, through `sudo -n bash -c` (as the
        cluster edition runs its own: the login need not be root); a failure with `check` is a
        TestbedError naming the server and the command."""
        line = command if isinstance(command, str) else shlex.join(command)
        remote = f"sudo -n bash -c {shlex.quote(line)}" if sudo else line
        try:
            r = subprocess.run(
                [*self.ssh_base(), server, remote],
                input=stdin,
                capture_output=True,
                text=True,
                timeout=SSH_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise TestbedError(f"server {server}: no answer in {SSH_TIMEOUT_S:g} s to: {line[:120]}") from None
        if check and r.returncode != 0:
            why = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["no output"]
            raise TestbedError(f"server {server}: `{line[:120]}` failed (exit {r.returncode}): {why[0][:300]}")
        return r

    def check(self, mtu: int) -> None:
        """Every server answers over SSH, has sudo, Open vSwitch, Mininet's mnexec and VXLAN, and
        its route to every other server takes a frame of `mtu` plus VXLAN's overhead. The first
        problem found is one TestbedError line naming the server and the fix."""
        for s in self.inv.servers:
            login = (
                "command -v sudo >/dev/null || { echo 'no sudo: apt-get install sudo'; exit 3; }; "
                "sudo -n true 2>/dev/null || { echo 'sudo asks for a password: give the login NOPASSWD'; exit 3; }"
            )
            probe = (
                "command -v mnexec >/dev/null || { echo 'no mnexec: apt-get install mininet'; exit 3; }; "
                "ovs-vsctl --timeout=5 show >/dev/null || { echo 'Open vSwitch is not running'; exit 3; }; "
                "ip link add psnet-vxprobe type vxlan id 1 dstport 4789 2>/dev/null "
                "|| { echo 'no VXLAN in the kernel'; exit 3; }; ip link del psnet-vxprobe"
            )
            r = self.run(s.name, login, check=False, sudo=False)
            if r.returncode == 0:
                r = self.run(s.name, probe, check=False)
            if r.returncode == 255:
                why = (r.stderr.strip().splitlines() or ["ssh failed"])[-1]
                raise TestbedError(
                    f"server {s.name} ({s.ssh.host}:{s.ssh.port}): cannot log in: {why}; check its key, "
                    f"user and that its host key is in {self.inv.known_hosts}"
                )
            if r.returncode != 0:
                raise TestbedError(f"server {s.name}: {(r.stdout.strip() or r.stderr.strip())[:200]}")
            for other in self.inv.servers:
                if other.name == s.name:
                    continue
                need = mtu + VXLAN_OVERHEAD
                got = self._path_mtu(s, other)
                if got < need:
                    raise TestbedError(
                        f"server {s.name}: its route to {other.name} ({other.tunnel_ip}) has MTU {got}; tunnelled "
                        f"frames of the topology's MTU {mtu} need {need}: raise the servers' network MTU, or "
                        f"set mtu: {got - VXLAN_OVERHEAD} in the topology file"
                    )

    def _path_mtu(self, s: ClusterServer, other: ClusterServer) -> int:
        r = self.run(
            s.name,
            f"dev=$(ip -o route get {other.tunnel_ip} | grep -o 'dev [^ ]*' | cut -d' ' -f2); "
            'cat "/sys/class/net/$dev/mtu"',
        )
        return int(r.stdout.split()[-1])

    # --- the controller ------------------------------------------------------------------------------
    def open_controller_tunnels(self, port: int) -> None:
        """On every server, 127.0.0.1:`port` forwarded to this machine's controller at 127.0.0.1:`port`."""
        for s in self.inv.servers:
            p = subprocess.Popen(
                [
                    *self.ssh_base(),
                    "-N",
                    "-o",
                    "ExitOnForwardFailure=yes",
                    "-S",
                    "none",  # a connection of its own: through the master, `-N -R` would hand the forward over and exit
                    "-R",
                    f"127.0.0.1:{port}:127.0.0.1:{port}",
                    s.name,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            self.tunnels.append(p)
        deadline = time.monotonic() + 15
        for s, p in zip(self.inv.servers, self.tunnels, strict=True):
            while True:
                if p.poll() is not None:
                    raise TestbedError(
                        f"server {s.name}: the controller's reverse tunnel failed: {p.stderr.read().strip()[-200:]}"
                    )
                r = self.run(s.name, f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo open", check=False)
                if "open" in r.stdout:
                    break
                if time.monotonic() > deadline:
                    raise TestbedError(f"server {s.name}: the controller port {port} is not open on its loopback")
                time.sleep(0.2)

    # --- tunnels for cut cables ------------------------------------------------------------------
    def next_vni(self) -> int:
        """A VXLAN network id for the next cut cable: distinct within the run, and between runs
        (from the run id), so a dead run's tunnel never joins a live one."""
        self._vni += 1
        base = (int(self.run_id.replace("-", "")[-6:], 16) % 4000) * 4000 + 1000
        return base + self._vni

    def tunnel_ip(self, server: str) -> str:
        return self.inv.server(server).tunnel_ip

    # --- clean-up ------------------------------------------------------------------------------------
    def clean_servers(self, intfs: Iterable[str], bridges: Iterable[str] = ()) -> list[str]:
        """Delete this run's bridges and its switches' interfaces on every server."""
        return clean_remote(self.config, [s.name for s in self.inv.servers], self.run_id, intfs, bridges)

    def close(self) -> None:
        """Stop the controller's tunnels and every master connection."""
        for p in self.tunnels:
            p.terminate()
        for p in self.tunnels:
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.tunnels.clear()
        for s in self.inv.servers:
            subprocess.run([*self.ssh_base(), "-O", "exit", s.name], capture_output=True, timeout=10, check=False)


def remote_command(argv: list[str], cwd: str | None) -> list[str]:
    """`argv` as words for the remote shell an ssh session hands them to (ssh joins its arguments
    with spaces): quoted, in `cwd` there (the checkout is at the same path on every server), and
    ended when the session's input closes (the ssh client here was killed or the run ended), so
    no process outlives its run on a server; the session's exit status is the process's."""
    # an asynchronous command's input is /dev/null unless redirected: the session's is kept as fd 3
    script = 'cd "$0" || exit 1; exec 3<&0; "$@" <&- & p=$!; (cat <&3 > /dev/null; kill $p 2>/dev/null) & wait $p'
    return ["sh", "-c", shlex.quote(script), shlex.quote(cwd or "/"), *(shlex.quote(a) for a in argv)]


class _NoMove:
    """The cluster edition moves a new interface into a remote host's namespace with a command on
    *this* machine; Mininet made it in place already (a veth's peer is created in the host's
    namespace), and a tunnel end is moved on its server by `VxlanLink`."""

    @staticmethod
    def move(_intf: str, _node: object) -> bool:
        return True


def node_classes(cluster: Cluster) -> tuple[type, type, type]:
    """(host, switch, link) classes whose sessions use the run's ssh_config (module doc)."""
    base = [*cluster.ssh_base(), "-q", "-tt"]

    class _Login:
        sshbase = base

        def startShell(self, *args, **kwargs):
            if self.isRemote:  # log in by the server's name as its own user (ssh_config); no local sudo -u
                self.dest = self.server
                self.sshcmd = [*self.sshbase, self.dest]
            return super().startShell(*args, **kwargs)

    class ClusterHost(_Login, RemoteHost):
        def addIntf(self, intf, port=None, moveIntfFn=None):
            return super().addIntf(intf, port=port, moveIntfFn=_NoMove.move)

        def popen(self, *args, cwd: str | None = None, env: object = None, **kwargs):
            """A process in the host on its server (`remote_command`): the edition would apply
            `cwd` to the local ssh client and run the command wherever the login lands; its
            environment is the server's own (`env` is this machine's, and is not sent)."""
            argv = args[0] if len(args) == 1 and isinstance(args[0], list) else list(args)
            kwargs.setdefault("stdin", subprocess.PIPE)
            return super().popen(remote_command(argv, cwd), **kwargs)

    def _on(server: str, check: bool):
        def run(command: str, **_kw: object) -> str:
            return cluster.run(server, command, check=check).stdout

        return run

    class ClusterSwitch(_Login, RemoteOVSSwitch):
        """The edition starts and stops a server's switches as one `ovs-vsctl` line typed into a
        switch's shell, a tty that takes at most 4095 characters a line (a longer one never
        completes); here that line is an SSH command of its own, which has no such limit."""

        @classmethod
        def batchStartup(cls, switches, **_kw):
            for server, group in groupby(sorted(switches, key=attrgetter("server")), attrgetter("server")):
                OVSSwitch.batchStartup(tuple(group), run=_on(server, check=True))
            return switches

        @classmethod
        def batchShutdown(cls, switches, **_kw):
            for server, group in groupby(sorted(switches, key=attrgetter("server")), attrgetter("server")):
                OVSSwitch.batchShutdown(tuple(group), run=_on(server, check=False))
            return switches

    class VxlanLink(RemoteLink):
        """A cable: a veth pair when both ends share a server, a VXLAN device pair when not."""

        def makeTunnel(self, node1, node2, intfname1, intfname2, addr1=None, addr2=None):
            vni = cluster.next_vni()
            for node, intf, addr, peer in ((node1, intfname1, addr1, node2), (node2, intfname2, addr2, node1)):
                local, remote = cluster.tunnel_ip(node.server), cluster.tunnel_ip(peer.server)
                cmds = [
                    f"ip link del {intf} 2>/dev/null",
                    f"ip link add {intf} {'address ' + addr + ' ' if addr else ''}type vxlan id {vni} "
                    f"local {local} remote {remote} dstport {VXLAN_PORT} nolearning",
                ]
                if node.inNamespace:
                    cmds.append(f"ip link set {intf} netns {node.pid}")
                r = cluster.run(node.server, "; ".join(cmds[:1]) + "; " + " && ".join(cmds[1:]), check=False)
                if r.returncode != 0:
                    raise TestbedError(
                        f"server {node.server}: could not make the tunnel end {intf} (VNI {vni}): "
                        f"{(r.stderr or r.stdout).strip()[-200:]}"
                    )
            self.tunnel = _Ends()
            return self.tunnel

    return ClusterHost, ClusterSwitch, VxlanLink


class _Ends:
    """What `RemoteLink.stop` terminates for a tunnel: nothing runs (the devices are deleted with
    the link's interfaces)."""

    def terminate(self) -> None:
        return None


class PlacedTopo(ModelTopo):
    """The model's Mininet topology with each node's server (and its login) in its parameters."""

    def build(self, net: Network, placement: Placement) -> None:  # type: ignore[override]
        super().build(net)
        for name in net.nodes:
            self.nodeInfo(name).update(server=placement.server_of[name], serverIP=placement.server_of[name])


def _placer(placement: Placement) -> type:
    """The cluster edition's placer (it asks one for every node, even one whose parameters name
    its server): the placement's answer."""

    class Placer:
        def __init__(self, **_kw: object) -> None:
            pass

        def place(self, node: str) -> str:
            return placement.server_of[node]

    return Placer


def make_cluster_mininet(model: Network, placement: Placement, cluster: Cluster, **switch_opts: object) -> Mininet:
    """An unbuilt MininetCluster of the placed model on the servers' userspace OVS: what
    `emulation.bringup.make_mininet` makes on this machine, with the cluster edition's classes."""
    names = list(placement.servers)
    return make_mininet(
        model,
        mininet=MininetCluster,
        topo=PlacedTopo(model, placement=placement),
        nodes=node_classes(cluster),
        extra={
            "servers": names,
            "serverIP": {n: n for n in names},
            "placement": _placer(placement),
            "precheck": False,
        },
        **switch_opts,
    )


__all__ = ["Cluster", "PlacedTopo", "make_cluster_mininet", "node_classes"]
