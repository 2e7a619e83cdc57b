"""`testbed topo show`: a topology as text (nodes, links, rates, addresses, circuits) and a PNG."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import networkx as nx

from controller.tc import deployment, initial_circuits
from topologies.model import Network


def describe(net: Network) -> str:
    """Human-readable summary of a built model."""
    spec = net.spec
    lines = [
        f"{net.name}: {net.family.name}, scale {spec.scale:g} (emulated rate = paper rate / scale), "
        f"routing {spec.routing}, seed {spec.seed}"
    ]
    roles = Counter(n.role.value for n in net.nodes.values())
    lines.append("nodes: " + ", ".join(f"{v} {k}" for k, v in roles.items()))
    lines.append("")
    lines.append(f"{'node':10s} {'role':12s} {'address':12s} {'ports':>5s}  dpid / MAC")
    for n in net.nodes.values():
        ident = (
            f"{n.dpid:016x}"
            if n.dpid is not None
            else net.mac(n.name, min(ln.port_of(n.name) for ln in net.links_of(n.name)))
        )
        lines.append(f"{n.name:10s} {n.role.value:12s} {n.ip:12s} {len(net.links_of(n.name)):5d}  {ident}")
    lines.append("")
    lines.append(f"{'link':28s} {'kind':14s} {'paper Mbit/s':>12s} {'emulated':>9s}")
    for ln in net.links:
        lines.append(
            f"{ln.a + ':' + str(ln.port_a) + ' - ' + ln.b + ':' + str(ln.port_b):28s} {ln.kind:14s} "
            f"{ln.paper_mbps:12g} {ln.mbps:9g}"
        )
    circuits = initial_circuits(net)
    if circuits:
        lines.append("")
        lines.append("circuit map (TC, at start):")
        for w, slot in circuits.items():
            lines.append(
                f"  {w:10s} ECS port {net.link_at(w, 1).port_b:3d} -> ECS port {slot.port_a:3d}"
                f" -> {slot.b} port {slot.port_b}"
            )
        for m, dep in deployment(net, circuits).items():
            lines.append(f"  module {m}: worker({','.join(map(str, dep))})")
    return "\n".join(lines)


def draw(net: Network, path: Path) -> Path:
    """Layered drawing of the physical topology (parallel cables drawn once, labelled xN); the
    kind gives each role its layer (a PSNet PS hangs below its ToRs; elsewhere PSs are hosts)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = nx.Graph()
    mult: Counter = Counter()
    layers = net.family.layers
    for n in net.nodes.values():
        g.add_node(n.name, layer=layers[n.role])
    for ln in net.links:
        g.add_edge(ln.a, ln.b)
        mult[frozenset((ln.a, ln.b))] += 1
    pos = nx.multipartite_layout(g, subset_key="layer", align="horizontal", scale=-1)
    width = max(8.0, 0.55 * max(Counter(layers[n.role] for n in net.nodes.values()).values()))
    fig, ax = plt.subplots(figsize=(width, 6))
    nx.draw_networkx_edges(g, pos, ax=ax, alpha=0.4)
    colors = [net.nodes[n].role.color for n in g.nodes]
    nx.draw_networkx_nodes(g, pos, ax=ax, node_color=colors, node_size=380)
    nx.draw_networkx_labels(g, pos, ax=ax, font_size=6)
    labels = {tuple(e): f"x{c}" for e, c in mult.items() if c > 1}
    nx.draw_networkx_edge_labels(g, pos, edge_labels=labels, ax=ax, font_size=6)
    ax.set_title(f"{net.name} ({net.family.name}, scale {net.spec.scale:g})")
    ax.axis("off")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
