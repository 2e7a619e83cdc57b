"""One replay framework: figure file -> points -> evaluator -> one claims engine -> one report writer.

Every replay is a figure kind: what its file is, and the evaluator its points go through.

- `figure` (workloads/figures/<name>.yaml): each point an emulated run, `repeat` times (replays.sweep);
- `model-figure` (the same, `mode: model`): each point from the closed-form model (Eqs. 5-7) and
  the flow model (SimGrid), no emulation (replays.modelreplay);
- `model-figure` of scheme jobs (`mode: model`, `traffic: schemes`): each point one scheme job's
  synchronisation on the flow model at a paper's size, no emulation (replays.schemefig_replay);
- `matrix` (workloads/matrix/<name>.yaml): each topology x scheme cell an emulated run (replays.matrix).

Whatever the evaluator, a figure's measured points reach the claims as replays.claims.Measured
(report.Row for a run, modelfig_report.ModelValue for a model's value) and are judged by
replays.claims; every kind writes its folder through replays.outputs and its figure-level summary
through replays.figsummary. `testbed replay` and `testbed matrix` go through `kind_of(...).replay`,
so a new kind (or evaluator) is one class here and its own points/report module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal, Protocol

from replays.figure import REPO


@dataclass(frozen=True)
class ReplayOptions:
    """The command line's choices, as every kind reads them (a kind ignores what it has no use for:
    a model figure has no repetitions, and recomputes only what changed whatever `report_only` says)."""

    quick: bool = False
    fresh: bool = False
    repeat: int | None = None
    repeat_as: Literal["rounds", "runs"] | None = None
    report_only: bool = False
    progress: bool = True
    results: Path = REPO / "results"
    budget: bool = True  # False: --no-budget (workloads.budget's check before bring-up skipped)


@dataclass(frozen=True)
class Replayed:
    """What one replay left: its folder, the report and figure a user opens first, what did not
    stand (for --strict), or `nothing` saying why there was nothing to do."""

    name: str
    out: Path
    report: Path
    figure: Path
    shortfalls: list[str] = field(default_factory=list)
    nothing: str = ""


class FigureKind(Protocol):
    """A kind of figure: its evidence kind (replays.evidence.KINDS), its evaluator in words, the
    names it owns, and the replay of one of them."""

    kind: ClassVar[str]
    evaluator: ClassVar[str]

    def owns(self, name: str) -> bool: ...

    def replay(self, name: str, opts: ReplayOptions) -> Replayed: ...


def report_shortfalls(name: str, out: Path) -> list[str]:
    """A figure's points that were not faithful and claims that did not hold, from its report.json
    (emulated and model figures write the same claims: replays.claims.ClaimResult)."""
    try:
        rep = json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        return [f"{name}: no report.json in {out}"]
    bad = [f"{name}: point {p.get('id')} not faithful" for p in rep.get("points", []) if p.get("faithful") is False]
    for c in rep.get("claims", []):
        if str(c.get("verdict", "")).startswith("does NOT hold"):
            bad.append(f"{name}: claim {c.get('label') or c.get('text')!r} does NOT hold")
    return bad


class EmulatedFigures:
    """Figure files replayed on the emulator: each point an emulated run, `repeat` times."""

    kind: ClassVar[str] = "figure"
    evaluator: ClassVar[str] = "emulated run"

    def owns(self, name: str) -> bool:
        from replays.figure import figure_names

        return name in figure_names()

    def replay(self, name: str, opts: ReplayOptions) -> Replayed:
        from replays import figure, sweep
        from replays.report import write_report

        out = opts.results / (f"{name}-quick" if opts.quick else name)
        if opts.report_only:
            from runs.predict import repredict
            from runs.steptime import resplit

            fig = figure.load_figure(name)
            summaries = sorted(out.glob("points/*/rep*/summary.json"))
            if not summaries:
                nothing = f"{name}: nothing to redraw: no runs in {out} (replay it first)"
                return Replayed(name, out, out / "report.md", out / f"{name}.png", nothing=nothing)
            redrawn = {}  # each run's summary with the model and step split as the code has them now
            for summary in summaries:
                s = repredict(summary.parent)  # from the run's manifest
                redrawn[summary] = resplit(summary.parent, s) or s  # from its links.csv, where it has one
            reps = sweep.repetitions(fig, opts.quick, opts.repeat)
            points = sweep.points_to_run(fig, opts.quick)
            write_report(fig, out, points, reps, {}, quick=opts.quick, redrawn=redrawn)  # summaries stay as run
        else:
            out = sweep.run_figure(
                name,
                quick=opts.quick,
                repeat=opts.repeat,
                fresh=opts.fresh,
                results=opts.results,
                progress=opts.progress,
                repeat_as=opts.repeat_as,
                budget=opts.budget,
            )
        return Replayed(name, out, out / "report.md", out / f"{name}.png", report_shortfalls(name, out))


class ModelFigures:
    """Figure files with `mode: model`: each point from the closed-form model and the flow model."""

    kind: ClassVar[str] = "model-figure"
    evaluator: ClassVar[str] = "closed-form model + flow model"

    def owns(self, name: str) -> bool:
        from replays.figure import figure_names
        from replays.schemefig import is_scheme_figure

        return name in figure_names("model") and not is_scheme_figure(name)

    def replay(self, name: str, opts: ReplayOptions) -> Replayed:
        from replays import modelreplay  # looked up at call time: tests stand in for replay_model_figure

        out = modelreplay.replay_model_figure(name, quick=opts.quick, fresh=opts.fresh, results=opts.results)
        return Replayed(name, out, out / "report.md", out / f"{name}.png", report_shortfalls(name, out))


class SchemeModelFigures:
    """Model figures of scheme jobs (`traffic: schemes`: RAT's and HiPS's figures at the papers'
    size): each point a scheme job's synchronisation on the flow model, kept points reused."""

    kind: ClassVar[str] = "model-figure"
    evaluator: ClassVar[str] = "flow model (scheme jobs)"

    def owns(self, name: str) -> bool:
        from replays.schemefig import is_scheme_figure

        return is_scheme_figure(name)

    def replay(self, name: str, opts: ReplayOptions) -> Replayed:
        from replays import schemefig_replay

        out = schemefig_replay.replay_scheme_figure(name, quick=opts.quick, fresh=opts.fresh, results=opts.results)
        return Replayed(name, out, out / "report.md", out / f"{name}.png", report_shortfalls(name, out))


class Matrices:
    """Matrix files (named by path): each topology x scheme cell an emulated run."""

    kind: ClassVar[str] = "matrix"
    evaluator: ClassVar[str] = "emulated run per cell"

    def owns(self, name: str) -> bool:
        return name.endswith((".yaml", ".yml"))

    def replay(self, name: str, opts: ReplayOptions) -> Replayed:
        from replays.matrix import run_matrix
        from replays.matrix_report import write_matrix_report

        run = run_matrix(
            Path(name),
            opts.quick,
            opts.repeat,
            opts.fresh,
            results=opts.results,
            progress=opts.progress,
            report_only=opts.report_only,
            budget=opts.budget,
        )
        rep = write_matrix_report(run)
        fig = run.fig.figure
        bad = [f"{fig}: {c.label} x {c.scheme} not faithful" for c in rep.cells if c.faithful is False]
        return Replayed(fig, run.out, run.out / "matrix.md", run.out / f"{run.spec.matrix}.png", bad)


#: every figure kind, in the order a name is looked up
KINDS: list[FigureKind] = [SchemeModelFigures(), ModelFigures(), EmulatedFigures(), Matrices()]


def kind_of(name: str) -> FigureKind:
    """The kind owning `name` (a figure file's name, or a matrix file's path); an emulated figure
    otherwise, whose loading then says the name is unknown (replays.figure.load_figure)."""
    return next((k for k in KINDS if k.owns(name)), next(k for k in KINDS if isinstance(k, EmulatedFigures)))
