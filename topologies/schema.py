"""Topology files: the YAML schema, its validation, and the one-line errors users see.

A topology file is loaded into one of three pydantic models (PSNet, FatTree, BCube), chosen by
its `kind` field. Unknown keys fail loudly (a misspelled `worker_mbsp` must not be ignored), and
every error names the file, the field and the fix in one line, because users edit these files by
hand and should never see a traceback for a typo.

Rates in a file are paper-equivalent Mbit/s; `scale` divides them (and, in jobs, the model bytes)
so that the communication time S/B of the paper is kept while the emulated rates stay inside what
the userspace datapath of this machine can carry faithfully.
"""

from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

#: Mininet ignores `bw` above 1000 Mbit/s, and userspace OVS carries ~1.35 Gbit/s unshaped on
#: one hop: an emulated link above this rate cannot be honoured at all.
EMULATOR_CEILING_MBPS = 1000.0
#: Above this aggregate offered load (Mbit/s x hops / 3) fidelity drops below ~95% here
#: (../shared/notes/platform-facts.md); the fidelity monitor measures, this only warns.
FIDELITY_BUDGET_MBPS = 300.0

Mbps = Annotated[float, Field(gt=0, description="paper-equivalent rate in Mbit/s")]


class InputError(ValueError):
    """Bad user input (a topology, experiment, figure or timeline): the message is the one line
    `FILE: FIELD: problem; fix` shown to the user. The CLI catches this base, so each input has its
    own error type while all of them print the same way."""


class TopologyError(InputError):
    """A topology file that cannot be built; the message is the one line shown to the user."""


class _Base(BaseModel):
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


class PSNetSpec(_Base):
    """PSNet (Section 3): H modules, each an ECS, R ToRs, a SuperNode switch and P multi-NIC PSs."""

    kind: Literal["psnet"]
    modules: int = Field(default=1, ge=1, description="H: number of modules (SuperNodes)")
    tors: int = Field(ge=1, description="R: ToR switches per module (and NICs per PS)")
    K: float = Field(default=1.0, gt=0, description="B_s = K x B_w: rate of each PS NIC")
    ps: int = Field(ge=1, description="P: parameter servers per module")
    workers: int | list[int] | list[list[int]] = Field(
        description="workers per module: a count (the TC balances them over the ToRs) or the "
        "deployment worker(i,j,k) per ToR, the same for every module or one list per module"
    )
    ecs_ports: int | None = Field(default=None, ge=1, description="W': worker ports of each ECS")
    tor_downlinks: int | None = Field(default=None, ge=1, description="M_d: ECS-facing ports of each ToR (default: W')")
    uplink_mbps: float | None = Field(default=None, gt=0, description="ToR-SuperNode rate")
    inter_module_mbps: float | None = Field(default=None, gt=0, description="SuperNode links")
    dark_ms: float = Field(default=0.0, ge=0, description="ECS reconfiguration dark period")
    standby_ps: int = Field(default=0, ge=0, description="standby PSs per module, cabled as PSs, idle until a PS fails")

    @model_validator(mode="after")
    def _shape(self) -> PSNetSpec:
        if 2 < self.modules <= self.tors:
            raise ValueError(
                f"modules: an R-regular graph of H={self.modules} SuperNodes needs H > R={self.tors}"
                f" (or H = 2, joined by R parallel links); use modules 1, 2 or >= {self.tors + 1}"
            )
        if self.modules > 2 and (self.modules * self.tors) % 2:
            raise ValueError(
                f"modules: an R-regular graph needs H x R even (H={self.modules}, R={self.tors})"
                "; change modules or tors"
            )
        if isinstance(self.workers, int) and self.workers < 1:
            raise ValueError(f"workers: a module needs at least one worker, got {self.workers}")
        for m, dep in enumerate(self.deployments(), start=1):
            if dep is None and -(-self.worker_count(m) // self.tors) > self.m_d:
                raise ValueError(
                    f"workers: balancing {self.worker_count(m)} workers over {self.tors} ToRs needs "
                    f"{-(-self.worker_count(m) // self.tors)} ECS-facing ports per ToR but tor_downlinks is "
                    f"{self.m_d}; raise tor_downlinks"
                )
            if dep is not None and len(dep) != self.tors:
                raise ValueError(
                    f"workers: module {m} lists {len(dep)} ToRs but tors is {self.tors}; give "
                    f"one count per ToR, e.g. {[1] * self.tors}"
                )
            if dep is not None and any(c < 0 for c in dep):
                raise ValueError(f"workers: module {m} has a negative count {dep}")
            count = self.worker_count(m)
            if count > self.w_prime:
                raise ValueError(
                    f"workers: module {m} has {count} workers but the ECS has {self.w_prime} "
                    "ports (ecs_ports); raise ecs_ports or place fewer workers"
                )
            if dep is not None and max(dep) > self.m_d:
                raise ValueError(
                    f"workers: module {m} puts {max(dep)} workers on one ToR but a ToR has "
                    f"{self.m_d} ECS-facing ports (tor_downlinks); raise tor_downlinks"
                )
        return self

    def deployments(self) -> list[list[int] | None]:
        """Per module: the deployment from the file, or None where the TC balances."""
        w = self.workers
        if isinstance(w, int):
            return [None] * self.modules
        if w and isinstance(w[0], list):
            if len(w) != self.modules:
                raise ValueError(
                    f"workers: {len(w)} per-module lists for {self.modules} modules; give one "
                    "list per module or a single list for all"
                )
            return [list(x) for x in w]  # type: ignore[arg-type]
        return [list(w) for _ in range(self.modules)]  # type: ignore[arg-type]

    def worker_count(self, module: int) -> int:
        """W of one module (1-based)."""
        dep = self.deployments()[module - 1]
        return int(self.workers) if dep is None else sum(dep)  # type: ignore[arg-type]

    @property
    def w_prime(self) -> int:
        """W': worker-side ports of each ECS (default: the largest module's worker count)."""
        if self.ecs_ports is not None:
            return self.ecs_ports
        return max(self._raw_count(m) for m in range(1, self.modules + 1))

    @property
    def uplink_paper_mbps(self) -> float:
        """ToR-SuperNode rate: the file's, else R x B_w (a ToR's downlinks never oversubscribe it)."""
        return self.uplink_mbps or self.worker_mbps * self.tors

    @property
    def inter_module_paper_mbps(self) -> float:
        """SuperNode-SuperNode rate: the file's, else the uplink rate."""
        return self.inter_module_mbps or self.uplink_paper_mbps

    @property
    def m_d(self) -> int:
        """M_d: ECS-facing ports of each ToR (default W', so any deployment can be circuited)."""
        return self.tor_downlinks if self.tor_downlinks is not None else self.w_prime

    def _raw_count(self, module: int) -> int:
        w = self.workers
        if isinstance(w, int):
            return w
        if w and isinstance(w[0], list):
            return sum(w[module - 1])  # type: ignore[arg-type]
        return sum(w)  # type: ignore[arg-type]


class FatTreeSpec(_Base):
    """FatTree(k) with oversubscription r at the ToR layer (Eq. 7: B_a = B_c = B_w / r)."""

    kind: Literal["fattree"]
    k: int = Field(ge=2, description="switch radix (even)")
    pods: int | None = Field(default=None, ge=1, description="pods built (partial build < k)")
    oversubscription: float = Field(default=1.0, ge=1, description="r: uplinks run at B_w / r")
    workers: list[int] = Field(description="deployment worker(i,j,k,h): workers under each ToR")
    ps: int | None = Field(default=None, ge=1, description="P: PSs (default: all other hosts)")
    ps_mbps: float | None = Field(default=None, gt=0, description="B_s: PS link rate (default B_w)")
    standby_ps: int = Field(default=0, ge=0, description="standby PSs: the next free hosts after the PSs")
    routing: Literal["hashed", "balanced"] = Field(
        default="hashed", description="ECMP path choice per (src, dst): hashed or least-loaded"
    )

    @model_validator(mode="after")
    def _shape(self) -> FatTreeSpec:
        if self.k % 2:
            raise ValueError(f"k: FatTree needs an even k, got {self.k}; use {self.k + 1}")
        if self.n_pods > self.k:
            raise ValueError(f"pods: a FatTree(k={self.k}) has at most {self.k} pods")
        tors = self.n_pods * self.k // 2
        if len(self.workers) != tors:
            raise ValueError(
                f"workers: {len(self.workers)} counts for {tors} ToRs ({self.n_pods} pods x "
                f"k/2); give one count per ToR"
            )
        per_tor = self.k // 2
        if any(c < 0 or c > per_tor for c in self.workers):
            raise ValueError(
                f"workers: each ToR has {per_tor} hosts in FatTree(k={self.k}); counts must be "
                f"0..{per_tor}, got {self.workers}"
            )
        free = tors * per_tor - sum(self.workers)
        if free < (self.ps or 1):
            raise ValueError(
                f"ps: {self.ps or 1} PSs but only {free} hosts are left after the workers; "
                "place fewer workers or build more pods"
            )
        if self.standby_ps and free < (self.ps or free) + self.standby_ps:
            raise ValueError(
                f"standby_ps: {self.standby_ps} standby PSs but only {free - (self.ps or free)} hosts are "
                "left after the workers and PSs; set ps, place fewer workers or build more pods"
            )
        return self

    @property
    def n_pods(self) -> int:
        """Pods built: all k by default, fewer for a partial build such as the 4-ToR prototype."""
        return self.pods if self.pods is not None else self.k


class BCubeSpec(_Base):
    """BCube(n, k): n^(k+1) servers with k+1 NICs, n-port switches on k+1 levels; servers relay."""

    kind: Literal["bcube"]
    n: int = Field(ge=2, description="switch ports")
    k: int = Field(ge=0, description="levels - 1 (servers have k+1 NICs)")
    ps: int = Field(default=1, ge=1, description="P: the first P servers are PSs")
    workers: int | None = Field(default=None, ge=1, description="W (default: all other servers)")

    @model_validator(mode="after")
    def _shape(self) -> BCubeSpec:
        servers = self.n ** (self.k + 1)
        if servers > 256:
            raise ValueError(f"n, k: BCube({self.n},{self.k}) has {servers} servers; keep <= 256")
        if self.ps >= servers:
            raise ValueError(f"ps: {self.ps} PSs leave no worker among the {servers} servers; use fewer")
        if self.ps + (self.workers or 0) > servers:
            raise ValueError(f"workers: {self.ps} PSs + {self.workers} workers exceed the {servers} servers")
        return self


TopologySpec = PSNetSpec | FatTreeSpec | BCubeSpec
_KINDS: dict[str, type[BaseModel]] = {"psnet": PSNetSpec, "fattree": FatTreeSpec, "bcube": BCubeSpec}


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


def parse_spec(data: object, source: str = "<topology>") -> TopologySpec:
    """Validate a mapping (as read from YAML) into a topology spec, or raise TopologyError."""
    if not isinstance(data, dict):
        raise TopologyError(f"{source}: (top level): expected a mapping of fields, got {type(data).__name__}")
    kind = data.get("kind")
    if kind not in _KINDS:
        raise TopologyError(f"{source}: kind: unknown kind {kind!r}; use one of {', '.join(sorted(_KINDS))}")
    data = dict(data)
    data.setdefault("name", Path(source).stem)
    try:
        spec = _KINDS[kind].model_validate(data)
    except ValidationError as err:
        raise TopologyError(one_line_error(source, err, _KINDS[kind])) from None
    _check_rates(spec, source)
    return spec  # type: ignore[return-value]


def _check_rates(spec: TopologySpec, source: str) -> None:
    fields = {"worker_mbps": spec.worker_mbps}
    if isinstance(spec, PSNetSpec):  # the rates the builder really uses, defaults included
        fields["K"] = spec.K * spec.worker_mbps
        fields["uplink_mbps"] = spec.uplink_paper_mbps
        fields["inter_module_mbps"] = spec.inter_module_paper_mbps
    if isinstance(spec, FatTreeSpec):
        fields["ps_mbps"] = spec.ps_mbps or 0
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
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise TopologyError(f"{p}: cannot read the file ({err.strerror}); check the path") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "?"
        raise TopologyError(f"{p}: {where}: not valid YAML ({getattr(err, 'problem', err)}); fix the syntax") from None
    return parse_spec(data, str(p))
