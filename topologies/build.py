"""Build a `Network` from a topology file or spec: the one entry point for every consumer."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from topologies.bcube import build_bcube
from topologies.fattree import build_fattree
from topologies.model import Network
from topologies.psnet import build_psnet
from topologies.schema import TopologyError, TopologySpec, load_spec

BUILDERS: dict[str, Callable[..., Network]] = {
    "psnet": build_psnet,
    "fattree": build_fattree,
    "bcube": build_bcube,
}


def build_network(spec: TopologySpec, source: str = "<topology>") -> Network:
    """Run the builder of the spec's kind; a builder's refusal becomes a one-line TopologyError."""
    try:
        return BUILDERS[spec.kind](spec)
    except ValueError as err:
        raise TopologyError(f"{source}: {err}") from None


def load_network(path: str | Path) -> Network:
    """Read, validate and build a topology file."""
    return build_network(load_spec(path), str(path))
