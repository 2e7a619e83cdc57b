"""The registry of topology kinds: one module per kind, listed once here.

`get(name)` returns the `Kind` a file's `kind:` names; a built `Network` carries its own as
`net.family`. Adding a kind is writing topologies/kinds/<kind>.py (see README, "Adding a
topology kind") and adding its instance and spec class below.
"""

from __future__ import annotations

from topologies.kinds.bcube import BCUBE, BCubeSpec
from topologies.kinds.fattree import FATTREE, FatTreeSpec
from topologies.kinds.leafspine import LEAFSPINE, LeafSpineSpec
from topologies.kinds.psnet import PSNET, PSNetSpec
from topologies.kinds.torus import TORUS, TorusSpec
from topologies.model import Kind

#: every kind, by the name a topology file's `kind:` gives
KINDS: dict[str, Kind] = {k.name: k for k in (PSNET, FATTREE, BCUBE, LEAFSPINE, TORUS)}

#: a validated topology file of any kind
TopologySpec = PSNetSpec | FatTreeSpec | BCubeSpec | LeafSpineSpec | TorusSpec


def get(name: str) -> Kind:
    """The kind called `name`; a ValueError naming the known kinds otherwise."""
    try:
        return KINDS[name]
    except KeyError:
        raise ValueError(f"unknown kind {name!r}; use one of {', '.join(sorted(KINDS))}") from None


def names() -> list[str]:
    """Known kind names, sorted."""
    return sorted(KINDS)
