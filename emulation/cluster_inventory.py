"""Cluster files: the servers one emulation is spread over (`testbed run EXP --cluster FILE`), and
how this machine logs in to them. Hardware mode's inventory (servers/inventory.py) logs in the
same way and shares `SSHSpec` and `resolve_access`.

    known_hosts: ~/.ssh/known_hosts      # host keys are checked against it (relative: to this file)
    servers:
      - name: server1                    # a label, used in results and logs
        ssh: {host: 192.168.56.11, port: 22, user: root, key: ~/.ssh/id_ed25519}
        tunnel: 10.0.0.11                # the address cut cables' VXLAN tunnels use (default: ssh.host)
      - name: server2
        ssh: {host: 192.168.56.12}
        tunnel: 10.0.0.12

Every server needs SSH (key only, its host key in known_hosts), Open vSwitch running, Mininet,
sudo and `ip` with VXLAN; the network between the servers carries the tunnels, so its MTU must
take a frame of the topology's MTU plus VXLAN's 50 bytes. The controller stays on this machine,
on loopback: each server reaches it through a reverse SSH tunnel, never over an open port.
"""

from __future__ import annotations

from collections.abc import Callable
from ipaddress import IPv4Address
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from topologies.schema import InputError, SafeName, one_line_error, read_yaml

M = TypeVar("M", bound=BaseModel)


class ClusterError(InputError):
    """A cluster file that cannot carry the run; the message is the one line shown."""


class SSHSpec(BaseModel):
    """How to log in to a server (key only; the host key must be in known_hosts)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    host: str = Field(min_length=1, description="address or name sshd listens on")
    port: int = Field(default=22, ge=1, le=65535)
    user: str | None = Field(default=None, description="default: this machine's user")
    key: Path | None = Field(default=None, description="private key; default: ssh-agent and ~/.ssh/id_*")


def resolve_access(
    source: Path, known_hosts: Path, logins: list[tuple[str, SSHSpec]], error: Callable[[str], Exception]
) -> tuple[Path, list[SSHSpec]]:
    """known_hosts and each (field, login)'s key resolved from the file's folder (`~` expanded) and
    checked to exist; a missing one is `error(one line naming the field)`."""
    base = source.resolve().parent

    def here(q: Path) -> Path:
        q = q.expanduser()
        return q if q.is_absolute() else base / q

    known = here(known_hosts)
    if not known.is_file():
        raise error(
            f"{source}: known_hosts: {known} not found; give the known_hosts file that holds the servers' "
            "host keys (ssh-keyscan them after checking their fingerprints)"
        )
    out = []
    for field, login in logins:
        key = login.key and here(login.key)
        if key is not None and not key.is_file():
            raise error(f"{source}: {field}.key: {key} not found; give the private key's path")
        out.append(login.model_copy(update={"key": key}))
    return known, out


class ClusterServer(BaseModel):
    """One server of the cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: SafeName
    ssh: SSHSpec
    tunnel: IPv4Address | None = Field(default=None, description="the tunnels' address; default: ssh.host")

    @property
    def tunnel_ip(self) -> str:
        return str(self.tunnel) if self.tunnel else self.ssh.host


class ClusterInventory(BaseModel):
    """The servers and their host keys."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    servers: list[ClusterServer] = Field(min_length=1)
    known_hosts: Path = Path("~/.ssh/known_hosts")

    @model_validator(mode="after")
    def _distinct(self) -> ClusterInventory:
        for what, values in (
            ("name", [s.name for s in self.servers]),
            ("ssh.host", [f"{s.ssh.host}:{s.ssh.port}" for s in self.servers]),
            ("tunnel", [s.tunnel_ip for s in self.servers]),
        ):
            twice = sorted({v for v in values if values.count(v) > 1})
            if twice:
                raise ValueError(f"servers: {what} {twice[0]} is given twice; each server needs its own")
        for i, s in enumerate(self.servers):
            try:
                IPv4Address(s.tunnel_ip)
            except ValueError:
                raise ValueError(
                    f"servers.{i}.tunnel: {s.tunnel_ip} is not an IPv4 address; give the address the servers "
                    "reach each other on (tunnel: 10.0.0.11)"
                ) from None
        return self

    def server(self, name: str) -> ClusterServer:
        return next(s for s in self.servers if s.name == name)


def load_logins(path: str | Path, model: type[M], error: Callable[[str], Exception], listed: str, expected: str) -> M:
    """Read and check a file of servers (`model`: a list field `listed` of entries with `ssh`, and
    `known_hosts`); relative key and known_hosts paths resolve from its folder. Every problem is
    `error(one line naming the file and field)`; `expected` says what the top level holds."""
    p = Path(path)
    data = read_yaml(p)
    if not isinstance(data, dict):
        raise error(f"{p}: (top level): expected a mapping with {expected}")
    try:
        inv = model.model_validate(data)
    except ValidationError as err:
        raise error(one_line_error(str(p), err, model)) from None
    entries = getattr(inv, listed)
    logins = [(f"{listed}.{i}.ssh", e.ssh) for i, e in enumerate(entries)]
    known, ssh = resolve_access(p, inv.known_hosts, logins, error)  # type: ignore[attr-defined]
    resolved = [e.model_copy(update={"ssh": x}) for e, x in zip(entries, ssh, strict=True)]
    return inv.model_copy(update={listed: resolved, "known_hosts": known})


def load_cluster(path: str | Path) -> ClusterInventory:
    """Read and check a cluster file (module doc)."""
    return load_logins(path, ClusterInventory, ClusterError, "servers", "servers and known_hosts")


__all__ = [
    "ClusterError",
    "ClusterInventory",
    "ClusterServer",
    "SSHSpec",
    "load_cluster",
    "load_logins",
    "resolve_access",
]
