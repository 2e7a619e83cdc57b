"""The registry of topology kinds: one module per kind, listed once here.

`get(name)` returns the `Kind` a file's `kind:` names; a built `Network` carries its own as
`net.family`. Adding a kind is writing topologies/kinds/<kind>.py (its spec, node identity,
builder, roles and cable kinds with their facts, layers, layouts and growth; see README, "Adding
a topology kind") and adding its instance to `KINDS` below. A kind defined elsewhere (a test's
toy kind) is added with `register` and reaches the controller process by `plugin_ref`.
"""

from __future__ import annotations

import importlib

from topologies.kinds.bcube import BCUBE
from topologies.kinds.fattree import FATTREE
from topologies.kinds.leafspine import LEAFSPINE
from topologies.kinds.psnet import PSNET
from topologies.kinds.torus import TORUS
from topologies.model import Kind
from topologies.spec import SpecBase

#: every kind, by the name a topology file's `kind:` gives
KINDS: dict[str, Kind] = {k.name: k for k in (PSNET, FATTREE, BCUBE, LEAFSPINE, TORUS)}

#: a validated topology file of any kind: an instance of its kind's `spec_class` (a file is
#: parsed by looking its `kind:` up here, not through a static union of the spec classes)
TopologySpec = SpecBase


def get(name: str) -> Kind:
    """The kind called `name`; a ValueError naming the known kinds otherwise."""
    try:
        return KINDS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown kind {name!r}; use one of {', '.join(sorted(KINDS))}") from None


def names() -> list[str]:
    """Known kind names, sorted."""
    return sorted(KINDS)


def register(kind: Kind) -> Kind:
    """Add a kind defined outside this package (a plugin, a test's toy kind); returns it.

    Its spec class must name it (`kind: Literal["<name>"]`), as every shipped kind's does."""
    literal = getattr(kind.spec_class.model_fields.get("kind"), "annotation", None)
    if getattr(literal, "__args__", None) != (kind.name,):
        raise ValueError(f"kind {kind.name}: its spec_class needs the field kind: Literal[{kind.name!r}]")
    if KINDS.get(kind.name, kind) is not kind:
        raise ValueError(f"kind {kind.name} is registered already; pick another name")
    KINDS[kind.name] = kind
    return kind


def unregister(name: str) -> None:
    """Remove a kind `register` added (a test cleaning up after itself)."""
    KINDS.pop(name, None)


def plugin_ref(kind: Kind) -> str | None:
    """`module:Class` of a kind not shipped in this package, so another process (the controller,
    which rebuilds the network from the topology file) can import and register it; None for
    the shipped kinds, which every process knows."""
    cls = type(kind)
    if cls.__module__.startswith(f"{__name__}."):
        return None
    return f"{cls.__module__}:{cls.__qualname__}"


def load_plugin(ref: str) -> Kind:
    """Import `module:Class` (a `plugin_ref`), instantiate the kind and register it."""
    module, _, cls = ref.partition(":")
    kind = getattr(importlib.import_module(module), cls)()
    return register(kind)
