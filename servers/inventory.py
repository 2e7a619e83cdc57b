"""Inventory files: the real servers a hardware-mode run (`testbed run EXP --hosts FILE`) starts
its job processes on, and which topology host each one plays.

    known_hosts: ~/.ssh/known_hosts        # host keys are checked against it (relative: to this file)
    checkout: /home/me/psnet-testbed       # the set-up checkout on every server (default ~/psnet-testbed)
    hosts:
      - name: server1                      # a label, used in results
        ssh: {host: 192.168.56.11, port: 22, user: me, key: ~/.ssh/id_ed25519}
        data: 10.0.0.11                    # the data-plane address the job's traffic uses
        role: ps                           # ps | worker | any: which topology hosts it may play
        capacity: 1                        # how many job tasks (topology hosts) it runs at once
      - name: server2
        ssh: {host: 192.168.56.12}
        data: 10.0.0.12
        role: worker
        capacity: 2
        as: [w1_1_1, w1_2_1]               # optional: play exactly these topology hosts

The topology file stays the model of the real network (runs.predict reads it as for an
emulated run); the inventory only says where each of the experiment's hosts runs. Hosts without
`as` are given the remaining topology hosts by role, in order (PSs first, then workers), each
server filling its capacity before the next. Tasks that share a server listen on consecutive
ports from PS_PORT, on the server's data-plane address only (TensorFlow would take every address
at its port; tfjob.bindshim keeps it to the address the cluster spec names), so the job's
traffic takes the data-plane network and the management network reaches no task.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Address
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from emulation.cluster_inventory import SSHSpec, load_logins
from tfjob.hosts import PS_PORT
from topologies.model import Network, Role
from topologies.schema import InputError, SafeName


class InventoryError(InputError):
    """An inventory file that cannot run the experiment; the message is the one line shown."""


class InventoryHost(BaseModel):
    """One real server."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    name: SafeName
    ssh: SSHSpec
    data: IPv4Address = Field(description="the data-plane address the job's processes talk on")
    role: Literal["ps", "worker", "any"] = "any"
    capacity: int = Field(default=1, ge=1, le=64, description="job tasks it runs at once")
    plays: list[str] = Field(default_factory=list, alias="as", description="topology hosts it plays")

    @field_validator("plays", mode="before")
    @classmethod
    def _one_or_many(cls, v: object) -> object:
        return [v] if isinstance(v, str) else v

    @model_validator(mode="after")
    def _fits(self) -> InventoryHost:
        if len(self.plays) > self.capacity:
            raise ValueError(
                f"as: {len(self.plays)} topology hosts but capacity {self.capacity}; raise capacity or list fewer"
            )
        return self

    def takes(self, role: Role) -> bool:
        return self.role == "any" or self.role == role.value


class Inventory(BaseModel):
    """The servers, their host keys and where the testbed is checked out on them."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    hosts: list[InventoryHost] = Field(min_length=1)
    known_hosts: Path = Path("~/.ssh/known_hosts")
    checkout: str = Field(default="~/psnet-testbed", min_length=1, description="the set-up checkout on each server")

    @model_validator(mode="after")
    def _distinct(self) -> Inventory:
        for what, values in (
            ("name", [h.name for h in self.hosts]),
            ("data", [str(h.data) for h in self.hosts]),
            ("as", [p for h in self.hosts for p in h.plays]),
        ):
            twice = sorted({v for v in values if values.count(v) > 1})
            if twice:
                raise ValueError(f"hosts: {what} {twice[0]} is given twice; each must be unique")
        return self


@dataclass(frozen=True)
class Placement:
    """Where one topology host's task runs: its server, and the port it listens on there."""

    server: InventoryHost
    port: int

    @property
    def address(self) -> str:
        """The task's address in the TF cluster spec: data-plane IP and port."""
        return f"{self.server.data}:{self.port}"


def load_inventory(path: str | Path) -> Inventory:
    """Read and check an inventory file; relative key and known_hosts paths resolve from its folder."""
    return load_logins(path, Inventory, InventoryError, "hosts", "hosts, known_hosts and checkout")


def place(inv: Inventory, net: Network, needed: list[str], source: str) -> dict[str, Placement]:
    """Topology host -> where it runs, for every host in `needed` (the jobs' PSs and workers, and
    the standby PSs a fail_ps may bring in). Explicit `as` first, then by role in order."""
    for h in inv.hosts:
        for name in h.plays:
            node = net.nodes.get(name)
            if node is None or not node.is_host:
                raise InventoryError(f"{source}: hosts[{h.name}].as: {name} is not a host of the topology {net.name}")
            if not h.takes(node.role):
                raise InventoryError(
                    f"{source}: hosts[{h.name}].as: {name} is a {node.role.value} but the server's role is "
                    f"{h.role}; set role: any or {node.role.value}"
                )
    given = {name: h for h in inv.hosts for name in h.plays}
    load = {h.name: len(h.plays) for h in inv.hosts}
    order = sorted(needed, key=lambda n: (net.nodes[n].role != Role.PS, needed.index(n)))
    chosen: dict[str, InventoryHost] = {}
    for name in order:
        if name in given:
            chosen[name] = given[name]
            continue
        role = net.nodes[name].role
        free = [h for h in inv.hosts if h.takes(role) and load[h.name] < h.capacity]
        if not free:
            raise InventoryError(
                f"{source}: hosts: no server left with capacity for {name} (a {role.value}): the run needs "
                f"{len(needed)} task(s) ({', '.join(needed)}); add servers with role {role.value} or any, or raise "
                "capacity"
            )
        load[free[0].name] += 1
        chosen[name] = free[0]
    slots: dict[str, int] = {}
    out = {}
    for name in needed:  # ports in the order of `needed`, so a run's layout reads in job order
        server = chosen[name]
        out[name] = Placement(server, PS_PORT + slots.get(server.name, 0))
        slots[server.name] = slots.get(server.name, 0) + 1
    return out
