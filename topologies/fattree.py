"""FatTree(k) builder with oversubscription r (Eq. 7) and partial builds (the 4-ToR prototype).

Addresses follow Al-Fares et al. as ripl does: host 10.pod.edge.id (id from 2), edge/agg switch
10.pod.sw.1, core 10.k.j.i. Names: host `h{pod}_{edge}_{id}`, edge (ToR) `e{pod}_{sw}`, agg
`a{pod}_{sw}`, core `c{j}_{i}`. ToR uplinks and agg-core links run at B_w / r, so B_a = B_c as in
Eq. 7. Roles: `workers` gives worker(i,j,k,h) per ToR (its first hosts); the next free hosts in
order are the PSs; any left over are idle.
"""

from __future__ import annotations

from topologies.model import Network, Node, Role, dpid_for, mac_for
from topologies.schema import FatTreeSpec


def build_fattree(spec: FatTreeSpec) -> Network:
    """Nodes and links of a (possibly partial) FatTree; ToRs are numbered pod-major from 1."""
    net = Network(spec)
    k, half = spec.k, spec.k // 2
    up = spec.worker_mbps / spec.oversubscription
    ps_left = spec.ps if spec.ps is not None else 10**9
    standby_left = spec.standby_ps
    tor_no = 0
    hosts: list[tuple[str, str, int]] = []  # (host, edge, ToR number) in ToR order
    for pod in range(spec.n_pods):
        for e in range(half):
            tor_no += 1
            edge = net.add_node(
                Node(f"e{pod}_{e}", Role.TOR, f"10.{pod}.{e}.1", dpid_for(Role.TOR, pod, e), pod, tor_no)
            )
            for hid in range(2, half + 2):
                hosts.append((f"h{pod}_{e}_{hid}", edge.name, tor_no))
    # roles: worker(i,j,k,h) from the file, then PSs on the free hosts in order
    for host, edge, tor in hosts:
        pod, e, hid = (int(x) for x in host[1:].split("_"))
        if hid - 2 < spec.workers[tor - 1]:
            role = Role.WORKER
        elif ps_left > 0:
            role, ps_left = Role.PS, ps_left - 1
        elif standby_left > 0:
            role, standby_left = Role.STANDBY, standby_left - 1
        else:
            role = Role.IDLE
        h = net.add_node(Node(host, role, f"10.{pod}.{e}.{hid}", None, pod, tor))
        rate = (spec.ps_mbps or spec.worker_mbps) if role in (Role.PS, Role.STANDBY) else spec.worker_mbps
        ln = net.add_link(h.name, edge, rate, "host-tor")
        net.set_mac(h.name, ln.port_a, mac_for(h.ip))
    for pod in range(spec.n_pods):
        aggs = [
            net.add_node(Node(f"a{pod}_{s}", Role.AGG, f"10.{pod}.{s}.1", dpid_for(Role.AGG, pod, s), pod, s))
            for s in range(half, k)
        ]
        for e in range(half):
            for a in aggs:
                net.add_link(f"e{pod}_{e}", a.name, up, "tor-agg")
    for j in range(1, half + 1):
        for i in range(1, half + 1):
            core = net.add_node(Node(f"c{j}_{i}", Role.CORE, f"10.{k}.{j}.{i}", dpid_for(Role.CORE, j, i)))
            for pod in range(spec.n_pods):
                net.add_link(f"a{pod}_{half + j - 1}", core.name, up, "agg-core")
    return net
