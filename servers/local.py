"""Servers made on this one machine, to try and test `--cluster` without a second machine (the
cluster tests and `scripts/bench_cluster.sh` use them).

Each "server" is a network namespace with its own sshd and its own Open vSwitch (ovsdb-server and
ovs-vswitchd, userspace datapath) in a mount namespace of its own, where /run/openvswitch,
/etc/openvswitch and /var/log/openvswitch are the server's private folders: every `ovs-vsctl` a
session on that server runs talks to the server's own database, as on a real machine. This
machine reaches each server over a management veth (192.168.217.4i+1/30, the server .4i+2), and
the servers reach each other over a Linux bridge in a third namespace (the servers' network,
192.168.216.0/24, MTU 9000 so a tunnelled 1500-byte frame fits). The servers share this machine's
filesystem, so the testbed's checkout and venv are "installed" on each.

What one machine cannot show: the servers share its 2 cores (a tunnel's cost is measured, but
not the gain of a second machine's CPU), and its kernel (a server's sysctls are this one's).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path

import psutil


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(argv, capture_output=True, text=True, check=check)


def keygen(path: Path) -> Path:
    """A throw-away ed25519 key pair at `path` (and path.pub), no passphrase."""
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "psnet-local", "-f", str(path))
    return path


def processes(pids: list[int]) -> list[psutil.Process]:
    """The pids still alive as psutil processes (a pid that has gone is skipped)."""
    out = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):
            out.append(psutil.Process(pid))
    return out


SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
#: the servers' network (the tunnels' underlay)
UNDERLAY = "192.168.216.{}"
UNDERLAY_MTU = 9000

#: a server's own Open vSwitch, in its private mount namespace (then its sshd is started)
OVS = """mount --bind {base}/run /run/openvswitch
mount --bind {base}/etc /etc/openvswitch
mount --bind {base}/log /var/log/openvswitch
ovsdb-tool create /etc/openvswitch/conf.db {schema}
ovsdb-server /etc/openvswitch/conf.db --remote=punix:/run/openvswitch/db.sock --pidfile --detach \\
  --log-file=/var/log/openvswitch/ovsdb-server.log
ovs-vsctl --no-wait init
ovs-vswitchd --pidfile --detach --log-file=/var/log/openvswitch/ovs-vswitchd.log
"""


class OvsServers:
    """N servers as namespaces (module doc); `start()`, then `stop()` whatever happened. `ovs`:
    each with its own Open vSwitch (the cluster's servers); without, sshd alone (hardware mode's
    servers, whose `underlay` addresses are the job's data plane)."""

    def __init__(self, base: Path, count: int = 2, ovs: bool = True) -> None:
        self.base = base
        self.ovs = ovs
        self.tag = f"{os.getpid() % 100000}"
        self.count = count
        self.netns = [f"psnet-cs{i}-{self.tag}" for i in range(1, count + 1)]
        self.switch = f"psnet-cssw-{self.tag}"
        self.mgmt = [f"pcsm{i}{self.tag}" for i in range(1, count + 1)]
        self.addresses = [f"192.168.217.{4 * i + 2}" for i in range(count)]
        self.underlay = [UNDERLAY.format(i + 1) for i in range(count)]
        self.key = keygen(base / "user_key")
        (base / "authorized_keys").write_text(Path(f"{self.key}.pub").read_text())
        self.known_hosts = base / "known_hosts"
        self.sshd: list[subprocess.Popen] = []

    def start(self) -> None:
        sh("ip", "netns", "add", self.switch)
        self._in(self.switch, "ip", "link", "add", "br0", "type", "bridge")
        self._in(self.switch, "ip", "link", "set", "br0", "mtu", str(UNDERLAY_MTU), "up")
        known = []
        for i, ns in enumerate(self.netns):
            sh("ip", "netns", "add", ns)
            self._in(ns, "ip", "link", "set", "lo", "up")
            sh("ip", "link", "add", self.mgmt[i], "type", "veth", "peer", "name", "eth0", "netns", ns)
            sh("ip", "addr", "add", f"192.168.217.{4 * i + 1}/30", "dev", self.mgmt[i])
            sh("ip", "link", "set", self.mgmt[i], "up")
            self._in(ns, "ip", "addr", "add", f"{self.addresses[i]}/30", "dev", "eth0")
            self._in(ns, "ip", "link", "set", "eth0", "up")
            self._in(ns, "ip", "link", "add", "eth1", "type", "veth", "peer", "name", f"p{i}", "netns", self.switch)
            self._in(ns, "ip", "link", "set", "eth1", "mtu", str(UNDERLAY_MTU))
            self._in(ns, "ip", "addr", "add", f"{self.underlay[i]}/24", "dev", "eth1")
            self._in(ns, "ip", "link", "set", "eth1", "up")
            self._in(self.switch, "ip", "link", "set", f"p{i}", "mtu", str(UNDERLAY_MTU), "master", "br0", "up")
            host_key = keygen(self.base / f"host_key{i}")
            known.append(f"{self.addresses[i]} {' '.join(Path(f'{host_key}.pub').read_text().split()[:2])}")
            self._launch(ns, i, host_key)
        self.known_hosts.write_text("\n".join(known) + "\n")

    def _in(self, ns: str, *argv: str) -> None:
        sh("ip", "netns", "exec", ns, *argv)

    def _launch(self, ns: str, i: int, host_key: Path) -> None:
        """The server's OVS, then its sshd, in one private mount namespace inside `ns`. MaxSessions:
        a run multiplexes more sessions over its one login than OpenSSH's default 10 (docs/cluster.md)."""
        home = self.base / f"server{i + 1}"
        for sub in ("run", "etc", "log"):
            (home / sub).mkdir(parents=True, exist_ok=True)
        cfg = home / "sshd_config"
        cfg.write_text(
            f"ListenAddress {self.addresses[i]}\nPort 22\nHostKey {host_key}\nPidFile {home / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {self.base / 'authorized_keys'}\nStrictModes no\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nUsePAM no\nPrintMotd no\n"
            "AllowTcpForwarding yes\nSubsystem sftp internal-sftp\nMaxSessions 64\n"
        )
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        own_ovs = OVS.format(base=home, schema=SCHEMA) if self.ovs else ""
        script = f"set -e\n{own_ovs}exec /usr/sbin/sshd -D -e -f {cfg}\n"
        log = (home / "launch.log").open("w")
        self.sshd.append(
            subprocess.Popen(
                ["ip", "netns", "exec", ns, "unshare", "--mount", "--propagation", "private", "bash", "-c", script],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.sshd[-1].poll() is not None:
                break
            with socket.socket() as s:
                s.settimeout(0.5)
                if s.connect_ex((self.addresses[i], 22)) == 0:
                    return
            time.sleep(0.1)
        raise RuntimeError(f"server {i + 1} did not start: {(home / 'launch.log').read_text()[-500:]}")

    def run(self, i: int, command: str) -> str:
        """`command`'s output on server i (0-based) as a session there sees it: in its network and
        mount namespaces (its own OVS), entered through its sshd."""
        return sh("nsenter", "-t", str(self.sshd[i].pid), "-m", "-n", "sh", "-c", command, check=False).stdout

    def ovs_log(self, i: int) -> str:
        """Server i's ovs-vswitchd log (0-based)."""
        p = self.base / f"server{i + 1}" / "log" / "ovs-vswitchd.log"
        return p.read_text() if p.exists() else ""

    def pids(self, i: int) -> list[int]:
        return [int(p) for p in sh("ip", "netns", "pids", self.netns[i], check=False).stdout.split()]

    def others(self, i: int) -> list[str]:
        """Server i's processes other than its sshd listener and its OVS daemons: sessions, hosts."""
        keep = {"sshd", "ovsdb-server", "ovs-vswitchd"}
        out = []
        for p in processes(self.pids(i)):
            with contextlib.suppress(psutil.NoSuchProcess):
                cmd = p.cmdline()
                if p.name() in keep and not any("@" in c or "[priv]" in c for c in cmd):
                    continue
                out.append(" ".join(cmd)[:160])
        return out

    def stop(self) -> None:
        for d in self.sshd:
            with contextlib.suppress(ProcessLookupError):
                d.kill()
            d.wait()
        for i in range(self.count):
            for proc in processes(self.pids(i)):
                with contextlib.suppress(psutil.NoSuchProcess):
                    proc.kill()
        for ns in [*self.netns, self.switch]:
            sh("ip", "netns", "del", ns, check=False)
        for m in self.mgmt:
            sh("ip", "link", "del", m, check=False)

    def cluster_file(self, path: Path, known_hosts: Path | None = None) -> Path:
        """A cluster file (emulation/cluster_inventory.py) naming these servers."""
        import yaml

        servers = [
            {"name": f"server{i + 1}", "ssh": {"host": self.addresses[i], "user": "root", "key": str(self.key)},
             "tunnel": self.underlay[i]}
            for i in range(self.count)
        ]  # fmt: skip
        path.write_text(yaml.safe_dump({"known_hosts": str(known_hosts or self.known_hosts), "servers": servers}))
        return path
