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
import json
import math
import os
import platform
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Literal

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo

from topologies.files import write_json_atomic

#: Mininet ignores `bw` above 1000 Mbit/s, and userspace OVS carries ~1.35 Gbit/s unshaped on
#: one hop: an emulated link above this rate cannot be honoured at all.
EMULATOR_CEILING_MBPS = 1000.0
#: Aggregate offered load (Mbit/s x hops / 3) up to which wire/configured held >= 95% here, per
#: interface MTU: the highest aggregate that held in consecutive idle runs of
#: `scripts/bench_network.sh --only shaping` (6 flows through ECS and ToR). ovs-vswitchd's one
#: thread pays per packet, so jumbo frames (~6x fewer packets per byte) carry more. The fidelity
#: monitor measures every run; this only warns and raises a figure point's scale. These came from
#: a faster machine (a fresh 2-core VM held 95% only to 600 Mbit/s): `testbed doctor` measures
#: this machine's and caches it (`datapath_ceiling`); these are the fallback when it has not.
FIDELITY_BUDGETS_MBPS = {1500: 900.0, 9000: 1200.0}
DEFAULT_MTU = 1500


def fixed_budget_mbps(mtu: int = DEFAULT_MTU) -> float:
    """The fixed budget at the largest MTU not above `mtu` (the default MTU's below it)."""
    return FIDELITY_BUDGETS_MBPS[max([m for m in FIDELITY_BUDGETS_MBPS if m <= mtu], default=DEFAULT_MTU)]


def fidelity_budget_mbps(mtu: int = DEFAULT_MTU, tso: bool = False) -> float:
    """The faithful aggregate at `mtu` on this machine: measured (`testbed doctor`, cached in
    `ceiling_cache_file()`) when it was, else the fixed figure (see `datapath_ceiling`). `tso`:
    the datapath with userspace TSO's figure (emulation.tso.ceiling says which one runs get)."""
    return datapath_ceiling(mtu, tso=tso)[0]


# ---------------------------------------------------------------- the datapath's ceiling, per machine


def machine_key() -> str:
    """This machine as the ceiling cache knows it: host name, CPU model and core count. The
    ceiling is one ovs-vswitchd thread's on this CPU, so a home folder copied to another machine
    (or a resized VM) must not carry its figure along."""
    cpu = "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{platform.node()}|{cpu}|{os.cpu_count()}"


def cache_dir() -> Path:
    """~/.cache/psnet-testbed (honouring XDG_CACHE_HOME): where this machine's measured figures
    are kept (datapath and relay ceilings, tfjob's calibration and host-time caches)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "psnet-testbed"


def read_cache(path: Path) -> dict:
    """A cache file's JSON object, or {} when it is missing, unreadable or not an object: a
    damaged cache means "not measured here", never an error."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def ceiling_cache_file() -> Path:
    """The datapath ceiling's cache, in `cache_dir()`."""
    return cache_dir() / "datapath-ceiling.json"


#: the cache key's ending for the datapath with userspace TSO (emulation.tso): its own figure
TSO_KEY = "|tso"


def measured_ceiling(path: Path | None = None, tso: bool = False) -> dict | None:
    """This machine's cached measurement ({"mbps": ..., "mtu": 1500, "measured": date, ...}) of
    the datapath of frames, or with `tso` of the datapath with userspace TSO (each its own entry:
    one figure cannot serve both, 1,200 against 1,800 Mbit/s here), or None when it was not
    measured here (or the file is unreadable: then the fixed figure holds)."""
    entry = read_cache(path or ceiling_cache_file()).get(machine_key() + (TSO_KEY if tso else ""))
    if not isinstance(entry, dict) or not isinstance(entry.get("mbps"), int | float) or entry["mbps"] <= 0:
        return None
    if bool(entry.get("tso")) != tso:  # an older cache's one figure, taken on the other datapath
        return None
    return entry


def datapath_ceiling(mtu: int = DEFAULT_MTU, path: Path | None = None, tso: bool = False) -> tuple[float, str]:
    """(Mbit/s, where it came from) of the faithful aggregate at `mtu`. A measurement of this
    machine wins over the fixed figures, which came from a faster machine; it is taken at the
    default MTU only (to stay short), so other MTUs scale it by the fixed figures' ratio. `tso`:
    the datapath with userspace TSO, whose figure is the frames' one until it was measured."""
    fixed = fixed_budget_mbps(mtu)
    got = measured_ceiling(path, tso=True) if tso else None
    unmeasured = ", the frames' figure (TSO's not measured: testbed doctor --measure)" if tso and got is None else ""
    if got is None:
        got, tso = measured_ceiling(path), False
    if got is None:
        return fixed, "fixed figure (not measured on this machine: testbed doctor measures it)"
    mbps = float(got["mbps"]) * fixed / fixed_budget_mbps(int(got.get("mtu", DEFAULT_MTU)))
    scaled = "" if fixed_budget_mbps(int(got.get("mtu", DEFAULT_MTU))) == fixed else f", scaled to MTU {mtu}"
    bound = ", the probe's top step" if got.get("at_least") else ""
    how = ", userspace TSO" if tso else ""
    return mbps, f"measured on this machine {got.get('measured', '?')}{how}{bound}{scaled}{unmeasured}"


def record_ceiling(mbps: float, detail: dict, path: Path | None = None) -> Path:
    """Cache this machine's measured ceiling (the default MTU's) of the datapath `detail["tso"]`
    says (frames when it says nothing), replacing the file atomically."""
    p = path or ceiling_cache_file()
    data = read_cache(p)
    data[machine_key() + (TSO_KEY if detail.get("tso") else "")] = {"mbps": mbps, "mtu": DEFAULT_MTU, **detail}
    p.parent.mkdir(parents=True, exist_ok=True)
    return write_json_atomic(p, data, indent=2, sort_keys=True)


Mbps = Annotated[float, Field(gt=0, description="paper-equivalent rate in Mbit/s")]


class InputError(ValueError):
    """Bad user input (a topology, experiment, figure or timeline): the message is the one line
    `FILE: FIELD: problem; fix` shown to the user. The CLI catches this base, so each input has its
    own error type while all of them print the same way."""


class TopologyError(InputError):
    """A topology file that cannot be built; the message is the one line shown to the user."""


# ---------------------------------------------------------------- shared input checks

#: a name read from a file (topology, experiment, job, figure, point) becomes a folder or file
#: name under results/, so it is one plain path component: never "..", a slash or a hidden name
_SAFE_NAME = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]*")


def is_safe_name(value: str) -> bool:
    """Whether `value` is one plain path component (see _SAFE_NAME)."""
    return bool(_SAFE_NAME.fullmatch(value)) and ".." not in value


def check_name(value: str) -> str:
    """`value` if it is safe as one path component; ValueError (the pydantic message) otherwise."""
    if not is_safe_name(value):
        raise ValueError(
            f"{value!r} cannot name a results folder; use only letters, digits, '-', '_' and '.' "
            "(not first, never '..'), e.g. psnet-vgg16"
        )
    return value


#: a string field that names results (see check_name)
SafeName = Annotated[str, AfterValidator(check_name)]


def check_rto_min(value: object) -> object:
    """`rto_min_ms`: auto, kernel or a positive number of ms, else one line saying so."""
    if value in ("auto", "kernel") or (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    ):
        return value
    raise ValueError(f"{value!r} is not a floor; use auto (the default), kernel (Linux's 200 ms) or ms, e.g. 3000")


#: the hosts' RTO floor (emulation.rto)
RtoMin = Annotated[float | Literal["auto", "kernel"], BeforeValidator(check_rto_min)]


def name_from_path(source: str | Path) -> str:
    """The default name of a file without one: its stem, made safe ("my run.yaml" -> "my-run",
    "<topology>" -> "topology"). A name written in the file is checked, never rewritten."""
    name = re.sub(r"[^A-Za-z0-9._-]+", "-", Path(source).stem)
    name = re.sub(r"\.{2,}", ".", name).strip("-.")
    return name or "unnamed"


def _leaves(data: object, loc: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], object]]:
    """(path, value) of every key and scalar of a YAML document, paths as pydantic writes them."""
    if isinstance(data, dict):
        for k, v in data.items():
            yield (*loc, str(k)), k
            yield from _leaves(v, (*loc, str(k)))
    elif isinstance(data, list | tuple):
        for i, v in enumerate(data):
            yield from _leaves(v, (*loc, str(i)))
    else:
        yield loc, data


def check_finite(data: object, source: str) -> None:
    """Raise TopologyError on the first .inf or .nan: no rate, time or scale may be infinite,
    and NaN passes every `gt`/`ge` bound unnoticed."""
    for loc, v in _leaves(data):
        if isinstance(v, float) and not math.isfinite(v):
            field = ".".join(loc) or "(top level)"
            raise TopologyError(f"{source}: {field}: {v} is not a finite number; give a finite value")


def read_yaml(path: str | Path) -> object:
    """The YAML document in a file; unreadable, non-UTF-8 or malformed files, aliases that loop or
    expand too far, and infinite or NaN numbers, raise a one-line TopologyError naming the file
    and where."""
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise TopologyError(f"{p}: cannot read the file ({err.strerror}); check the path") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise TopologyError(f"{p}: {_undecodable_field(raw, err)}: not UTF-8 text; save the file as UTF-8") from None
    return parse_yaml(text, str(p))


def parse_yaml(text: str, source: str) -> object:
    """The YAML document in `text` (from `source`, named in errors), loaded by `_BoundedLoader`:
    each problem read_yaml names is one TopologyError line."""
    try:
        data = _load_bounded(text)
    except _AliasProblem as err:
        raise TopologyError(f"{source}: {err}") from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "?"
        raise TopologyError(
            f"{source}: {where}: not valid YAML ({getattr(err, 'problem', err)}); fix the syntax"
        ) from None
    check_finite(data, source)
    return data


# ---------------------------------------------------------------- YAML aliases, bounded

#: values (scalars, lists, mappings) a document may hold once every alias is expanded: a shipped
#: figure file holds ~2,000; ten aliases of ten aliases of ... reach millions in a few lines,
#: and every later walk (the finite check, pydantic, model_dump) visits each copy
MAX_YAML_VALUES = 100_000
#: levels of nesting, aliases expanded (a shipped file has at most 6): deeper is no testbed input,
#: and Python's recursion limit would end the walk in a RecursionError
MAX_YAML_DEPTH = 50


class _AliasProblem(yaml.YAMLError):
    """A loop or an expansion past the bounds; the message is what follows `FILE: `."""


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader that refuses, while it composes, an alias to a node that contains it (PyYAML
    builds that as a self-containing list, on which any walk recurses forever) and nesting past
    MAX_YAML_DEPTH, and records every alias so `_check_expansion` can size the document before
    anything walks it. PyYAML has no such bound of its own (its `max_depth`-like options are
    for the emitter), hence this subclass of its composer's one hook."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._open: list[str | None] = []  # anchors of the collections being composed, outermost first
        self.aliases: list[tuple[str, yaml.Mark, yaml.Node]] = []

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            if event.anchor in self._open:
                raise _AliasProblem(
                    f"line {event.start_mark.line + 1}: alias *{event.anchor} points into the value that holds it "
                    f"(&{event.anchor}, a loop); write the values out instead of the alias"
                )
            node = super().compose_node(parent, index)
            self.aliases.append((event.anchor, event.start_mark, node))
            return node
        event = self.peek_event()
        if len(self._open) >= MAX_YAML_DEPTH:
            raise _AliasProblem(
                f"line {event.start_mark.line + 1}: nested more than {MAX_YAML_DEPTH} levels deep; flatten the file"
            )
        self._open.append(getattr(event, "anchor", None))
        try:
            return super().compose_node(parent, index)
        finally:
            self._open.pop()


def _load_bounded(text: str) -> object:
    """Compose `text`, check what its aliases expand to, then construct it (shared, not copied)."""
    loader = _BoundedLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if loader.aliases:
            _check_expansion(node, loader.aliases)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _check_expansion(root: yaml.Node, aliases: list[tuple[str, yaml.Mark, yaml.Node]]) -> None:
    """Refuse a document (`root`) whose aliases expand it past MAX_YAML_VALUES values or
    MAX_YAML_DEPTH levels, naming the alias that expands to the most. Sizes are counted once per node (memoised), so
    the check takes time in the file's length, not in what it expands to."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}

    def measure(node: yaml.Node) -> None:  # children first, iteratively: no recursion to run out of
        stack: list[tuple[yaml.Node, bool]] = [(node, False)]
        while stack:
            n, ready = stack.pop()
            if id(n) in size:
                continue
            kids = _children(n)
            if ready or not kids:
                size[id(n)] = 1 + sum(size[id(k)] for k in kids)
                depth[id(n)] = 1 + max((depth[id(k)] for k in kids), default=0)
                continue
            stack.append((n, True))
            stack.extend((k, False) for k in kids if id(k) not in size)

    measure(root)
    anchor, mark, node = max(aliases, key=lambda a: size[id(a[2])])
    if size[id(root)] > MAX_YAML_VALUES:
        raise _AliasProblem(
            f"line {mark.line + 1}: aliases expand the file to {size[id(root)]:,} values (at most "
            f"{MAX_YAML_VALUES:,}; *{anchor} here to {size[id(node)]:,}: aliases of aliases multiply); write the "
            "values out or nest fewer aliases"
        )
    anchor, mark, node = max(aliases, key=lambda a: depth[id(a[2])])
    if depth[id(root)] > MAX_YAML_DEPTH:
        raise _AliasProblem(
            f"line {mark.line + 1}: alias *{anchor} nests the file {depth[id(root)]} levels deep (at most "
            f"{MAX_YAML_DEPTH}); write the values out or nest fewer aliases"
        )


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _undecodable_field(raw: bytes, err: UnicodeDecodeError) -> str:
    """The field holding the first byte that is not UTF-8 (else its line), for the error line."""
    line_no = raw[: err.start].count(b"\n") + 1
    line = f"line {line_no} (byte 0x{raw[err.start]:02x})"
    try:
        data = _load_bounded(raw.decode("utf-8", errors="replace"))
    except yaml.YAMLError:
        return line
    for loc, v in _leaves(data):
        if isinstance(v, str) and "\ufffd" in v:
            return ".".join(loc) or line
    return line


class SpecBase(BaseModel):
    """Fields common to every kind; each kind adds its own `kind: Literal[...]` and shape."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: SafeName = Field(default="", description="name used in results and logs")
    scale: float = Field(default=1.0, gt=0, description="divides every rate (and model bytes)")
    seed: int = Field(default=1, description="seed for every random choice (R-regular graph, hashing)")
    worker_mbps: Mbps = Field(description="B_w: rate of a worker's link (ToR downlink)")
    delay_ms: float = Field(default=0.0, ge=0, description="one-way delay per link; needs netem")
    mtu: int = Field(
        default=DEFAULT_MTU,
        ge=1280,
        le=9000,
        description="MTU (bytes) of every emulated interface; 9000 (jumbo frames) raises the emulator's "
        "faithful aggregate (fidelity_budget_mbps), at packets 6x coarser in time",
    )
    tcp: Literal["cubic", "reno", "bbr"] = Field(
        default="cubic",
        description="congestion control of every emulated host's TCP, pinned: a host's namespace would "
        "otherwise take the machine's own (bbr on some VMs), and results would move with the machine",
    )
    rto_min_ms: RtoMin = Field(
        default="auto",
        description="every emulated host's TCP retransmission-timeout floor: auto (a full queue's drain time on "
        "the slowest cable, when above the kernel's 200 ms: scaled rates stretch queue delays, not timers), "
        "kernel (Linux's 200 ms), or ms (Linux 6.11+; emulation.rto)",
    )
    routing: Literal["hashed", "balanced"] = Field(
        default="balanced",
        description="choice among equal-cost paths per (src, dst): hashed (ECMP) or least-loaded",
    )
    relay_queue: Literal["fair", "fifo"] = Field(
        default="fair",
        description="egress queue of a relaying server's NICs (BCube, Torus): fair gives every sending "
        "host its own share (a fair queue, as fq_codel, Linux servers' usual qdisc, shares by flow); fifo "
        "one queue, where TCP Small Queues leave the relay's own flows a few % beside those it forwards",
    )

    patch_cables: bool = Field(
        default=True,
        description="cables that can never be a bottleneck (the kind's `patch_links`: PSNet's ECS-ToR "
        "circuit slots, each carrying one worker's circuit) are OVS patch ports: one pass less through "
        "ovs-vswitchd per packet, no qdisc, no kernel interface; false: every cable a shaped veth pair",
    )

    def emulated(self, paper_mbps: float) -> float:
        """Emulated rate (Mbit/s) of a paper-equivalent rate under this file's scale."""
        return paper_mbps / self.scale


#: pydantic validation context of a spec read for the flow model only (runs.simulate): the
#: emulator's limits, such as a kind's size cap, do not apply (`emulating` tells a validator)
FLOW_MODEL_ONLY = {"emulated": False}


def emulating(info: ValidationInfo) -> bool:
    """Whether a validator checks a spec the emulator will build (not FLOW_MODEL_ONLY)."""
    return bool((info.context or {}).get("emulated", True))


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
