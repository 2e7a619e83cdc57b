"""`testbed simulate`: an experiment file's network part on the flow model, building nothing.

The same files as `testbed run`: the topology model (topologies.build), the controller's circuits
and routes, the job's bytes from the experiment's scale/compress/width logic (the runner's
`choose_width`), and the paper's model (models.bct_model) printed beside the simulated time.

Rates: by default the emulated ones (`Link.mbps`) with the emulated bytes (S / scale /
compress), so the seconds are the emulation's and compare with `testbed run`; `paper=True`
takes `Link.paper_mbps` with S / compress (the same S/B, so the same seconds but for latency).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from pydantic import ValidationError

from models.flow.demands import Traffic, scheme_traffic
from models.flow.links import busiest_cable, platform
from models.flow.routes import EXACT_HOSTS, Routes, flow_routes
from models.flow.simgrid import SimResult, sim_config, simulate
from runs import plink_groups
from runs.plink_groups import Grouped
from schemes.registry import FlowTraffic, Need
from schemes.registry import get as get_scheme
from topologies import kinds
from topologies.build import build_network
from topologies.model import Network
from topologies.schema import TopologyError, TopologySpec, one_line_error, parse_spec
from workloads.experiment import ExperimentSpec, JobSpec, load_experiment

LOG = logging.getLogger(__name__)


def topology_for_simulation(data: dict, source: str) -> TopologySpec:
    """Validate a topology mapping as the testbed does, without the emulator's limits (a kind's
    size cap such as BCube's 256 servers, the rate ceiling): the flow model has none."""
    return parse_spec(data, source, emulated=False)


def parse_sets(sets: list[str], source: str) -> tuple[dict, dict, dict]:
    """`key=value` overrides -> (topology, job, experiment) fields. A key goes to the topology
    when the topology has that field, else to the job, else to the experiment; `topology.`,
    `job.` or `experiment.` in front says which. Values are YAML (`workers=[2,2,2]`)."""
    topo: dict = {}
    job: dict = {}
    exp: dict = {}
    for item in sets:
        key, eq, raw = item.partition("=")
        if not eq or not key:
            raise TopologyError(f"{source}: --set {item}: expected key=value, e.g. --set scale=10")
        value = yaml.safe_load(raw)
        where, _, name = key.rpartition(".")
        if where:
            target = {"topology": topo, "job": job, "experiment": exp}.get(where)
            if target is None:
                raise TopologyError(f"{source}: --set {item}: prefix {where!r}; use topology., job. or experiment.")
            target[name] = value
        elif name in _topology_fields():
            topo[name] = value
        elif name in JobSpec.model_fields:
            job[name] = value
        elif name in ExperimentSpec.model_fields:
            exp[name] = value
        else:
            raise TopologyError(
                f"{source}: --set {item}: no topology, job or experiment field {name!r}; see topologies/README.md "
                "and workloads/README.md"
            )
    return topo, job, exp


def _topology_fields() -> set[str]:
    """Every field of every registered kind's spec (a `--set` key goes to the topology if it is one)."""
    return {f for kind in kinds.KINDS.values() for f in kind.spec_class.model_fields}


@dataclass
class Plan:
    """What one simulation runs: the network, the job's hosts and bytes, the traffic pattern."""

    name: str
    net: Network
    job: JobSpec
    workers: list[str]
    pss: list[str]
    scheme: str
    width: float
    model_bytes: float  # bytes one worker's gradient has in the simulated units
    compress: float
    paper: bool
    #: RAT's paused senders (Traffic.pauses): per host, its windows in seconds from the start
    pauses: dict[str, list[tuple[float, float]]] = field(default_factory=dict)


def plan(path: str | Path, sets: list[str] = (), scheme: str | None = None, paper: bool = False) -> Plan:
    """Read the experiment file, apply `--set` overrides, build the network, size the job.

    The synchronisation is the job's own (`job.scheme`, as `testbed run` runs it) unless
    `scheme` names another; its hosts come from where the run takes them: TF's PS job from the
    topology's PS and worker roles (runs.runloop.resolve_jobs), a scheme job from the job or the
    scheme's defaults (runs.engine_job.job_hosts)."""
    from runs.engine_job import job_hosts
    from runs.predict import choose_width
    from runs.runloop import resolve_jobs
    from schemes.registry import SCHEMES

    src = str(path)
    if scheme is not None and scheme not in SCHEMES:
        raise TopologyError(f"{src}: --scheme {scheme}: unknown; use one of {', '.join(SCHEMES)}")
    exp, topo, topo_path = load_experiment(path)
    t_set, j_set, e_set = parse_sets(list(sets), src)
    topo = topology_for_simulation({**topo.model_dump(), **t_set}, str(topo_path))
    if j_set or e_set:
        data = exp.model_dump()
        if j_set:
            key = "job" if exp.job is not None else "jobs"
            data[key] = {**data["job"], **j_set} if key == "job" else [{**data["jobs"][0], **j_set}, *data["jobs"][1:]]
        data.update(e_set)
        try:
            exp = ExperimentSpec.model_validate(data)
        except ValidationError as err:
            raise TopologyError(one_line_error(src, err, ExperimentSpec)) from None
    net = build_network(topo, str(topo_path))
    job = exp.all_jobs[0]
    if scheme is not None and scheme != job.scheme:
        job = job.model_copy(update={"scheme": scheme})
    if SCHEMES[job.scheme].flow is FlowTraffic.PS_PHASES:
        _, pss, workers = resolve_jobs(exp, net, src)[0]
    else:
        workers, pss = job_hosts(job, net, src)
    width, emulated = choose_width(job, topo.scale * exp.compress)
    model_bytes = emulated * topo.scale if paper else emulated
    return Plan(exp.name, net, job, workers, pss, job.scheme, width, model_bytes, exp.compress, paper)


@dataclass
class Outcome:
    plan: Plan
    traffic: Traffic
    result: SimResult
    routes: Routes
    bound_s: float
    bound_cable: str
    prediction: dict = field(default_factory=dict)
    config_note: str = ""
    traffic_s: float = 0.0
    grouped: Grouped | None = None  # PLink's groups (runs.plink_groups)


def run(p: Plan, calibrated: bool | None = None, config: dict[str, str] | None = None) -> Outcome:
    """Route, simulate, and put the paper's model beside it (where it applies). `calibrated`:
    whether the stored calibration against this emulator applies (default: at emulated rates,
    not at the paper's; False gives exact max-min); `config`: these SimGrid settings instead
    (the calibration benchmark's factors before they are stored)."""
    from controller.tc import initial_circuits
    from models.flow.routes import IndexedNetwork

    t0 = time.perf_counter()
    from runs.engine_job import scheme_options

    options = scheme_options(p.job)
    if p.paper and options["segment_bytes"]:  # emulated bytes: the same share of a paper-size gradient
        options["segment_bytes"] = round(options["segment_bytes"] * p.net.spec.scale)
    grouped = None
    if Need.CLUSTERS in get_scheme(p.scheme).needs:  # PLink: probes on the model, the racks or random
        grouped = plink_groups.for_flow_model(p.job, p.net, p.workers, p.paper)
        options.update(grouped.options())
    traffic = scheme_traffic(
        p.net,
        initial_circuits(IndexedNetwork.of(p.net)),
        p.scheme,
        p.workers,
        p.pss,
        p.model_bytes,
        **options,
    )
    traffic.pauses = p.pauses
    t1 = time.perf_counter()
    routes = flow_routes(p.net, traffic.pairs())
    cfg, note = sim_config(calibrated=not p.paper if calibrated is None else calibrated)
    if config is not None:
        cfg, note = dict(config), f"{config.get('network/model', 'CM02')} with the given settings"
    result = simulate(platform(p.net, routes, p.paper), traffic, cfg)
    bound, cable = busiest_cable(traffic, routes, p.paper)
    return Outcome(p, traffic, result, routes, bound, cable, model_prediction(p), note, t1 - t0, grouped)


def model_prediction(p: Plan) -> dict:
    """The paper's T_push and T_pull (models.bct_model), network terms only (no compute)."""
    from models import bct_model

    if get_scheme(p.scheme).flow is not FlowTraffic.PS_PHASES:
        return {"note": "the paper's equations model the TF PS job only"}
    if len(p.net.hosts()) > EXACT_HOSTS:
        return {"note": f"skipped: bct_model.predict routes every host pair ({len(p.net.hosts())}^2)"}
    try:
        pred = bct_model.predict(
            p.net,
            p.model_bytes,
            1,
            math.inf,
            math.inf,
            latency_s=p.net.spec.delay_ms / 1000,
            scaled=not p.paper,
            workers=[p.net.nodes[h] for h in p.workers],
            pss=[p.net.nodes[h] for h in p.pss],
        )
    except ValueError as err:
        return {"note": str(err)}
    return {"equation": pred.equation, "t_push_s": pred.t_push_s, "t_pull_s": pred.t_pull_s, "c": pred.c}


def format_outcome(o: Outcome) -> str:
    """What `testbed run` prints for the network part, from the flow model."""
    p, r = o.plan, o.result
    units = "paper rates and bytes" if p.paper else "emulated rates and bytes"
    scale = p.net.spec.scale
    lines = [
        f"{p.name}: {p.job.model} W={len(p.workers)} P={len(p.pss)} scale {scale:g}"
        + (f" compress {p.compress:g}" if p.compress != 1 else "")
        + f", {p.model_bytes / 1e6:.2f} MB gradient per worker ({units}); traffic {p.scheme}",
    ]
    phases = "  ".join(f"{n} {s:.3f} s" for n, s in zip(o.traffic.phases, r.phase_s, strict=False))
    lines.append(f"  iteration simulated  {r.iteration_s:.3f} s  ({phases})")
    pred = o.prediction
    if pred.get("equation"):
        model = pred["t_push_s"] + pred["t_pull_s"]
        lines.append(
            f"  BCT model (network) {model:.3f} s  (T_push {pred['t_push_s']:.3f} s + T_pull {pred['t_pull_s']:.3f} s, "
            f"{pred['equation']}{'' if pred['c'] is None else ', C = ' + str(pred['c'])})"
            f"  simulated / model {r.iteration_s / model:.3f}"
        )
    else:
        lines.append(f"  BCT model           - ({pred.get('note', '')})")
    if o.grouped is not None:
        g = o.grouped
        members = "; ".join(",".join(m) for m in g.record()["groups"].values())
        how = f"ProbeEmbed on probes on the {g.where}" if g.probes is not None else g.mode
        lines.append(f"  plink groups        {how}: {members} (AMI vs racks {g.ami:.2f})")
    lines.append(
        f"  busiest cable       {o.bound_s:.3f} s  ({o.bound_cable}: its bytes over its rate, per phase; a lower bound)"
    )
    lines.append(
        f"  flow model          {r.messages} messages, {r.links} cables, {r.hosts} hosts; routes "
        f"{o.routes.seconds:.2f} s ({'every pair, as the emulator' if o.routes.exact else 'the used pairs'}); "
        f"SimGrid {r.wall_s:.2f} s, {r.max_rss_mb:.0f} MB max RSS ({o.config_note})"
    )
    return "\n".join(lines)
