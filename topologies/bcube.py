"""BCube(n, k) builder: n^(k+1) servers with k+1 NICs, n^k n-port switches per level.

Server `s` + its base-n digits a_k..a_0 joined by `_` (address 10.1.x.y from its index + 1), its
NIC of level l (port l+1) wired to switch `b{l}_{digits without a_l}` at port a_l + 1. Servers
relay packets between their NICs as BCube does; switches only ever see directly attached servers.
"""

from __future__ import annotations

import itertools

from topologies.model import Network, Node, Role, dpid_for, mac_for
from topologies.schema import BCubeSpec


def digits(index: int, n: int, k: int) -> tuple[int, ...]:
    """Base-n digits (a_k, ..., a_0) of a server index."""
    out = []
    for _ in range(k + 1):
        out.append(index % n)
        index //= n
    return tuple(reversed(out))


def build_bcube(spec: BCubeSpec) -> Network:
    """Nodes and links of BCube(n, k); the first P servers are PSs, the next W workers."""
    net = Network(spec)
    n, k = spec.n, spec.k
    total = n ** (k + 1)
    workers = spec.workers if spec.workers is not None else total - spec.ps
    for idx in range(total):
        a = digits(idx, n, k)
        role = Role.PS if idx < spec.ps else Role.WORKER if idx < spec.ps + workers else Role.IDLE
        ip = f"10.1.{(idx + 1) >> 8}.{(idx + 1) & 255}"
        net.add_node(Node("s" + "_".join(map(str, a)), role, ip, None, 0, idx, relay=True))
    for level in range(k + 1):
        for rest in itertools.product(range(n), repeat=k):
            sw_name = f"b{level}_" + "_".join(map(str, rest)) if k else f"b{level}"
            sw_idx = sum(d * n**i for i, d in enumerate(reversed(rest)))
            net.add_node(
                Node(
                    sw_name,
                    Role.BSWITCH,
                    f"10.{2 + level}.{sw_idx >> 8}.{sw_idx & 255}",
                    dpid_for(Role.BSWITCH, level, sw_idx >> 8, sw_idx & 255),
                    level,
                    sw_idx,
                )
            )
    for level in range(k + 1):  # NIC l of every server is its port l+1
        for idx in range(total):
            a = digits(idx, n, k)
            server = "s" + "_".join(map(str, a))
            pos = k - level  # a_level sits at this position of (a_k..a_0)
            rest = a[:pos] + a[pos + 1 :]
            sw_name = f"b{level}_" + "_".join(map(str, rest)) if k else f"b{level}"
            ln = net.add_link(server, sw_name, spec.worker_mbps, "server-switch")
            net.set_mac(server, ln.port_a, mac_for(net.nodes[server].ip, level + 1))
    return net
