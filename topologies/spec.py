"""What every topology file shares: the base of the kind specs, the error users see, the limits.

Each kind's pydantic spec (topologies/kinds/<kind>.py) extends `SpecBase`. Unknown keys fail
loudly (a misspelled `worker_mbsp` must not be ignored), and every error names the file, the
field and the fix in one line, because users edit these files by hand and should never see a
traceback for a typo. This module knows no kind, so the kind modules can import it.

Rates in a file are paper-equivalent Mbit/s; `scale` divides them (and, in jobs, the model bytes)
so that the communication time S/B of the paper is kept while the emulated rates stay inside what
the userspace datapath of this machine can carry faithfully.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

#: Mininet ignores `bw` above 1000 Mbit/s, and userspace OVS carries ~1.35 Gbit/s unshaped on
#: one hop: an emulated link above this rate cannot be honoured at all.
EMULATOR_CEILING_MBPS = 1000.0
#: Above this aggregate offered load (Mbit/s x hops / 3) fidelity drops below ~95% here
#: (../shared/notes/platform-facts.md); the fidelity monitor measures, this only warns.
FIDELITY_BUDGET_MBPS = 300.0

Mbps = Annotated[float, Field(gt=0, description="paper-equivalent rate in Mbit/s")]


class TopologyError(ValueError):
    """A topology file that cannot be built; the message is the one line shown to the user."""


class SpecBase(BaseModel):
    """Fields common to every kind; each kind adds its own `kind: Literal[...]` and shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(default="", description="name used in results and logs")
    scale: float = Field(default=1.0, gt=0, description="divides every rate (and model bytes)")
    seed: int = Field(default=1, description="seed for every random choice (R-regular graph, hashing)")
    worker_mbps: Mbps = Field(description="B_w: rate of a worker's link (ToR downlink)")
    delay_ms: float = Field(default=0.0, ge=0, description="one-way delay per link; needs netem")
    routing: Literal["hashed", "balanced"] = Field(
        default="balanced",
        description="choice among equal-cost paths per (src, dst): hashed (ECMP) or least-loaded",
    )

    def emulated(self, paper_mbps: float) -> float:
        """Emulated rate (Mbit/s) of a paper-equivalent rate under this file's scale."""
        return paper_mbps / self.scale


def one_line_error(path: str, err: ValidationError, model: type[BaseModel]) -> str:
    """Render pydantic's most useful error as `file: field: problem; fix`.

    A misspelled key also makes the real key "missing": the unknown key is the cause, so it is
    reported first, with the closest valid name.
    """
    errors = sorted(err.errors(), key=lambda e: e["type"] != "extra_forbidden")
    e = errors[0]
    field = ".".join(str(x) for x in e["loc"])
    msg = e["msg"].removeprefix("Value error, ")
    if not field:  # model-level checks word their message as "field: problem; fix"
        field, _, msg = msg.partition(": ") if ": " in msg else ("(top level)", "", msg)
    if e["type"] == "extra_forbidden":
        close = difflib.get_close_matches(field, list(model.model_fields), n=1)
        hint = f"did you mean {close[0]}?" if close else "see topologies/README.md for the fields"
        msg = f"unknown field; {hint}"
    elif e["type"] == "missing":
        msg = "required field is missing; add it (see topologies/README.md)"
    return f"{path}: {field}: {msg}"
