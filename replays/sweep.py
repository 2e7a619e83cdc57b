"""Figure sweeps: a figure file lists points (topology + overrides + job); run them all.

    testbed replay fig13 [--quick] [--repeat N] [--fresh]

Each point runs `repeat` times (3 by default; the quick subset once) through the same `run_job`
as `testbed run`, into results/<figure>/points/<id>/rep<k>/. By default (`repeat_as: rounds`) a
point's repetitions are rounds of one job: one network, one set of TF processes, warm-up + R x n
steps, each round summarised on its own into its rep<k>/ (runs.rounds); `repeat_as: runs`
(or `--repeat-as runs`) runs a separate job per repetition. A finished repetition (its
summary.json complete) is kept and skipped next time, so an interrupted sweep resumes where it
stopped. A kept repetition must have run on the code the sweep would run now: its summary's
provenance (the commit and local changes it ran on, replays.provenance) is compared with the work
tree in what a point depends on (DEPENDS_ON: the platform's packages, the figure and matrix
code; replays.staleness.against_tree); one run on other code, or with no provenance at all, is
run again, and the log says why. Before a point runs, its offered load is checked against the
emulator's budget; a point over it gets a larger scale (rates and bytes divided together: S/B is
kept), and the report says so.

A repetition is run once more, in the same folder, before the sweep gives up on it: at twice the
scale when it finished but was judged not faithful (half the load on the emulator, S/B kept), at
the same scale when it stalled (runs.stall); the repetitions of a point due the same retry
run again together, as rounds of one job. The first attempt's summary is kept beside it
(attempt1-summary.json) and the summary records the retry (`retries`), which the report quotes.
A kept repetition that is not faithful and was not retried yet is retried on resume.

Figure files live in workloads/figures/<figure>.yaml (documented in its README.md); `--quick` runs
the file's `quick` subset with its reduced job: the same code path, in about a minute. A figure's
`compare` runs every point once more with other job fields (Fig. 13: the other host-time mode),
into results/<figure>/points/<id>.<name>/rep<k>/, after the figure's own runs (not in --quick).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

from emulation import tso
from replays import figsummary
from replays import provenance as prov
from replays.figure import FIGURES, REPO, TOPOLOGIES, Figure, FigureError, Point, load_figure, rep_dir
from replays.report import write_report
from replays.staleness import CURRENT, PLATFORM, against_tree
from runs import rounds
from runs.summary import write_summary
from schemes.registry import DEFAULT as DEFAULT_SCHEME
from topologies.files import write_json_atomic
from topologies.schema import TopologySpec, load_spec, parse_spec
from workloads.budget import BUDGET_HOPS, OVERRIDE_TOPO, check_job, offered_load_mbps
from workloads.experiment import ExperimentSpec, JobSpec

LOG = logging.getLogger(__name__)
#: an unfaithful repetition is run once more at this many times its scale
RETRY_SCALE = 2.0
#: characters of a stall's message kept in the retry record
WHY_CHARS = 400
#: what a repetition's numbers depend on: a change here since it ran means running it again
DEPENDS_ON = [*PLATFORM, "replays/figure.py", "replays/sweep.py", "replays/matrix.py"]


def point_topology(fig: Figure, point: Point) -> tuple[TopologySpec, str, str]:
    """The point's topology spec with overrides and the scale; returns (spec, source, scale note)."""
    path = TOPOLOGIES / point.topology
    base = load_spec(path).model_dump()
    data = {**base, **point.set}
    if fig.emulated_mbps:
        data["scale"] = data["worker_mbps"] / fig.emulated_mbps
    elif fig.scale:
        data["scale"] = fig.scale
    spec = parse_spec(data, f"{path} (figure {fig.figure}, point {point.id})")
    load = offered_load_mbps(spec, {**fig.job, **point.job}.get("scheme", DEFAULT_SCHEME))
    note = ""
    budget = tso.ceiling(spec.mtu)[0]  # the datapath runs get here: with TSO where it may be used
    if load > budget:
        spec = parse_spec({**data, "scale": spec.scale * load / budget}, str(path))
        note = (
            f"offered load {load:.0f} Mbit/s x-hop/{BUDGET_HOPS} exceeds the {budget:g} budget at MTU {spec.mtu}: "
            f"scale raised to {spec.scale:g}"
        )
        LOG.warning("%s/%s: %s", fig.figure, point.id, note)
    return spec, str(path), note


def point_experiment(fig: Figure, point: Point, quick: bool, compare: bool = False) -> ExperimentSpec:
    """The point's run; `compare`: its comparison run (the figure's `compare` job fields on top)."""
    job = {**fig.job, **point.job}
    compress = point.compress or fig.compress
    if quick and fig.quick:
        job.update(fig.quick.job)
        compress = fig.quick.compress or compress
    if compare and fig.compare:
        job.update(fig.compare.job)
        point = fig.compare.point(point)
    return ExperimentSpec(
        name=f"{fig.figure}-{point.id}",
        topology=point.topology,
        compress=compress,
        job=JobSpec.model_validate(job),
        timeline=point.timeline,
    )


def check_budget(fig: Figure, quick: bool, todo: list[tuple[Point, int, bool]] | None = None) -> None:
    """Refuse the whole figure (BudgetError) if any of its runs would not fit this machine
    (workloads.budget), before the first is built: a sweep that fails at its 7th point has spent
    the first six for nothing."""
    seen = set()
    for point, _, cmp in todo if todo is not None else runs(fig, quick, 1):
        if (point.id, cmp) in seen:
            continue
        seen.add((point.id, cmp))
        spec, source, _ = point_topology(fig, point)
        exp = point_experiment(fig, point, quick, compare=cmp)
        where = f"{FIGURES / fig.figure}.yaml (point {point.id})"
        check_job(spec, source, exp.all_jobs, exp.compress, where, override=OVERRIDE_TOPO)


def points_to_run(fig: Figure, quick: bool) -> list[Point]:
    if quick:
        if not fig.quick:
            raise FigureError(f"{fig.figure}: no quick subset defined")
        by_id = {p.id: p for p in fig.points}
        return [by_id[i] for i in fig.quick.points]
    return list(fig.points)


def repetitions(fig: Figure, quick: bool, repeat: int | None = None) -> int:
    """Runs per point: `--repeat`, else the quick subset's (1: a smoke run) or the figure's (3 by
    default, so each point has a 95% CI over repetitions)."""
    if repeat:
        return repeat
    return fig.quick.repeat if quick and fig.quick else fig.repeat


def runs(fig: Figure, quick: bool, reps: int) -> list[tuple[Point, int, bool]]:
    """(point, repetition, is a comparison run) of a sweep: every point `reps` times, then, unless
    quick, every compared point (`compare.points`, default all) `compare.repeat` times with the
    figure's `compare` job fields."""
    todo = [(p, k, False) for p in points_to_run(fig, quick) for k in range(1, reps + 1)]
    if fig.compare and not quick:
        compared = [p for p in points_to_run(fig, quick) if fig.compare.compares(p)]
        todo += [(p, k, True) for p in compared for k in range(1, fig.compare.repeat + 1)]
    return todo


def run_dir(out: Path, fig: Figure, point: Point, rep: int, compare: bool) -> Path:
    return rep_dir(out, fig.compare.point(point) if compare and fig.compare else point, rep)


def finished(d: Path) -> dict | None:
    """The summary of a finished repetition, or None (absent, incomplete or unreadable)."""
    f = d / "summary.json"
    try:
        s = json.loads(f.read_text())
    except (OSError, ValueError):
        return None
    return s if s.get("complete") else None


def ran_on(d: Path, s: dict) -> tuple[str | None, dict[str, str | None]]:
    """(commit, local changes) a finished repetition ran on: its summary's provenance, else (runs
    written before summaries carried one) the short commit its manifest's versions name."""
    p = s.get("provenance") or {}
    if p.get("commit"):
        return p["commit"], p.get("dirty_files") or {}
    try:
        manifest = json.loads((d / "manifest.json").read_text())
    except (OSError, ValueError):
        return None, {}
    return (manifest.get("versions") or {}).get("git") or None, {}


def drop_other_code(
    dirs: list[Path], now: prov.Provenance, depends_on: list[str] = DEPENDS_ON, repo: Path = REPO
) -> list[Path]:
    """Of these repetitions, the finished ones that ran on other code than the tree's now (see the
    module docstring) lose their summary, so the sweep runs them again; one line each says why.
    Returns them. A sweep never mixes points measured by different code."""
    dropped = []
    for d in dirs:
        s = finished(d)
        if s is None:
            continue
        commit, dirty = ran_on(d, s)
        st = against_tree(commit, dirty, now.commit, now.dirty_files, depends_on, repo)
        if st.state == CURRENT:
            continue
        LOG.warning("%s: ran on other code (%s): running it again", d / "summary.json", st.text)
        (d / "summary.json").unlink()
        dropped.append(d)
    return dropped


def retry_reason(summary: dict | None, error: str = "", stalled: bool = False) -> tuple[str, float] | None:
    """Why a repetition gets its one more run, and the factor on its scale; None: no retry.
    A stall: the same scale. Finished but not faithful: RETRY_SCALE times the scale."""
    if stalled:
        return error[:WHY_CHARS], 1.0
    if summary and summary.get("complete") and summary.get("fidelity", {}).get("faithful") is False:
        return f"not faithful at scale {summary['scale']:g}: {summary['fidelity']['reason']}", RETRY_SCALE
    return None


def needs_run(d: Path) -> bool:
    """A repetition to run: not finished, or finished unfaithful and not retried yet."""
    s = finished(d)
    return s is None or (s["fidelity"]["faithful"] is False and not s.get("retries"))


def run_repetition(
    exp: ExperimentSpec,
    spec: TopologySpec,
    source: str,
    d: Path,
    origin: str,
    rescale: bool = True,
    provenance: dict | None = None,
) -> None:
    """One repetition, as a separate run (run_repetitions with one folder)."""
    run_repetitions(exp, spec, source, [d], origin, rescale, provenance)


def run_repetitions(
    exp: ExperimentSpec,
    spec: TopologySpec,
    source: str,
    dirs: list[Path],
    origin: str,
    rescale: bool = True,
    provenance: dict | None = None,
) -> None:
    """A point's repetitions into `dirs`: those not finished run as rounds of one job (one folder:
    one run), then each is run once more on a stall or an unfaithful result (see the module
    docstring), the ones due the same retry together, again as rounds of one job. A failure after
    that is logged, and the report marks the repetition as failed. `rescale=False` keeps an
    unfaithful result as it is (a matrix holds every cell at one rate and gradient size).
    `provenance`: the tree the sweep runs on, recorded in each run's manifest and summary."""
    todo = [d for d in dirs if finished(d) is None]
    stall = _attempt(exp, spec, source, todo, origin, provenance) if todo else None
    due: dict[Path, tuple[str, float]] = {}
    if stall is not None:
        due |= {d: retry_reason(None, stall, stalled=True) for d in todo if finished(d) is None}
    for d in dirs:
        s = finished(d)
        why = retry_reason(s) if s and not s.get("retries") else None
        if d not in due and why is not None and (rescale or why[1] == 1.0):
            due[d] = why
    for factor in sorted({f for _, f in due.values()}):
        group = [d for d, (_, f) in due.items() if f == factor]
        _retry(exp, spec, source, group, origin, factor, {d: due[d][0] for d in group}, provenance)


def _retry(
    exp: ExperimentSpec,
    spec: TopologySpec,
    source: str,
    dirs: list[Path],
    origin: str,
    factor: float,
    why: dict[Path, str],
    provenance: dict | None = None,
) -> None:
    """Run these repetitions once more at `factor` times the scale; each summary records why."""
    for d in dirs:
        LOG.warning("%s: running it once more at scale %g: %s", d, spec.scale * factor, why[d])
        if (d / "summary.json").exists():
            (d / "summary.json").replace(d / "attempt1-summary.json")
    rerun = parse_spec({**spec.model_dump(), "scale": spec.scale * factor}, source) if factor != 1 else spec
    _attempt(exp, rerun, source, dirs, origin, provenance)
    for d in dirs:
        f = d / "summary.json"
        s = json.loads(f.read_text()) if f.exists() else {"complete": False, "error": "the retry wrote no summary"}
        retry = {"why": why[d], "scale": spec.scale, "rerun_scale": rerun.scale}
        write_summary(f, {**s, "retries": [retry]})


def _attempt(
    exp: ExperimentSpec, spec: TopologySpec, source: str, dirs: list[Path], origin: str, provenance: dict | None = None
) -> str | None:
    """Run the repetitions (several: as rounds of one job, runs.rounds); the stall's message
    if the job stalled (the sweep runs the unfinished ones once more), else None."""
    from runs.runner import run_job
    from runs.stall import Stalled
    from workloads.errors import RunError

    try:
        run_job(exp, spec, source, dirs[0], progress=False, source=origin, more_rounds=dirs[1:], provenance=provenance)
    except Stalled as err:
        LOG.error("%s: %s", dirs[0], err)
        return str(err)[:WHY_CHARS]
    except RunError as err:  # keep going: the report marks the point as failed
        LOG.error("%s: %s", dirs[0], err)
    return None


def _by_point(todo: list[tuple[Point, int, bool]]) -> list[tuple[tuple[Point, bool], list[int]]]:
    """The sweep's runs grouped per point (and comparison), repetitions in order."""
    groups: dict[tuple[str, bool], tuple[Point, list[int]]] = {}
    for p, k, cmp in todo:
        groups.setdefault((p.id, cmp), (p, []))[1].append(k)
    return [((p, cmp), ks) for (_, cmp), (p, ks) in groups.items()]


def run_figure(
    name: str,
    quick: bool = False,
    repeat: int | None = None,
    fresh: bool = False,
    results: Path = REPO / "results",
    progress: bool = True,
    repeat_as: str | None = None,
    budget: bool = True,
) -> Path:
    """Run (or resume) a figure's sweep, then write its CSV, plot and report; returns the folder.
    `repeat_as`: rounds or runs (runs.rounds), over the figure file's `repeat_as`. `budget=False`
    (`--no-budget`) skips the resource budget every point is checked against before any runs."""
    from tqdm import tqdm

    fig = load_figure(name)
    out = results / (f"{name}-quick" if quick else name)
    reps = repetitions(fig, quick, repeat)
    todo = runs(fig, quick, reps)
    if fresh:
        for p, k, cmp in todo:
            (run_dir(out, fig, p, k, cmp) / "summary.json").unlink(missing_ok=True)
    if budget:
        check_budget(fig, quick, todo)
    now = prov.capture(quick)  # the tree the points run on: kept ones must have run on the same code
    notes: dict[str, str] = {}
    ran = False
    t0 = time.monotonic()
    bar = tqdm(total=len(todo), desc=f"{name}", unit="run", disable=not progress)
    for (point, cmp), ks in _by_point(todo):
        dirs = [run_dir(out, fig, point, k, cmp) for k in ks]
        spec, source, note = point_topology(fig, point)
        if note:
            notes[point.id] = note
        drop_other_code(dirs, now)
        due = [d for d in dirs if needs_run(d)]
        label = f"{dirs[0].parent.name} rep{','.join(d.name[3:] for d in due)}" if due else dirs[0].parent.name
        bar.set_postfix_str(label if due else f"{label}: kept")
        if due:
            ran = True
            exp = point_experiment(fig, point, quick, compare=cmp)
            together = (repeat_as or fig.repeat_as) == "rounds" and not rounds.eligible(exp)
            for group in [due] if together else [[d] for d in due]:
                origin = f"{FIGURES / name}.yaml#{dirs[0].parent.name}"
                run_repetitions(exp, spec, source, group, origin, provenance=now.model_dump())
        bar.update(len(dirs))
    bar.close()
    summaries = [run_dir(out, fig, p, k, cmp) / "summary.json" for p, k, cmp in todo]
    queued = sum(json.loads(f.read_text()).get("timings", {}).get("lock_wait_s", 0.0) for f in summaries if f.exists())
    wall = time.monotonic() - t0
    if ran:  # a resume that only kept finished runs keeps the last sweep's time
        write_json_atomic(out / "run.json", figsummary.run_record(wall, queued, now), indent=None)
    write_report(fig, out, points_to_run(fig, quick), reps, notes, quick=quick)
    return out
