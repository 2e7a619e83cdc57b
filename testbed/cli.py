"""`testbed`: the command line. Every failure a user can cause ends in one line, never a traceback.

testbed doctor                      what this machine has and lacks
testbed clean [--all]               remove leftovers of crashed runs (only this testbed's)
testbed topo show FILE              nodes, links, rates, addresses, circuit map, PNG drawing
testbed topo check FILE             build, route, measure; table of verdicts; exit 1 on a FAIL
testbed topo up FILE                bring it up and drop into Mininet's CLI (--cluster FILE: over several servers)
testbed topo place FILE             where each node would run over N servers, and each server's datapath load
testbed topo probe FILE             PLink's pairwise probes between its hosts, heat map, groups
testbed run EXP                     an experiment file: network + TF PS or scheme job, results/NAME/
testbed run EXP --hosts INV         the experiment's job on real servers (hardware mode)
testbed compare RUN_A RUN_B         two runs side by side (emulated vs real)
testbed replay FIG|GROUP            a paper's figure (sweep, plot, report, claims judged)
testbed matrix [FILE]               every topology x scheme cell at one rate: table + heat map
testbed bct FILE                    the paper's BCT model for a topology file (builds nothing)
testbed simulate EXP                an experiment's network part on the SimGrid flow model
testbed remote HOST COMMAND         run, replay, topo check/show, doctor or setup on another machine over SSH
testbed report                      the reproduction page from the committed results (runs nothing)

Global options (-v, --strict) go before or after the subcommand. Exit codes: EXIT_CODES below
(0 ok, 1 the run failed, 2 usage or input, 3 with --strict: ran but not faithful or a claim did
not hold, 130 interrupted). Paths: PATHS below, the same for every command.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from controller.channel_client import ChannelError
from controller.tc import CircuitError
from emulation.hostcmd import CommandError
from runs.summary import RunSummary, Stats, SummaryError
from schemes import registry as scheme_registry
from servers.ssh import SSHError
from topologies.schema import InputError
from workloads.errors import RunError, Unrecoverable
from workloads.experiment import BYTES_ONLY, PAPER_MODEL_BYTES

REPO_DIR = Path(__file__).resolve().parent.parent

if TYPE_CHECKING:
    from replays.report import FigureReport

LOG = logging.getLogger("testbed")
#: what a user's input or a refused request raises: one line, exit code 2 (topology, experiment, figure and
#: timeline errors are all InputError; a malformed summary.json given to compare is a SummaryError)
USER_ERRORS = (InputError, CircuitError, ChannelError, CommandError, FileNotFoundError, SSHError, SummaryError)
#: a run that started and failed (a TF task crashed, the job stalled, a PS failed with no standby):
#: one line, exit code 1
RUN_ERRORS = (RunError, Unrecoverable)
EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FAITHFUL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES = f"""exit codes:
  {EXIT_OK}    done (and with --strict: every run faithful, every claim held)
  {EXIT_FAILED}    the run failed: a TF task crashed or stalled, the job could not go on; or a doctor or
       topo check check failed; or an unexpected error (-v shows its traceback)
  {EXIT_USAGE}    usage or input: a mistyped command, a bad file (one line names file, field and fix)
  {EXIT_NOT_FAITHFUL}    with --strict only: it ran, but a run was not faithful (the emulator could not hold
       its rates) or a paper's claim did not hold
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C, SIGTERM, SIGHUP); whatever was built was torn down"""
PATHS = """paths: a FILE argument is read from the current directory or, when it is not there, from
this checkout, so topologies/psnet-testbed.yaml works from anywhere. What the testbed writes
(runs, replays, matrices, drawings) goes to the checkout's results/ unless you name the path
(--png, remote --results). This checkout: {repo}"""


def cmd_doctor(args: argparse.Namespace) -> int:
    from emulation import doctor, tso
    from topologies.spec import datapath_ceiling, measured_ceiling

    bad = 0
    for c in doctor.checks():
        mark = "ok  " if c.ok else ("FAIL" if c.blocking else "note")
        bad += (not c.ok) and c.blocking
        print(f"{mark}  {c.name:24s} {c.detail}")
    with_tso = not bad and tso.enabled()
    unmeasured = measured_ceiling() is None or (with_tso and measured_ceiling(tso=True) is None)
    if not bad and (args.measure or (unmeasured and not args.no_measure)):
        from emulation.bringup import TestbedError
        from emulation.ceiling import NotMeasured, measure_ceiling

        print(f"....  {'datapath ceiling':24s} measuring (~{80 if with_tso else 40} s, once; cached)")
        try:
            measure_ceiling(queue=args.measure)
        except (TestbedError, NotMeasured) as err:  # the emulator or the machine is busy
            print(f"note  {'datapath ceiling':24s} not measured: {err}")
    for label, on in (("datapath ceiling", False), ("ceiling with TSO", True))[: 1 + with_tso]:
        mbps, source = datapath_ceiling(tso=on)
        mark = "ok  " if measured_ceiling(tso=on) else "note"
        print(f"{mark}  {label:24s} {mbps:.0f} Mbit/s at MTU 1500: {source}")
    _relay_lines()
    print("ready to emulate" if not bad else f"{bad} blocking problem(s): fix them, then run testbed doctor again")
    return 1 if bad else 0


def _relay_lines() -> None:
    """Where servers relay (BCube, Torus), the rate per cable up to which this machine carried an
    all-to-all faithfully (emulation.relaying; measured by scripts/bench_alltoall.sh, ~8 min)."""
    from emulation.relaying import measured

    for kind in ("bcube", "torus"):
        c = measured(kind)
        name = f"relay ceiling ({kind})"
        if c is None:
            print(f"note  {name:24s} not measured: scripts/bench_alltoall.sh measures it; runs are not judged on it")
        elif c.failed_mbps is None:
            print(f"ok  {name:24s}   held to {c.mbps:g} Mbit/s per cable, the highest rate tried ({c.measured})")
        else:
            print(
                f"ok  {name:24s}   {c.mbps:g} Mbit/s per cable (at {c.failed_mbps:g}: {c.failed_ratio:.2f}x the "
                f"lowest rate's all-to-all time; {c.topology}, {c.measured}); runs above it are not faithful"
            )


def cmd_clean(args: argparse.Namespace) -> int:
    from emulation import registry

    removed = registry.clean(include_live=args.all)
    for r in removed:
        print(f"removed {r}")
    print(f"clean: {len(removed)} item(s) removed" if removed else "clean: nothing of this testbed was left over")
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from testbed.show import describe, draw
    from topologies.build import load_network

    net = load_network(args.file)
    print(describe(net))
    png = Path(args.png) if args.png else REPO_DIR / "results" / "topologies" / f"{net.name}.png"
    if args.png != "":
        draw(net, png)
        print(f"drawing: {png}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from emulation.net import Testbed
    from testbed.check import format_rows, run_checks

    _topology_budget(args)
    with Testbed(args.file) as tb:
        rows = run_checks(tb, iperf_s=args.iperf_seconds)
    print(format_rows(rows))
    failed = sum(r.ok is False for r in rows)
    print(f"{sum(r.ok is True for r in rows)} passed, {failed} failed")
    return 1 if failed else 0


def _topology_budget(args: argparse.Namespace) -> None:
    """`topo up`/`topo check`: refuse a network that would not fit this machine before it is built."""
    if args.no_budget:
        LOG.warning("--no-budget: the resource budget is not checked")
        return
    from topologies.schema import load_spec
    from workloads.budget import check_topology

    check_topology(load_spec(args.file), args.file)


def cmd_place(args: argparse.Namespace) -> int:
    """`testbed topo place FILE`: where each node would run over a cluster's servers (or N named
    ones), by the traffic of the file's intended pairs, and what each server's datapath carries."""
    from emulation.cluster_inventory import load_cluster
    from emulation.placement import place, servers_needed
    from topologies.build import build_network
    from topologies.schema import load_spec
    from workloads.budget import BUDGET_HOPS, Machine

    spec = load_spec(args.file)
    net = build_network(spec, args.file)
    m = Machine.here(spec.mtu)
    names = [s.name for s in load_cluster(args.cluster).servers] if args.cluster else []
    if not names:
        hops = sum(place(net, ["one"]).hops.values())
        names = [f"server{i + 1}" for i in range(args.servers or servers_needed(hops, m.ceiling_mbps, BUDGET_HOPS))]
    p = place(net, names)
    for server in p.servers:
        nodes = p.nodes_on(server)
        share = p.hop_mbps(server) / BUDGET_HOPS / m.ceiling_mbps
        print(
            f"{server}: {len(nodes)} nodes ({', '.join(nodes[:8])}{' ...' if len(nodes) > 8 else ''}); "
            f"{p.hop_mbps(server) / BUDGET_HOPS:,.0f} Mbit/s x-hop/{BUDGET_HOPS}, {share:.0%} of this machine's "
            f"ceiling of {m.ceiling_mbps:.0f} Mbit/s"
        )
    cut = ", ".join(f"{ln.a}-{ln.b}" for ln in p.cut[:8]) + (" ..." if len(p.cut) > 8 else "")
    share = f"{p.cut_share:.0%} of the traffic ({p.cut_mbps:,.0f} Mbit/s)"
    print(f"tunnelled: {len(p.cut)} cables ({cut or 'none'}), {share}")
    return 0


def cmd_up(args: argparse.Namespace) -> int:
    from emulation.net import Testbed
    from testbed.mncli import TestbedCLI

    if args.cluster:
        from emulation.cluster_inventory import load_cluster
        from emulation.cluster_net import ClusterTestbed

        inv = load_cluster(args.cluster)
        tb_cm = ClusterTestbed(args.file, inv)
        print(f"placement: {tb_cm.placement.text()}")
    else:
        _topology_budget(args)
        tb_cm = Testbed(args.file)
    with tb_cm as tb:
        print(f"{tb.model.name}: up in {tb.timings['bring_up_s']:.2f} s; control channel 127.0.0.1:{tb.channel_port}")
        if args.cli:
            print("Mininet CLI with extra commands: circuits, ecs, fail, repair")
            TestbedCLI(tb.mn, testbed=tb)
        else:
            print("up; press Ctrl-C to tear it down")
            signal.pause()
    return 0


def cmd_probe(args: argparse.Namespace) -> int:
    """`testbed topo probe FILE`: runs.probe on the file's network, written and summarised."""
    import json

    from emulation.net import Testbed
    from runs import probe
    from topologies.build import build_network
    from topologies.schema import load_spec

    known = [h.name for h in build_network(load_spec(args.file)).hosts()]  # checked before anything is built
    hosts = args.probe_hosts or known
    unknown = sorted(set(hosts) - set(known))
    if unknown or len(set(hosts)) < 3:
        what = f"no host {', '.join(unknown)} in it" if unknown else "ProbeEmbed needs at least 3 distinct hosts"
        raise InputError(f"{args.file}: --hosts: {what}; its hosts: {', '.join(known)}")
    _topology_budget(args)
    with Testbed(args.file) as tb:
        p = probe.probe(tb, list(dict.fromkeys(hosts)), args.kind, seconds=args.seconds)
        net = tb.model
    out = Path(args.out) if args.out else REPO_DIR / "results" / "probes" / net.name
    g = probe.embed_and_group(p, net)
    record = {
        "topology": args.file,
        "kind": p.kind,
        "unit": p.unit,
        "rounds": p.rounds,
        "probes": [{"a": a, "b": b, "value": v} for (a, b), v in sorted(p.values.items())],
        "groups": dict(zip(p.hosts, g.labels, strict=True)),
        "ami_vs_racks": g.ami,
        "paia": {"raw": g.paia_raw, "embedded": g.paia_embedded},
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "probes.json").write_text(json.dumps(record, indent=1))
    png = probe.heatmap(p, out / "probes.png", f"{net.name}: pairwise {p.kind} ({p.unit})")
    lo, hi = min(p.values.values()), max(p.values.values())
    print(f"{net.name}: {len(p.values)} pairs in {p.rounds} rounds, {p.kind} {lo:.3g}-{hi:.3g} {p.unit}")
    groups: dict[int, list[str]] = {}
    for h, lab in zip(p.hosts, g.labels, strict=True):
        groups.setdefault(lab, []).append(h)
    print("ProbeEmbed groups: " + "; ".join(", ".join(m) for m in groups.values()))
    print(f"against the racks: AMI {g.ami:.2f}, PAIA raw {g.paia_raw:.2f}, embedded {g.paia_embedded:.2f}")
    print(f"written: {out / 'probes.json'}, {png}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    from runs.runner import run_experiment

    hosts = Path(args.hosts) if args.hosts else None  # an inventory: real servers (servers.hardware)
    if hosts is not None and not args.verbose:  # paramiko's transport chatter; failures are our one line
        logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    if hosts is not None:
        from servers.hardware import run_hardware_experiment

        res = run_hardware_experiment(args.experiment, hosts, Path(args.results), progress=progress_on(args))
    else:
        if args.no_budget:
            LOG.warning("--no-budget: the resource budget is not checked")
        from testbed.clusterrun import cluster_run

        budget = not args.no_budget
        with cluster_run(args.experiment, args.cluster, budget) if args.cluster else contextlib.nullcontext():
            res = run_experiment(
                args.experiment,
                Path(args.results),
                progress=progress_on(args),
                budget=budget and not args.cluster,  # a cluster's budget was checked above
            )
    s = res.summary
    if s.scheme:
        _print_scheme_run(s, res.out_dir)
        return strict_code(args, _run_shortfalls(s))
    b, pred = s.bct_s, s.pred
    print(
        f"{s.name}: {s.model} W={s.workers} P={s.ps} BS={s.batch_size} scale {s.scale:g}, "
        f"{(s.model_bytes_emulated or 0) / 1e6:.2f} MB pushed per worker-step (x{s.scale:g} = paper S)"
    )
    print(f"  BCT measured  mean {b.mean:.3f} s  p50 {b.p50:.3f}  p95 {b.p95:.3f}  +-{b.ci95:.3f} (95% CI, n={b.n})")
    if pred.get("equation"):
        print(
            f"  BCT model     min {pred['bct_min_s']:.3f} s  max {pred['bct_max_s']:.3f} s  ({pred['equation']}; "
            f"T_push {pred['t_push_s']:.3f} s, T_compute {pred['t_compute_s']:.3f} s)"
        )
    print(host_time_line(s.host_time or {}))
    placed = s.predicted_placement or {}
    if placed.get("bct_max_s"):
        print(
            f"  with PS split min {placed['bct_min_s']:.3f} s  max {placed['bct_max_s']:.3f} s  (the busiest PS holds "
            f"{placed['largest_ps_share']:.0%} of the bytes; the equations assume 1/P)"
        )
    for name, js in (s.jobs or {}).items():
        jb = js.bct_s
        print(f"  job {name:9s} W={js.workers} P={js.ps}: BCT mean {jb.mean:.3f} s (n={jb.n})")
    _print_flows(s)
    if s.hardware:
        _print_hardware(s)
    else:
        print(f"  fidelity      {'faithful' if s.faithful else 'NOT faithful'}: {s.fidelity_reason}")
    if s.timeline:
        _print_timeline(s.timeline.as_dict())
    print(f"  results       {res.out_dir}")
    return strict_code(args, _run_shortfalls(s))


def _print_hardware(s: RunSummary) -> None:
    """A hardware run's servers (data-plane NIC bytes, CPU) where an emulated run prints its verdict."""
    print(f"  model         {s.prediction_applies}")
    for name, v in (s.hardware.servers if s.hardware else {}).items():
        cpu = "-" if v["cpu_mean"] is None else f"{v['cpu_mean']:.0%} mean, {v['cpu_p95']:.0%} p95 of {v['cpus']} CPUs"
        print(
            f"  server {name} ({', '.join(v['plays'])}): {v['nic']} rx {v['rx_bytes'] / 1e6:.2f} MB tx "
            f"{v['tx_bytes'] / 1e6:.2f} MB over {v['seconds']:.1f} s; CPU {cpu}"
        )


def cmd_compare(args: argparse.Namespace) -> int:
    from testbed.compare import compare, load_run

    print(compare(load_run(args.run_a), load_run(args.run_b)))
    return 0


def _print_scheme_run(s: RunSummary, out_dir: Path) -> None:
    """What `testbed run` prints for a scheme job (runs.engine_job)."""
    g, b = s.gst_s or Stats(), s.bct_s
    print(
        f"{s.name}: {s.scheme} ({s.compute} compute) {s.model} W={s.workers} P={s.ps} "
        f"scale {s.scale:g}, {(s.model_bytes_emulated or 0) / 1e6:.2f} MB gradient per worker"
    )
    print(f"  GST measured  mean {g.mean:.3f} s  p95 {g.p95:.3f}  +-{g.ci95:.3f} (95% CI, n={g.n})")
    print(f"  BCT measured  mean {b.mean:.3f} s  (compute {s.compute_s_per_step:.3f} s per step when calibrated)")
    print(f"  schedule      busiest cable at its rate {s.expected_sync_s:.3f} s; chain {s.chain_length} messages")
    if s.cable_load_gbps is not None:
        slow = (
            f": this machine's flow-model calibration expects GST {s.load_slowdown:.2f}x max-min from it"
            + (f" and its {s.connections} connections" if s.connections else "")
            if s.load_slowdown
            else ""
        )
        print(f"  cable load    {s.cable_load_gbps:.2f} Gbit/s over the veth cables at that bound{slow}")
    if s.engine_cpu_s_per_gb is not None:
        print(f"  engine CPU    {s.engine_cpu_s_per_gb:.2f} s per GB sent, in synchronisations (all hosts)")
    streams, segment = s.get("streams"), s.get("segment_kb")
    if streams is not None:
        print(f"  transport     {streams} connection(s) per peer, {segment:g} KB segments")
    plink = s.get("plink")
    if plink:
        members = "; ".join(",".join(m) for m in plink["groups"].values())
        how = (
            f"ProbeEmbed on probes ({plink['probe_rounds']} rounds)"
            if plink.get("probe_rounds")
            else plink["groups_mode"]
        )
        print(f"  plink groups  {how}: {members} (AMI vs racks {plink['ami_vs_racks']:.2f})")
    if s.cross_region_bytes:
        levels = ", ".join(f"level {i}: {v / 1e6:.2f} MB" for i, v in enumerate(s.cross_region_bytes))
        print(f"  cross-region  {levels}")
    if s.sums_checked:
        print(f"  sums          {'exact on every worker' if not s.sum_problems else s.sum_problems[0]}")
    _print_flows(s)
    print(f"  fidelity      {'faithful' if s.faithful else 'NOT faithful'}: {s.fidelity_reason}")
    tl = s.timeline.as_dict() if s.timeline else None
    if tl:
        draws = [e for e in tl["events"] if e["action"] == "pause_senders"]
        if draws:
            hosts = {h for e in draws for h in e["target"].split(" for ")[0].split(",")}
            print(f"  paused        {len(draws)} draws over {len(hosts)} hosts (each in events.csv)")
        network = [e for e in tl["events"] if e["action"] != "pause_senders"]
        if network or tl.get("not_applied"):
            _print_timeline({**tl, "events": network})
    print(f"  results       {out_dir}")


def _print_flows(s: RunSummary) -> None:
    """The routing and C measured on the busiest shared link (emulation.flows)."""
    c = s.flows_on_busiest_link
    if not c:
        return
    where = f"on {c.link}" if c.link else "(no shared link carried a connection)"
    routes = f"; the controller's per-pair paths give {c.from_routes}" if c.from_routes is not None else ""
    lost = f"; {c.unmapped} of {c.streams} not followed" if c.unmapped else ""
    print(f"  routing       {s.routing or '?'}: C = {c.c} connections {where}{routes}{lost}")


def _num(v: float | None, fmt: str = ".2f") -> str:
    return "-" if v is None else format(v, fmt)


def _print_timeline(tl: dict) -> None:
    """The timeline's events with what each cost the job (runs.recovery.recovery)."""
    print(
        "  timeline  t (s)  event                          applied (ms)  resume (s)  recovery (s)  slow steps  "
        "extra (s)  steps lost  dropped (kB)"
    )
    for e in tl["events"]:
        rec = "never" if e["recovery_s"] is None and e["slow_steps"] else _num(e["recovery_s"])
        print(
            f"  {e['t'] - tl['t0']:13.2f}  {e['action'] + ' ' + e['target']:30.30s} {e['took_ms']:12.0f} "
            f"{_num(e['resume_s']):>11s} {rec:>13s} {_num(e['slow_steps'], 'd'):>11s} {_num(e['extra_s']):>10s} "
            f"{_num(e.get('steps_lost'), 'd'):>11s} {e.get('dropped_bytes', 0) / 1e3:13.0f}"
        )
    for e in tl.get("not_applied", []):
        print(f"  not applied (the job ended first): {e}")


def cmd_bct(args: argparse.Namespace) -> int:
    from models import bct_model
    from tfjob import calibrate, dnn
    from topologies.build import load_network
    from workloads.experiment import PAPER_MODEL_BYTES

    net = load_network(args.file)
    paper_bytes = args.model_bytes or PAPER_MODEL_BYTES[args.model]
    if args.p_w and args.p_s:
        p_w, p_s = args.p_w, args.p_s
    else:
        width = dnn.width_for_bytes(args.model, paper_bytes / net.spec.scale)
        cal = calibrate.calibrate(
            lambda: dnn.build_model(args.model, width), f"{args.model}@w{width:.6g}", args.batch_size
        )
        p_w, p_s = cal.p_w_samples_per_s, cal.p_s_bytes_per_s * net.spec.scale  # P_s on paper-sized updates
    pred = bct_model.predict(
        net, paper_bytes, args.batch_size * len(net.workers()), p_w, p_s, latency_s=args.latency_ms / 1000, scaled=False
    )
    print(
        f"{net.name}: {args.model}, S = {paper_bytes / 1e6:.1f} MB, W={pred.workers} P={pred.ps}, "
        f"BS={args.batch_size} per worker; P_w {p_w:.2f} samples/s, P_s {p_s:.3g} B/s ({pred.equation})"
    )
    print(
        f"  T_push = T_pull {pred.t_push_s:.3f} s (per-flow {pred.flow_mbps:.1f} Mbit/s"
        + (f", C = {pred.c}" if pred.c is not None else "")
        + ")"
    )
    print(f"  T_compute {pred.t_compute_s:.3f} s  T_ps_update {pred.t_ps_update_s:.3f} s")
    print(f"  BCT_min {pred.bct_min_s:.3f} s   BCT_max {pred.bct_max_s:.3f} s   (paper-equivalent seconds)")
    return 0


def host_time_line(ht: dict) -> str:
    """`testbed run`'s line on the job's host-time mode (tfjob.hosttime)."""
    if ht.get("mode") not in ("full", "pinned"):
        return (
            "  host time     scaled: the run's own at its scaled model size (job.host_time: full pads to full size, "
            "a number of seconds pins it)"
        )
    f = ht["full"]
    if ht["mode"] == "pinned":
        return (
            f"  host time     pinned: every step padded {ht['pad_s']:.3f} s to the job's {ht['full_s']:.3f} s "
            f"(at this run's size {ht['scaled_s']:.3f} s measured here)"
        )
    return (
        f"  host time     full: every step padded {ht['pad_s']:.3f} s (full size {ht['full_s']:.3f} s = worker "
        f"{f['worker_s']:.3f} + PS {f['ps_s']:.3f}; at this run's size {ht['scaled_s']:.3f} s)"
    )


def cmd_simulate(args: argparse.Namespace) -> int:
    from runs.simulate import format_outcome, plan, run

    p = plan(args.experiment, args.set, scheme=args.scheme, paper=args.paper)
    print(format_outcome(run(p, calibrated=False if args.exact else None)))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Each figure of the name or group through its kind's evaluator (replays.framework): emulated
    runs, or the closed-form and flow models for the model figures (Figs. 6-7, no emulation).
    `stale`: a figure stale by drawing code alone keeps its runs and is redrawn, the others run afresh."""
    from replays import evidence

    evidence.loaded_tree()  # the tree its reports are drawn with, read before their code loads
    from replays import figure, framework

    group = figure.group_names(args.figure)
    redraw: set[str] = set()
    if args.figure == STALE_GROUP:
        group, redraw = _stale_figures(Path(args.results))
        if not group:
            print("every shipped figure's committed result is current: nothing to replay")
            return 0
    names = group if group is not None else [args.figure]
    models = figure.figure_names("model")
    opts = framework.ReplayOptions(
        quick=args.quick,
        fresh=args.fresh or args.figure == STALE_GROUP,  # points kept from the stale run would stay stale
        repeat=args.repeat,
        repeat_as=args.repeat_as,
        report_only=args.report_only,
        progress=progress_on(args),
        results=Path(args.results),
        budget=not args.no_budget and not args.cluster,
    )
    shortfalls: list[str] = []
    with _over_cluster(args):
        for name in names:
            kind = framework.kind_of(name)
            done = kind.replay(name, replace(opts, fresh=False) if name in redraw else opts)  # kept runs redrawn
            if done.nothing:
                print(done.nothing)
                continue
            print(f"{name}: {done.report}  {done.figure}")
            shortfalls += done.shortfalls
            headline = speedup_table(done.out) if kind.kind == "figure" else ""
            if headline:
                print(headline)
    if group is not None:
        from replays.report import overview

        print(overview(Path(args.results), [n for n in names if n not in models]))
    return strict_code(args, shortfalls)


#: `testbed replay stale`: every figure whose committed result a re-run would bring up to date
STALE_GROUP = "stale"


def _stale_figures(results: Path) -> tuple[list[str], set[str]]:
    """The figures `testbed report` marks stale (or of unknown provenance, unreadable, quick only,
    never run), in the page's order, and those among them stale by drawing code alone (a redraw,
    replays.staleness.DRAWING); the matrix's and benchmarks' commands among them are printed,
    not run (they are not figures: `testbed matrix`, scripts/bench_*.sh)."""
    from replays import figure, reproduction

    redo = reproduction.to_redo(reproduction.collect(results, REPO_DIR))
    figures = set(figure.figure_names("all"))
    names = [e.name for e in redo if e.name in figures]
    redraw = {e.name for e in redo if e.name in figures and e.staleness is not None and e.staleness.redraw}
    others = [e for e in redo if e.name not in figures]
    if names:
        print(f"to replay ({len(names)}): {', '.join(names)}")
    if redraw:
        print(f"of which stale by drawing code alone, redrawn from their runs: {', '.join(sorted(redraw))}")
    for e in others:
        print(f"also out of date, not a figure: {e.name}: {e.command}")
    return names, redraw


def _over_cluster(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """`replay`/`matrix --cluster FILE`: every point's network over the servers (testbed.clusterrun),
    with the budget off (a point's budget is one machine's)."""
    if not args.cluster:
        return contextlib.nullcontext()
    from testbed.clusterrun import cluster_testbeds

    LOG.warning("--cluster: each point runs over %s's servers; the resource budget is not checked", args.cluster)
    return cluster_testbeds(args.cluster)


def cmd_matrix(args: argparse.Namespace) -> int:
    """The matrix: a figure kind of replays.framework (each cell an emulated run)."""
    from replays import evidence

    evidence.loaded_tree()  # the tree its report is drawn with, read before its code loads
    from replays import framework

    opts = framework.ReplayOptions(
        quick=args.quick,
        fresh=args.fresh,
        repeat=args.repeat,
        report_only=args.report_only,
        progress=progress_on(args),
        budget=not args.no_budget and not args.cluster,
    )
    with _over_cluster(args):
        done = framework.Matrices().replay(args.file, opts)
    print(f"{done.name}: {done.report}  {done.figure}")
    return strict_code(args, done.shortfalls)


# --- exit codes, progress, paths ---------------------------------------------------------------------
def strict_code(args: argparse.Namespace, shortfalls: list[str]) -> int:
    """EXIT_NOT_FAITHFUL with --strict when something ran but did not stand (one line says what),
    else EXIT_OK: without --strict an unfaithful run is reported, not an error."""
    if not shortfalls or not getattr(args, "strict", False):
        return EXIT_OK
    more = f" (and {len(shortfalls) - 1} more)" if len(shortfalls) > 1 else ""
    print(f"testbed: --strict: {shortfalls[0]}{more}", file=sys.stderr)
    return EXIT_NOT_FAITHFUL


def _run_shortfalls(s: RunSummary) -> list[str]:
    """An emulated run whose fidelity verdict is not faithful (a hardware run has none to fail)."""
    return [f"{s.name or 'run'}: NOT faithful: {s.fidelity_reason}"] if s.faithful is False else []


def _report_shortfalls(name: str, out: Path) -> list[str]:
    """A figure's points that were not faithful and claims that did not hold (replays.framework)."""
    from replays.framework import report_shortfalls

    return report_shortfalls(name, out)


def progress_on(args: argparse.Namespace) -> bool:
    """Progress bars unless --no-progress, and only where they draw on a terminal (tqdm writes to
    stderr): a log file or a pipe gets no carriage-return redraws."""
    return not getattr(args, "no_progress", False) and sys.stderr.isatty()


#: the arguments of each command that name files to read (see PATHS)
_INPUTS = ("file", "experiment", "hosts")


def resolve_inputs(args: argparse.Namespace) -> None:
    """Apply PATHS to `args`: a relative input path missing from the current directory but present
    in the checkout is taken from the checkout. One rule for every command, so `topo show` and
    `run` agree on where `topologies/x.yaml` is."""
    for name in _INPUTS:
        value = getattr(args, name, None)
        if not value or Path(value).is_absolute() or Path(value).exists():
            continue
        if (REPO_DIR / value).exists():
            setattr(args, name, str(REPO_DIR / value))


def version() -> str:
    """`testbed --version`: the package's version and, in a git checkout, its commit."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        v = dist_version("psnet-testbed")
    except PackageNotFoundError:
        v = "unknown"
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO_DIR), "describe", "--always", "--dirty"], capture_output=True, text=True, timeout=5
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"testbed {v}" + (f" (commit {commit})" if commit else "") + f" at {REPO_DIR}"


class _Version(argparse.Action):
    """--version, worked out only when asked (it runs git)."""

    def __init__(self, option_strings: list[str], dest: str, **_kw: object) -> None:
        super().__init__(
            option_strings, argparse.SUPPRESS, nargs=0, default=argparse.SUPPRESS, help="print the version"
        )

    def __call__(self, parser: argparse.ArgumentParser, *_args: object, **_kw: object) -> None:
        print(version())
        parser.exit()


def interrupted_line() -> str:
    """What Ctrl-C prints: "torn down" only where this process built something (an emulation,
    tasks on real servers); an interrupt while reading files or computing a model built nothing."""
    registry = sys.modules.get("emulation.registry")
    cluster = sys.modules.get("servers.cluster")
    net = sys.modules.get("emulation.net")
    by = f" by {net.INTERRUPTED_BY}" if net is not None and net.INTERRUPTED_BY else ""  # a signal, not Ctrl-C
    if registry is not None and getattr(registry, "RUNS_OPENED", 0):
        return f"testbed: interrupted{by}; everything was torn down"
    if cluster is not None and getattr(cluster.HardwareCluster, "tasks_started", 0):
        return f"testbed: interrupted{by}; every task started on the servers was stopped"
    return f"testbed: interrupted{by} (nothing had been built)"


def speedup_table(out: Path) -> str:
    """The README's headline: the speed-ups a figure's `faster_than` claims compare with the paper
    (Fig. 13: PSNet vs FatTree r=1), read from its report.json; "" when it has none."""
    from replays.claims import PAPER_EQ
    from replays.report import headlines, load_report, ratio_ci95

    rep = load_report(out)
    heads = headlines(rep) if rep else {}
    if not heads:
        return ""
    points = {p.id: p for p in rep.points}
    parts = []
    for group, h in heads.items():
        ratio, paper_eq = h["measured"], h["unit"] == PAPER_EQ
        judged = not h["verdict"].startswith("not judged")  # an unfaithful point: no number stands
        fast_p, slow_p = (points.get(i) for i in h["points"]) if len(h["points"]) == 2 else (None, None)
        ci = ratio_ci95(ratio, fast_p, slow_p, paper_eq) if ratio and judged else None
        over = f"{fast_p.ci_n} reps" if fast_p and fast_p.ci_over == "repetitions" else "steps of one run"
        parts.append(
            f"{group}: paper {h['paper']}x, "
            + (f"measured {ratio:.2f}x" if ratio else "not measured")
            + (f" ± {ci:.2f} (95% CI over {over})" if ci is not None else "")
            + (f" in paper-equivalent seconds (as run {h['as_run']:.2f}x)" if ratio and paper_eq else "")
            + ("" if judged else f", {h['verdict']}")
        )
    fast, slow = next(iter(heads.values()))["series"]
    return f"{fast} vs {slow} speed-up: " + "; ".join(parts) + host_time_note(rep, heads)


def host_time_note(rep: FigureReport, heads: dict[str, dict]) -> str:
    """What a speed-up that includes host time rests on: each group's measured host time per step
    (it differs from machine to machine, and pulls the ratio toward 1) and the ratio of the
    measured communication alone (the machine-independent part), from the report's ratio curves
    (replays.decomposition); "" where the figure has none."""
    host, comm, mode = [], [], ""
    for group, h in heads.items():
        curve = next((c for c in rep.ratio_curves if c.group == group), None)
        ms = curve.measured if curve else []
        # the figure's own runs: of its host-time mode, else the one mode they ran in
        m = next((m for m in ms if m.mode == h["mode"]), ms[0] if len(ms) == 1 else None)
        if m is None or not m.comm_fast_s:
            continue
        mode = m.mode
        host.append(f"{group} {m.host_s:.2f} s")
        comm.append(f"{group} {m.comm_slow_s / m.comm_fast_s:.2f}x")
    if not host:
        return ""
    whose = "the job's host_time, the same on any machine" if mode == "pinned" else "this machine's"
    return f". Host time per step ({mode}, {whose}): {', '.join(host)}; communication alone: {', '.join(comm)}"


def draw_benchmark_figures(results: Path) -> None:
    """Each benchmark's figure and csv from its committed json in RESULTS/bench, named in its
    summary (replays.benchfigures), before the page is built from the summaries. A failure is a
    warning: the page is built with the figures there are."""
    from replays import benchfigures

    bench = results / "bench"
    if not bench.is_dir():
        return
    try:
        benchfigures.draw_all(bench)
    except (OSError, RuntimeError) as err:
        LOG.warning("benchmark figures not drawn (%s): the page shows the ones there are", err)


def cmd_report(args: argparse.Namespace) -> int:
    """docs/reproduction.md and results/index.html from the figure-level summaries in results/
    (replays.reproduction), each benchmark's figure drawn first from its committed json; or, with
    --readme-table, the README's headline table on stdout."""
    import time

    from replays import reproduction, reproduction_page

    t0 = time.monotonic()
    results = Path(args.results)
    if args.readme_table:
        print(reproduction.readme_table(reproduction.collect(results, REPO_DIR)))
        return 0
    draw_benchmark_figures(results)
    sections = reproduction.collect(results, REPO_DIR)
    md = Path(args.md)
    page = Path(args.html) if args.html else results / "index.html"
    reproduction_page.write(sections, md, page)
    for e in (e for s in sections for e in s.entries):
        if e.stale or e.unknown or e.state == reproduction.UNREADABLE:
            print(f"{e.name}: {reproduction_page.status_text(e)}")
    print(reproduction_page.summary_line(sections))
    print(f"written: {md}, {page} ({time.monotonic() - t0:.1f} s)")
    return 0


def cmd_remote(args: argparse.Namespace) -> int:
    """`testbed remote HOST [options] COMMAND ...` (testbed.remote): the options may come before or
    after HOST; the command is parsed by this parser, so it takes what it takes locally."""
    from servers.ssh import Endpoint
    from testbed.remote import COMMANDS, Options, parse_env, plan, run_remote, split_argv

    options = _remote_options(
        argparse.ArgumentParser(prog=f"testbed remote {args.host}", parents=[global_options(defaults=False)])
    )
    value_options = {s for a in options._actions if a.nargs != 0 for s in a.option_strings}
    opt_words, words = split_argv(args.remote_command, value_options)
    options.parse_args(opt_words, namespace=args)
    if not words or words[0] not in COMMANDS:
        raise InputError(
            f"remote {args.host}: give a command: run EXP | replay FIG | topo check FILE | topo show FILE | doctor | "
            "setup"
        )
    if words[0] == "setup":
        if len(words) > 1:
            raise InputError(f"remote {args.host} setup: takes no arguments, got {' '.join(words[1:])}")
        ns = argparse.Namespace(command="setup")
    else:
        ns = build_parser().parse_args(words)
        resolve_inputs(ns)
    ns.verbose = args.verbose or getattr(ns, "verbose", False)  # -v before HOST, after it, or after the command
    ns.strict = args.strict or getattr(ns, "strict", False)
    if not ns.verbose:  # paramiko logs transport failures with tracebacks; ours is the one line
        logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    endpoint = Endpoint(
        host=args.host,
        port=args.port,
        user=args.user,
        key=Path(args.key) if args.key else None,
        known_hosts=Path(args.known_hosts),
        accept_new_host_key=args.accept_new_host_key,
        timeout_s=args.connect_timeout,
        ssh_config=Path(args.ssh_config),
    )
    opts = Options(path=args.path, sudo=args.sudo, env=parse_env(args.env), results=Path(args.results))
    return run_remote(endpoint, plan(ns), opts)


def _remote_options(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    from replays.figure import REPO

    p.add_argument("--user", default=None, help="login name (default: ~/.ssh/config's User, else yours)")
    p.add_argument("--key", default=None, help="private key file (default: ssh-agent and ~/.ssh/id_*)")
    p.add_argument("--port", type=int, default=None, help="SSH port (default: ~/.ssh/config's Port, else 22)")
    p.add_argument("--path", default=None, help="the remote checkout (default ~/psnet-testbed)")
    p.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="trust a host key not yet in known_hosts and save it there (a changed key is always refused)",
    )
    p.add_argument("--known-hosts", default="~/.ssh/known_hosts", help="host keys checked (default: %(default)s)")
    p.add_argument("--ssh-config", default="~/.ssh/config", help="Host aliases read from (default: %(default)s)")
    p.add_argument("--sudo", action="store_true", help="run the command with sudo -n (the remote login is not root)")
    p.add_argument(
        "--env", action="append", default=[], metavar="NAME=VALUE", help="set in the remote command's environment"
    )
    p.add_argument("--results", default=str(REPO / "results"), help="where fetched results go (default: %(default)s)")
    p.add_argument("--connect-timeout", type=float, default=10.0, help="seconds to wait for the host")
    return p


def global_options(defaults: bool) -> argparse.ArgumentParser:
    """The options every command takes, before or after its name (`testbed -v run X` and
    `testbed run X -v`). The main parser sets the defaults; each subcommand's copy leaves an
    option out of the namespace unless given (SUPPRESS), so it never resets what came first."""
    g = argparse.ArgumentParser(add_help=False)
    unset = {} if defaults else {"default": argparse.SUPPRESS}
    g.add_argument(
        "-v", "--verbose", action="store_true", help="debug logging, and tracebacks of unexpected errors", **unset
    )
    g.add_argument(
        "--strict",
        action="store_true",
        help=f"exit {EXIT_NOT_FAITHFUL} when a run was not faithful or a paper's claim did not hold (run, replay, "
        "matrix)",
        **unset,
    )
    return g


def build_parser() -> argparse.ArgumentParser:
    common = [global_options(defaults=False)]
    p = argparse.ArgumentParser(
        prog="testbed",
        description="PSNet/FatTree/BCube emulation testbed",
        epilog=EXIT_CODES + "\n\n" + PATHS.format(repo=REPO_DIR),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[global_options(defaults=True)],
    )
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True)

    def command(parent: argparse._SubParsersAction, name: str, **kw: object) -> argparse.ArgumentParser:
        return parent.add_parser(name, parents=common, **kw)  # type: ignore[arg-type]

    d = command(sub, "doctor", help="check this machine; measure its datapath ceiling once (cached)")
    d.add_argument(
        "--measure",
        action="store_true",
        help="measure the datapath's faithful ceiling again (~40 s, takes the emulator)",
    )
    d.add_argument("--no-measure", action="store_true", help="do not measure the ceiling even when none is cached")
    d.set_defaults(func=cmd_doctor)
    no_budget = {
        "action": "store_true",
        "help": "do not check the resource budget (memory, cores, the datapath's ceiling) before building",
    }
    c = command(sub, "clean", help="remove leftovers of crashed runs")
    c.add_argument("--all", action="store_true", help="also runs whose owner process is alive")
    c.set_defaults(func=cmd_clean)
    topo = command(sub, "topo", help="topology files").add_subparsers(dest="topo_command", required=True)
    s = command(topo, "show", help="describe a topology file (no root needed)")
    s.add_argument("file")
    s.add_argument("--png", default=None, help="where to draw it (default results/topologies/NAME.png; '' = none)")
    s.set_defaults(func=cmd_show)
    k = command(topo, "check", help="bring up, route, measure, print verdicts")
    k.add_argument("file")
    k.add_argument("--iperf-seconds", type=float, default=3.0, help="length of the shaping probe (0 = skip)")
    k.add_argument("--no-budget", **no_budget)  # type: ignore[arg-type]
    k.set_defaults(func=cmd_check)
    u = command(topo, "up", help="bring up (and open Mininet's CLI with --cli)")
    u.add_argument("file")
    u.add_argument("--cli", action="store_true", help="drop into Mininet's CLI (else stay up until Ctrl-C)")
    u.add_argument("--no-budget", **no_budget)  # type: ignore[arg-type]
    u.add_argument("--cluster", metavar="FILE", help="spread it over this cluster file's servers")
    u.set_defaults(func=cmd_up)
    pl = command(topo, "place", help="where each node would run over several servers (--cluster), and each one's load")
    pl.add_argument("file")
    pl.add_argument("--cluster", metavar="FILE", help="the cluster file whose servers to place on")
    pl.add_argument("--servers", type=int, default=None, help="N servers named server1..N (default: as many as needed)")
    pl.set_defaults(func=cmd_place)
    pr = command(topo, "probe", help="PLink's pairwise probes between hosts, a heat map, and ProbeEmbed's groups")
    pr.add_argument("file")
    pr.add_argument("--kind", choices=("bandwidth", "latency"), default="bandwidth", help="what to probe")
    pr.add_argument("--seconds", type=float, default=1.0, help="length of one bandwidth probe round")
    pr.add_argument(
        "--hosts", dest="probe_hosts", nargs="+", help="the hosts to probe (default: every host of the file)"
    )
    pr.add_argument("--out", help="folder for probes.json and probes.png (default results/probes/NAME)")
    pr.add_argument("--no-budget", **no_budget)  # type: ignore[arg-type]
    pr.set_defaults(func=cmd_probe)
    r = command(sub, "run", help="run an experiment file (network + TF job), write results/NAME/")
    r.add_argument("experiment")
    r.add_argument("--no-progress", action="store_true", help="no progress bar (none either when not on a terminal)")
    r.add_argument("--hosts", metavar="INVENTORY", help="run on the real servers of this inventory file (over SSH)")
    r.add_argument("--cluster", metavar="FILE", help="spread the emulated network over this cluster file's servers")
    r.add_argument("--no-budget", **no_budget)  # type: ignore[arg-type]
    r.add_argument(
        "--results",
        default=str(REPO_DIR / "results"),
        help="the run writes RESULTS/NAME/ (default: %(default)s; tests write to a temporary folder)",
    )
    r.set_defaults(func=cmd_run)
    cp = command(sub, "compare", help="two runs side by side (e.g. emulated vs real): BCT, per-PS bytes, model")
    cp.add_argument("run_a", help="a results folder, or a run name under results/")
    cp.add_argument("run_b")
    cp.set_defaults(func=cmd_compare)
    rp = command(sub, "replay", help="replay a figure (fig1 ... fig13, rat-fig6, hips-table3, ...) or a group of them")
    rp.add_argument(
        "figure",
        help="a figure file's name (workloads/figures/NAME.yaml), or a group: psnet (the PSNet paper's Figs. 1, "
        "6-7, 9-13), rat, hips, plink, pf, all, or stale (every figure whose committed result `testbed report` "
        "marks stale, or that has none)",
    )
    rp.add_argument("--quick", action="store_true", help="the figure's two-point reduced sweep (~1-2 min)")
    rp.add_argument("--repeat", type=int, default=None, help="runs per point (default: the figure file's)")
    rp.add_argument("--fresh", action="store_true", help="rerun points already finished")
    rp.add_argument(
        "--repeat-as",
        choices=["rounds", "runs"],
        default=None,
        help="a point's repetitions as rounds of one job (one network and TF process set per point) or as "
        "separate runs (default: the figure file's repeat_as, rounds)",
    )
    rp.add_argument(
        "--report-only",
        action="store_true",
        help="recompute the model, redraw plot and report from saved results (no run)",
    )
    rp.add_argument("--no-progress", action="store_true", help="no progress bar (none either when not on a terminal)")
    rp.add_argument(
        "--results", default=str(REPO_DIR / "results"), help="where figure folders go (default: %(default)s)"
    )
    rp.add_argument("--no-budget", **no_budget)  # type: ignore[arg-type]
    rp.add_argument("--cluster", metavar="FILE", help="run every emulated point over this cluster file's servers")
    rp.set_defaults(func=cmd_replay)
    mx = command(sub, "matrix", help="every topology x scheme cell at one rate: table + heat map")
    mx.add_argument(
        "file", nargs="?", default="workloads/matrix/matrix.yaml", help="a matrix file (default: %(default)s)"
    )
    mx.add_argument("--quick", action="store_true", help="the file's few-cell subset (~2-3 min)")
    mx.add_argument("--repeat", type=int, default=None, help="runs per cell (default: the file's)")
    mx.add_argument("--fresh", action="store_true", help="rerun cells already finished")
    mx.add_argument("--report-only", action="store_true", help="redraw table and heat map from saved runs")
    mx.add_argument("--no-budget", **no_budget)  # type: ignore[arg-type]
    mx.add_argument("--cluster", metavar="FILE", help="run every cell over this cluster file's servers")
    mx.add_argument("--no-progress", action="store_true", help="no progress bar (none either when not on a terminal)")
    mx.set_defaults(func=cmd_matrix)
    rr = command(
        sub,
        "report",
        help="the reproduction page (docs/reproduction.md, results/index.html) from the committed results",
        description="Builds the reproduction page from the figure-level summaries in results/ (runs nothing): "
        "each paper headline with the paper's number, ours, the verdict, provenance and a stale mark. Each "
        "benchmark's figure and csv are drawn first from its committed json (replays.benchfigures).",
    )
    rr.add_argument("--results", default=str(REPO_DIR / "results"), help="results folder (default: %(default)s)")
    rr.add_argument("--md", default=str(REPO_DIR / "docs" / "reproduction.md"), help="markdown page written")
    rr.add_argument("--html", default=None, help="HTML gallery written (default: RESULTS/index.html)")
    rr.add_argument("--readme-table", action="store_true", help="print the README's headline table, write nothing")
    rr.set_defaults(func=cmd_report)
    b = command(sub, "bct", help="the paper's BCT model for a topology file (builds nothing)")
    b.add_argument("file")
    b.add_argument(
        "--model", default="vgg16", choices=sorted(set(PAPER_MODEL_BYTES) - BYTES_ONLY), help="default: %(default)s"
    )
    b.add_argument("--model-bytes", type=float, default=None, help="paper-equivalent S (default: the paper's)")
    b.add_argument("--batch-size", type=int, default=1, help="samples per worker step")
    b.add_argument("--p-w", type=float, default=None, help="P_w samples/s per worker (default: calibrated here)")
    b.add_argument("--p-s", type=float, default=None, help="P_s bytes/s per PS (default: calibrated here)")
    b.add_argument("--latency-ms", type=float, default=0.0, help="per-link latency")
    b.set_defaults(func=cmd_bct)
    sm = command(sub, "simulate", help="an experiment's network part on the SimGrid flow model (builds nothing)")
    sm.add_argument("experiment")
    sm.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a topology or job field")
    sm.add_argument(
        "--scheme",
        default=None,
        choices=scheme_registry.names(),
        help="another scheme of the registry for the same hosts and bytes (default: the job's own, as testbed run)",
    )
    sm.add_argument("--paper", action="store_true", help="paper rates and bytes (default: the emulated ones)")
    sm.add_argument("--exact", action="store_true", help="exact max-min, without the emulator's stored calibration")
    sm.set_defaults(func=cmd_simulate)
    rm = _remote_options(
        command(
            sub,
            "remote",
            help="run a command on another machine over SSH: push its files, stream its output, fetch its results",
            description="testbed remote HOST [options] run EXP | replay FIG | topo check FILE | topo show FILE | "
            "doctor | setup",
        )
    )
    rm.add_argument("host", help="host name, address or ~/.ssh/config alias")
    rm.add_argument(
        "remote_command", nargs=argparse.REMAINDER, help="options above, then the command and its arguments"
    )
    rm.set_defaults(func=cmd_remote)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    resolve_inputs(args)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TensorFlow's start-up chatter hides our output
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    from tqdm.contrib.logging import logging_redirect_tqdm

    from emulation.net import unwind_on_signals

    unwind_on_signals()  # so `with Testbed` unwinds and tears down on SIGTERM and SIGHUP too
    try:
        with logging_redirect_tqdm():  # log lines print above a progress bar, not through it
            return args.func(args)
    except USER_ERRORS as err:
        print(f"testbed: {err}", file=sys.stderr)
        return EXIT_USAGE
    except RUN_ERRORS as err:
        if args.verbose:
            raise
        print(f"testbed: {err}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        try:
            print(interrupted_line(), file=sys.stderr)
        except OSError:  # SIGHUP: the terminal is gone (EIO); the teardown is done all the same
            pass
        return EXIT_INTERRUPTED
    except Exception as err:  # TestbedError and friends: one line, details with -v
        if args.verbose:
            raise
        print(f"testbed: {type(err).__name__}: {err} (run with -v for details)", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
