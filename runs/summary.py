"""summary.json as one typed record: what every run writes and every reader reads.

Three orchestrators write a run's summary (runs.runner for TF PS jobs, runs.engine_job for
scheme jobs, servers.hardware for real servers; runs.rounds a round's copy, runs.predict and
runs.steptime a recomputed part, replays.sweep a retry), and the CLI, `testbed compare`, the
figure and matrix reports read them back. Before this model each side agreed on string keys
only, so a renamed field broke a report silently. `RunSummary` names the fields, their types and
which writer sets them; readers use its attributes.

Compatibility is the point of three choices here:
- every model allows extra fields (`extra="allow"`): a field a writer adds before this model
  knows it, or an old file's field since renamed, is kept and written back unchanged;
- only `complete` is required: a failed retry writes little more than why (replays.sweep), old
  runs lack newer fields, and a reader can judge nothing without `complete`;
- writing dumps only the fields that were given, in the order they were given, and leaves ints
  ints: a summary read and written again is the same JSON (tests/test_summary.py checks it).

`read_summary` refuses a malformed file in one line naming the file and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeAlias

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError, model_serializer, model_validator

from topologies.files import write_json_atomic

#: a number as a writer gave it: ints stay ints and floats floats, so a file reads back the same
Num: TypeAlias = int | float


class SummaryError(ValueError):
    """A summary.json that is not a run's summary; the message is one line naming file and field."""


class Record(BaseModel):
    """A part of summary.json: extra fields kept, written back in the order they were read."""

    model_config = ConfigDict(extra="allow")
    _order: list[str] = PrivateAttr(default_factory=list)

    @model_validator(mode="wrap")
    @classmethod
    def _remember_order(cls, data: Any, handler: Any) -> Any:
        """Keep the keys' order as given (a writer's dict, or the file), to write it back so."""
        obj = handler(data)
        if isinstance(data, dict):
            obj._order = list(data)
        return obj

    @model_serializer(mode="wrap")
    def _in_order(self, handler: Any) -> Any:
        out = handler(self)
        if not isinstance(out, dict) or not self._order:
            return out
        first = [k for k in self._order if k in out]
        return {**{k: out[k] for k in first}, **{k: v for k, v in out.items() if k not in first}}

    def as_dict(self) -> dict[str, Any]:
        """The record as JSON would hold it: only the fields that were given."""
        return self.model_dump(exclude_unset=True)

    # The JSON view by key, for callers not yet on attributes (the emulated runs' tests, the
    # benchmarks): exactly what the old dict gave, a KeyError for a field the writer left out.
    def __getitem__(self, key: str) -> Any:
        return self.as_dict()[key]

    def __contains__(self, key: object) -> bool:
        return key in self.as_dict()

    def get(self, key: str, default: Any = None) -> Any:
        return self.as_dict().get(key, default)


class Stats(Record):
    """runs.stats.describe over the measured steps (the BCT, GST, or a step split's part);
    {"n": 0} when nothing was measured (the other fields then absent)."""

    n: int = 0
    mean: Num | None = None
    p50: Num | None = None
    p95: Num | None = None
    ci95: Num | None = None  # NaN with one step: no spread to estimate
    min: Num | None = None
    max: Num | None = None


class Fidelity(Record):
    """The fidelity verdict (emulation.fidelity.Verdict.as_dict); a hardware run's says
    `faithful: null` (no emulator to doubt). Its other fields (ovs_cpu_p95, busiest_link,
    datapath drops, retrans, ...) are kept as extra fields."""

    faithful: bool | None
    reason: str = ""


class StepSplit(Record):
    """A step's measured communication and the rest (runs.steptime.step_split); empty ({}) when
    no transfer window was sampled."""

    comm_s: Stats | None = None
    rest_s: Stats | None = None
    link_s: Stats | None = None
    method: str | None = None


class Flows(Record):
    """C measured on the busiest shared link (emulation.flows.Busiest.as_dict)."""

    c: int | None = None
    link: str | None = None
    streams: int | None = None
    unmapped: int | None = None
    from_routes: int | None = None


class Timeline(Record):
    """A timeline's outputs (runs.results.timeline_outputs, runs.engine_timeline): t0 and the
    per-event metrics (runs.recovery: took_ms, resume_s, recovery_s, ...) of each applied event."""

    t0: Num | None = None
    events: list[dict[str, Any]] = []
    not_applied: list[dict[str, Any]] = []


class Round(Record):
    """Which round of one job this summary is (runs.rounds.Round.as_dict)."""

    index: int
    of: int
    steps: list[int]
    shared_with: list[str] = []
    shares: str = ""


class Retry(Record):
    """A repetition the sweep ran once more, and why (replays.sweep)."""

    why: str
    scale: Num
    rerun_scale: Num


class Hardware(Record):
    """A hardware run's inventory, where each topology host ran and each server's NIC bytes and CPU
    (servers.hostload), where an emulated run has its fidelity verdict."""

    inventory: str = ""
    placements: dict[str, dict[str, Any]] = {}
    servers: dict[str, dict[str, Any]] = {}


#: the summary fields a figure's metric may be
METRIC_FIELDS = ("bct_s", "gst_s", "bcast_s", "wire_mb")


class RunSummary(Record):
    """One run's summary.json (or one job's, under `jobs`). Fields by writer:
    every run: name, complete, error, scale, compress, model, workers, ps, the hosts, batch_size,
    model_bytes_emulated, bct_s, fidelity, routing, mtu, flows_on_busiest_link;
    TF PS jobs (runs.results.summarize, runs.runner): bytes_per_ps, global_step, restarts,
    predicted (runs.predict: the paper's model), predicted_placement, host_time*, step_split
    (runs.steptime), timings, ps_nic_bytes, jobs (several jobs), round (runs.rounds);
    scheme jobs (runs.engine_job): scheme, compute, gst_s, expected_sync_s, cable_load_gbps,
    connections, load_slowdown, gst_formula_s,
    bytes_per_host, cross_region_bytes, chain_length, loss, sums_checked, sum_problems, nic_bytes,
    dvf (pf);
    hardware (servers.hardware): mode, prediction_applies, hardware; a timeline: timeline;
    the sweep: retries. `predicted` stays a dict: its keys are the model's (the paper's
    equations for a TF job, the schedule's `gst_s` for a scheme), read by replays.claims."""

    name: str = ""
    complete: bool
    error: str = ""
    mode: str | None = None  # "hardware" on real servers; absent when emulated
    scheme: str | None = None  # an engine scheme; absent for TF's PS job
    compute: str | None = None
    compute_s_per_step: Num | None = None
    model: str | None = None
    workers: int | None = None
    ps: int | None = None
    worker_hosts: list[str] = []
    ps_hosts: list[str] = []
    batch_size: int | None = None
    scale: Num | None = None
    compress: Num | None = None
    routing: str | None = None
    mtu: int | None = None
    flows_on_busiest_link: Flows | None = None
    model_bytes_emulated: Num | None = None
    bct_s: Stats = Stats()
    gst_s: Stats | None = None
    bytes_per_ps: dict[str, Num] | None = None
    global_step: int | None = None
    restarts: list[dict[str, Any]] = []  # one per PS failover: failed, standby, reached_step, attempt
    fidelity: Fidelity | None = None
    predicted: dict[str, Any] | None = None
    predicted_placement: dict[str, Any] | None = None
    host_time_mode: str | None = None
    host_time_pad_s: Num | None = None
    host_time: dict[str, Any] | str | None = None  # tfjob.hosttime's record (older runs: the mode)
    step_split: StepSplit | None = None
    jobs: dict[str, RunSummary] | None = None
    timings: dict[str, Any] | None = None
    ps_nic_bytes: dict[str, dict[str, dict[str, Num]]] | None = None
    timeline: Timeline | None = None
    round: Round | None = None
    retries: list[Retry] = []
    prediction_applies: str | None = None
    hardware: Hardware | None = None
    expected_sync_s: Num | None = None
    #: scheme jobs: Gbit/s on the veth cables together at the schedule's bound (schemes.count.cable_load_gbps)
    cable_load_gbps: Num | None = None
    #: scheme jobs: the flow-model calibration's expected GST / max-min at that load and connections (1 + a L^q P^j)
    load_slowdown: Num | None = None
    connections: int | None = None  # host pairs the schedule sends between (the load term's P)
    gst_formula_s: Num | None = None
    bytes_per_host: dict[str, dict[str, Num]] | None = None
    cross_region_bytes: list[Num] = []
    chain_length: int | None = None
    loss: list[Any] | None = None
    sums_checked: bool = False
    sum_problems: list[str] = []
    bcast_s: Stats | None = None  # scheme jobs with servers: the broadcast's delivery per iteration
    wire_mb: Stats | None = None  # scheme jobs: MB the engine put on the wire per iteration (all hosts)
    engine_cpu_s_per_gb: Num | None = None  # scheme jobs: the engine's CPU in synchronisations per GB sent
    nic_bytes: dict[str, dict[str, Num]] | None = None  # scheme jobs: each host's interfaces, rx/tx
    dvf: dict[str, Any] | None = None  # pf with DVF: what it cut per clock (runs.engine_job.dvf_summary)

    def metric(self, key: str) -> Stats | None:
        """The statistics a figure plots: `bct_s`, or for scheme jobs `gst_s`, `bcast_s` (the
        broadcast's delivery) or `wire_mb` (bytes on the wire)."""
        if key not in METRIC_FIELDS:
            raise ValueError(f"metric {key!r}: one of {', '.join(METRIC_FIELDS)}")
        return getattr(self, key)

    @property
    def faithful(self) -> bool | None:
        """The verdict: True, False, or None (a hardware run, or no verdict recorded)."""
        return self.fidelity.faithful if self.fidelity else None

    @property
    def fidelity_reason(self) -> str:
        return self.fidelity.reason if self.fidelity else "no fidelity verdict"

    @property
    def pred(self) -> dict[str, Any]:
        """The model's prediction, {} when there is none."""
        return self.predicted or {}

    @property
    def lock_wait_s(self) -> float:
        """Seconds this run queued behind another emulation (timings.lock_wait_s)."""
        return float((self.timings or {}).get("lock_wait_s", 0.0))

    @property
    def compress_factor(self) -> float:
        """The figure's compress (1 when the run did not record one)."""
        return float(self.compress or 1.0)


def summary_of(data: dict[str, Any] | RunSummary, where: str = "summary") -> RunSummary:
    """A writer's summary dict as the model (a model as it is); SummaryError names the field."""
    if isinstance(data, RunSummary):
        return data
    try:
        return RunSummary.model_validate(data)
    except ValidationError as err:
        raise SummaryError(f"{where}: {_first(err)}") from None


def read_summary(path: Path) -> RunSummary:
    """The run summary in `path` (a summary.json, or a run's folder). OSError when it cannot be
    read; SummaryError (a ValueError) in one line naming file and field when it is not a summary."""
    path = Path(path)
    if path.is_dir():
        path = path / "summary.json"
    text = path.read_text()
    try:
        data = json.loads(text)
    except ValueError as err:
        raise SummaryError(f"{path}: not readable JSON ({err})") from None
    if not isinstance(data, dict):
        raise SummaryError(f"{path}: not a run summary (a JSON object): {type(data).__name__}")
    return summary_of(data, str(path))


def write_summary(path: Path, summary: RunSummary | dict[str, Any]) -> RunSummary:
    """Write `summary` (a model, or a writer's dict validated here: a wrong type fails before the
    file is touched) to `path` whole or not at all (topologies.files); returns the model."""
    model = summary_of(summary, str(path))
    write_json_atomic(path, model.as_dict())
    return model


def _first(err: ValidationError) -> str:
    """The first problem of a validation error as `field: message` (one line)."""
    e = err.errors()[0]
    loc = ".".join(str(p) for p in e["loc"]) or "(top level)"
    extra = f" ({len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{loc}: {e['msg']}{extra}"
