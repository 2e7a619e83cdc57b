"""Build a `Network` from a topology file or spec: the one entry point for every consumer."""

from __future__ import annotations

from pathlib import Path

from topologies import kinds
from topologies.model import Network
from topologies.schema import TopologyError, TopologySpec, load_spec


def build_network(spec: TopologySpec, source: str = "<topology>") -> Network:
    """Run the builder of the spec's kind; a builder's refusal becomes a one-line TopologyError."""
    try:
        return kinds.get(spec.kind).build(spec)
    except ValueError as err:
        raise TopologyError(f"{source}: {err}") from None


def load_network(path: str | Path) -> Network:
    """Read, validate and build a topology file."""
    return build_network(load_spec(path), str(path))
