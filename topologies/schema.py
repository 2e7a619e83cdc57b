"""Topology files: read a YAML file, pick its kind, validate it into that kind's spec.

A topology file is loaded into the pydantic spec of the kind its `kind` field names (each kind's
spec lives in its module, topologies/kinds/<kind>.py; the shared fields and the one-line errors
in topologies/spec.py). Every failure is one `TopologyError` line naming the file, the field and
the fix. The names other packages import from here (the specs, the error, the limits) are
re-exported so they keep one import path.
"""

from __future__ import annotations

import math
from pathlib import Path

from pydantic import ValidationError

from topologies import kinds
from topologies.kinds import TopologySpec
from topologies.kinds.bcube import BCubeSpec
from topologies.kinds.fattree import FatTreeSpec
from topologies.kinds.psnet import PSNetSpec
from topologies.spec import (
    EMULATOR_CEILING_MBPS,
    FIDELITY_BUDGETS_MBPS,
    FLOW_MODEL_ONLY,
    InputError,
    Mbps,
    SafeName,
    SpecBase,
    TopologyError,
    check_finite,
    check_name,
    emulating,
    fidelity_budget_mbps,
    is_safe_name,
    name_from_path,
    one_line_error,
    parse_yaml,
    read_yaml,
)

__all__ = [
    "EMULATOR_CEILING_MBPS",
    "FIDELITY_BUDGETS_MBPS",
    "BCubeSpec",
    "FatTreeSpec",
    "InputError",
    "Mbps",
    "PSNetSpec",
    "SafeName",
    "SpecBase",
    "TopologyError",
    "TopologySpec",
    "check_finite",
    "check_name",
    "emulating",
    "fidelity_budget_mbps",
    "is_safe_name",
    "load_spec",
    "name_from_path",
    "one_line_error",
    "parse_spec",
    "parse_yaml",
    "read_yaml",
]


def parse_spec(data: object, source: str = "<topology>", emulated: bool = True) -> TopologySpec:
    """Validate a mapping (as read from YAML) into its kind's spec, or raise TopologyError.

    `emulated=False` reads it for the flow model only (runs.simulate): the emulator's limits (a
    kind's size cap, the rate ceiling) do not apply there."""
    if not isinstance(data, dict):
        raise TopologyError(f"{source}: (top level): expected a mapping of fields, got {type(data).__name__}")
    try:
        kind = kinds.get(data.get("kind"))  # type: ignore[arg-type]
    except ValueError as err:
        raise TopologyError(f"{source}: kind: {err}") from None
    data = dict(data)
    data.setdefault("name", name_from_path(source))
    check_finite(data, source)
    try:
        spec = kind.spec_class.model_validate(data, context=None if emulated else FLOW_MODEL_ONLY)
    except ValidationError as err:
        raise TopologyError(one_line_error(source, err, kind.spec_class)) from None
    check_finite(spec.model_dump(), source)  # "inf" as a string: pydantic reads it as a float
    if emulated:
        _check_rates(spec, source)
    return spec  # type: ignore[return-value]


def _check_rates(spec: SpecBase, source: str) -> None:
    """Every rate the kind's builder uses must emulate within the emulator's ceiling."""
    fields = kinds.get(spec.kind).rate_fields(spec)  # type: ignore[attr-defined]
    for field, paper in fields.items():
        if spec.emulated(paper) > EMULATOR_CEILING_MBPS * (1 + 1e-9):  # float slack: 4100/4.1
            need = math.ceil(paper / EMULATOR_CEILING_MBPS * 1000) / 1000
            raise TopologyError(
                f"{source}: {field}: {paper:g} Mbit/s at scale {spec.scale:g} emulates "
                f"{spec.emulated(paper):g} Mbit/s, above the emulator's ceiling of "
                f"{EMULATOR_CEILING_MBPS:g}; set scale >= {need:g}"
            )


def load_spec(path: str | Path) -> TopologySpec:
    """Read and validate a topology YAML file; every failure is a one-line TopologyError."""
    return parse_spec(read_yaml(path), str(Path(path)))
